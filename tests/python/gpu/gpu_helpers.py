"""Helpers of the GPU suite."""

import ctypes

from producers import Producer


class Driver:
    """The few CUDA driver calls the tests make themselves, through ctypes."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")

    def current_context(self):
        ctx = ctypes.c_void_p()
        assert self.lib.cuCtxGetCurrent(ctypes.byref(ctx)) == 0
        return ctx.value


def Dict(desc, owner=None):  # noqa: N802 - reads as the class it stands for
    """A pure-Python producer of the given interface dict (it touches no CUDA API),
    holding `owner` so that the memory it describes stays alive."""
    p = Producer(desc)
    p.owner = owner
    return p


def cai_dict(ptr, nbytes, typestr="|u1", stream=None):
    itemsize = int(typestr[2:])
    return {"shape": (nbytes // itemsize,), "typestr": typestr, "data": (ptr, False), "version": 3, "stream": stream}


def cuda_core_views(obj):
    """cuda.core's StridedMemoryView of `obj` through each protocol it names, as
    {protocol: view}, with no synchronization (stream_ptr=-1). Recent cuda.core has a
    constructor per protocol (and deprecates the plain one, which picks DLPack when it can);
    an older one only the plain constructor, recorded as "any"."""
    import pytest

    try:
        from cuda.core.utils import StridedMemoryView
    except ImportError:
        StridedMemoryView = pytest.importorskip("cuda.core.experimental.utils").StridedMemoryView
    makers = {
        name: getattr(StridedMemoryView, f"from_{name}")
        for name in ("cuda_array_interface", "dlpack")
        if hasattr(StridedMemoryView, f"from_{name}")
    }
    if "cuda_array_interface" not in makers:
        makers = {"any": StridedMemoryView}
    return {name: make(obj, stream_ptr=-1) for name, make in makers.items()}
