"""Host array arguments (`PyHostArray*`): NumPy, `__array_interface__` producers, cai
views, derived host containers and DLPack CPU producers, read through safe slices and
`ndarray` views; and the views of other modules being `cai`'s own classes."""

import re
import subprocess
import sys
import textwrap

import threading

import numpy as np
import pytest

import cai
import cai_fixtures as fx
from producers import OnlyDLPack, Producer, cai_dict


def address(a):
    return a.__array_interface__["data"][0]


def test_numpy_in_rust_reads_and_writes_the_same_memory():
    x = np.arange(6, dtype=np.float64)
    assert fx.host_sum(x) == 15.0
    assert fx.host_sum(x.reshape(2, 3)) == 15.0
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    before = address(m)
    fx.host_scale(m, 2.0)
    assert m.tolist() == [[0, 2, 4], [6, 8, 10]] and address(m) == before
    a, s, strides, ro, n = fx.host_describe(m)
    assert (a, s, strides, ro, n) == (before, [2, 3], [12, 4], False, 6)


def test_zero_d_and_empty_arrays():
    assert fx.host_sum(np.array(2.5)) == 2.5
    assert fx.host_sum(np.zeros((0, 5))) == 0.0
    fx.host_scale(np.zeros((0, 3), dtype=np.float32), 2.0)
    assert fx.host_nd_elements(np.zeros((4, 0), dtype=np.int64)) == []


def test_every_host_producer_is_accepted():
    m = fx.HostMatrix(2, 3)  # a derived host container
    a, shape, *_ = fx.host_describe(m)
    assert shape == [2, 3] and a == m.address()
    fx.host_scale(m, 3.0)
    assert m.get(1, 2) == 15.0
    view = cai.as_array(np.ones((2, 2), dtype=np.float32))
    assert fx.host_describe(view)[1] == [2, 2]
    cloud = fx.HostCloud(2)
    assert fx.host_describe(cloud.xyz)[1] == [2, 3]
    # any object with __array_interface__
    backing = np.arange(4, dtype=np.float64)
    producer = Producer(dict(backing.__array_interface__), host=True)
    assert fx.host_sum(producer) == 6.0


def test_a_dlpack_cpu_producer_is_accepted():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    cpu = jax.devices("cpu")[0]
    x = jax.device_put(jnp.arange(12, dtype=jnp.int32).reshape(3, 4), cpu)
    assert not hasattr(x, "__array_interface__")
    assert fx.host_nd_rows(x) == np.arange(12).reshape(3, 4).tolist()


def test_dlpack_carries_read_only_and_writes_reach_the_producer():
    ro = np.arange(6, dtype=np.float32).reshape(2, 3)
    ro.flags.writeable = False
    with pytest.raises(BufferError, match="read-only"):
        fx.host_scale(OnlyDLPack(ro), 2.0)
    rw = np.arange(6, dtype=np.float32).reshape(2, 3)
    fx.host_scale(OnlyDLPack(rw), 2.0)
    assert rw.tolist() == [[0, 2, 4], [6, 8, 10]]


def test_checks_and_their_messages():
    with pytest.raises(TypeError, match=r"expected a host array of '<f8', received .* '<f4' .*wrong element type"):
        fx.host_sum(np.zeros(3, dtype=np.float32))
    with pytest.raises(TypeError, match=r"with 2 dimensions.*wrong number of dimensions"):
        fx.host_describe(np.zeros(3, dtype=np.float32))
    with pytest.raises(TypeError, match="wrong element type"):
        fx.host_sum(np.zeros(3, dtype=">f8"))
    ro = np.zeros((2, 2), dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(BufferError, match=r"expected a writable host array .*read-only"):
        fx.host_scale(ro, 1.0)
    with pytest.raises(TypeError, match=r"expected a host array of '<f8', received \[1.0\] \(list\) \(an object with __array_interface__"):
        fx.host_sum([1.0])


def test_device_memory_is_refused_with_the_way_out():
    device = Producer(cai_dict(shape=(3,), typestr="<f8"))
    with pytest.raises(TypeError, match=r"__cuda_array_interface__, CUDA memory: take it with a device array argument, PyCudaArray, or copy it to the host first"):
        fx.host_sum(device)

    class DeviceDLPack:
        called = False

        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kwargs):
            DeviceDLPack.called = True
            raise AssertionError("a device tensor must not be exported for a host argument")

    with pytest.raises(TypeError, match="DLPack device is CUDA memory"):
        fx.host_sum(DeviceDLPack())
    assert not DeviceDLPack.called


def test_a_device_view_is_refused_as_device_memory_where_its_device_cannot_be_told():
    # A cai.CudaArray has both protocols; its __dlpack_device__ asks the driver which
    # device holds the pointer. Without a driver, the argument is still device memory.
    if cai.cuda_driver_present():
        pytest.skip("needs a machine without the CUDA driver (with one, the pointer check answers)")
    before = cai.configure()
    try:
        cai.configure(check_pointers=False)
        view = cai.as_cuda_array(Producer(cai_dict(shape=(3,), typestr="<f8")))
        cai.configure(check_pointers=True)
        with pytest.raises(TypeError, match=r"CudaArray.*it exports __cuda_array_interface__, CUDA memory: take it with a device array argument") as caught:
            fx.host_sum(view)
        assert type(caught.value.__cause__) is cai.CudaDriverError
    finally:
        cai.configure(**before)


def test_a_slice_needs_c_order_and_says_so():
    x = np.arange(6, dtype=np.float64)
    with pytest.raises(ValueError, match=r"as_slice: the <f8 array of shape \(3,\) with strides \(16,\) .*not C-contiguous"):
        fx.host_sum(x[::2])
    m = np.zeros((3, 2), dtype=np.float32)
    with pytest.raises(ValueError, match="as_slice_mut: .*not C-contiguous"):
        fx.host_scale(m.T, 2.0)


def test_unaligned_memory_is_refused():
    raw = np.zeros(9 * 8, dtype=np.uint8)
    unaligned = raw[1 : 1 + 8 * 8].view(np.float64)
    assert address(unaligned) % 8 == 1
    with pytest.raises(ValueError, match="not aligned to 8 bytes"):
        fx.host_sum(unaligned)
    with pytest.raises(ValueError, match="not aligned"):
        fx.host_nd_elements(raw[1 : 1 + 8 * 8].view(np.int64))


def test_bools_must_be_zero_or_one():
    assert fx.host_bools(np.array([True, False, True])) == [True, False, True]
    bad = np.array([0, 2, 1], dtype=np.uint8).view(np.bool_)
    with pytest.raises(ValueError, match="bool element holds the byte 2"):
        fx.host_bools(bad)
    particles = fx.Particles(4)
    assert fx.host_alive(particles) == [True, False, True, False]
    records = np.asarray(particles).copy()
    assert fx.host_alive(records) == [True, False, True, False]
    raw = records.view(np.uint8).reshape(4, -1)
    raw[3, fx.Particles.layout()[1][3][1]] = 7  # the `alive` byte of particle 3
    with pytest.raises(ValueError, match="byte 7"):
        fx.host_alive(records)


def test_bools_broadcast_along_an_axis_are_checked_once():
    # One byte behind 2**60 elements: the check reads it once, not once per index.
    huge = np.lib.stride_tricks.as_strided(np.array([True]), shape=(2**30, 2**30), strides=(0, 0))
    assert fx.host_nd_first_bool(huge) is True
    byte = np.array([2], dtype=np.uint8).view(np.bool_)
    with pytest.raises(ValueError, match="bool element holds the byte 2"):
        fx.host_nd_first_bool(np.lib.stride_tricks.as_strided(byte, shape=(2**30, 2**30), strides=(0, 0)))
    # The other axes are read in full: the bad byte is the last element's.
    rows = np.array([[1, 1, 0], [0, 1, 3]], dtype=np.uint8).view(np.bool_)
    spread = np.lib.stride_tricks.as_strided(rows, shape=(2, 2**40, 3), strides=(3, 0, 1))
    with pytest.raises(ValueError, match="byte 3"):
        fx.host_nd_first_bool(spread)
    assert fx.host_nd_first_bool(spread[:, :, :2]) is True


def test_bools_whose_elements_overlap_are_checked_once_per_address():
    # 2**28 indices over 32 KiB: each address the elements start at is read once, through
    # the set of those addresses (element by element, this took hours).
    b = np.ones(2 * 2**14, bool)
    assert fx.host_nd_first_bool(np.lib.stride_tricks.as_strided(b, shape=(2**14, 2**14), strides=(1, 1))) is True
    # Only the bytes elements reach count: with strides of 2, odd bytes are not elements.
    raw = np.ones(4 * 2**10, np.uint8)
    raw[1::2] = 7
    even = np.lib.stride_tricks.as_strided(raw.view(bool), shape=(2**10, 2**10), strides=(2, 2))
    assert fx.host_nd_first_bool(even) is True
    raw[3000] = 9
    with pytest.raises(ValueError, match="bool element holds the byte 9"):
        fx.host_nd_first_bool(even)
    # Negative strides reach the same addresses from the other end.
    raw[3000] = 1
    raw[0] = 5
    back = np.lib.stride_tricks.as_strided(raw[4092:].view(bool), shape=(2**10, 2**10), strides=(-2, -2))
    with pytest.raises(ValueError, match="bool element holds the byte 5"):
        fx.host_nd_first_bool(back)
    raw[0] = 1
    assert fx.host_nd_first_bool(back) is True


def test_opaque_records_are_refused_for_a_record_argument():
    # NumPy exports a dtype whose fields are not in offset order as opaque bytes ('|V32'
    # and no fields): read as Particles, `alive` would be another field's byte.
    layout = fx.Particles.layout()
    shuffled = np.dtype({"names": ["alive", "mass", "position", "id"], "formats": ["?", "<f8", ("<f4", (3,)), "<u2"],
                         "offsets": [8, 0, 12, 10], "itemsize": 32})
    a = np.zeros(4, shuffled)
    a["alive"] = True
    assert a.__array_interface__["descr"] == [("", "|V32")]
    with pytest.raises(TypeError, match=r"its records are opaque: the producer gave no fields to check against"):
        fx.host_alive(a)
    # So is a dict that gives a record typestr and no descr.
    records = np.asarray(fx.Particles(2)).copy()
    bare = {k: v for k, v in records.__array_interface__.items() if k != "descr"}
    with pytest.raises(TypeError, match="its records are opaque"):
        fx.host_alive(type("P", (), {"__array_interface__": bare, "keep": records})())
    # With its fields, the same memory is read.
    assert fx.host_alive(records) == [True, False]
    assert layout == fx.Particles.layout()


def test_a_slice_for_writing_is_the_only_slice_of_its_bytes_across_calls():
    # A callback of a function that holds a slice for writing takes a slice of the same
    # bytes in a call of its own: two Rust slices of one memory, one of them `&mut`.
    a = np.arange(4, dtype=np.float64)
    with pytest.raises(BufferError, match=r"as_slice: bytes 0x[0-9a-f]+\.\.0x[0-9a-f]+ overlap .* another call in progress"):
        fx.host_hold(a, lambda: fx.host_sum(a))
    with pytest.raises(BufferError, match="as_slice_mut: .* a slice for writing may not share memory"):
        fx.host_hold_ro(a, lambda: fx.host_hold(a[1:], lambda: None))
    # Reading beside reading, and other bytes beside writing, are fine.
    assert fx.host_hold_ro(a, lambda: fx.host_sum(a)) == 6.0
    assert fx.host_hold(a[:2], lambda: fx.host_sum(a[2:])) == 5.0
    assert a[0] == 1.0
    # Every slice was given back: the memory is free again.
    assert fx.host_hold(a, lambda: "done") == "done"
    assert fx.host_sum(a) == 1.0 + 1 + 2 + 3


def test_a_slice_held_on_one_thread_refuses_a_writing_slice_on_another():
    a = np.zeros(4, dtype=np.float64)
    holding, tried = threading.Event(), threading.Event()
    outcome = []

    def wait_for_the_other_thread():
        holding.set()
        tried.wait(30)

    def other():
        holding.wait(30)
        try:
            fx.host_hold(a, lambda: None)
            outcome.append("taken")
        except BufferError as e:
            outcome.append(str(e))
        tried.set()

    t = threading.Thread(target=other)
    t.start()
    fx.host_hold_ro(a, wait_for_the_other_thread)
    t.join()
    assert len(outcome) == 1 and "another call in progress (on this thread or another)" in outcome[0], outcome
    fx.host_hold(a, lambda: None)


def test_overlapping_arguments_of_one_call_are_refused():
    a = np.arange(8, dtype=np.float32)
    with pytest.raises(BufferError, match="overlap"):
        fx.host_add_into(a, a)
    with pytest.raises(BufferError, match="overlap"):
        fx.host_add_into(a[2:6], a[:4])
    fx.host_add_into(a[:4], a[4:])
    assert a[:4].tolist() == [4, 6, 8, 10]


def c_order(x):
    return np.ascontiguousarray(x).ravel().tolist()


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a,
        lambda a: a[::2],
        lambda a: a[::-1],
        lambda a: a[:, ::-1],
        lambda a: a[::-2, 1::3],
        lambda a: a.T,
        lambda a: a[1],
        lambda a: a[1, 2],
        lambda a: a[:0],
        lambda a: np.broadcast_to(a[0], (3, 6)),
    ],
    ids=["c", "step", "rows-reversed", "cols-reversed", "both", "transposed", "row", "0-d", "empty", "broadcast"],
)
def test_ndarray_views_read_any_layout(make):
    base = np.arange(24, dtype=np.int64).reshape(4, 6)
    x = make(base)
    assert fx.host_nd_elements(x) == c_order(x)
    if x.ndim == 2:
        assert fx.host_nd_rows(x.astype(np.int32)) == x.tolist()
        assert fx.host_nd_rows(make(base.astype(np.int32))) == x.tolist()


@pytest.mark.parametrize("stride", [6, -6, 2**62, -(2**62), 2**63 - 1, -(2**63), 0])
def test_ndarray_views_ignore_the_stride_of_an_axis_of_one_element(stride):
    # That stride is never stepped and may be anything; the view takes 0, as ndarray's own
    # slicing does (-2**63, in elements of one byte, was a negative ndarray stride).
    base = np.full(8, -1, dtype=np.int64)
    p = Producer({"shape": (3, 1), "strides": (8, stride), "typestr": "<i8", "data": (address(base), False),
                  "version": 3}, host=True)
    fx.host_nd_number(p)
    assert base.tolist() == [0, 1, 2, -1, -1, -1, -1, -1]
    assert fx.host_nd_elements(p) == [0, 1, 2]
    flags = np.array([1, 0], np.uint8)
    q = Producer({"shape": (1,), "strides": (stride,), "typestr": "|b1", "data": (address(flags), False),
                  "version": 3}, host=True)
    assert fx.host_nd_first_bool(q) is True


@pytest.mark.parametrize("index", [np.s_[::-1], np.s_[:, ::-2], np.s_[1:, 1:5]], ids=["reversed", "step", "inner"])
def test_ndarray_mutable_views_write_in_place(index):
    base = np.full((4, 6), -1, dtype=np.int64)
    view = base[index]
    fx.host_nd_number(view)
    assert view.tolist() == np.arange(view.size).reshape(view.shape).tolist()
    mask = np.ones(base.shape, dtype=bool)
    mask[index] = False
    assert (base[mask] == -1).all()
    transposed = np.zeros((3, 2), dtype=np.int64)
    fx.host_nd_number(transposed.T)
    assert transposed.T.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_a_mutable_view_refuses_elements_reached_twice():
    base = np.zeros(4, dtype=np.int64)
    overlapping = np.lib.stride_tricks.as_strided(base, shape=(3, 2), strides=(8, 8))
    assert overlapping.flags.writeable
    with pytest.raises(ValueError, match="reaches some elements by two indices"):
        fx.host_nd_number(overlapping)
    assert fx.host_nd_elements(overlapping) == [0, 0, 0, 0, 0, 0]


def test_a_writing_host_argument_refuses_a_broadcast_array():
    base = np.zeros(4, dtype=np.float32)
    broadcast = np.lib.stride_tricks.as_strided(base, shape=(3, 4), strides=(0, 4))
    assert broadcast.flags.writeable
    with pytest.raises(BufferError, match=r"strides: \(0, 4\) give axis 0 \(of 3 elements\) stride 0"):
        fx.host_scale(broadcast, 2.0)
    assert base.tolist() == [0.0] * 4


def test_a_stable_vec_that_cannot_grow_raises_and_changes_nothing():
    g = fx.GrowingVector([1.0, 2.0, 3.0])
    a = np.asarray(g)
    first = g.address()
    # 2**60 more f64 exceed the address space; 2**52 (32 PiB) no allocator gives.
    for n in (2**64 - 1, 2**60, 2**52):
        with pytest.raises(MemoryError, match=f"extend: {n} more values: memory allocation failed"):
            g.extend(n, 7.0)
    assert g.address() == first and g.retired_bytes() == 0
    assert np.asarray(g).tolist() == a.tolist() == [1.0, 2.0, 3.0]


def test_views_of_other_modules_are_cai_classes():
    cloud = fx.HostCloud(3)
    assert isinstance(cloud.xyz, cai.HostArray) and type(cloud.xyz) is cai.HostArray
    assert type(cloud.ids).__module__ == "cai"
    device = fx.DeviceCloud(0x7F0000000000, 4)
    assert type(device.xyz) is cai.CudaArray and isinstance(device.rgb, cai.CudaArray)
    assert device.xyz.owner is device
    assert np.asarray(cloud.xyz).tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert cloud.xyz.owner is cloud


def test_views_work_without_the_cai_package():
    script = textwrap.dedent(
        """
        import sys
        sys.modules["cai"] = None  # the package cannot be imported
        import numpy as np
        import cai_fixtures as fx
        cloud = fx.HostCloud(2)
        v = cloud.xyz
        assert type(v).__name__ == "HostArray", type(v)
        assert type(v).__module__ == "cai_py", type(v).__module__
        assert np.asarray(v).tolist() == [[0, 1, 2], [3, 4, 5]]
        assert fx.host_describe(v)[1] == [2, 3]
        # The module's own classes have the views' C getter as well.
        assert type(type(v).__dict__["__array_interface__"]).__name__ == "getset_descriptor"
        assert [v.__array_interface__["shape"] for _ in range(2)] == [(2, 3), (2, 3)]
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_stable_vec_keeps_what_views_read_when_rust_grows_it():
    g = fx.GrowingVector([1.0, 2.0, 3.0])
    a = np.asarray(g)
    first = g.address()
    assert address(a) == first
    for _ in range(5):
        g.extend(10_000, 7.0)  # moves to larger allocations
    assert g.address() != first and g.retired_bytes() >= 24
    # The old view reads the old allocation, still alive (and unchanged).
    junk = [np.full(10_000, 9.0) for _ in range(20)]  # reuse freed memory, if any were freed
    assert a.tolist() == [1.0, 2.0, 3.0]
    b = np.asarray(g)
    assert b.shape == (50_003,) and b[:3].tolist() == [1.0, 2.0, 3.0] and b[-1] == 7.0
    del junk


class Sub(np.ndarray):
    """An ndarray subclass: read through __array_interface__, not NumPy's DLPack fast path."""


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(12, dtype=np.float32).reshape(3, 4),
        lambda: np.arange(12, dtype=np.float32).reshape(3, 4)[::-1, 1::2],
        lambda: np.arange(12, dtype=np.float32).reshape(4, 3).T,
        lambda: np.zeros((0, 4), dtype=np.float32),
        lambda: np.broadcast_to(np.arange(4, dtype=np.float32), (3, 4)),
        lambda: np.zeros((3, 4), dtype=">f4"),
        lambda: np.zeros((3, 4), dtype=np.float64),
        lambda: np.zeros(4, dtype=np.float32),
        lambda: np.zeros(9 * 4 + 1, dtype=np.uint8)[1:].view(np.float32).reshape(3, 3),
    ],
    ids=["c", "sliced", "transposed", "empty", "broadcast-read-only", "big-endian", "f64", "1-d", "unaligned"],
)
def test_numpy_arrays_read_fast_agree_with_the_interface(make):
    def outcome(x):
        try:
            return fx.host_describe(x)
        except (TypeError, ValueError, BufferError) as e:
            return type(e).__name__, str(e).split(" (a ")[0]

    x = make()
    assert type(x) is np.ndarray
    fast, interface = outcome(x), outcome(x.view(Sub))
    if x.size == 0:  # an empty array's strides mean nothing: NumPy exports zeros through DLPack
        fast, interface = fast[:2] + fast[3:], interface[:2] + interface[3:]
    assert fast == interface


def test_empty_mutable_views_of_any_rank():
    for shape in [(0,), (3, 0), (2, 0, 2), (0, 4)]:
        fx.host_nd_number(np.zeros(shape, dtype=np.int64))
        assert fx.host_nd_elements(np.zeros(shape, dtype=np.int64)) == []


def test_zero_size_records_with_a_null_pointer_read_no_memory():
    desc = {"shape": (4,), "typestr": "|V0", "descr": [("none", "<f4", (0,))], "data": (0, False), "version": 3}
    assert fx.host_zero_size(Producer(desc, host=True)) == (4, 4)


def test_masked_arrays_are_refused_by_typed_arguments():
    data = np.arange(3.0)
    mask = np.array([True, False, True])
    masked = dict(data.__array_interface__, mask=mask, version=3)
    with pytest.raises(ValueError, match="mask: expected a host array of '<f8' without a mask"):
        fx.host_sum(Producer(masked, host=True))
    device = cai_dict(shape=(3,), typestr="<f4", mask=Producer(cai_dict(shape=(3,), typestr="|b1")))
    with pytest.raises(ValueError, match="mask: expected a CUDA array of '<f4' without a mask"):
        fx.describe_f32(Producer(device))


class LegacyOnly(OnlyDLPack):
    """Offers an array through a legacy DLPack capsule alone (as JAX does)."""

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__()


def test_a_legacy_capsule_is_read_but_never_written():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert fx.host_describe(LegacyOnly(x))[1] == [2, 3]
    with pytest.raises(BufferError, match="legacy DLPack capsule, which cannot say whether the memory may be written"):
        fx.host_scale(LegacyOnly(x), 2.0)
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_jax_arrays_are_not_written_through():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    j = jax.device_put(jnp.arange(4, dtype=jnp.float32).reshape(2, 2), jax.devices("cpu")[0])
    try:
        fx.host_scale(j, 10.0)
    except BufferError:
        pass  # a legacy capsule (JAX up to now) or a read-only versioned one
    assert np.asarray(j).tolist() == [[0, 1], [2, 3]]


def test_a_tensor_somewhere_else_than_its_producer_said_is_refused():
    device_view = cai.from_cuda_array_interface(cai_dict(shape=(3,), typestr="<f8"), check_pointers=False)

    class Liar:
        def __dlpack_device__(self):
            return (1, 0)  # says host memory

        def __dlpack__(self, **kwargs):
            return device_view.__dlpack__(stream=-1, max_version=(1, 0))  # hands over CUDA memory

    before = cai.configure()
    cai.configure(check_pointers=False)  # the device export of a made-up pointer
    try:
        with pytest.raises(BufferError, match=r"the tensor is on \(kDLCUDA, 0\) but __dlpack_device__ said \(kDLCPU, 0\)"):
            fx.host_sum(Liar())
    finally:
        cai.configure(**before)


def test_a_python_class_that_calls_itself_numpy_ndarray_is_not_numpy():
    script = textwrap.dedent(
        """
        import numpy as np
        import cai_fixtures as fx
        Fake = type("ndarray", (), {"__module__": "numpy",
                                    "__dlpack_device__": lambda self: (2, 0),
                                    "__dlpack__": lambda self, **kw: 1 / 0})
        try:
            fx.host_sum(Fake())
        except TypeError as e:
            assert "DLPack device is CUDA memory" in str(e), e
        assert fx.host_sum(np.arange(4.0)) == 6.0
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_bfloat16_argument_takes_raw_pairs_of_native_order_only():
    raw = np.array([0x3F80, 0x4000], dtype=np.uint16)  # the bfloat16 bits of 1.0 and 2.0

    class Pairs:
        def __init__(self, typestr):
            self.__array_interface__ = {"shape": (2,), "typestr": typestr, "data": (raw.ctypes.data, True), "version": 3}

    assert fx.host_bf16(Pairs("<V2")) == [1.0, 2.0]
    # Raw bytes (`|V2`) and the other byte order are not bfloat16, as DLPack tells them.
    for typestr in ("|V2", ">V2"):
        with pytest.raises(TypeError, match=rf"\(raw bytes '{re.escape(typestr)}', not '<V2'\)"):
            fx.host_bf16(Pairs(typestr))
    # `=V2` is raw bytes too, as NumPy reads it (`|V2`).
    with pytest.raises(TypeError, match=r"\(raw bytes '\|V2', not '<V2'\)"):
        fx.host_bf16(Pairs("=V2"))
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert fx.host_bf16(np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)) == [1.5, -2.0]


def test_arguments_whose_elements_interleave_do_not_overlap():
    # Elements that lie between each other's share no byte: the columns of a matrix, the
    # real and imaginary parts of a complex array, the even and the odd elements.
    m = np.arange(12, dtype=np.float32).reshape(4, 3)
    fx.host_nd_add_into(m[:, 0], m[:, 1])
    assert m[:, 0].tolist() == [1, 7, 13, 19]
    fx.host_nd_swap(m[:, 1], m[:, 2])
    assert m[:, 1].tolist() == [2, 5, 8, 11] and m[:, 2].tolist() == [1, 4, 7, 10]
    c = (np.arange(4) + 10j * np.arange(4)).astype(np.complex64)
    fx.host_nd_swap(c.real, c.imag)
    assert c.tolist() == [complex(10 * i, i) for i in range(4)]
    v = np.arange(8, dtype=np.float32)
    fx.host_nd_add_into(v[::2], v[1::2])
    assert v.tolist() == [1, 1, 5, 3, 9, 5, 13, 7]
    # Contiguous slices of interleaved arguments are refused for their layout alone.
    with pytest.raises(ValueError, match="as_slice: .* is not C-contiguous"):
        fx.host_add_into(m[:, 0], m[:, 1])


def test_arguments_whose_elements_can_share_a_byte_overlap():
    m = np.arange(12, dtype=np.float32).reshape(4, 3)
    # A row and a column share an element.
    with pytest.raises(BufferError, match="overlap .* of an earlier array argument of this call"):
        fx.host_nd_add_into(m[0], m[:, 0])
    with pytest.raises(BufferError, match="overlap .* of an earlier array argument of this call"):
        fx.host_nd_swap(m[:, 1], m[::-1, 1])
    # Columns of f4 elements two bytes apart share bytes, though no element starts at
    # another's address.
    raw = np.zeros(64, dtype=np.uint8)
    shifted = [np.lib.stride_tricks.as_strided(raw[k : k + 48].view(np.float32), shape=(4,), strides=(12,)) for k in (0, 2)]
    assert all(s.flags.writeable for s in shifted)
    with pytest.raises(BufferError, match="overlap .* of an earlier array argument of this call"):
        fx.host_nd_swap(*shifted)
    assert raw.tolist() == [0] * 64
