from typing import Any, Dict, List, Literal, Mapping, Optional, Protocol, SupportsIndex, Tuple, Union, final

__version__: str

class CudaDriverError(RuntimeError): ...

class _View(Protocol):
    """For type checkers only: what CudaArray and HostArray have in common. No such class
    exists at runtime, and neither view class can be subclassed or constructed."""

    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def strides(self) -> Tuple[int, ...]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def typestr(self) -> str: ...
    @property
    def descr(self) -> List[Tuple[Any, ...]]: ...
    @property
    def kind(self) -> str: ...
    @property
    def itemsize(self) -> int: ...
    @property
    def byteorder(self) -> str: ...
    @property
    def ptr(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def byte_bounds(self) -> Tuple[int, int]: ...
    @property
    def readonly(self) -> bool: ...
    @property
    def version(self) -> int: ...
    @property
    def stream(self) -> Optional[int]: ...
    @property
    def mask(self) -> Optional[Any]: ...
    @property
    def owner(self) -> Any: ...
    @property
    def is_c_contiguous(self) -> bool: ...
    @property
    def is_f_contiguous(self) -> bool: ...
    def __len__(self) -> int: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[SupportsIndex] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...

@final
class DLPackTensor:
    """The owner of a tensor read through DLPack; its deleter runs when the last view goes."""

@final
class CudaArray(_View):
    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]: ...

@final
class HostArray(_View):
    @property
    def __array_interface__(self) -> Dict[str, Any]: ...

def as_cuda_array(
    obj: Any,
    *,
    sync: bool = True,
    stream: Any = None,
    policy: Optional[Literal["wait", "synchronize", "sync", "ignore", "1", "0"]] = None,
    check_pointers: Optional[bool] = None,
    allow_other_device: bool = False,
) -> CudaArray: ...
def from_cuda_array_interface(
    desc: Mapping[str, Any],
    owner: Any = None,
    *,
    sync: bool = True,
    stream: Any = None,
    policy: Optional[Literal["wait", "synchronize", "sync", "ignore", "1", "0"]] = None,
    check_pointers: Optional[bool] = None,
    allow_other_device: bool = False,
) -> CudaArray: ...
def as_array(obj: Any) -> HostArray: ...
def from_dlpack(
    obj: Any,
    *,
    stream: Any = None,
    copy: Optional[bool] = None,
    check_pointers: Optional[bool] = None,
) -> Union[CudaArray, HostArray]: ...
def validate(obj: Any, *, interface: Optional[Literal["cuda", "host"]] = None) -> List[str]: ...
def configure(
    *,
    import_sync: Optional[Literal["wait", "synchronize", "sync", "ignore", "1", "0"]] = None,
    check_pointers: Optional[bool] = None,
    export_stream: Optional[Literal["report", "none"]] = None,
    export_version: Optional[Literal[2, 3]] = None,
) -> Dict[str, Any]: ...
def cuda_driver_present() -> bool: ...
def pointer_attributes(ptr: int) -> Dict[str, Any]: ...
