"""Validated, zero-copy views of CUDA Array Interface producers.

``as_cuda_array(obj)`` reads ``obj.__cuda_array_interface__`` once, checks it against the
version of the interface it declares, orders the producer's stream before the consumer's
(by default without blocking the host) and returns a
``CudaArray`` view that keeps ``obj`` alive and can itself be handed to any consumer
(CuPy, PyTorch, Numba, JAX, ...), through the interface or DLPack. ``as_array`` does the
same for NumPy's host ``__array_interface__``, ``from_dlpack`` for any DLPack producer;
``validate`` lists everything a producer gets wrong.
"""

from ._cai import (
    CudaArray,
    CudaDriverError,
    DLPackTensor,
    HostArray,
    __version__,
    as_array,
    as_cuda_array,
    configure,
    cuda_driver_present,
    from_cuda_array_interface,
    from_dlpack,
    pointer_attributes,
    validate,
)

__all__ = [
    "CudaArray",
    "CudaDriverError",
    "DLPackTensor",
    "HostArray",
    "__version__",
    "as_array",
    "as_cuda_array",
    "configure",
    "cuda_driver_present",
    "from_cuda_array_interface",
    "from_dlpack",
    "pointer_attributes",
    "validate",
]
