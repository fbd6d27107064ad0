"""DLPack on a real device: Rust containers read by CuPy, PyTorch, JAX and cuda.core, their
arrays read by cai, and the stream handshake (the producer orders its work before the
consumer's stream)."""

import time

import numpy as np
import pytest

import cai
import cai_fixtures as fx

N = 64 << 20


def ptr_of(obj):
    return obj.__cuda_array_interface__["data"][0]


@pytest.fixture
def buf():
    b = fx.CudarcBuffer([256, 256])
    b.fill(1.5)
    b.to_list()
    return b


def test_the_device_is_reported_from_the_pointer(buf):
    assert buf.__dlpack_device__() == (2, 0)
    assert cai.as_cuda_array(buf).__dlpack_device__() == (2, 0)
    cupy = pytest.importorskip("cupy")
    managed = cupy.cuda.malloc_managed(1 << 20)
    desc = {"shape": (1 << 18,), "typestr": "<f4", "data": (managed.ptr, False), "version": 3, "stream": None}
    assert cai.from_cuda_array_interface(desc, managed).__dlpack_device__() == (13, 0)


def test_cupy_reads_rust_memory_through_dlpack(buf):
    cupy = pytest.importorskip("cupy")
    c = cupy.from_dlpack(buf)
    assert c.data.ptr == ptr_of(buf) and c.shape == (256, 256) and float(c.sum()) == 1.5 * 256 * 256


def test_torch_reads_rust_memory_through_dlpack(buf):
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(buf)
    assert t.data_ptr() == ptr_of(buf) and t.is_cuda and float(t[0, 0]) == 1.5


def test_jax_reads_rust_memory_through_dlpack(buf):
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.from_dlpack(buf)
    assert x.shape == (256, 256) and float(x[0, 0]) == 1.5
    assert x.unsafe_buffer_pointer() == ptr_of(buf), "JAX copied"


def test_cuda_core_reads_rust_memory_through_dlpack(buf):
    try:
        from cuda.core.utils import StridedMemoryView
    except ImportError:
        StridedMemoryView = pytest.importorskip("cuda.core.experimental.utils").StridedMemoryView
    view = StridedMemoryView.from_dlpack(buf, stream_ptr=-1)
    assert view.ptr == ptr_of(buf) and tuple(view.shape) == (256, 256)


@pytest.mark.parametrize("peer", ["cupy", "torch", "jax"])
def test_cai_reads_the_peers_through_dlpack(peer):
    if peer == "cupy":
        cupy = pytest.importorskip("cupy")
        x = cupy.arange(12, dtype=cupy.float32).reshape(3, 4).T
        ptr, strides = x.data.ptr, x.strides
    elif peer == "torch":
        torch = pytest.importorskip("torch")
        x = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4).T
        ptr, strides = x.data_ptr(), tuple(s * 4 for s in x.stride())
    else:
        jnp = pytest.importorskip("jax.numpy")
        x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
        ptr, strides = x.unsafe_buffer_pointer(), (16, 4)
    v = cai.from_dlpack(x)
    assert isinstance(v, cai.CudaArray) and v.ptr == ptr and v.strides == strides
    assert v.__dlpack_device__() == (2, 0)
    cupy = pytest.importorskip("cupy")
    np.testing.assert_array_equal(cupy.asarray(v).get(), np.asarray(x.get() if peer == "cupy" else (x.cpu() if peer == "torch" else x)))


def test_device_to_host_copies(buf):
    a = np.from_dlpack(buf, device="cpu")
    assert a.shape == (256, 256) and float(a[0, 0]) == 1.5
    with pytest.raises(BufferError, match="copy=False forbids one"):
        buf.__dlpack__(dl_device=(1, 0), copy=False, max_version=(1, 0))


def test_empty_device_arrays_are_copied_without_the_driver_reading_them():
    cupy = pytest.importorskip("cupy")
    v = cai.as_cuda_array(cupy.zeros((0, 3), cupy.float32))
    a = np.from_dlpack(v, device="cpu")
    assert a.shape == (0, 3) and a.dtype == np.float32
    assert cupy.from_dlpack(cai.from_dlpack(v, copy=True)).shape == (0, 3)


def test_the_consumer_stream_waits_for_pending_work_and_the_host_does_not():
    """100 trials: the producer leaves 100 memsets pending on one of its streams; CuPy
    imports through DLPack on its own stream and must read the final value."""
    cupy = pytest.importorskip("cupy")
    b = fx.CudarcBuffer([N])
    own, side = b.streams()
    consumer = cupy.cuda.Stream(non_blocking=True)
    host = np.empty(1, np.float32)
    busy, times = 0, []
    for trial in range(100):
        b.fill(float(trial), side=trial % 2 == 1, repeat=100)
        t0 = time.perf_counter()
        capsule = b.__dlpack__(stream=consumer.ptr, max_version=(1, 0))
        times.append(time.perf_counter() - t0)
        busy += not cupy.cuda.ExternalStream(side if trial % 2 else own).done
        with consumer:
            c = cupy.from_dlpack(type("C", (), {"__dlpack__": lambda s, **k: capsule, "__dlpack_device__": lambda s: (2, 0)})())
        cupy.cuda.runtime.memcpyAsync(host.ctypes.data, c.data.ptr + (N - 1) * 4, 4, cupy.cuda.runtime.memcpyDeviceToHost, consumer.ptr)
        consumer.synchronize()
        assert host[0] == trial, f"trial {trial}: read {host[0]}"
    print(f"__dlpack__ with work pending: median {sorted(times)[50] * 1e6:.1f} us; producer busy after {busy}/100 exports")
    assert busy >= 90, "the export waited for the producer's work on the host"
