//! Everything that touches the CUDA driver (through cudarc) lives here.
//!
//! cudarc is used with dynamic loading and without a CUDA version feature: the final
//! application picks the version by depending on cudarc itself, for example
//! `cudarc = { version = "0.19", default-features = false, features = ["cuda-12080"] }`
//! (any version builds without a toolkit, since the driver is loaded at run time).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DeviceSlice};

use crate::buffer::{AsStream, DeviceBuffer};
use crate::element::Element;
use crate::error::Result;
use crate::stream::Stream;

/// The interface value of a cudarc stream: its null stream is the legacy default (1).
fn stream_of(stream: &CudaStream) -> Result<Stream> {
    match stream.cu_stream() as usize {
        0 => Ok(Stream::LegacyDefault),
        raw => Stream::from_raw(Some(raw)),
    }
}

impl AsStream for CudaStream {
    fn as_stream(&self) -> Result<Stream> {
        stream_of(self)
    }
}

impl AsStream for Arc<CudaStream> {
    fn as_stream(&self) -> Result<Stream> {
        stream_of(self)
    }
}

macro_rules! cudarc_buffer {
    ($ty:ty, readonly = $readonly:expr) => {
        // SAFETY: cudarc's slices and views address `len()` initialized elements of `T` on
        // the device for as long as they are borrowed; a `CudaView` is a shared borrow
        // and is exported read-only.
        unsafe impl<T: Element> DeviceBuffer for $ty {
            type Elem = T;

            fn device_address(&self) -> usize {
                // Reading the pointer on the buffer's own stream makes that stream wait
                // for cudarc's last recorded write; the guard records a read on drop.
                let (ptr, _read) = DevicePtr::<T>::device_ptr(self, DeviceSlice::<T>::stream(self));
                ptr as usize
            }

            fn len(&self) -> usize {
                DeviceSlice::<T>::len(self)
            }

            fn readonly(&self) -> bool {
                $readonly
            }

            fn stream(&self) -> Result<Stream> {
                stream_of(DeviceSlice::<T>::stream(self))
            }
        }
    };
}

cudarc_buffer!(CudaSlice<T>, readonly = false);
cudarc_buffer!(CudaView<'_, T>, readonly = true);
cudarc_buffer!(CudaViewMut<'_, T>, readonly = false);

/// A failure to reach or use the CUDA driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The driver library (`libcuda.so`, `nvcuda.dll`) could not be loaded.
    #[error("the CUDA driver library (libcuda) was not found on this machine")]
    NotFound,
    /// A driver call returned an error code.
    #[error("{call} failed: {name} ({code}): {description}")]
    Call {
        /// The driver function.
        call: &'static str,
        /// The `CUresult` code.
        code: u32,
        /// The code's name (`CUDA_ERROR_INVALID_HANDLE`).
        name: String,
        /// The driver's description of the code.
        description: String,
    },
}

impl DriverError {
    fn call(call: &'static str, error: cudarc::driver::DriverError) -> DriverError {
        let text = |r: std::result::Result<&std::ffi::CStr, _>| {
            r.map_or_else(|_| "unknown".to_owned(), |s: &std::ffi::CStr| s.to_string_lossy().into_owned())
        };
        DriverError::Call {
            call,
            code: error.0 as u32,
            name: text(error.error_name()),
            description: text(error.error_string()),
        }
    }
}

/// Whether the CUDA driver library can be loaded. Every function of this module that calls
/// the driver checks this first and returns [`DriverError::NotFound`] instead of failing.
pub fn driver_present() -> bool {
    // SAFETY: loading the library has no precondition; cudarc caches the result.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

fn init() -> std::result::Result<(), DriverError> {
    if !driver_present() {
        return Err(DriverError::NotFound);
    }
    cudarc::driver::result::init().map_err(|e| DriverError::call("cuInit", e))
}

/// Blocks the host until all work queued on `stream` so far has finished; nothing to do
/// for [`Stream::None`].
///
/// The legacy and per-thread default streams are those of the context current on the
/// calling thread.
pub fn synchronize(stream: Stream) -> std::result::Result<(), DriverError> {
    let Some(raw) = stream.to_raw() else { return Ok(()) };
    init()?;
    // SAFETY: the driver validates the handle; the producer keeps the stream alive for as
    // long as the object it was exported from, which the caller holds.
    unsafe { cudarc::driver::result::stream::synchronize(raw as cudarc::driver::sys::CUstream) }
        .map_err(|e| DriverError::call("cuStreamSynchronize", e))
}
