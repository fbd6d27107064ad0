//! Imported arrays as cudarc device memory, so a Rust function can launch a cudarc kernel
//! on a CuPy array or a torch tensor.

use std::marker::PhantomData;
use std::sync::Arc;

use cai_core::cuda::DriverError;
use cai_core::{Element, Stream};
use cudarc::driver::{sys, CudaContext, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};
use pyo3::prelude::*;

use crate::extract::{Access, ReadOnly, ReadWrite};

/// A non-owning cudarc view of an imported array's elements: it implements cudarc's
/// `DeviceSlice`, `DevicePtr` and (for [`ReadWrite`] extractions) `DevicePtrMut`, keeps the
/// Python producer alive, and its [`stream`](DeviceSlice::stream) is the producer's own
/// stream, wrapped with cudarc's `wrap_borrowed_stream` (the legacy default stream when the
/// producer gave none).
///
/// Work queued on that stream is ordered after the producer's. Asked for its pointer on
/// another stream, the view makes that stream wait for the producer's and synchronizes it
/// when the returned guard drops, so the producer never sees a half-done write.
///
/// It covers the `len` elements from the array's pointer, so use it for C-contiguous
/// arrays (see `PyCudaArray::cudarc_view`).
pub struct CudaForeign<T, A: Access = ReadOnly> {
    ptr: sys::CUdeviceptr,
    len: usize,
    stream: Arc<CudaStream>,
    owner: Py<PyAny>,
    _elem: PhantomData<(*const T, A)>,
}

impl<T, A: Access> std::fmt::Debug for CudaForeign<T, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaForeign")
            .field("ptr", &format_args!("0x{:x}", self.ptr))
            .field("len", &self.len)
            .field("stream", &self.stream.cu_stream())
            .field("writable", &A::WRITABLE)
            .finish_non_exhaustive()
    }
}

// SAFETY: the view is a device address, a length, a stream handle and a Python reference
// (`Py` is Send and Sync); nothing in it is tied to the creating thread.
unsafe impl<T, A: Access> Send for CudaForeign<T, A> {}
// SAFETY: as above; shared access only reads these fields.
unsafe impl<T, A: Access> Sync for CudaForeign<T, A> {}

impl<T: Element, A: Access> CudaForeign<T, A> {
    /// A view of `len` elements at `ptr` on `device`, ordered on `stream`, kept alive by `owner`.
    pub(crate) fn new(
        ptr: usize,
        len: usize,
        device: i32,
        stream: Stream,
        owner: Py<PyAny>,
    ) -> Result<CudaForeign<T, A>, DriverError> {
        if !cai_core::cuda::driver_present() {
            return Err(DriverError::NotFound);
        }
        let ordinal = usize::try_from(device).map_err(|_| DriverError::Invalid(format!("device {device}")))?;
        let ctx =
            CudaContext::new(ordinal).map_err(|e| DriverError::Invalid(format!("cuDevicePrimaryCtxRetain: {e:?}")))?;
        let handle = stream.to_raw().unwrap_or(1) as sys::CUstream;
        // SAFETY: the handle is the producer's stream (or CU_STREAM_LEGACY), which the
        // producer keeps alive as long as `owner`, held by this view.
        let stream = unsafe { ctx.wrap_borrowed_stream(handle) };
        Ok(CudaForeign { ptr: ptr as sys::CUdeviceptr, len, stream, owner, _elem: PhantomData })
    }

    /// The Python object whose memory this is.
    pub fn owner(&self) -> &Py<PyAny> {
        &self.owner
    }

    fn ordered_on<'a>(&'a self, stream: &'a CudaStream) -> SyncOnDrop<'a> {
        if stream.cu_stream() == self.stream.cu_stream() {
            return SyncOnDrop::Sync(None);
        }
        // A failure to order is recorded by cudarc in the context and reported by its next
        // checked call; the guard still synchronizes `stream` after the caller's work.
        let _ = stream.join(&self.stream);
        SyncOnDrop::sync_stream(stream)
    }
}

impl<T, A: Access> DeviceSlice<T> for CudaForeign<T, A> {
    fn len(&self) -> usize {
        self.len
    }

    fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl<T: Element, A: Access> DevicePtr<T> for CudaForeign<T, A> {
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'a>) {
        (self.ptr, self.ordered_on(stream))
    }
}

impl<T: Element> DevicePtrMut<T> for CudaForeign<T, ReadWrite> {
    fn device_ptr_mut<'a>(&'a mut self, stream: &'a CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'a>) {
        (self.ptr, self.ordered_on(stream))
    }
}
