"""Producers shared by the tests of the cai suite.

`Producer` is a pure-Python producer of any interface dict. `host_backed` describes a
NumPy array's memory as a CUDA Array Interface dict, so that extractors that write can be
checked without a GPU.
"""


class Producer:
    """Exports the given dict as `__cuda_array_interface__` (or `__array_interface__`)."""

    def __init__(self, desc, host=False):
        self.desc = desc
        self.host = host

    @property
    def __cuda_array_interface__(self):
        if self.host:
            raise AttributeError("__cuda_array_interface__")
        return self.desc

    @property
    def __array_interface__(self):
        if not self.host:
            raise AttributeError("__array_interface__")
        return self.desc


class Legacy:
    """A producer from before DLPack 1.0: no max_version, legacy capsules of `arr`'s only."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, stream=None):
        return self.arr.__dlpack__()

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


class OnlyDLPack:
    """Offers an array through DLPack alone."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def cai_dict(shape=(4,), typestr="<f4", ptr=0x7F00_0000_0000, readonly=False, version=3, **extra):
    d = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, readonly), "version": version}
    d.update(extra)
    return d


def host_backed(arr, version=3, stream=None):
    """A CUDA Array Interface producer whose pointer is `arr`'s host memory."""
    ai = arr.__array_interface__
    desc = {
        "shape": ai["shape"],
        "typestr": ai["typestr"],
        "data": ai["data"],
        "version": version,
        "strides": ai["strides"],
    }
    if version >= 3:
        desc["stream"] = stream
    p = Producer(desc)
    p.base = arr
    return p

