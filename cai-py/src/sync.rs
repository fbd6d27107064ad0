//! Synchronizing on an imported stream, until the sync engine takes over: the host waits
//! for the producer's stream (`cuStreamSynchronize`), with the GIL released.

use cai_core::Stream;
use pyo3::prelude::*;

use crate::error::driver_error;

/// Makes the producer's pending work on `stream` visible to the caller; nothing to do for
/// `Stream::None`. Without a CUDA driver this is a `cai.CudaDriverError`.
pub(crate) fn synchronize(py: Python<'_>, stream: Stream) -> PyResult<()> {
    let Some(raw) = stream.to_raw() else { return Ok(()) };
    driver_synchronize(py, stream).map_err(|reason| {
        let message = format!(
            "stream: cannot synchronize on stream {raw}: {reason}; pass sync=False to skip synchronization \
             (the caller then orders its work after the producer's)"
        );
        driver_error(py, message)
    })
}

#[cfg(feature = "driver")]
fn driver_synchronize(py: Python<'_>, stream: Stream) -> Result<(), String> {
    if !cai_core::cuda::driver_present() {
        return Err(cai_core::cuda::DriverError::NotFound.to_string());
    }
    py.detach(|| cai_core::cuda::synchronize(stream)).map_err(|e| e.to_string())
}

#[cfg(not(feature = "driver"))]
fn driver_synchronize(_py: Python<'_>, _stream: Stream) -> Result<(), String> {
    Err("this build of cai-py has no CUDA driver support (its `driver` feature is off)".to_owned())
}
