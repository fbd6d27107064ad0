"""DLPack both ways, against real peers that run without a GPU (NumPy, JAX on CPU): Rust
containers and cai views exported through `__dlpack__`, and `cai.from_dlpack` of theirs.
Capsules with unusual contents are built here with ctypes."""

import ctypes
import os
import gc
import re
import inspect
import subprocess
import sys
import threading
import weakref

import numpy as np
import pytest

import cai
import cai_fixtures as fx
from producers import Legacy, Producer, cai_dict

PTR = 0x7F00_0000_0000


def address(a):
    return a.__array_interface__["data"][0]


@pytest.fixture(autouse=True)
def restore_config():
    before = cai.configure()
    yield
    cai.configure(**before)


# -- export: NumPy reads Rust containers and cai views ----------------------------------------


def test_numpy_reads_a_derived_host_container_without_a_copy():
    m = fx.HostMatrix(3, 4)
    a = np.from_dlpack(m)
    assert address(a) == m.address() and a.shape == (3, 4) and a.dtype == np.float32 and a.flags.writeable
    np.testing.assert_array_equal(a, np.arange(12, dtype=np.float32).reshape(3, 4))
    a[1, 2] = 42.0
    assert m.get(1, 2) == 42.0
    m.set(0, 0, -1.0)
    assert a[0, 0] == -1.0
    assert m.__dlpack_device__() == (1, 0)


def test_read_only_is_carried_and_a_legacy_capsule_refused():
    v = fx.FrozenVector([1, 2, 3])
    a = np.from_dlpack(v)  # NumPy asks for a versioned capsule
    assert not a.flags.writeable and list(a) == [1, 2, 3]
    with pytest.raises(BufferError, match="read-only array cannot be exported through a legacy DLPack capsule"):
        v.__dlpack__()
    c = np.from_dlpack(v, copy=True)
    assert c.flags.writeable and address(c) != address(a) and list(c) == [1, 2, 3]
    assert v.__dlpack__(max_version=(1, 0)) is not None


def test_copies_are_the_consumers():
    m = fx.HostMatrix(2, 3)
    c = np.from_dlpack(m, copy=True)
    assert address(c) != m.address()
    c[0, 0] = 99.0
    assert m.get(0, 0) == 0.0
    same = np.from_dlpack(m, copy=False)
    assert address(same) == m.address()


def test_a_host_copy_holds_the_elements_alone_in_c_order():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    for x in [base[::-2, 1::2], base.T, np.broadcast_to(base[0], (3, 6)), np.array(5.0, np.float32)]:
        v = cai.as_array(x)
        c = np.from_dlpack(v, copy=True)
        np.testing.assert_array_equal(c, x)
        assert c.flags.c_contiguous and c.strides == np.array(x, order="C").strides, (x.strides, c.strides)
        copied = cai.from_dlpack(v, copy=True)
        assert copied.shape == x.shape and copied.is_c_contiguous and copied.ptr != v.ptr
        np.testing.assert_array_equal(np.from_dlpack(copied), x)


def test_a_copy_too_large_to_allocate_is_a_memory_error():
    mem = np.zeros(1, np.float32)

    class Broadcast:  # 2**60 elements in four bytes
        __array_interface__ = {"version": 3, "shape": (2**60,), "typestr": "<f4", "data": (mem.ctypes.data, False), "strides": (0,)}

    v = cai.as_array(Broadcast())
    with pytest.raises(MemoryError, match=f"copy: cannot allocate {2**62} bytes for a copy of the array"):
        v.__dlpack__(max_version=(1, 0), copy=True)
    assert np.from_dlpack(v).strides == (0,), "without a copy, the view itself is exported"


def test_a_producer_that_empties_the_keywords_it_was_given_gets_its_own_error():
    # The retry without max_version used the dict of the first call, which the producer
    # could reach through the collector and empty: a KeyError came out of cai.
    class OldProducer:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kw):
            for o in gc.get_objects():
                if type(o) is dict and o is not kw and o == kw:
                    o.clear()
            raise TypeError("no max_version here")

    for f in (cai.from_dlpack, fx.host_shape_f32):
        with pytest.raises(TypeError, match="no max_version here"):
            f(OldProducer())


def test_the_retry_of_a_producer_from_before_dlpack_1_raises_the_producers_own_error():
    class OldProducer:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, stream=None):
            raise BufferError("cannot export: the array is byte-swapped")

    for f in (cai.from_dlpack, fx.host_shape_f32):
        with pytest.raises(BufferError, match="cannot export: the array is byte-swapped") as caught:
            f(OldProducer())
        # The first call's error, which made cai retry, is its context.
        first = caught.value.__context__
        assert type(first) is TypeError and "max_version" in str(first)


def test_a_typeerror_subclass_is_the_producers_refusal_and_is_not_retried():
    # PyArrow refuses an array with nulls with ArrowTypeError, a TypeError subclass: that
    # is not "no max_version here", and cai does not retry (which would warn of a legacy
    # capsule under -W error instead of saying why).
    class ArrowTypeError(TypeError):
        pass

    class Refuses:
        calls = 0

        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kw):
            Refuses.calls += 1
            raise ArrowTypeError("Can only convert a null-free array")

    with pytest.raises(ArrowTypeError, match="null-free"):
        cai.from_dlpack(Refuses())
    assert Refuses.calls == 1


def test_copy_refused_by_a_producer_that_takes_max_version_is_its_own_error():
    class NoCopy:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, *, stream=None, max_version=None):
            return np.arange(3.0).__dlpack__(max_version=max_version)

    with pytest.raises(TypeError, match="unexpected keyword argument 'copy'") as caught:
        cai.from_dlpack(NoCopy(), copy=True)
    assert caught.value.__context__ is None, "raised as the producer raised it, not retried"
    assert cai.from_dlpack(NoCopy()).shape == (3,)

    class Interrupting:
        def __str__(self):
            raise KeyboardInterrupt

    class Hostile(NoCopy):
        def __dlpack__(self, **kw):
            raise TypeError(Interrupting())

    with pytest.raises(KeyboardInterrupt):
        cai.from_dlpack(Hostile(), copy=True)


def test_copy_asked_of_a_producer_from_before_dlpack_1_says_so():
    from producers import Legacy

    for copy in (True, False):
        with pytest.raises(TypeError, match=r"^copy: Legacy's __dlpack__ refused max_version \(a producer from before "
                                            r"DLPack 1.0, which takes no copy either\); call cai.from_dlpack without copy=") as caught:
            cai.from_dlpack(Legacy(np.arange(3.0)), copy=copy)
        assert type(caught.value.__cause__) is TypeError and "max_version" in str(caught.value.__cause__)
    assert cai.from_dlpack(Legacy(np.arange(3.0))).shape == (3,)


def test_the_retry_chains_its_error_as_python_would_with_no_cycle():
    # The first call raises a TypeError while handling X; the retry raises X itself.
    # Python cuts the link that would make X the context of its own context.
    x = ValueError("the producer's cached error")

    class Cyclic:
        calls = 0

        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kw):
            Cyclic.calls += 1
            if Cyclic.calls == 1:
                try:
                    raise x
                except ValueError:
                    raise TypeError("first")
            raise x

    with pytest.raises(ValueError) as caught:
        cai.from_dlpack(Cyclic())
    assert caught.value is x
    chain, e = [], caught.value
    while e is not None and len(chain) < 10:
        chain.append(e)
        e = e.__context__
    assert [type(e).__name__ for e in chain] == ["ValueError", "TypeError"]
    # A retry that succeeds leaves no exception behind, and sys.exc_info() is as before.
    try:
        raise KeyError("outer")
    except KeyError as outer:
        assert np.asarray(cai.from_dlpack(Legacy(np.arange(3.0)))).tolist() == [0.0, 1.0, 2.0]
        assert sys.exc_info()[1] is outer


def test_a_writing_argument_refuses_a_copy_its_producer_flagged():
    class CopiesAlways:
        """A DLPack 1.0 producer that exports a copy (flagged IS_COPIED), as the array API
        lets it when `copy` is None."""

        def __init__(self, arr):
            self.arr, self.copy_asked = arr, []

        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            self.copy_asked.append(copy)
            return self.arr.__dlpack__(max_version=max_version, copy=True)

    arr = np.ones((2, 2), np.float32)
    p = CopiesAlways(arr)
    with pytest.raises(BufferError, match=r"exported a copy \(the tensor's IS_COPIED flag\): what the function writes"):
        fx.host_scale(p, 10.0)
    assert arr.tolist() == [[1.0, 1.0], [1.0, 1.0]] and p.copy_asked == [None]
    # Reading a copy is reading the same values.
    assert fx.host_describe(p)[1] == [2, 2]
    assert cai.from_dlpack(p).readonly is False
    # Unless copy=False was asked for: the producer was told not to copy.
    with pytest.raises(BufferError, match=r"asked for copy=False, the producer returned a tensor it flagged as a copy"):
        cai.from_dlpack(p, copy=False)
    assert p.copy_asked[-1] is False


def test_a_derived_export_reads_its_arguments_before_the_object():
    # An argument's `__index__` may change the object: the capsule describes the object
    # as it is once the arguments are read, not the buffer it moved out of.
    class Capsule:
        def __init__(self, capsule, device=(1, 0)):
            self.capsule, self.device = capsule, device

        def __dlpack_device__(self):
            return self.device

        def __dlpack__(self, **kwargs):
            return self.capsule

    g = fx.GrowingVector([1.0, 2.0, 3.0])

    class Grows:
        def __index__(self):
            g.extend(1000, 9.0)
            return 1

    a = np.from_dlpack(Capsule(g.__dlpack__(max_version=(Grows(), 0))))
    assert a.shape == (1003,) and address(a) == g.address()
    a[0] = 42.0
    assert np.asarray(g)[0] == 42.0
    cai.configure(check_pointers=False)  # the device's pointers are made up
    m = fx.DeviceMatrix(0x7F00_0000_0000, 12, [3, 4])

    class Moves:
        def __index__(self):
            m.reallocate(0x7F00_0010_0000)
            return 1

    t = cai.from_dlpack(Capsule(m.__dlpack__(max_version=(Moves(), 0)), (2, 0)))
    assert t.ptr == 0x7F00_0010_0000


def test_named_arrays_and_views_export_too():
    cloud = fx.HostCloud(4)
    xyz, ids = np.from_dlpack(cloud.xyz), np.from_dlpack(cloud.ids)
    assert xyz.shape == (4, 3) and ids.dtype == np.uint32 and list(ids) == [0, 1, 2, 3]
    assert address(xyz) == cloud.xyz.ptr
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    for arr in (base, base.T, base[1:3, ::2], base[::-1], base[:0], np.array(5.0)):
        view = cai.as_array(arr)
        back = np.from_dlpack(view)
        assert address(back) == address(arr) or arr.size == 0
        assert back.shape == arr.shape and (back.strides == arr.strides or arr.size == 0)
        np.testing.assert_array_equal(back, arr)


def test_export_arguments_are_checked():
    m = fx.HostMatrix(2, 2)
    with pytest.raises(BufferError, match=r"stream: host memory is exported with stream=None, received 1 \(int\)"):
        m.__dlpack__(stream=1)
    with pytest.raises(BufferError, match=r"dl_device: the array is in \(kDLCPU, 0\) memory and cannot be exported to \(kDLCUDA, 0\)"):
        m.__dlpack__(dl_device=(2, 0))
    assert m.__dlpack__(dl_device=(1, 0)) is not None
    with pytest.raises(TypeError, match=r"max_version: expected a tuple of two ints, received '1.0' \(str\)"):
        m.__dlpack__(max_version="1.0")
    with pytest.raises(TypeError, match=r"copy: expected None, True or False, received 1 \(int\)"):
        m.__dlpack__(copy=1)
    with pytest.raises(TypeError, match=r"dl_device: expected a tuple of two ints"):
        m.__dlpack__(dl_device=(1,))
    # A version's parts are ordinals: a negative one, or one past 64 bits, is a bad value.
    for bad in [(-1, 0), (1, -1)]:
        with pytest.raises(ValueError, match=r"max_version: \(-?1, -?[01]\) is not a version"):
            m.__dlpack__(max_version=bad)
    with pytest.raises(ValueError, match=r"max_version: 1180591620717411303424 \(int\) is out of range"):
        m.__dlpack__(max_version=(2**70, 0))
    with pytest.raises(ValueError, match=r"max_version: np.uint64\(9223372036854775808\) \(uint64\) is out of range"):
        m.__dlpack__(max_version=(1, np.uint64(2**63)))


def test_a_views_dlpack_reads_its_keywords_as_python_would():
    # The views' __dlpack__ is a METH_FASTCALL method that matches its keywords itself.
    view = cai.as_array(np.arange(6.0).reshape(2, 3))
    assert str(inspect.signature(view.__dlpack__)) == "(*, stream=None, max_version=None, dl_device=None, copy=None)"
    assert "DLPack" in type(view).__dlpack__.__doc__
    # Worded as pyo3 words them for the derived classes' __dlpack__ (the class named).
    with pytest.raises(TypeError, match=r"^HostArray\.__dlpack__\(\) takes 0 positional arguments but 1 was given$"):
        view.__dlpack__(None)
    with pytest.raises(TypeError, match=r"^HostArray\.__dlpack__\(\) takes 0 positional arguments but 2 were given$"):
        view.__dlpack__(None, None)
    with pytest.raises(TypeError, match=r"^HostArray\.__dlpack__\(\) got an unexpected keyword argument 'versions'$"):
        view.__dlpack__(versions=(1, 0))
    # A name is shown as Python shows a str: a lone surrogate escaped, not replaced.
    with pytest.raises(TypeError, match=r"^HostArray\.__dlpack__\(\) got an unexpected keyword argument '\\udc80'$"):
        view.__dlpack__(**{"\udc80": 1})
    with pytest.raises(TypeError, match=r"max_version: expected a tuple of two ints, received '1.0' \(str\)"):
        view.__dlpack__(max_version="1.0")
    with pytest.raises(TypeError, match=r"copy: expected None, True or False, received 1 \(int\)"):
        view.__dlpack__(copy=1)
    # A NumPy bool reads as the bool it is, as cai.from_dlpack(copy=...) reads it.
    assert view.__dlpack__(copy=np.False_) is not None
    assert view.__dlpack__(copy=np.True_) is not None
    with pytest.raises(BufferError, match=r"stream: host memory is exported with stream=None, received 1 \(int\)"):
        view.__dlpack__(stream=1)
    with pytest.raises(TypeError, match=r"max_version: expected a tuple of two ints, received \(1, 2, 3\)"):
        view.__dlpack__(max_version=(1, 2, 3))
    with pytest.raises(TypeError, match=r"max_version: expected a tuple of two ints, received \(True, 0\)"):
        view.__dlpack__(max_version=(True, 0))
    with pytest.raises(ValueError, match=r"dl_device: the device id 4294967296 \(int\) is out of range"):
        view.__dlpack__(dl_device=(1, 2**32))
    with pytest.raises(ValueError, match=r"dl_device: the device type np.int64\(-4294967296\) \(int64\) is out of range"):
        view.__dlpack__(dl_device=(np.int64(-(2**32)), 0))

    class Index:
        def __index__(self):
            return 2**40

    with pytest.raises(
        ValueError, match=r"dl_device: the device id <.* \(Index; its __index__ gave 1099511627776\) is out of range"
    ):
        view.__dlpack__(dl_device=(1, Index()))

    class Name(str):
        pass

    # Names made at run time (not the interned strings), as NumPy's from_dlpack passes
    # them, and names of a str subclass, match by text, every time.
    for _ in range(3):
        for name in ("".join(["max_", "version"]), Name("max_version")):
            capsule = view.__dlpack__(**{name: (1, 0)})
            assert "dltensor_versioned" in repr(capsule)
    held = Name("copy")
    before = sys.getrefcount(held)
    view.__dlpack__(**{held: None})
    assert sys.getrefcount(held) == before, "a str subclass name is not kept"
    assert '"dltensor"' in repr(view.__dlpack__(max_version=(0, 8)))
    with pytest.raises(ValueError, match=r"max_version: 1180591620717411303424 \(int\) is out of range"):
        view.__dlpack__(max_version=(2**70, 0))
    back = np.from_dlpack(view)
    assert address(back) == view.ptr and back.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_a_view_keeps_no_failed_layout():
    # What a view cannot carry through DLPack is refused on every call, not only the first.
    view = cai.as_array(np.zeros(3, ">f4"))
    for _ in range(2):
        with pytest.raises(BufferError, match=r"typestr: '>f4' is not in this machine's byte order"):
            view.__dlpack__()


def test_a_deleter_called_on_a_thread_without_the_gil_releases_the_exporter():
    # DLPack lets a consumer call the deleter from any thread; ctypes calls it with the
    # GIL released, as a C++ consumer's thread would.
    view = cai.as_array(np.arange(4.0))
    base = sys.getrefcount(view)
    capsule = view.__dlpack__(max_version=(1, 0))
    assert sys.getrefcount(view) == base + 1
    get, rename = ctypes.pythonapi.PyCapsule_GetPointer, ctypes.pythonapi.PyCapsule_SetName
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    rename.restype, rename.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
    managed = DLManagedTensorVersioned.from_address(get(capsule, b"dltensor_versioned"))
    deleter = ctypes.cast(managed.deleter, ctypes.c_void_p).value
    assert rename(capsule, b"used_dltensor_versioned") == 0  # taken: the capsule no longer deletes
    call = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(deleter)
    thread = threading.Thread(target=call, args=(ctypes.addressof(managed),))
    thread.start()
    thread.join()
    del capsule
    gc.collect()
    assert sys.getrefcount(view) == base


def test_strides_that_are_not_whole_elements_are_refused():
    rec = np.zeros(4, dtype=[("a", "u1"), ("b", "<f4")])  # packed: b's stride is 5 bytes
    view = cai.as_array(Producer(rec["b"].__array_interface__, host=True))
    with pytest.raises(BufferError, match=r"strides: strides \(5,\) are not whole multiples of the element size 4"):
        view.__dlpack__()


@pytest.mark.parametrize(
    "shape, strides, elements",
    [
        ((3, 1), (4, 6), [[0.0], [1.0], [2.0]]),  # a length-1 axis: its stride is never stepped
        ((1, 3), (5, 4), [[0.0, 1.0, 2.0]]),
        ((2, 1, 2), (8, 7, 4), [[[0.0, 1.0]], [[2.0, 3.0]]]),
        ((0,), (5,), []),  # an empty array: no stride is stepped
        ((0, 3), (3, 5), np.zeros((0, 3))),
    ],
)
def test_strides_never_stepped_need_not_be_whole_elements(shape, strides, elements):
    # NumPy calls such arrays contiguous and exports them through DLPack; so does cai,
    # through both of its protocols, and its extractors take them.
    buf = np.arange(16, dtype=np.float32)
    d = {"shape": shape, "strides": strides, "typestr": "<f4", "data": (address(buf), False), "version": 3}
    p = Producer(d, host=True)
    expected = np.lib.stride_tricks.as_strided(buf, shape, strides)
    np.testing.assert_array_equal(expected, elements)
    view = cai.as_array(p)
    assert view.is_c_contiguous
    for through in (np.from_dlpack(view), np.asarray(cai.from_dlpack(view)), np.asarray(view)):
        assert through.shape == shape
        np.testing.assert_array_equal(through, expected)
    if expected.size:
        assert np.from_dlpack(view).__array_interface__["data"][0] == address(buf)
    assert fx.host_shape_f32(p) == list(shape)
    # A Rust container exporting such strides does too.
    cai.configure(check_pointers=False)  # the device's pointers are made up
    m = fx.DeviceMatrix(PTR, 16, list(shape), strides=list(strides))
    assert m.__cuda_array_interface__["strides"] is None
    imported = cai.from_dlpack(m)
    assert imported.shape == shape and imported.is_c_contiguous


@pytest.mark.parametrize("shape, strides", [((2, 1), (6, 4)), ((1, 2), (4, 6)), ((2, 2, 1), (16, 6, 4))])
def test_strides_stepped_must_be_whole_elements(shape, strides):
    buf = np.arange(16, dtype=np.float32)
    d = {"shape": shape, "strides": strides, "typestr": "<f4", "data": (address(buf), False), "version": 3}
    p = Producer(d, host=True)
    with pytest.raises(BufferError, match=r"strides: strides \(.*\) are not whole multiples of the element size 4"):
        cai.as_array(p).__dlpack__()
    with pytest.raises(ValueError, match=r"strides: \(.*\) are not whole multiples of the element size 4"):
        fx.host_shape_f32(p)


def test_types_without_a_dlpack_type_are_refused_by_name():
    view = cai.as_array(np.zeros(3, dtype="<M8[ns]"))
    with pytest.raises(BufferError, match=r"typestr: '<M8\[ns\]' has no DLPack data type"):
        view.__dlpack__()


# -- import: cai reads NumPy's and JAX's arrays -------------------------------------------------

DTYPES = ["?", "i1", "<i2", "<i4", "<i8", "u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8", "<c8", "<c16"]


def layouts(dtype):
    base = np.arange(24).astype(dtype).reshape(4, 6)
    yield "c", base
    yield "transposed", base.T
    yield "sliced", base[1:3, 1::2]
    yield "negative", base[::-1, ::-1]
    yield "0-d", np.array(base[2, 3])
    yield "empty", base[:0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_cai_reads_numpy_in_every_layout_and_type(dtype):
    for name, arr in layouts(dtype):
        v = cai.from_dlpack(arr)
        assert isinstance(v, cai.HostArray), name
        assert v.shape == arr.shape and np.dtype(v.typestr) == arr.dtype, name
        if arr.size:
            assert v.ptr == address(arr) and v.strides == arr.strides, name
        assert v.readonly is False and v.stream is None
        np.testing.assert_array_equal(np.asarray(v), arr)
        assert isinstance(v.owner, cai.DLPackTensor)


def test_cai_reads_a_read_only_numpy_array_as_read_only():
    arr = np.arange(4.0)
    arr.flags.writeable = False
    assert cai.from_dlpack(arr).readonly is True


def test_jax_reads_a_rust_container_and_cai_reads_jax():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    cpu = jax.devices("cpu")[0]  # where JAX also has a GPU, its arrays would be there
    v = fx.AlignedVector(64)
    j = jnp.from_dlpack(v)
    assert j.unsafe_buffer_pointer() == v.address(), "JAX copied a 64-byte aligned host buffer"
    np.testing.assert_array_equal(np.asarray(j), np.arange(64, dtype=np.float32))
    x = jax.device_put(jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4), cpu)
    view = cai.from_dlpack(x)
    assert view.ptr == x.unsafe_buffer_pointer() and view.shape == (3, 4) and view.typestr == "<f4"
    np.testing.assert_array_equal(np.asarray(view), np.asarray(x))
    bf16 = jax.device_put(jnp.zeros(4, dtype=jnp.bfloat16), cpu)
    assert cai.from_dlpack(bf16).typestr == "<V2", "bfloat16 is <V2, as PyTorch exports it"


# -- lifetimes: each deleter runs exactly once -----------------------------------------------------


def test_a_capsule_keeps_the_exporter_alive_and_frees_it_once():
    m = fx.HostMatrix(2, 2)
    alive = weakref.ref(m)
    capsule = m.__dlpack__()
    del m
    gc.collect()
    assert alive() is not None, "the capsule keeps the container alive"
    del capsule  # dropped unconsumed: the capsule calls the deleter
    gc.collect()
    assert alive() is None

    m = fx.HostMatrix(2, 2)
    alive = weakref.ref(m)
    a = np.from_dlpack(m)
    del m
    gc.collect()
    assert alive() is not None
    del a  # NumPy consumed the capsule: NumPy calls the deleter
    gc.collect()
    assert alive() is None


def test_imported_tensors_are_freed_once_with_their_last_view():
    v = fx.FrozenVector([1, 2, 3])
    base = sys.getrefcount(v)
    view = cai.from_dlpack(v)
    again = np.asarray(view)  # a second consumer of the same tensor, through the view
    assert sys.getrefcount(v) == base + 1
    del view
    gc.collect()
    assert sys.getrefcount(v) == base + 1, "NumPy's array still holds the view"
    del again
    gc.collect()
    assert sys.getrefcount(v) == base


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_no_leak_over_a_hundred_thousand_exports_and_imports():
    m = fx.HostMatrix(8, 8)
    x = np.arange(64.0)
    view = cai.as_array(x)
    base_m, base_x, base_view = sys.getrefcount(m), sys.getrefcount(x), sys.getrefcount(view)
    for _ in range(2000):  # warm up allocator pools
        np.from_dlpack(m)
        np.from_dlpack(view)
        cai.from_dlpack(x)
    before = rss()
    for _ in range(100_000):
        np.from_dlpack(m)
        m.__dlpack__(max_version=(1, 0))
        np.from_dlpack(view)
        view.__dlpack__()
        cai.from_dlpack(x)
    gc.collect()
    grown = rss() - before
    assert sys.getrefcount(m) == base_m and sys.getrefcount(view) == base_view
    assert sys.getrefcount(x) == base_x
    assert grown < 8 << 20, f"memory grew by {grown / 1e6:.1f} MB over 10^5 round trips"


# -- capsules made by hand: what cai refuses -----------------------------------------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class HandMade:
    """A producer of one versioned capsule over `memory`, counting its deleter's calls. As
    DLPack asks of producers, the capsule's destructor calls the deleter when no consumer
    took the tensor (renamed the capsule)."""

    def __init__(self, memory, shape, code=2, bits=32, lanes=1, device=(1, 0), major=1, ptr=None, byte_offset=0,
                 capsule_name=b"dltensor_versioned"):
        self.memory = memory
        self.capsule_name = capsule_name
        self.deleted = 0
        # Of those, the deletes the capsule's destructor ran (a tensor no consumer took).
        self.destroyed = 0
        # One callback for every capsule made: a capsule may outlive the next call.
        self._destructor = CAPSULE_DESTRUCTOR(self._destroy)
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.device = device
        self._deleter = DELETER(self._delete)
        self.managed = DLManagedTensorVersioned(
            major, 0, None, self._deleter, 0,
            DLTensor(ptr if ptr is not None else memory.ctypes.data, DLDevice(*device), len(shape),
                     DLDataType(code, bits, lanes), self.shape, None, byte_offset),
        )

    def _delete(self, _):
        self.deleted += 1

    def _destroy(self, capsule):
        valid = ctypes.pythonapi.PyCapsule_IsValid
        valid.restype, valid.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]
        if valid(capsule, self.capsule_name):
            self.destroyed += 1
            self.managed.deleter(ctypes.addressof(self.managed))

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kwargs):
        self.kwargs = kwargs
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, CAPSULE_DESTRUCTOR]
        return new(ctypes.addressof(self.managed), self.capsule_name, self._destructor)


def test_a_hand_made_capsule_is_read_and_its_deleter_called_once():
    mem = np.arange(6, dtype=np.float32)
    p = HandMade(mem, (2, 3))
    v = cai.from_dlpack(p)
    assert v.shape == (2, 3) and v.ptr == mem.ctypes.data and v.strides == (12, 4)
    assert p.deleted == 0
    del v
    gc.collect()
    assert (p.deleted, p.destroyed) == (1, 0), "taken, so freed by cai, not by the capsule's destructor"


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"code": 10, "bits": 8}, BufferError, r"dtype: kDLFloat8_e4m3fn \(8 bits\) has no typestr"),
        ({"code": 2, "bits": 32, "lanes": 4}, BufferError, "dtype: kDLFloat \\(32 bits, 4 lanes\\) has 4 lanes"),
        ({"major": 2}, BufferError, r"DLPack 2.0 is newer than the versions cai reads \(1.x\)"),
        ({"major": 0}, BufferError, r"DLPack 0.0 is older than versioned capsules \(DLPack 1.0 and later\)"),
        ({"device": (8, 0)}, BufferError, r"kDLMetal \(8\) memory is neither host nor CUDA memory"),
    ],
)
def test_what_cai_cannot_read_is_refused_and_still_freed(kwargs, error, message):
    p = HandMade(np.zeros(4, np.float32), (4,), **kwargs)
    with pytest.raises(error, match=message):
        cai.from_dlpack(p)
    gc.collect()
    # Refused before the capsule is consumed: the capsule's destructor frees the tensor. A
    # device cai cannot read is refused before a capsule is asked for.
    freed = 0 if "device" in kwargs else 1
    assert (p.deleted, p.destroyed) == (freed, freed), "never taken: freed by the capsule's destructor alone"
    assert not hasattr(p, "kwargs") if "device" in kwargs else p.kwargs


def test_a_versioned_tensor_in_a_capsule_named_as_a_legacy_one_is_refused_and_left_to_its_producer():
    # A producer that names a DLManagedTensorVersioned's capsule 'dltensor' (pydlpack 0.2
    # does): read as a legacy tensor, its device is its manager_ctx and its "deleter" its
    # shape pointer. cai refuses the tensor before it consumes the capsule, and never runs
    # a deleter of a tensor it refused: the producer's destructor frees it. In a process
    # of its own: a deleter read from the wrong struct would crash it.
    code = (
        "import gc, numpy as np, cai, test_dlpack as t\n"
        "p = t.HandMade(np.arange(6, dtype=np.float32), (6,), capsule_name=b'dltensor')\n"
        "try:\n"
        "    cai.from_dlpack(p)\n"
        "except BufferError as e:\n"
        "    print('refused:', e)\n"
        "gc.collect()\n"
        "print('deleted', p.deleted, p.destroyed)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(__file__), capture_output=True, text=True)
    assert r.returncode == 0, (r.returncode, r.stderr)
    lines = r.stdout.splitlines()
    assert lines[0].startswith("refused: __dlpack__: the tensor is on "), lines
    assert lines[1] == "deleted 1 1", lines


def test_a_tensor_with_a_negative_device_id_is_refused_and_freed():
    # DLPack's device ids are ordinals, on the host too: (kDLCPU, -5) is not where
    # __dlpack_device__'s (kDLCPU, 0) says the memory is.
    for device in [(1, -5), (3, -1)]:
        p = HandMade(np.zeros(4, np.float32), (4,), device=device)
        p.__dlpack_device__ = lambda: (1, 0)
        with pytest.raises(BufferError, match=r"tensor is on \((kDLCPU, -5|kDLCUDAHost, -1)\) but __dlpack_device__ said \(kDLCPU, 0\)"):
            cai.from_dlpack(p)
        gc.collect()
        assert (p.deleted, p.destroyed) == (1, 1)


def test_a_null_pointer_with_a_byte_offset_is_refused():
    p = HandMade(np.zeros(4, np.float32), (4,), ptr=0, byte_offset=16)
    with pytest.raises(ValueError, match="data: the tensor's pointer is null and its byte_offset is 16"):
        cai.from_dlpack(p)
    with pytest.raises(ValueError, match="byte_offset is 16"):
        fx.host_shape_f32(HandMade(np.zeros(4, np.float32), (4,), ptr=0, byte_offset=16))


def int64_at_odd_address(values, keep):
    """The address of `values` as int64s, one byte past an 8-byte boundary."""
    buf = (ctypes.c_char * (8 * len(values) + 16))()
    keep.append(buf)
    odd = (ctypes.addressof(buf) + 7) // 8 * 8 + 1
    ctypes.memmove(odd, (ctypes.c_int64 * len(values))(*values), 8 * len(values))
    return odd


@pytest.mark.parametrize("field", ["shape", "strides"])
def test_misaligned_shape_and_strides_are_refused_and_the_tensor_freed(field):
    keep = []
    p = HandMade(np.arange(4, dtype=np.float32), (4,))
    setattr(p.managed.dl_tensor, field, ctypes.cast(int64_at_odd_address([4] if field == "shape" else [1], keep),
                                                    ctypes.POINTER(ctypes.c_int64)))
    with pytest.raises(ValueError, match=rf"{field}: the pointer 0x[0-9a-f]+ is not aligned for int64 values"):
        cai.from_dlpack(p)
    gc.collect()
    assert (p.deleted, p.destroyed) == (1, 1)


def test_a_misaligned_tensor_is_refused_and_left_to_its_producer():
    p = HandMade(np.arange(4, dtype=np.float32), (4,))
    size = ctypes.sizeof(p.managed)
    buf = (ctypes.c_char * (size + 16))()
    odd = (ctypes.addressof(buf) + 7) // 8 * 8 + 1
    ctypes.memmove(odd, ctypes.addressof(p.managed), size)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = new(odd, b"dltensor_versioned", None)
    p.__dlpack__ = lambda **kwargs: capsule
    with pytest.raises(ValueError, match=r"__dlpack__: the capsule's tensor pointer 0x[0-9a-f]+ is not aligned to \d+ bytes"):
        cai.from_dlpack(p)
    gc.collect()
    assert p.deleted == 0, "a tensor not taken is not freed"


@pytest.mark.parametrize("ptr", [0, PTR])
def test_an_empty_array_is_copied_without_reading_its_pointer(ptr):
    class Empty:
        __array_interface__ = {"version": 3, "shape": (0, 3), "typestr": "<f8", "data": (ptr, False)}

    v = cai.as_array(Empty())
    a = np.from_dlpack(v, copy=True)
    assert a.shape == (0, 3) and a.dtype == np.float64
    copied = cai.from_dlpack(v, copy=True)
    assert copied.shape == (0, 3) and copied.ptr == 0, "an empty copy points at nothing"
    assert np.from_dlpack(copied).shape == (0, 3)


class MaskedHost:
    """A host producer whose interface carries a mask."""

    def __init__(self, values, mask):
        self.values, self.mask = values, mask

    @property
    def __array_interface__(self):
        return dict(self.values.__array_interface__, mask=self.mask)


def test_masked_arrays_are_not_exported_through_dlpack():
    # DLPack carries no mask: exported without it, the masked-out 1e300 would read as valid.
    v = cai.as_array(MaskedHost(np.array([1.0, 1e300, 2.0]), np.array([True, False, True])))
    assert v.mask is not None
    m = fx.MaskedDevice(PTR, PTR + 4096, 3)
    for export in (
        lambda: np.from_dlpack(v),
        lambda: cai.from_dlpack(v),
        lambda: m.__dlpack__(),
        lambda: cai.as_cuda_array(m, check_pointers=False).__dlpack__(),
    ):
        with pytest.raises(BufferError, match=r"mask: a masked array has no DLPack form"):
            export()


@pytest.mark.parametrize("device", [(2, 2**40), (2, -1), (2**40, 0)])
def test_a_device_that_is_no_device_ordinal_is_refused_naming_it(device):
    p = HandMade(np.zeros(4, np.float32), (4,), device=device)
    with pytest.raises(ValueError, match=re.escape(f"__dlpack_device__: returned {device}")):
        cai.from_dlpack(p)


def test_a_legacy_capsule_is_read_only_as_numpy_reads_it():
    arr = np.arange(4.0)
    assert np.from_dlpack(Legacy(arr)).flags.writeable is False
    v = cai.from_dlpack(Legacy(arr))
    assert v.readonly is True
    assert np.from_dlpack(v).flags.writeable is False
    with pytest.raises(BufferError, match="legacy DLPack capsule, which cannot say whether the memory may be written"):
        fx.host_scale(Legacy(np.zeros((2, 2), np.float32)), 2.0)


def test_jax_arrays_come_in_read_only():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    x = jax.device_put(jnp.arange(4.0, dtype=jnp.float32), jax.devices("cpu")[0])
    v = cai.from_dlpack(x)
    assert v.readonly is True and np.from_dlpack(v).flags.writeable is False
    # A JAX that asks for a legacy capsule (0.10 does), which cannot say read-only, is
    # refused with what JAX's users can do instead; one that asks for a versioned capsule
    # reads it. Either way, jax.numpy.array works.
    try:
        got = jnp.from_dlpack(v)
    except BufferError as e:
        assert re.search(r"\(jax.numpy.from_dlpack\) can copy it .* \(jax.numpy.array\)", str(e)), e
    else:
        assert got.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert jnp.array(v).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_two_byte_records_and_raw_bytes_are_not_exported_as_bfloat16():
    with pytest.raises(BufferError, match=r"descr: a record type \(\[\('x', '<i2'\)\]\) has no DLPack data type"):
        cai.as_array(np.zeros(3, [("x", "<i2")])).__dlpack__()
    with pytest.raises(BufferError, match=r"typestr: '\|V2' has no DLPack data type"):
        cai.as_array(np.zeros(3, "V2")).__dlpack__()
    # `=` gives no byte order to raw bytes, as NumPy reads it: '=V2' is '|V2', not '<V2'.
    arr = np.zeros(3, "<u2")
    for typestr in ["=V2", "=b1", "=i1", "=S2", "=f4", "=U1"]:
        ai = {"shape": (1,), "typestr": typestr, "data": (arr.ctypes.data, False), "version": 3}
        producer = type("Native", (), {"__array_interface__": ai, "base": arr})()
        assert cai.as_array(producer).typestr == np.asarray(producer).dtype.str, typestr
    raw = cai.as_array(type("Native", (), {"__array_interface__": dict(ai, typestr="=V2"), "base": arr})())
    with pytest.raises(BufferError, match=r"typestr: '\|V2' has no DLPack data type"):
        raw.__dlpack__()


def test_one_byte_items_have_no_byte_order_to_refuse():
    # NumPy exports `>u1` as uint8; so does a view whose producer wrote the order.
    arr = np.arange(4, dtype=np.uint8)
    ai = {k: v for k, v in arr.__array_interface__.items() if k != "descr"}
    ai["typestr"] = ">u1"
    view = cai.as_array(type("Big", (), {"__array_interface__": ai, "base": arr})())
    assert view.typestr == ">u1"
    back = np.from_dlpack(view)
    assert back.dtype == np.uint8 and back.tolist() == [0, 1, 2, 3]
    # Raw bytes in the other byte order are raw bytes, not bfloat16.
    other = ">V2" if sys.byteorder == "little" else "<V2"
    raw = cai.as_array(type("Raw", (), {"__array_interface__": dict(ai, typestr=other, shape=(2,)), "base": arr})())
    with pytest.raises(BufferError, match=rf"typestr: '{other}' has no DLPack data type"):
        raw.__dlpack__()


def test_a_dlpack_producer_given_to_an_interface_reader_is_pointed_to_from_dlpack():
    jnp = pytest.importorskip("jax.numpy")
    for call, attribute in [(cai.as_array, "__array_interface__"), (cai.as_cuda_array, "__cuda_array_interface__")]:
        with pytest.raises(TypeError, match=rf"^{attribute}: objects of type 'ArrayImpl' do not export it \(they offer __dlpack__: cai\.from_dlpack reads them\)$"):
            call(jnp.arange(3.0))
    with pytest.raises(TypeError, match=r"^__array_interface__: objects of type 'int' do not export it$"):
        cai.as_array(3)
    # Any object that offers __dlpack__, JAX or not; a __dlpack__ attribute that raises
    # is no offer, and one that must propagate does.
    offers = type("Offers", (), {"__dlpack__": lambda s, **k: None})()
    with pytest.raises(TypeError, match=r"^__array_interface__: objects of type 'Offers' do not export it \(they offer"):
        cai.as_array(offers)
    broken = type("Broken", (), {"__dlpack__": property(lambda s: 1 / 0)})()
    with pytest.raises(TypeError, match=r"^__cuda_array_interface__: objects of type 'Broken' do not export it$"):
        cai.as_cuda_array(broken)

    def interrupt(s):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cai.as_array(type("Interrupting", (), {"__dlpack__": property(interrupt)})())


def test_used_capsules_non_capsules_and_non_producers_are_refused():
    m = fx.HostMatrix(2, 2)
    capsule = m.__dlpack__()
    np.from_dlpack(type("Once", (), {"__dlpack__": lambda s, **k: capsule, "__dlpack_device__": lambda s: (1, 0)})())
    used = type("Used", (), {"__dlpack__": lambda s, **k: capsule, "__dlpack_device__": lambda s: (1, 0)})()
    with pytest.raises(BufferError, match="the capsule was already consumed"):
        cai.from_dlpack(used)
    with pytest.raises(TypeError, match=r"__dlpack__: expected a PyCapsule, received 5 \(int\)"):
        cai.from_dlpack(type("Five", (), {"__dlpack__": lambda s, **k: 5, "__dlpack_device__": lambda s: (1, 0)})())
    with pytest.raises(TypeError, match="__dlpack__: objects of type 'object' do not export it"):
        cai.from_dlpack(object())
    # Methods that are not methods are named.
    with pytest.raises(TypeError, match=r"^__dlpack__: expected a method, received 5 \(int\)$"):
        cai.from_dlpack(type("Attr", (), {"__dlpack__": 5, "__dlpack_device__": lambda s: (1, 0)})())
    with pytest.raises(TypeError, match=r"^__dlpack_device__: expected a method, received \(1, 0\) \(tuple\)$"):
        cai.from_dlpack(type("Attr", (), {"__dlpack__": lambda s, **k: 5, "__dlpack_device__": (1, 0)})())
    with pytest.raises(TypeError, match=r"__dlpack_device__: expected a method, received None \(NoneType\)"):
        fx.host_describe(type("Attr", (), {"__dlpack__": lambda s, **k: 5, "__dlpack_device__": None})())


# -- device memory without a GPU: the capsule mechanics, on made-up pointers ---------------------


def test_a_device_export_round_trips_through_cai_without_touching_memory():
    cai.configure(check_pointers=False, import_sync="ignore")
    d = fx.DeviceMatrix(PTR, 12, [3, 4])
    assert d.__dlpack_device__() == (2, 0)
    v = cai.from_dlpack(d)
    assert isinstance(v, cai.CudaArray) and v.ptr == PTR and v.shape == (3, 4)
    assert v.stream == 1, "the producer was asked to order its work before the legacy default stream"
    assert cai.from_dlpack(d, stream=-1).stream is None
    with pytest.raises(ValueError, match="stream: 0 is disallowed"):
        d.__dlpack__(stream=0)


def test_a_dlpack_stream_may_be_an_int_like_as_the_other_arguments_may():
    cai.configure(check_pointers=False)
    quiet = fx.OptionsDevice(PTR, 4, 5, stream_none=True)  # orders nothing: no driver needed
    view = cai.as_cuda_array(fx.DeviceMatrix(PTR, 4, [4]), sync=False)

    class Index:
        def __init__(self, n):
            self.n = n

        def __index__(self):
            return self.n

    for stream in (np.int64(7), np.uint64(7), Index(7)):
        assert type(quiet.__dlpack__(stream=stream)).__name__ == "PyCapsule"
    for exporter in (quiet, view):
        with pytest.raises(ValueError, match=r"^stream: 0 is disallowed"):
            exporter.__dlpack__(stream=np.int64(0))
        with pytest.raises(ValueError, match=r"^stream: <.* \(Index; its __index__ gave 1180591620717411303424\) is not a stream$"):
            exporter.__dlpack__(stream=Index(2**70))
        for wrong in (True, 1.0, "7"):
            with pytest.raises(TypeError, match=r"^stream: expected None or an int, received"):
                exporter.__dlpack__(stream=wrong)

    class Interrupting:
        def __index__(self):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        view.__dlpack__(stream=Interrupting())


def test_export_version_2_leaves_dlpacks_stream_handshake_alone():
    # Version 2 of the interface has no stream; DLPack still makes the consumer's stream
    # wait for the producer's (here, with no driver or a made-up stream, it says it cannot).
    # The stream opt-out is what leaves the ordering to the consumer.
    before = cai.configure()
    try:
        cai.configure(check_pointers=False, export_version=2)
        d = fx.DeviceMatrix(PTR, 4, [4], stream=5)
        assert "stream" not in d.__cuda_array_interface__
        # Only without a driver: a real one would be handed made-up stream handles, which
        # it may take as pointers (the stand-in driver's cases order real ones).
        if not cai.cuda_driver_present():
            for producer in (d, fx.OptionsDevice(PTR, 4, 5, version=2)):
                with pytest.raises(
                    cai.CudaDriverError, match="^stream: cannot make stream 7 wait for the producer's stream 5"
                ):
                    producer.__dlpack__(stream=7)
        assert type(fx.OptionsDevice(PTR, 4, 5, stream_none=True).__dlpack__(stream=7)).__name__ == "PyCapsule"
        cai.configure(export_stream="none")
        assert type(d.__dlpack__(stream=7)).__name__ == "PyCapsule"
    finally:
        cai.configure(**before)


def test_an_extractor_reads_a_dlpack_only_producer():
    cai.configure(check_pointers=False, import_sync="ignore")
    view = cai.from_dlpack(fx.DeviceMatrix(PTR, 12, [3, 4]))
    only_dlpack = type("OnlyDLPack", (), {"__dlpack__": view.__dlpack__, "__dlpack_device__": view.__dlpack_device__})()
    assert fx.describe_f32(only_dlpack)[:3] == (PTR, [3, 4], [16, 4])
    host_only = fx.HostMatrix(2, 2)
    with pytest.raises(TypeError, match="its DLPack device is host memory"):
        fx.describe_f32(host_only)


def test_an_object_with_both_protocols_is_read_through_the_interface():
    cai.configure(check_pointers=False, import_sync="ignore")

    class Both:
        __cuda_array_interface__ = cai_dict(shape=(4,), stream=None)

        def __dlpack__(self, **kwargs):
            raise AssertionError("the extractor took DLPack although the interface was there")

        def __dlpack_device__(self):
            return (2, 0)

    assert fx.describe_f32(Both())[1] == [4]


def test_typestrs_past_the_cache_are_not_interned():
    # Interned strings are immortal from Python 3.12: past its 64 cached typestrs, an export
    # makes a new string each time, so that exporting ever new types cannot grow memory.
    for n in range(1000, 1070):
        cai.as_array(np.zeros(1, f"V{n}")).__array_interface__
    a = cai.as_array(np.zeros(1, "V2000")).__array_interface__["typestr"]
    b = cai.as_array(np.zeros(2, "V2000")).__array_interface__["typestr"]
    assert a == b == "|V2000" and a is not b
