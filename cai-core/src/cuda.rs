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
