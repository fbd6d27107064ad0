"""The pointer checks on every kind of memory the peers hand out: pool sub-allocations,
stream-ordered pools, memory mapped through the virtual memory API (PyTorch's expandable
segments), managed and pinned memory."""

import os
import subprocess
import sys
import textwrap

import pytest

import cai
from gpu_helpers import Dict, cai_dict

HERE = os.path.dirname(__file__)


def run_python(code, **env):
    """Runs `code` in a fresh interpreter (allocator settings apply at start-up)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("CAI_")}
    full.update(env)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full, cwd=HERE, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


def test_cupy_pool_sub_allocations():
    cupy = pytest.importorskip("cupy")
    big = cupy.empty(8 << 20, cupy.uint8)
    del big  # back to the pool: the next arrays are pieces of its block
    a = cupy.empty(1000, cupy.uint8)
    b = cupy.empty(1000, cupy.uint8)
    for x in (a, b, a[10:], b[::3]):
        assert cai.as_cuda_array(x).ptr == x.data.ptr
    block = cai.pointer_attributes(a.data.ptr)["allocation"]
    start, end = block
    assert start <= a.data.ptr and a.data.ptr + a.nbytes <= end
    # The driver sees the pool's block, not CuPy's pieces: an array reaching past `a` but
    # not past the block is accepted (what the check cannot catch, as the README says)...
    if end - a.data.ptr > a.nbytes:
        assert cai.as_cuda_array(Dict(cai_dict(a.data.ptr, end - a.data.ptr), owner=a)).nbytes == end - a.data.ptr
    # ...and one byte past the block is refused.
    with pytest.raises(ValueError, match="outside the device allocation"):
        cai.as_cuda_array(Dict(cai_dict(a.data.ptr, end - a.data.ptr + 1), owner=a))


def test_cupy_stream_ordered_pool():
    cupy = pytest.importorskip("cupy")
    pool = cupy.cuda.MemoryAsyncPool()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        memory = pool.malloc(1 << 20)
    info = cai.pointer_attributes(memory.ptr)
    assert info["memory"] == "device"
    ok = cai.as_cuda_array(Dict(cai_dict(memory.ptr, 1 << 20, stream=stream.ptr), owner=memory), stream=stream)
    assert ok.ptr == memory.ptr
    if info["allocation"] is None:
        # The driver gave no range for this pool's memory: the extent cannot be checked,
        # and an import is not refused for it (as the README says).
        assert cai.as_cuda_array(Dict(cai_dict(memory.ptr, 2 << 20), owner=memory)).ptr == memory.ptr
        return
    start, end = info["allocation"]
    with pytest.raises(ValueError, match="outside the device allocation"):
        cai.as_cuda_array(Dict(cai_dict(memory.ptr, end - memory.ptr + 1)))


def test_managed_memory():
    cupy = pytest.importorskip("cupy")
    memory = cupy.cuda.malloc_managed(1 << 20)
    info = cai.pointer_attributes(memory.ptr)
    assert info["memory"] == "managed" and info["allocation"] == (memory.ptr, memory.ptr + (1 << 20))
    v = cai.as_cuda_array(Dict(cai_dict(memory.ptr, 1 << 20), owner=memory))
    a = cupy.asarray(v)
    a.fill(7)
    cupy.cuda.runtime.deviceSynchronize()
    with pytest.raises(ValueError, match="outside the managed allocation"):
        cai.as_cuda_array(Dict(cai_dict(memory.ptr + 1, 1 << 20)))


def test_pinned_host_memory():
    cupy = pytest.importorskip("cupy")
    memory = cupy.cuda.alloc_pinned_memory(1 << 20)
    info = cai.pointer_attributes(memory.ptr)
    assert info["memory"] == "host" and info["allocation"] == (memory.ptr, memory.ptr + (1 << 20))
    assert cai.as_cuda_array(Dict(cai_dict(memory.ptr, 1 << 20), owner=memory)).nbytes == 1 << 20
    with pytest.raises(ValueError, match="outside the host allocation"):
        cai.as_cuda_array(Dict(cai_dict(memory.ptr, (1 << 20) + 1)))
    # Ordinary host memory is not memory the driver knows.
    import numpy as np

    h = np.zeros(16, np.uint8)
    with pytest.raises(ValueError, match="not memory the CUDA driver knows"):
        cai.as_cuda_array(Dict(cai_dict(h.ctypes.data, 16), owner=h))


def test_torch_expandable_segments():
    """Tensors of expandable segments (several physical mappings in one reserved range) are
    accepted, each inside the allocation range the driver reports."""
    pytest.importorskip("torch")
    out = run_python(
        """
        import torch, cai
        tensors = [torch.empty(int(7.3 * (1 << 20)) + i * 4096, dtype=torch.uint8, device="cuda") for i in range(12)]
        tensors.append(torch.empty(300 << 20, dtype=torch.uint8, device="cuda"))
        for t in tensors:
            v = cai.as_cuda_array(t)
            assert v.ptr == t.data_ptr() and v.nbytes == t.numel()
            start, end = cai.pointer_attributes(t.data_ptr())["allocation"]
            assert start <= t.data_ptr() and t.data_ptr() + t.numel() <= end
        print("ok", len(tensors))
        """,
        # The older name, and the one PyTorch 2.9 and later read.
        PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True",
        PYTORCH_ALLOC_CONF="expandable_segments:True",
    )
    assert out.split() == ["ok", "13"]


def test_torch_cuda_malloc_async_backend():
    pytest.importorskip("torch")
    out = run_python(
        """
        import torch, cai
        assert torch.cuda.get_allocator_backend() == "cudaMallocAsync"
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            ts = [torch.full((1 << 18,), float(i), device="cuda") for i in range(8)]
        for i, t in enumerate(ts):
            v = cai.as_cuda_array(t[1:], stream=s)
            assert v.ptr == t.data_ptr() + 4
        print("ok")
        """,
        PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync",
    )
    assert out.split() == ["ok"]
