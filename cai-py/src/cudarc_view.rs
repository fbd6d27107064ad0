//! Imported arrays as cudarc device memory, so a Rust function can launch a cudarc kernel
//! on a CuPy array or a torch tensor.

use std::marker::PhantomData;
use std::sync::Arc;

use cai_core::cuda::{self, event_pool, DriverBackend, KeepCurrent};
use cai_core::sync::{order, Backend, Capture, Located};
use cai_core::{DriverError, Element, Stream};
use cudarc::driver::{result, sys, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};
use pyo3::prelude::*;

use crate::extract::{Access, ReadOnly, ReadWrite};

/// A non-owning cudarc view of an imported array's elements: it implements cudarc's
/// `DeviceSlice`, `DevicePtr` and (for [`ReadWrite`] extractions) `DevicePtrMut`, keeps the
/// Python producer alive, and its [`stream`](DeviceSlice::stream) is the producer's own
/// stream, wrapped with cudarc's `wrap_borrowed_stream` (the legacy default stream when the
/// producer gave none).
///
/// Work queued on that stream is ordered after the producer's. Asked for its pointer on
/// another stream, the view makes that stream wait for the producer's (an event, or a
/// host wait when that stream is capturing a graph) and synchronizes it when the returned
/// guard drops, so the producer never sees a half-done write. A failure there is recorded
/// in the cudarc context and reported by its next checked call, as cudarc does.
///
/// A producer on the per-thread default stream (2) names a different stream on every
/// thread, so the view never carries the marker: it works on a stream of its own, which
/// waits for the per-thread stream of the creating thread and is synchronized when the
/// view drops. The view may then move to another thread.
///
/// It borrows the producer's stream handle, which the array does not own (CuPy and
/// PyTorch report the stream current when they export): use the view within the call
/// that made it, since one kept past it may outlive that stream.
///
/// It covers the `len` elements from the array's pointer, so use it for C-contiguous
/// arrays (see `PyCudaArray::cudarc_view`). cudarc's own calls bind the context to the
/// thread; cai's calls here leave the caller's current context as it was.
pub struct CudaForeign<T, A: Access = ReadOnly> {
    ptr: sys::CUdeviceptr,
    len: usize,
    stream: Arc<CudaStream>,
    /// Whether `stream` is the view's own (the producer was on the per-thread stream).
    own_stream: bool,
    owner: Py<PyAny>,
    /// What else the memory was read from (the producer's interface value), kept alive.
    _also: Option<Py<PyAny>>,
    _elem: PhantomData<(*const T, A)>,
}

impl<T, A: Access> std::fmt::Debug for CudaForeign<T, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaForeign")
            .field("ptr", &format_args!("0x{:x}", self.ptr))
            .field("len", &self.len)
            .field("stream", &self.stream.cu_stream())
            .field("own_stream", &self.own_stream)
            .field("writable", &A::WRITABLE)
            .finish_non_exhaustive()
    }
}

// SAFETY: the view is a device address, a length, a stream handle that is valid on every
// thread (never the per-thread marker 2) and Python references (`Py` is Send and Sync).
unsafe impl<T, A: Access> Send for CudaForeign<T, A> {}
// SAFETY: as above; shared access only reads these fields.
unsafe impl<T, A: Access> Sync for CudaForeign<T, A> {}

/// A cudarc stream, located in its own context (its default-stream handle 0 as the legacy
/// default stream).
pub(crate) fn located(stream: &CudaStream) -> Located<usize> {
    let stream_value = match stream.cu_stream() as usize {
        0 => Stream::LegacyDefault,
        raw => Stream::from_raw(Some(raw)).unwrap_or(Stream::LegacyDefault),
    };
    Located { stream: stream_value, context: stream.context().cu_ctx() as usize }
}

impl<T: Element, A: Access> CudaForeign<T, A> {
    /// A view of `len` elements at `ptr` on `device`, ordered on `stream`, kept alive by `owner`
    /// (and `also`). The view works in the context of a stream handle (another device's,
    /// for memory reached through peer access), else in `device`'s primary context.
    pub(crate) fn new(
        ptr: usize,
        len: usize,
        device: i32,
        stream: Stream,
        owner: Py<PyAny>,
        also: Option<Py<PyAny>>,
    ) -> Result<CudaForeign<T, A>, DriverError> {
        cuda::driver_status()?;
        let mut ctx = cuda::cudarc_context(device)?;
        let _keep = KeepCurrent::new();
        if let Stream::Handle(_) = stream {
            // A stream works only in its own context, which may be another device's than
            // the memory's (memory reached through peer access): the view's work goes there.
            let at = DriverBackend::primary(device)?.locate(stream)?;
            if at.context != ctx.cu_ctx() as usize {
                let stream_device = cuda::context_device(at.context)?;
                ctx = cuda::cudarc_context(stream_device)?;
                if at.context != ctx.cu_ctx() as usize {
                    return Err(DriverError::Invalid(format!(
                        "the producer's stream {stream} belongs to a CUDA context that is not a device's primary \
                         context, and cudarc works in primary contexts only"
                    )));
                }
            }
        }
        let (stream, own_stream) = match stream {
            Stream::PerThreadDefault => (cuda::cudarc_stream_after(&ctx, Stream::PerThreadDefault)?, true),
            other => {
                let handle = other.to_raw().unwrap_or(1) as sys::CUstream;
                // SAFETY: the handle is the producer's stream (or CU_STREAM_LEGACY), which
                // the producer keeps alive as long as `owner`, held by this view.
                (unsafe { ctx.wrap_borrowed_stream(handle) }, false)
            }
        };
        Ok(CudaForeign {
            ptr: ptr as sys::CUdeviceptr,
            len,
            stream,
            own_stream,
            owner,
            _also: also,
            _elem: PhantomData,
        })
    }

    /// The Python object whose memory this is.
    pub fn owner(&self) -> &Py<PyAny> {
        &self.owner
    }

    fn ordered_on<'a>(&'a self, stream: &'a CudaStream) -> SyncOnDrop<'a> {
        let (from, to) = (located(&self.stream), located(stream));
        if from == to {
            return SyncOnDrop::Sync(None);
        }
        let _keep = KeepCurrent::new();
        let Ok(backend) = DriverBackend::of_context(self.stream.context()) else {
            return SyncOnDrop::Sync(None);
        };
        match order(&backend, event_pool(), from, to) {
            Ok(_) => {}
            Err(DriverError::Capture(_)) => {
                let isolation = sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
                stream.context().record_err::<()>(Err(result::DriverError(isolation)));
                return SyncOnDrop::Sync(None);
            }
            // The event could not be recorded or waited on: wait on the host instead.
            Err(_) => self.stream.context().record_err(self.stream.synchronize()),
        }
        // A capturing stream cannot be synchronized: its work runs when the graph is
        // launched, which the launcher orders.
        match backend.capture(to) {
            Ok(Capture::Idle) => SyncOnDrop::sync_stream(stream),
            _ => SyncOnDrop::Sync(None),
        }
    }
}

impl<T, A: Access> Drop for CudaForeign<T, A> {
    fn drop(&mut self) {
        if self.own_stream {
            // The producer goes on with its per-thread stream: finish the view's work first.
            let _keep = KeepCurrent::new();
            self.stream.context().record_err(self.stream.synchronize());
        }
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
