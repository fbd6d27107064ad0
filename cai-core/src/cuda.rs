//! Everything that touches the CUDA driver (through cudarc) lives here.
//!
//! cudarc is used with dynamic loading and without a CUDA version feature: the final
//! application picks the version by depending on cudarc itself, for example
//! `cudarc = { version = "0.19", default-features = false, features = ["cuda-12080"] }`
//! (any version builds without a toolkit, since the driver is loaded at run time).

use std::ffi::CStr;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::driver::{result, sys, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DeviceSlice};

use crate::buffer::{AsStream, DeviceBuffer};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::stream::Stream;
pub use crate::sync::DriverError;
use crate::sync::{Backend, PendingWork};

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

            fn order_before(&self, stream: Stream) -> Result<()> {
                order_after(DeviceSlice::<T>::stream(self), stream)
            }
        }
    };
}

/// Makes `target` wait for the work queued on `own` so far (nothing when they are the
/// same stream).
fn order_after(own: &Arc<CudaStream>, target: Stream) -> Result<()> {
    if target.is_none() || stream_of(own)? == target {
        return Ok(());
    }
    let raw = raw_stream(target).map_err(Error::Driver)?;
    // SAFETY: `target` is the stream the container exports, which it keeps alive as long
    // as itself, and it belongs to the buffer's context; the wrapper does not destroy it.
    let target = unsafe { own.context().wrap_borrowed_stream(raw) };
    target.join(own).map_err(|e| Error::Driver(call_error("cuStreamWaitEvent", e)))
}

cudarc_buffer!(CudaSlice<T>, readonly = false);
cudarc_buffer!(CudaView<'_, T>, readonly = true);
cudarc_buffer!(CudaViewMut<'_, T>, readonly = false);

// ---------------------------------------------------------------------------------------
// The driver: every call cai makes to it is below. Each entry point checks that the driver
// library can be loaded first and returns `DriverError::NotFound` otherwise; nothing panics.

fn call_error(call: &'static str, error: cudarc::driver::DriverError) -> DriverError {
    let text = |r: std::result::Result<&CStr, _>| {
        r.map_or_else(|_| "unknown".to_owned(), |s: &CStr| s.to_string_lossy().into_owned())
    };
    DriverError::Call {
        call,
        code: error.0 as u32,
        name: text(error.error_name()),
        description: text(error.error_string()),
    }
}

/// Whether the CUDA driver library can be loaded (probed once per process).
pub fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: probing loads the library, which has no precondition.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// Loads and initializes the driver once per process.
fn init() -> std::result::Result<(), DriverError> {
    static INIT: OnceLock<std::result::Result<(), DriverError>> = OnceLock::new();
    INIT.get_or_init(|| {
        if !driver_present() {
            return Err(DriverError::NotFound);
        }
        result::init().map_err(|e| call_error("cuInit", e))
    })
    .clone()
}

/// The driver handle of an interface stream: `CU_STREAM_LEGACY` is 1 and
/// `CU_STREAM_PER_THREAD` is 2, the same integers as in the interface.
fn raw_stream(stream: Stream) -> std::result::Result<sys::CUstream, DriverError> {
    match stream.to_raw() {
        Some(raw) => Ok(raw as sys::CUstream),
        None => Err(DriverError::Invalid("stream None has no driver handle".into())),
    }
}

/// Makes a context current on this thread until dropped, then restores the previous one.
struct Bound {
    previous: Option<sys::CUcontext>,
    changed: bool,
}

impl Bound {
    fn new(context: sys::CUcontext) -> std::result::Result<Bound, DriverError> {
        let previous = result::ctx::get_current().map_err(|e| call_error("cuCtxGetCurrent", e))?;
        let changed = previous != Some(context);
        if changed {
            // SAFETY: `context` is a primary context retained for the life of the process.
            unsafe { result::ctx::set_current(context) }.map_err(|e| call_error("cuCtxSetCurrent", e))?;
        }
        Ok(Bound { previous, changed })
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        if self.changed {
            // SAFETY: restores the context that was current (or none) before `new`.
            let _ = unsafe { result::ctx::set_current(self.previous.unwrap_or(std::ptr::null_mut())) };
        }
    }
}

/// The sync engine's backend on the CUDA driver, working in one device's primary context
/// (the context CuPy, PyTorch, Numba and JAX use). Every call makes that context current
/// for its duration and restores the caller's afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverBackend {
    device: i32,
    context: usize,
}

impl DriverBackend {
    /// The backend of device `ordinal`'s primary context, retained once for the life of
    /// the process.
    pub fn primary(ordinal: i32) -> std::result::Result<DriverBackend, DriverError> {
        static CONTEXTS: Mutex<Vec<(i32, usize)>> = Mutex::new(Vec::new());
        init()?;
        let mut contexts = CONTEXTS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(&(_, context)) = contexts.iter().find(|(d, _)| *d == ordinal) {
            return Ok(DriverBackend { device: ordinal, context });
        }
        let device = result::device::get(ordinal).map_err(|e| call_error("cuDeviceGet", e))?;
        // SAFETY: `device` is a valid device handle; the retained context is never released.
        let context =
            unsafe { result::primary_ctx::retain(device) }.map_err(|e| call_error("cuDevicePrimaryCtxRetain", e))?;
        contexts.push((ordinal, context as usize));
        Ok(DriverBackend { device: ordinal, context: context as usize })
    }

    /// The device ordinal.
    pub fn device(&self) -> i32 {
        self.device
    }

    fn bind(&self) -> std::result::Result<Bound, DriverError> {
        Bound::new(self.context as sys::CUcontext)
    }
}

/// A driver event, destroyed on drop.
#[derive(Debug)]
pub struct DriverEvent(usize);

impl Drop for DriverEvent {
    fn drop(&mut self) {
        // SAFETY: the event was created by `cuEventCreate` and is destroyed once; a driver
        // library was loaded to create it.
        let _ = unsafe { result::event::destroy(self.0 as sys::CUevent) };
    }
}

impl Backend for DriverBackend {
    type Event = DriverEvent;

    fn create_event(&self) -> std::result::Result<DriverEvent, DriverError> {
        let _bound = self.bind()?;
        result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map(|e| DriverEvent(e as usize))
            .map_err(|e| call_error("cuEventCreate", e))
    }

    fn record(&self, event: &DriverEvent, stream: Stream) -> std::result::Result<(), DriverError> {
        let stream = raw_stream(stream)?;
        let _bound = self.bind()?;
        // SAFETY: the event is live; the producer keeps its stream alive while the object
        // it exported from is, which the caller holds.
        unsafe { result::event::record(event.0 as sys::CUevent, stream) }.map_err(|e| call_error("cuEventRecord", e))
    }

    fn wait(&self, stream: Stream, event: &DriverEvent) -> std::result::Result<(), DriverError> {
        let stream = raw_stream(stream)?;
        let _bound = self.bind()?;
        // SAFETY: as in `record`.
        unsafe {
            result::stream::wait_event(stream, event.0 as sys::CUevent, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)
        }
        .map_err(|e| call_error("cuStreamWaitEvent", e))
    }

    fn synchronize(&self, stream: Stream) -> std::result::Result<(), DriverError> {
        let stream = raw_stream(stream)?;
        let _bound = self.bind()?;
        // SAFETY: as in `record`.
        unsafe { result::stream::synchronize(stream) }.map_err(|e| call_error("cuStreamSynchronize", e))
    }
}

/// What the driver says of a pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointerInfo {
    /// The device the memory belongs to (for host memory, the device it is mapped for).
    pub device: i32,
    /// Where the memory lives.
    pub memory: MemoryType,
    /// The whole allocation the pointer lies in, when the driver can tell.
    pub allocation: Option<Range<usize>>,
}

/// Where memory lives, as `CU_POINTER_ATTRIBUTE_MEMORY_TYPE` and `IS_MANAGED` say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryType {
    /// Device memory.
    Device,
    /// Pinned or registered host memory, mapped for the device.
    Host,
    /// Managed (unified) memory.
    Managed,
}

impl fmt::Display for MemoryType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemoryType::Device => "device",
            MemoryType::Host => "host",
            MemoryType::Managed => "managed",
        })
    }
}

fn attribute<T: Default>(
    ptr: usize,
    attr: sys::CUpointer_attribute,
    name: &'static str,
) -> std::result::Result<T, DriverError> {
    let mut value = T::default();
    // SAFETY: `value` is the type the attribute writes (int, unsigned int, pointer or
    // size_t, chosen by each caller); the driver validates `ptr`.
    unsafe { sys::cuPointerGetAttribute(std::ptr::addr_of_mut!(value).cast(), attr, ptr as sys::CUdeviceptr) }
        .result()
        .map_err(|e| call_error(name, e))?;
    Ok(value)
}

/// The device, memory type and allocation of `ptr`. Memory the driver does not know
/// (unregistered host memory, a stale pointer) is an error.
pub fn pointer_info(ptr: usize) -> std::result::Result<PointerInfo, DriverError> {
    use sys::CUpointer_attribute::*;
    init()?;
    let kind: u32 = attribute(ptr, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, "cuPointerGetAttribute(MEMORY_TYPE)")?;
    let managed: u32 = attribute(ptr, CU_POINTER_ATTRIBUTE_IS_MANAGED, "cuPointerGetAttribute(IS_MANAGED)")?;
    let device: i32 = attribute(ptr, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, "cuPointerGetAttribute(DEVICE_ORDINAL)")?;
    let memory = match (managed != 0, kind) {
        (true, _) => MemoryType::Managed,
        (false, k) if k == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32 => MemoryType::Host,
        _ => MemoryType::Device,
    };
    let allocation = if memory == MemoryType::Host {
        let start: usize =
            attribute(ptr, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, "cuPointerGetAttribute(RANGE_START_ADDR)")
                .unwrap_or(0);
        let size: usize =
            attribute(ptr, CU_POINTER_ATTRIBUTE_RANGE_SIZE, "cuPointerGetAttribute(RANGE_SIZE)").unwrap_or(0);
        (start != 0 && size != 0).then(|| start..start.saturating_add(size))
    } else {
        // Memory the driver knows but gives no range for (some virtual-memory mappings) has
        // no allocation to check against: `None`, not an error.
        let _bound = DriverBackend::primary(device)?.bind()?;
        let (mut base, mut size): (sys::CUdeviceptr, usize) = (0, 0);
        // SAFETY: both out-pointers are valid; the driver validates `ptr`.
        let found = unsafe {
            sys::cuMemGetAddressRange_v2(
                std::ptr::addr_of_mut!(base),
                std::ptr::addr_of_mut!(size),
                ptr as sys::CUdeviceptr,
            )
        }
        .result()
        .is_ok();
        let base = base as usize;
        (found && size != 0).then(|| base..base.saturating_add(size))
    };
    Ok(PointerInfo { device, memory, allocation })
}

/// The device a consumer's `stream` works on: the device of a handle's context, or of the
/// context current on this thread for the default streams; `None` when no context is
/// current (nothing to compare a pointer's device with).
pub fn stream_device(stream: Stream) -> std::result::Result<Option<i32>, DriverError> {
    init()?;
    let context = match stream {
        Stream::None => return Ok(None),
        Stream::Handle(h) => {
            let mut ctx: sys::CUcontext = std::ptr::null_mut();
            // SAFETY: the out-pointer is valid; the driver validates the handle.
            unsafe { sys::cuStreamGetCtx(h.get() as sys::CUstream, std::ptr::addr_of_mut!(ctx)) }
                .result()
                .map_err(|e| call_error("cuStreamGetCtx", e))?;
            ctx
        }
        Stream::LegacyDefault | Stream::PerThreadDefault => {
            match result::ctx::get_current().map_err(|e| call_error("cuCtxGetCurrent", e))? {
                Some(ctx) => ctx,
                None => return Ok(None),
            }
        }
    };
    let _bound = Bound::new(context)?;
    let mut device: sys::CUdevice = 0;
    // SAFETY: the out-pointer is valid and a context is current.
    unsafe { sys::cuCtxGetDevice(std::ptr::addr_of_mut!(device)) }
        .result()
        .map_err(|e| call_error("cuCtxGetDevice", e))?;
    Ok(Some(device))
}

/// A producer's pending work on cudarc streams, for a `#[cai(stream)]` field: the stream
/// to export (kept alive as long as the container) and an event per other stream that has
/// used the buffer. Record work with [`record`](TrackedStream::record) after enqueuing it;
/// on export, the export stream waits on every other stream's event (version 3's rule for
/// producers with work on several streams).
pub struct TrackedStream {
    export: Arc<CudaStream>,
    work: PendingWork<DriverBackend>,
}

impl fmt::Debug for TrackedStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrackedStream").field("export", &self.export.cu_stream()).field("work", &self.work).finish()
    }
}

impl TrackedStream {
    /// Work on `export`, the stream the container is exported with.
    pub fn new(export: Arc<CudaStream>) -> std::result::Result<TrackedStream, DriverError> {
        let ordinal = i32::try_from(export.context().ordinal()).unwrap_or(i32::MAX);
        let backend = DriverBackend::primary(ordinal)?;
        Ok(TrackedStream { export, work: PendingWork::new(backend) })
    }

    /// Notes that work touching the buffer was enqueued on `stream`.
    pub fn record(&self, stream: &CudaStream) -> std::result::Result<(), DriverError> {
        self.work.record(stream_of(stream).map_err(|e| DriverError::Invalid(e.to_string()))?)
    }

    /// The stream the container is exported with.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.export
    }
}

impl AsStream for TrackedStream {
    fn as_stream(&self) -> Result<Stream> {
        let target = stream_of(&self.export)?;
        self.work.export_on(target).map_err(Error::Driver)
    }
}
