//! The consumer side of the sync engine for imports from Python: pointer checks (device,
//! allocation) and ordering the consumer's work after the producer's.
//!
//! Without a CUDA driver, stream `None` imports work and skip the pointer checks (nothing
//! on such a machine can touch device memory); an integer stream under the `wait` or
//! `synchronize` policy is a `cai.CudaDriverError`.

use cai_core::sync::SyncPolicy;
use cai_core::Stream;
use pyo3::prelude::*;

use crate::error::driver_error;
use crate::parse::Parsed;

/// What an import asks of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ImportOptions {
    pub(crate) policy: SyncPolicy,
    pub(crate) consumer: Stream,
    pub(crate) check_pointers: bool,
    pub(crate) allow_other_device: bool,
}

fn sync_failure(py: Python<'_>, stream: Stream, reason: &dyn std::fmt::Display) -> PyErr {
    driver_error(
        py,
        format!(
            "stream: cannot synchronize on stream {stream}: {reason}; pass sync=False (or set CAI_IMPORT_SYNC=ignore) \
             to skip synchronization and order the work yourself"
        ),
    )
}

/// Checks the imported pointer and orders the consumer's work after the producer's.
pub(crate) fn consume(py: Python<'_>, parsed: &Parsed, options: &ImportOptions) -> PyResult<()> {
    imp::consume(py, parsed, options)
}

/// Whether the CUDA driver can be loaded (always false without the `driver` feature).
pub(crate) fn driver_present() -> bool {
    imp::driver_present()
}

#[cfg(not(feature = "driver"))]
mod imp {
    use super::*;

    pub(super) fn driver_present() -> bool {
        false
    }

    pub(super) fn consume(py: Python<'_>, parsed: &Parsed, options: &ImportOptions) -> PyResult<()> {
        let stream = parsed.descriptor.stream;
        if stream.is_none() || options.policy == SyncPolicy::Ignore {
            return Ok(());
        }
        Err(sync_failure(py, stream, &cai_core::sync::DriverError::Unsupported))
    }
}

#[cfg(feature = "driver")]
mod imp {
    use std::sync::{Arc, Mutex, PoisonError};

    use cai_core::cuda::{self, DriverBackend};
    use cai_core::sync::{import, EventPool};

    use super::*;
    use crate::error::Problem;

    pub(super) fn driver_present() -> bool {
        cuda::driver_present()
    }

    /// One event pool per device, for the life of the process.
    fn pool(device: i32) -> Arc<EventPool<DriverBackend>> {
        static POOLS: Mutex<Vec<(i32, Arc<EventPool<DriverBackend>>)>> = Mutex::new(Vec::new());
        let mut pools = POOLS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, p)) = pools.iter().find(|(d, _)| *d == device) {
            return p.clone();
        }
        let p = Arc::new(EventPool::new());
        pools.push((device, p.clone()));
        p
    }

    pub(super) fn consume(py: Python<'_>, parsed: &Parsed, options: &ImportOptions) -> PyResult<()> {
        let d = &parsed.descriptor;
        let needs_sync = !d.stream.is_none() && options.policy != SyncPolicy::Ignore;
        if !cuda::driver_present() {
            if needs_sync {
                return Err(sync_failure(py, d.stream, &cuda::DriverError::NotFound));
            }
            return Ok(());
        }
        let mut device = None;
        if options.check_pointers && !parsed.extent.is_empty() {
            device = Some(check_pointer(parsed, options)?);
        }
        if !needs_sync {
            return Ok(());
        }
        let device = match device {
            Some(d) => d,
            None => cuda::stream_device(d.stream).ok().flatten().unwrap_or(0),
        };
        let backend = DriverBackend::primary(device).map_err(|e| sync_failure(py, d.stream, &e))?;
        let pool = pool(device);
        let (producer, consumer, policy) = (d.stream, options.consumer, options.policy);
        py.detach(|| import(&backend, &pool, producer, consumer, policy))
            .map_err(|e| sync_failure(py, producer, &e))?;
        Ok(())
    }

    /// The pointer's device, after checking that the array's bytes lie in its allocation
    /// and that the device is the consumer's.
    fn check_pointer(parsed: &Parsed, options: &ImportOptions) -> PyResult<i32> {
        const OPT_OUT: &str = "pass check_pointers=False (or set CAI_CHECK_POINTERS=0) to skip this check";
        let d = &parsed.descriptor;
        let info = cuda::pointer_info(d.data).map_err(|e| {
            Problem::value_error(format!(
                "data: pointer 0x{:x} is not memory the CUDA driver knows ({e}); {OPT_OUT}",
                d.data
            ))
        })?;
        if let Some(allocation) = &info.allocation {
            let low = d.data.wrapping_add_signed(parsed.extent.start);
            let high = d.data.wrapping_add_signed(parsed.extent.end);
            if low < allocation.start || high > allocation.end {
                return Err(Problem::value_error(format!(
                    "shape: {} with strides {} reaches bytes 0x{low:x} to 0x{high:x}, outside the {} allocation \
                     0x{:x} to 0x{:x} ({} bytes) that pointer 0x{:x} lies in; {OPT_OUT}",
                    crate::error::py_tuple(&d.shape),
                    d.strides.as_deref().map_or_else(|| "None".to_owned(), crate::error::py_tuple),
                    info.memory,
                    allocation.start,
                    allocation.end,
                    allocation.end - allocation.start,
                    d.data
                ))
                .into());
            }
        }
        if !options.allow_other_device {
            if let Ok(Some(consumer)) = cuda::stream_device(options.consumer) {
                if consumer != info.device && info.memory != cuda::MemoryType::Managed {
                    return Err(Problem::value_error(format!(
                        "data: pointer 0x{:x} is {} memory of device {}, but the consumer's stream {} works on device \
                         {consumer}; pass allow_other_device=True if the devices have peer access",
                        d.data, info.memory, info.device, options.consumer
                    ))
                    .into());
                }
            }
        }
        Ok(info.device)
    }
}
