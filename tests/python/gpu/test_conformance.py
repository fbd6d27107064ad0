"""cai against CuPy, PyTorch, Numba, JAX and cuda.core on a real device."""

import statistics
import time

import numpy as np
import pytest

import cai
import cai_fixtures as fx
from gpu_helpers import cuda_core_views
from producers import OnlyDLPack

N = 1 << 16


def interface_ptr(obj):
    return obj.__cuda_array_interface__["data"][0]


@pytest.fixture
def rust_buffer():
    buf = fx.CudarcBuffer([256, 256])
    buf.fill(1.5)
    return buf


# -- a Rust-derived producer, read by every consumer ---------------------------------------


def test_cupy_reads_and_writes_rust_memory(rust_buffer):
    cupy = pytest.importorskip("cupy")
    c = cupy.asarray(rust_buffer)
    assert c.data.ptr == interface_ptr(rust_buffer) and c.shape == (256, 256) and c.dtype == cupy.float32
    assert float(c.sum()) == 1.5 * 256 * 256
    c[3, 4] = 7.0
    cupy.cuda.runtime.deviceSynchronize()
    assert rust_buffer.to_list()[3 * 256 + 4] == 7.0
    rust_buffer.fill(2.0)
    assert float(cupy.asarray(rust_buffer)[0, 0]) == 2.0


def test_torch_reads_and_writes_rust_memory(rust_buffer):
    torch = pytest.importorskip("torch")
    t = torch.as_tensor(rust_buffer, device="cuda")
    assert t.data_ptr() == interface_ptr(rust_buffer) and tuple(t.shape) == (256, 256)
    torch.cuda.synchronize()
    assert float(t[0, 0]) == 1.5
    t.fill_(3.0)
    torch.cuda.synchronize()
    assert set(rust_buffer.to_list()) == {3.0}


def test_numba_reads_writes_and_launches_on_rust_memory(rust_buffer):
    numba_cuda = pytest.importorskip("numba.cuda")
    d = numba_cuda.as_cuda_array(rust_buffer)
    assert d.device_ctypes_pointer.value == interface_ptr(rust_buffer) and d.shape == (256, 256)

    @numba_cuda.jit
    def add_one(x):
        i, j = numba_cuda.grid(2)
        if i < x.shape[0] and j < x.shape[1]:
            x[i, j] += 1.0

    add_one[(16, 16), (16, 16)](rust_buffer)
    numba_cuda.synchronize()
    assert set(rust_buffer.to_list()) == {2.5}


def test_jax_reads_rust_memory(rust_buffer):
    jnp = pytest.importorskip("jax.numpy")
    rust_buffer.to_list()  # settle the producer's work first
    try:
        x = jnp.asarray(rust_buffer)
    except Exception as e:  # noqa: BLE001 - JAX's own error class
        # Through the interface, JAX accepts only streams it knows (None, 1, 2) and refuses
        # a producer's own; the documented way is to export `stream: None` for JAX.
        assert "GetStreamFromExternalStream failed to find stream" in str(e), e
        before = cai.configure()
        cai.configure(export_stream="none")
        try:
            x = jnp.asarray(rust_buffer)
        finally:
            cai.configure(**before)
    assert x.shape == (256, 256) and float(x[0, 0]) == 1.5
    assert x.unsafe_buffer_pointer() == interface_ptr(rust_buffer), "JAX imported by copy"


def test_cuda_core_strided_memory_view(rust_buffer):
    for protocol, v in cuda_core_views(rust_buffer).items():
        assert v.ptr == interface_ptr(rust_buffer) and tuple(v.shape) == (256, 256), protocol


def test_rust_writes_a_cupy_array_through_cudarc():
    cupy = pytest.importorskip("cupy")
    c = cupy.full(1000, 9.0, dtype=cupy.float32)
    fx.zero_with_cudarc(c)
    assert float(abs(c).sum()) == 0.0


def test_a_cudarc_view_of_a_dlpack_argument_keeps_the_producer_s_tensor():
    # Through DLPack the memory lives as long as the producer's tensor (its deleter may
    # free it), not as long as the object that exported it.
    cupy = pytest.importorskip("cupy")
    c = cupy.arange(8, dtype=cupy.float32)
    assert type(fx.cudarc_view_owner(OnlyDLPack(c))).__name__ == "DLPackTensor"
    assert fx.cudarc_view_owner(c) is c


def test_rust_writes_a_torch_tensor_through_cudarc():
    torch = pytest.importorskip("torch")
    t = torch.full((10, 10), 9.0, device="cuda")
    fx.zero_with_cudarc(t)
    torch.cuda.synchronize()
    assert float(t.abs().sum()) == 0.0


# -- cai reading the peers' arrays ---------------------------------------------------------


def layouts(xp, make):
    base = make(xp)
    return {
        "contiguous": base,
        "transposed": base.T,
        "sliced": base[1:5, ::3],
        "empty": base[:0],
    }


def check_view(v, ptr, shape, strides):
    assert v.ptr == ptr and v.shape == tuple(shape) and v.strides == tuple(strides)
    assert v.__cuda_array_interface__["data"][0] == (ptr if v.size else 0)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "empty"])
def test_cai_reads_cupy(layout):
    cupy = pytest.importorskip("cupy")
    a = layouts(cupy, lambda xp: xp.arange(12 * 8, dtype=xp.float32).reshape(12, 8))[layout]
    v = cai.as_cuda_array(a)
    check_view(v, a.data.ptr if a.size else 0, a.shape, a.strides)
    assert cupy.asarray(v).data.ptr == (a.data.ptr if a.size else 0) or a.size == 0


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "empty"])
def test_cai_reads_torch(layout):
    torch = pytest.importorskip("torch")
    t = layouts(torch, lambda xp: xp.arange(12 * 8, dtype=xp.float32, device="cuda").reshape(12, 8))[layout]
    v = cai.as_cuda_array(t)
    strides = [s * t.element_size() for s in t.stride()]
    check_view(v, t.data_ptr() if t.numel() else 0, t.shape, strides if t.numel() else v.strides)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "empty"])
def test_cai_reads_numba(layout):
    numba_cuda = pytest.importorskip("numba.cuda")
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    host = np.arange(12 * 8, dtype=np.float32).reshape(12, 8)
    base = numba_cuda.to_device(host)
    base_ptr = base.device_ctypes_pointer.value
    # Numba's `.T` copies through a kernel; a transposed view of the same memory is a
    # DeviceNDArray with swapped strides.
    dev = {
        "contiguous": base,
        "transposed": DeviceNDArray(shape=(8, 12), strides=(4, 32), dtype=np.float32, gpu_data=base.gpu_data),
        "sliced": base[1:5, ::3],
        "empty": base[:0],
    }[layout]
    exported = dev.__cuda_array_interface__
    v = cai.as_cuda_array(dev)
    ptr = exported["data"][0]
    check_view(v, ptr, dev.shape, dev.strides)
    if dev.size:
        assert base_ptr <= v.ptr < base_ptr + host.nbytes, "a view of the same memory, not a copy"
    if layout == "transposed":
        assert v.ptr == base_ptr and v.strides == (4, 32) and not v.is_c_contiguous
        cupy = pytest.importorskip("cupy")
        np.testing.assert_array_equal(cupy.asarray(v).get(), host.T)


@pytest.mark.parametrize("layout", ["contiguous", "sliced", "transposed"])
def test_cai_reads_jax(layout):
    jnp = pytest.importorskip("jax.numpy")
    base = jnp.arange(12 * 8, dtype=jnp.float32).reshape(12, 8)
    # JAX arrays are always dense in C order: slicing and transposing make new buffers,
    # so JAX never exports strides, and cai reads whatever buffer JAX hands over.
    x = {"contiguous": base, "sliced": base[1:5], "transposed": base.T}[layout]
    v = cai.as_cuda_array(x)
    assert v.ptr == x.unsafe_buffer_pointer() and v.shape == x.shape and v.is_c_contiguous
    assert v.readonly, "JAX exports its buffers read-only"
    if layout != "contiguous":
        assert v.ptr != base.unsafe_buffer_pointer()


def test_cuda_core_reads_a_strided_cai_view():
    cupy = pytest.importorskip("cupy")
    a = cupy.arange(12 * 8, dtype=cupy.float32).reshape(12, 8)
    v = cai.as_cuda_array(a.T[1:, ::2])
    for protocol, smv in cuda_core_views(v).items():
        assert smv.ptr == v.ptr and tuple(smv.shape) == v.shape, protocol
        assert tuple(smv.strides) in (v.strides, tuple(s // 4 for s in v.strides)), (protocol, smv.strides, v.strides)


# -- streams ---------------------------------------------------------------------------------


def test_consumer_on_another_stream_sees_the_final_values_without_blocking():
    cupy = pytest.importorskip("cupy")
    n = 64 << 20  # 256 MiB: 100 memsets keep the producer's stream busy for milliseconds
    buf = fx.CudarcBuffer([n])
    own, side = buf.streams()
    consumer = cupy.cuda.Stream(non_blocking=True)
    host = np.empty(1, np.float32)
    import_times, busy_after_import = [], 0
    for trial in range(100):
        buf.fill(float(trial), side=trial % 2 == 1, repeat=100)
        t0 = time.perf_counter()
        v = cai.as_cuda_array(buf, stream=consumer)
        import_times.append(time.perf_counter() - t0)
        busy_after_import += not cupy.cuda.ExternalStream(side if trial % 2 else own).done
        cupy.cuda.runtime.memcpyAsync(host.ctypes.data, v.ptr + (n - 1) * 4, 4, cupy.cuda.runtime.memcpyDeviceToHost, consumer.ptr)
        consumer.synchronize()
        assert host[0] == trial, f"trial {trial}: the consumer read {host[0]}"
    median_us = statistics.median(import_times) * 1e6
    print(f"import while the producer's work runs: median {median_us:.1f} us; producer still busy after {busy_after_import}/100 imports")
    assert busy_after_import >= 90, "the import waited for the producer's work"
    assert median_us < 1000


def test_synchronize_policy_blocks_until_the_work_is_done():
    cupy = pytest.importorskip("cupy")
    buf = fx.CudarcBuffer([64 << 20])
    own, _ = buf.streams()
    buf.fill(4.0, repeat=50)
    cai.as_cuda_array(buf, policy="synchronize")
    assert cupy.cuda.ExternalStream(own).done


# -- pointer checks --------------------------------------------------------------------------


def test_extent_one_byte_past_the_allocation_is_refused():
    cupy = pytest.importorskip("cupy")
    size = 2 << 20
    ptr = cupy.cuda.runtime.malloc(size)
    try:
        ok = {"shape": (size,), "typestr": "|u1", "data": (ptr, False), "version": 3, "stream": None}
        assert cai.from_cuda_array_interface(ok).nbytes == size
        info = cai.pointer_attributes(ptr)
        assert info["memory"] == "device" and info["allocation"] == (ptr, ptr + size)
        past = dict(ok, shape=(size + 1,))
        with pytest.raises(ValueError, match="outside the device allocation"):
            cai.from_cuda_array_interface(past)
        assert cai.from_cuda_array_interface(past, check_pointers=False).nbytes == size + 1
        with pytest.raises(ValueError, match="is not memory the CUDA driver knows"):
            cai.from_cuda_array_interface(dict(ok, data=(0x10, False), shape=(4,)))
    finally:
        cupy.cuda.runtime.free(ptr)


def test_memory_of_another_device_is_refused_unless_allowed():
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    with cupy.cuda.Device(1):
        a = cupy.zeros(16, cupy.float32)
    with cupy.cuda.Device(0):
        with pytest.raises(ValueError, match="memory of device 1"):
            cai.as_cuda_array(a)
        assert cai.as_cuda_array(a, allow_other_device=True).ptr == a.data.ptr
