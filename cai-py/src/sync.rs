//! The consumer side of the sync engine for imports from Python: pointer checks (device,
//! allocation, mapping) and ordering the consumer's work after the producer's.
//!
//! Without a usable CUDA driver (none, or one whose `cuInit` fails), stream `None`
//! imports work and skip the pointer checks (nothing in this process can touch device
//! memory); an integer stream under the `wait` or `synchronize` policy is a
//! `cai.CudaDriverError` that names the driver's state.

use cai_core::dlpack::{device_type, DLDevice};
use cai_core::sync::SyncPolicy;
use cai_core::Stream;
use pyo3::prelude::*;

use crate::error::driver_error;
use crate::parse::Parsed;

/// Who imports, for the opt-outs an error message names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// `cai.as_cuda_array` and `cai.from_cuda_array_interface`: keyword arguments.
    Function,
    /// A typed extractor: the caller of a Rust function has no arguments to pass.
    Extractor,
}

/// What an import asks of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ImportOptions {
    pub(crate) policy: SyncPolicy,
    /// The stream the consumer works on; `None` defers ordering to the extractor's
    /// accessors, which are told the stream (or wait on the host).
    pub(crate) consumer: Option<Stream>,
    pub(crate) check_pointers: bool,
    pub(crate) allow_other_device: bool,
    pub(crate) caller: Caller,
}

fn sync_opt_out(caller: Caller) -> &'static str {
    match caller {
        Caller::Function => {
            "pass sync=False (or set CAI_IMPORT_SYNC=ignore) to skip synchronization and order the work \
                             yourself"
        }
        Caller::Extractor => {
            "set CAI_IMPORT_SYNC=ignore, or call cai.configure(import_sync='ignore'), to skip \
                              synchronization and order the work yourself"
        }
    }
}

pub(crate) fn sync_failure(py: Python<'_>, stream: Stream, reason: &dyn std::fmt::Display, caller: Caller) -> PyErr {
    driver_error(py, format!("stream: cannot synchronize on stream {stream}: {reason}; {}", sync_opt_out(caller)))
}

/// Checks the imported pointer and, when the consumer's stream is known, orders the
/// consumer's work after the producer's. Returns the device of the memory when the
/// pointer was checked.
#[inline]
pub(crate) fn consume(py: Python<'_>, parsed: &Parsed, options: &ImportOptions) -> PyResult<Option<i32>> {
    imp::consume(py, parsed, options)
}

/// Whether the CUDA driver can be loaded (always false without the `driver` feature).
pub(crate) fn driver_present() -> bool {
    imp::driver_present()
}

/// Why no pointer can be checked in this process (no driver, or one that cannot be
/// used), or `None` when they can.
pub(crate) fn unchecked_reason() -> Option<String> {
    imp::unchecked_reason()
}

/// A stream a Rust function works on, to order an extracted array's pending work before:
/// a [`Stream`] value (located in the context current on the calling thread) or, with
/// the `driver` feature, a cudarc `Arc<CudaStream>` (located in its own context, and kept
/// alive by the argument until the producer's stream has been made to wait for it).
///
/// A `Stream` handle must stay valid until the argument goes, after the function's body
/// (its locals included): the producer's stream is then made to wait for it.
pub trait ConsumerStream: crate::extract::sealed::Sealed {
    #[doc(hidden)]
    fn target(&self) -> Target;
}

/// Where deferred ordering goes.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub enum Target {
    /// A stream value, located by the engine.
    Stream(Stream),
    /// A cudarc stream, located in its own context.
    #[cfg(feature = "driver")]
    Cudarc(std::sync::Arc<cudarc::driver::CudaStream>),
}

impl crate::extract::sealed::Sealed for Stream {}
impl ConsumerStream for Stream {
    fn target(&self) -> Target {
        Target::Stream(*self)
    }
}

// Only the `Arc`: the argument keeps the stream until the producer's stream has waited
// for it, and a stream that is only borrowed may be destroyed before that (a function's
// local stream goes before its arguments do).
#[cfg(feature = "driver")]
impl crate::extract::sealed::Sealed for std::sync::Arc<cudarc::driver::CudaStream> {}
#[cfg(feature = "driver")]
impl ConsumerStream for std::sync::Arc<cudarc::driver::CudaStream> {
    fn target(&self) -> Target {
        Target::Cudarc(self.clone())
    }
}

/// Orders the producer's pending work on `producer` before `target` (an event wait), or,
/// with no target, makes the host wait for it; `policy` as configured. `device` is the
/// memory's device when known.
///
/// When the consumer's work goes to a stream of its own (a target other than the
/// producer's stream), returns what [`hand_back`] needs to order the producer's later work
/// after it, when the argument goes.
pub(crate) fn order_deferred(
    py: Python<'_>,
    producer: Stream,
    policy: SyncPolicy,
    device: Option<i32>,
    target: Option<Target>,
) -> PyResult<Option<HandBack>> {
    if producer.is_none() || policy == SyncPolicy::Ignore {
        return Ok(None);
    }
    imp::order_deferred(py, producer, policy, device, target)
}

/// A consumer's stream whose work the producer's stream is to wait for.
pub(crate) use imp::HandBack;

/// Makes the producer's stream wait for the work queued on the consumer's stream so far
/// (the other half of [`order_deferred`]): an event wait where the streams allow it (see
/// `cai_core::sync::hand_back`). Run as an extracted argument goes, which cannot raise: a
/// failure is returned as its message, for [`report_hand_back`].
pub(crate) fn hand_back(py: Python<'_>, handed: HandBack) -> Result<(), String> {
    imp::hand_back(py, handed)
}

/// Reports a failed [`hand_back`] through `sys.unraisablehook`, as `cai.CudaDriverError`.
pub(crate) fn report_hand_back(py: Python<'_>, message: String) {
    imp::report_hand_back(py, message)
}

/// Where an exported device array's memory is, for `__dlpack_device__`: the device of its
/// pointer (device, managed or pinned host memory). Without a usable driver, device 0
/// when pointer checks are off, else `cai.CudaDriverError`.
pub(crate) fn export_device(py: Python<'_>, ptr: usize, empty: bool, check_pointers: bool) -> PyResult<DLDevice> {
    imp::export_device(py, ptr, empty, check_pointers)
}

/// Makes the consumer's `consumer` stream wait for the producer's pending work on
/// `producer`, on a DLPack export from memory of `device`.
pub(crate) fn order_export(py: Python<'_>, producer: Stream, consumer: Stream, device: i32) -> PyResult<()> {
    // The same stream (both in the caller's current context) needs no ordering.
    if producer.is_none() || producer == consumer {
        return Ok(());
    }
    imp::order_export(py, producer, consumer, device)
}

/// A copy of device memory made for an export: into the host (`to_host`) or into a new
/// device allocation, after the producer's pending work on `producer` has finished.
pub(crate) fn copy_device(
    py: Python<'_>,
    producer: Stream,
    src: usize,
    len: usize,
    device: i32,
    to_host: bool,
) -> PyResult<Copied> {
    imp::copy_device(py, producer, src, len, device, to_host)
}

/// Memory a DLPack export made for its consumer, freed with the capsule's tensor.
#[derive(Debug)]
pub(crate) enum Copied {
    Host(HostCopy),
    #[cfg(feature = "driver")]
    Device(cai_core::cuda::DeviceCopy),
}

impl Copied {
    pub(crate) fn address(&self) -> usize {
        match self {
            Copied::Host(b) => b.ptr.as_ptr() as usize,
            #[cfg(feature = "driver")]
            Copied::Device(d) => d.address(),
        }
    }
}

/// Zeroed host memory for a copy, aligned to 256 bytes as DLPack recommends (and so for
/// any element type). The zeroes cost nothing up front for large sizes: the allocator
/// hands out fresh pages, which the copy then writes once.
#[derive(Debug)]
pub(crate) struct HostCopy {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the copy owns its bytes, which nothing else references.
unsafe impl Send for HostCopy {}
// SAFETY: shared access only reads the address.
unsafe impl Sync for HostCopy {}

impl HostCopy {
    const ALIGN: usize = 256;

    /// `len` zeroed bytes (none, at an aligned dangling address, for 0), or the
    /// `MemoryError` of a size no allocation gives.
    pub(crate) fn zeroed(len: usize, what: &str) -> PyResult<HostCopy> {
        let no_memory =
            || pyo3::exceptions::PyMemoryError::new_err(format!("copy: cannot allocate {len} bytes for {what}"));
        if len == 0 {
            return Ok(HostCopy { ptr: std::ptr::NonNull::<[u8; Self::ALIGN]>::dangling().cast(), len });
        }
        let layout = std::alloc::Layout::from_size_align(len, Self::ALIGN).map_err(|_| no_memory())?;
        // SAFETY: the layout's size is not zero.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        std::ptr::NonNull::new(ptr).map(|ptr| HostCopy { ptr, len }).ok_or_else(no_memory)
    }

    /// The bytes, to be written.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: `len` initialized (zeroed) bytes that this copy owns, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HostCopy {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: allocated in `zeroed` with this very layout (which was valid then).
            unsafe {
                std::alloc::dealloc(
                    self.ptr.as_ptr(),
                    std::alloc::Layout::from_size_align_unchecked(self.len, Self::ALIGN),
                )
            };
        }
    }
}

const NO_DRIVER: &str = "no CUDA driver can be loaded on this machine";

fn no_driver_for_export(py: Python<'_>, what: String, reason: &dyn std::fmt::Display) -> PyErr {
    driver_error(py, format!("{what}: {reason}"))
}

#[cfg(not(feature = "driver"))]
mod imp {
    use super::*;

    pub(super) fn driver_present() -> bool {
        false
    }

    pub(super) fn unchecked_reason() -> Option<String> {
        Some(NO_DRIVER.to_owned())
    }

    pub(super) fn consume(py: Python<'_>, parsed: &Parsed, options: &ImportOptions) -> PyResult<Option<i32>> {
        let stream = parsed.descriptor.stream;
        if stream.is_none() || options.policy == SyncPolicy::Ignore {
            return Ok(None);
        }
        Err(sync_failure(py, stream, &cai_core::DriverError::Unsupported, options.caller))
    }

    /// Never made without the driver.
    #[derive(Debug)]
    pub(crate) enum HandBack {}

    impl HandBack {
        pub(crate) fn absorbs(&mut self, _other: &mut HandBack) -> bool {
            match *self {}
        }
    }

    pub(super) fn order_deferred(
        py: Python<'_>,
        producer: Stream,
        _policy: SyncPolicy,
        _device: Option<i32>,
        _target: Option<Target>,
    ) -> PyResult<Option<HandBack>> {
        Err(sync_failure(py, producer, &cai_core::DriverError::Unsupported, Caller::Extractor))
    }

    pub(super) fn hand_back(_py: Python<'_>, handed: HandBack) -> Result<(), String> {
        match handed {}
    }

    pub(super) fn report_hand_back(_py: Python<'_>, _message: String) {}

    pub(super) fn export_device(py: Python<'_>, ptr: usize, _empty: bool, check_pointers: bool) -> PyResult<DLDevice> {
        if !check_pointers {
            return Ok(DLDevice { device_type: device_type::CUDA, device_id: 0 });
        }
        Err(no_driver_for_export(
            py,
            format!("data: cannot tell the device of pointer 0x{ptr:x}"),
            &cai_core::DriverError::Unsupported,
        ))
    }

    pub(super) fn order_export(py: Python<'_>, producer: Stream, consumer: Stream, _device: i32) -> PyResult<()> {
        Err(no_driver_for_export(
            py,
            format!("stream: cannot make stream {consumer} wait for the producer's stream {producer}"),
            &cai_core::DriverError::Unsupported,
        ))
    }

    pub(super) fn copy_device(
        py: Python<'_>,
        _producer: Stream,
        src: usize,
        _len: usize,
        _device: i32,
        _to_host: bool,
    ) -> PyResult<Copied> {
        Err(no_driver_for_export(
            py,
            format!("copy: cannot copy device memory at 0x{src:x}"),
            &cai_core::DriverError::Unsupported,
        ))
    }
}

#[cfg(feature = "driver")]
mod imp {
    use cai_core::cuda::{self, event_pool, DriverBackend};
    use cai_core::sync::{import, order, settle, Backend, Located};
    use cai_core::DriverError;

    use super::*;
    use crate::cudarc_view::located;
    use crate::error::Problem;

    pub(super) fn driver_present() -> bool {
        cuda::driver_present()
    }

    pub(super) fn unchecked_reason() -> Option<String> {
        match cuda::driver_status() {
            Ok(()) => None,
            Err(DriverError::NotFound) => Some(NO_DRIVER.to_owned()),
            Err(e) => Some(e.to_string()),
        }
    }

    pub(super) fn pointer_opt_out(caller: Caller) -> &'static str {
        match caller {
            Caller::Function => {
                "pass check_pointers=False, or call cai.configure(check_pointers=False), to skip this check"
            }
            Caller::Extractor => {
                "call cai.configure(check_pointers=False) (or set CAI_CHECK_POINTERS=0 before the process first \
                 uses cai) to skip this check"
            }
        }
    }

    // Inlined: an import with nothing to do (no stream to order, and no pointer to check
    // or no driver to check it with) returns at once.
    #[inline(always)]
    pub(super) fn consume(py: Python<'_>, parsed: &Parsed, options: &ImportOptions) -> PyResult<Option<i32>> {
        let needs_sync = !parsed.descriptor.stream.is_none() && options.policy != SyncPolicy::Ignore;
        let needs_check = options.check_pointers && !parsed.extent.is_empty();
        if !needs_sync && (!needs_check || !cuda::driver_ready()) {
            return Ok(None);
        }
        consume_with_driver(py, parsed, options, needs_sync, needs_check)
    }

    #[inline(never)]
    fn consume_with_driver(
        py: Python<'_>,
        parsed: &Parsed,
        options: &ImportOptions,
        needs_sync: bool,
        needs_check: bool,
    ) -> PyResult<Option<i32>> {
        let d = &parsed.descriptor;
        if !cuda::driver_ready() {
            // Nothing in this process can touch device memory: no pointer to check.
            return match cuda::driver_status() {
                Err(e) if needs_sync => Err(sync_failure(py, d.stream, &e, options.caller)),
                _ => Ok(None),
            };
        }
        let mut device = None;
        if needs_check {
            device = Some(check_pointer(py, parsed, options)?);
        }
        let Some(consumer) = options.consumer else { return Ok(device) };
        if !needs_sync {
            return Ok(device);
        }
        let (producer, policy) = (d.stream, options.policy);
        let waiting = (policy == SyncPolicy::Wait).then_some(consumer);
        let fail = |e: &DriverError| ordering_failure(py, producer, waiting, e, options.caller);
        let backend = backend_for(producer, device).map_err(|e| fail(&e))?;
        py.detach(|| import(&backend, event_pool(), producer, consumer, policy)).map_err(|e| fail(&e))?;
        Ok(device)
    }

    pub(super) fn export_device(py: Python<'_>, ptr: usize, empty: bool, check_pointers: bool) -> PyResult<DLDevice> {
        let unknown = |e: &dyn std::fmt::Display| {
            if check_pointers {
                Err(no_driver_for_export(
                    py,
                    format!(
                        "data: cannot tell the device of pointer 0x{ptr:x} (call cai.configure(check_pointers=False), \
                         or set CAI_CHECK_POINTERS=0 before the process first uses cai, to export it as device 0)"
                    ),
                    e,
                ))
            } else {
                Ok(DLDevice { device_type: device_type::CUDA, device_id: 0 })
            }
        };
        if let Err(e) = cuda::driver_status() {
            return unknown(&e);
        }
        if empty {
            let device = cuda::stream_device(Stream::LegacyDefault).ok().flatten().unwrap_or(0);
            return Ok(DLDevice { device_type: device_type::CUDA, device_id: device });
        }
        match cuda::pointer_info(ptr) {
            Ok(Some(info)) => Ok(match info.memory {
                cuda::MemoryType::Device => DLDevice { device_type: device_type::CUDA, device_id: info.device },
                cuda::MemoryType::Managed => {
                    DLDevice { device_type: device_type::CUDA_MANAGED, device_id: info.device }
                }
                cuda::MemoryType::Host => DLDevice { device_type: device_type::CUDA_HOST, device_id: 0 },
            }),
            Ok(None) if !check_pointers => Ok(DLDevice { device_type: device_type::CUDA, device_id: 0 }),
            Ok(None) => Err(Problem::buffer_error(format!(
                "data: pointer 0x{ptr:x} is not memory the CUDA driver knows, so it cannot be exported through \
                 DLPack; {}",
                pointer_opt_out(Caller::Extractor)
            ))
            .into()),
            Err(e) => unknown(&e),
        }
    }

    pub(super) fn order_export(py: Python<'_>, producer: Stream, consumer: Stream, device: i32) -> PyResult<()> {
        let fail = |e: &dyn std::fmt::Display| {
            no_driver_for_export(
                py,
                format!("stream: cannot make stream {consumer} wait for the producer's stream {producer}"),
                e,
            )
        };
        cuda::driver_status().map_err(|e| fail(&e))?;
        let backend = DriverBackend::primary(device).map_err(|e| fail(&e))?;
        let work = || -> Result<(), DriverError> {
            let from = backend.locate(producer)?;
            let to = backend.locate(consumer)?;
            order(&backend, event_pool(), from, to).map(drop)
        };
        py.detach(work).map_err(|e| fail(&e))
    }

    pub(super) fn copy_device(
        py: Python<'_>,
        producer: Stream,
        src: usize,
        len: usize,
        device: i32,
        to_host: bool,
    ) -> PyResult<Copied> {
        let fail = |e: &dyn std::fmt::Display| {
            no_driver_for_export(py, format!("copy: cannot copy the array at 0x{src:x}"), e)
        };
        cuda::driver_status().map_err(|e| fail(&e))?;
        let backend = DriverBackend::primary(device).map_err(|e| fail(&e))?;
        // The host memory first: a size no allocation can give is a `MemoryError`.
        let host = if to_host {
            Some(HostCopy::zeroed(len, &format!("a host copy of the array at 0x{src:x}"))?)
        } else {
            None
        };
        let work = move || -> Result<Copied, DriverError> {
            if !producer.is_none() {
                settle(&backend, event_pool(), backend.locate(producer)?)?;
            }
            match host {
                Some(mut host) => {
                    cuda::copy_to_host(src, host.bytes_mut(), device)?;
                    Ok(Copied::Host(host))
                }
                None => cuda::DeviceCopy::of(src, len, device).map(Copied::Device),
            }
        };
        py.detach(work).map_err(|e| fail(&e))
    }

    /// A consumer's backend, whose default streams fall back to the memory's device (or
    /// the producer stream's, or device 0) when no context is current on this thread.
    fn backend_for(producer: Stream, device: Option<i32>) -> Result<DriverBackend, DriverError> {
        DriverBackend::primary(device_for(producer, device))
    }

    /// What a failed ordering raises: when a consumer's stream was to wait for the
    /// producer's, an error naming both (the failure may be the consumer stream's own);
    /// else that of the host's wait for the producer's stream.
    fn ordering_failure(
        py: Python<'_>,
        producer: Stream,
        waiting: Option<Stream>,
        e: &dyn std::fmt::Display,
        caller: Caller,
    ) -> PyErr {
        match waiting {
            Some(consumer) if consumer != producer => driver_error(
                py,
                format!(
                    "stream: cannot make stream {consumer} wait for the producer's stream {producer}: {e}; {}",
                    sync_opt_out(caller)
                ),
            ),
            _ => sync_failure(py, producer, e, caller),
        }
    }

    /// The memory's device, or else the producer stream's, or else device 0.
    fn device_for(producer: Stream, device: Option<i32>) -> i32 {
        match device {
            Some(d) => d,
            None => cuda::stream_device(producer).ok().flatten().unwrap_or(0),
        }
    }

    /// A consumer's stream whose work the producer's stream is to wait for, both located,
    /// the device whose primary context the backend falls back to, and a cudarc consumer
    /// stream, kept (with its context) until the producer's stream has waited for it.
    #[derive(Debug)]
    pub(crate) struct HandBack {
        consumer: Located<usize>,
        producer: Located<usize>,
        device: i32,
        keep: Option<std::sync::Arc<cudarc::driver::CudaStream>>,
    }

    impl HandBack {
        /// Whether `other` hands the same consumer stream back to the same producer
        /// stream; if so, it is folded into this one (its cudarc stream kept, if this one
        /// keeps none: the same stream may be named once as a `Stream` and once as a cudarc
        /// stream).
        pub(crate) fn absorbs(&mut self, other: &mut HandBack) -> bool {
            let same = (self.consumer, self.producer) == (other.consumer, other.producer);
            if same && self.keep.is_none() {
                self.keep = other.keep.take();
            }
            same
        }
    }

    impl Drop for HandBack {
        fn drop(&mut self) {
            if let Some(stream) = self.keep.take() {
                // The last reference destroys the stream, for which cudarc binds its
                // context to the thread: the caller's current context is put back after
                // (on every path, unwinding included).
                let _keep_current = cuda::KeepCurrent::new();
                drop(stream);
            }
        }
    }

    pub(super) fn order_deferred(
        py: Python<'_>,
        producer: Stream,
        policy: SyncPolicy,
        device: Option<i32>,
        target: Option<Target>,
    ) -> PyResult<Option<HandBack>> {
        let consumer = target.as_ref().map(|t| match t {
            Target::Stream(s) => *s,
            Target::Cudarc(c) => located(c).stream,
        });
        let fail = |e: &dyn std::fmt::Display| ordering_failure(py, producer, consumer, e, Caller::Extractor);
        cuda::driver_status().map_err(|e| fail(&e))?;
        let device = device_for(producer, device);
        let backend = DriverBackend::primary(device).map_err(|e| fail(&e))?;
        let work = || -> Result<Option<HandBack>, DriverError> {
            let from = backend.locate(producer)?;
            let (to, keep) = match target {
                None => (None, None),
                Some(Target::Stream(s)) => (Some(backend.locate(s)?), None),
                Some(Target::Cudarc(c)) => (Some(located(&c)), Some(c)),
            };
            match (policy, to) {
                (SyncPolicy::Synchronize, _) => import(&backend, event_pool(), producer, producer, policy).map(drop)?,
                (_, None) => settle(&backend, event_pool(), from).map(drop)?,
                (_, Some(to)) => order(&backend, event_pool(), from, to).map(drop)?,
            }
            Ok(to.filter(|&to| to != from).map(|consumer| HandBack { consumer, producer: from, device, keep }))
        };
        py.detach(work).map_err(|e| fail(&e))
    }

    pub(super) fn hand_back(py: Python<'_>, handed: HandBack) -> Result<(), String> {
        let (consumer, producer, device) = (handed.consumer, handed.producer, handed.device);
        let work = move || -> Result<(), DriverError> {
            let result = cuda::driver_status().and_then(|()| {
                let backend = DriverBackend::primary(device)?;
                cai_core::sync::hand_back(&backend, event_pool(), consumer, producer).map(drop)
            });
            // Its cudarc stream, kept until now, may go with it.
            drop(handed);
            result
        };
        py.detach(work).map_err(|e| {
            format!(
                "stream: cannot make the producer's stream {producer} wait for stream {consumer}, which a Rust \
                 function's work on an extracted array was ordered on: {e}; the producer's later work may overlap it"
            )
        })
    }

    pub(super) fn report_hand_back(py: Python<'_>, message: String) {
        crate::error::report_unraisable(py, || driver_error(py, message));
    }

    /// The pointer's device, after checking that the driver knows the memory, that the
    /// array's bytes lie in its allocation and are mapped, and that the device is the
    /// consumer's.
    fn check_pointer(py: Python<'_>, parsed: &Parsed, options: &ImportOptions) -> PyResult<i32> {
        let opt_out = pointer_opt_out(options.caller);
        let d = &parsed.descriptor;
        let driver =
            |e: DriverError| driver_error(py, format!("data: cannot check pointer 0x{:x}: {e}; {opt_out}", d.data));
        let info = cuda::pointer_info(d.data).map_err(driver)?.ok_or_else(|| {
            Problem::value_error(format!(
                "data: pointer 0x{:x} is not memory the CUDA driver knows (neither device, managed nor pinned host \
                 memory); {opt_out}",
                d.data
            ))
        })?;
        // Validation checked that the bytes lie inside the address space.
        let bytes = d.byte_range_of(parsed.extent).map_err(crate::error::to_py_err)?;
        let (low, high) = (bytes.start, bytes.end);
        let reach = || {
            format!(
                "shape: {} with strides {} reaches bytes 0x{low:x} to 0x{high:x}",
                crate::error::py_tuple(&d.shape),
                d.strides.as_deref().map_or_else(|| "None".to_owned(), crate::error::py_tuple),
            )
        };
        if let Some(allocation) = &info.allocation {
            if low < allocation.start || high > allocation.end {
                return Err(Problem::value_error(format!(
                    "{}, outside the {} allocation 0x{:x} to 0x{:x} ({} bytes) that pointer 0x{:x} lies in; {opt_out}",
                    reach(),
                    info.memory,
                    allocation.start,
                    allocation.end,
                    allocation.end - allocation.start,
                    d.data
                ))
                .into());
            }
        }
        if info.memory != cuda::MemoryType::Host {
            if let Some(gap) = cuda::unmapped(low..high, d.data, info.device).map_err(driver)? {
                return Err(Problem::value_error(format!(
                    "{}, but the {} memory from 0x{:x} on is not mapped (pointer 0x{:x} lies in an allocation \
                     that ends before the array does); {opt_out}",
                    reach(),
                    info.memory,
                    gap.start,
                    d.data
                ))
                .into());
            }
        }
        // Device memory only: managed memory, and pinned host memory (portable under unified
        // addressing), can be used from every device, so the consumer's device is not asked.
        if !options.allow_other_device && info.memory == cuda::MemoryType::Device {
            let consumer = options.consumer.unwrap_or(Stream::LegacyDefault);
            let consumer_device = cuda::stream_device(consumer).map_err(|e| {
                driver_error(
                    py,
                    format!(
                        "stream: cannot tell the device of the consumer's stream {consumer}, to compare it with that \
                         of pointer 0x{:x}: {e}; {opt_out}",
                        d.data
                    ),
                )
            })?;
            if let Some(device) = consumer_device.filter(|&device| device != info.device) {
                let fix = match options.caller {
                    Caller::Function => "pass allow_other_device=True if the devices have peer access",
                    Caller::Extractor => "make the memory's device current first",
                };
                return Err(Problem::value_error(format!(
                    "data: pointer 0x{:x} is {} memory of device {}, but the consumer's stream {consumer} works on \
                     device {device}; {fix}",
                    d.data, info.memory, info.device
                ))
                .into());
            }
        }
        Ok(info.device)
    }
}
