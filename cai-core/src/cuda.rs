//! Everything that touches the CUDA driver (through cudarc) lives here.
//!
//! cudarc is used with dynamic loading and without a CUDA version feature: the final
//! application picks the version by depending on cudarc itself, for example
//! `cudarc = { version = "0.19", default-features = false, features = ["cuda-12080"] }`
//! (any version builds without a toolkit, since the driver is loaded at run time).
//!
//! Three rules hold for every function here:
//!
//! - **The driver is checked first.** A missing library is [`DriverError::NotFound`]; a
//!   library whose `cuInit` fails, or that lacks a function cai calls, is
//!   [`DriverError::Unusable`] with the reason. Nothing panics.
//! - **The caller's current context is left as it was**, none included: each call makes
//!   the context it needs current and restores the previous one before returning.
//! - **A graph capture under way is never invalidated**: driver calls are made in the
//!   relaxed capture mode, and the engine (`crate::sync`) decides from
//!   [`Capture`] what may be enqueued.

use std::ffi::{c_void, CStr};
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::driver::{result, sys, CudaContext, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DeviceSlice};

use crate::buffer::{AsStream, DeviceBuffer};
use crate::element::Element;
use crate::error::{DriverError, Error, Result};
use crate::stream::Stream;
use crate::sync::{order, Backend, Capture, EventPool, Located, PendingWork};

/// The interface value of a cudarc stream: its null stream is the legacy default (1).
fn stream_of(stream: &CudaStream) -> Result<Stream> {
    match stream.cu_stream() as usize {
        0 => Ok(Stream::LegacyDefault),
        raw => Stream::from_raw(Some(raw)),
    }
}

/// A cudarc stream, located in its own context.
fn located(stream: &CudaStream) -> Result<Located<usize>> {
    Ok(Located { stream: stream_of(stream)?, context: stream.context().cu_ctx() as usize })
}

#[allow(unknown_or_malformed_diagnostic_attributes)] // do_not_recommend: Rust 1.85
#[diagnostic::do_not_recommend]
impl AsStream for CudaStream {
    fn as_stream(&self) -> Result<Stream> {
        stream_of(self)
    }
}

#[allow(unknown_or_malformed_diagnostic_attributes)] // do_not_recommend: Rust 1.85
#[diagnostic::do_not_recommend]
impl AsStream for Arc<CudaStream> {
    fn as_stream(&self) -> Result<Stream> {
        stream_of(self)
    }
}

macro_rules! cudarc_buffer {
    ($ty:ty, readonly = $readonly:expr) => {
        #[allow(unknown_or_malformed_diagnostic_attributes)] // do_not_recommend: Rust 1.85
        #[diagnostic::do_not_recommend]
        // SAFETY: cudarc's slices and views address `len()` initialized elements of `T` on
        // the device for as long as they are borrowed; a `CudaView` is a shared borrow
        // and is exported read-only.
        unsafe impl<T: Element> DeviceBuffer for $ty {
            type Elem = T;

            fn device_address(&self) -> usize {
                // cudarc binds the buffer's context to the thread while ordering; the
                // caller's current context comes back when `_keep` drops.
                let _keep = KeepCurrent::new();
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

/// Makes `target` (located in `own`'s context when it is a default stream) wait for the
/// work queued on `own` so far; nothing when they are the same stream.
fn order_after(own: &Arc<CudaStream>, target: Stream) -> Result<()> {
    if target.is_none() {
        return Ok(());
    }
    let backend = DriverBackend::of_context(own.context()).map_err(Error::Driver)?;
    let from = located(own)?;
    let to = backend.locate(target).map_err(Error::Driver)?;
    order(&backend, event_pool(), from, to).map(drop).map_err(Error::Driver)
}

cudarc_buffer!(CudaSlice<T>, readonly = false);
cudarc_buffer!(CudaView<'_, T>, readonly = true);
cudarc_buffer!(CudaViewMut<'_, T>, readonly = false);

// ---------------------------------------------------------------------------------------
// The driver: every call cai makes to it is below.

fn code_text(code: sys::CUresult) -> (String, String) {
    let text = |r: std::result::Result<&CStr, _>| {
        r.map_or_else(|_| "unknown".to_owned(), |s: &CStr| s.to_string_lossy().into_owned())
    };
    let e = result::DriverError(code);
    (text(e.error_name()), text(e.error_string()))
}

fn call_error(call: &'static str, error: result::DriverError) -> DriverError {
    let (name, description) = code_text(error.0);
    DriverError::Call { call, code: error.0 as u32, name, description }
}

fn check(call: &'static str, code: sys::CUresult) -> std::result::Result<(), DriverError> {
    code.result().map_err(|e| call_error(call, e))
}

/// Whether the CUDA driver library can be loaded (probed once per process). A library
/// that loads may still be unusable: [`driver_status`] says.
pub fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: probing loads the library, which has no precondition.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// The driver functions cai calls, each checked once before the first call, so that an
/// old driver is a clear error and never a panic inside cudarc's loader.
const REQUIRED: &[&str] = &[
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuCtxGetDevice",
    "cuDeviceGet",
    "cuDevicePrimaryCtxRetain",
    "cuDeviceGetAttribute",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuStreamWaitEvent",
    "cuStreamSynchronize",
    // cudarc's own calls for the views of `cai-py`'s `cudarc_view`: a stream of the view's
    // own for a producer on the per-thread default stream, and the context's release.
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuDevicePrimaryCtxRelease_v2",
    "cuStreamGetCtx",
    "cuStreamGetCaptureInfo_v2",
    "cuThreadExchangeStreamCaptureMode",
    "cuPointerGetAttributes",
    "cuMemGetAddressRange_v2",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemcpyDtoD_v2",
    "cuMemcpyDtoH_v2",
];

fn has_symbol(name: &str) -> bool {
    // SAFETY: only called once the library is known to load; looking a symbol up has no
    // other precondition, and the pointer is not used.
    unsafe { sys::culib().get::<*const c_void>(name).is_ok() }
}

/// Loads and initializes the driver once per process: `Ok` when it can be used,
/// [`DriverError::NotFound`] without a library, [`DriverError::Unusable`] when `cuInit`
/// fails (no device, a driver too old) or a function cai needs is missing.
pub fn driver_status() -> std::result::Result<(), DriverError> {
    status().clone()
}

/// Whether [`driver_status`] is `Ok`, without copying its error: the check on every
/// import, where the error is only needed when there is one.
pub fn driver_ready() -> bool {
    status().is_ok()
}

fn status() -> &'static std::result::Result<(), DriverError> {
    static INIT: OnceLock<std::result::Result<(), DriverError>> = OnceLock::new();
    INIT.get_or_init(|| {
        if !driver_present() {
            return Err(DriverError::NotFound);
        }
        for name in ["cuInit", "cuGetErrorName", "cuGetErrorString"] {
            if !has_symbol(name) {
                return Err(DriverError::Unusable(format!("it has no function {name}")));
            }
        }
        if let Err(e) = result::init() {
            let (name, description) = code_text(e.0);
            return Err(DriverError::Unusable(format!("cuInit failed: {name} ({}): {description}", e.0 as u32)));
        }
        let missing: Vec<&str> = REQUIRED.iter().copied().filter(|n| !has_symbol(n)).collect();
        if !missing.is_empty() {
            return Err(DriverError::Unusable(format!(
                "it lacks {} (a driver for CUDA 12.0 or later is needed)",
                missing.join(", ")
            )));
        }
        Ok(())
    })
}

fn init() -> std::result::Result<(), DriverError> {
    driver_status()
}

type GetCaptureInfo = unsafe extern "C" fn(
    sys::CUstream,
    *mut sys::CUstreamCaptureStatus,
    *mut u64,
    *mut sys::CUgraph,
    *mut *const sys::CUgraphNode,
    *mut usize,
) -> sys::CUresult;

/// `cuStreamGetCaptureInfo_v2`, looked up by name: cudarc's bindings offer it only for
/// some CUDA version features, and every driver from CUDA 11.3 on exports it.
fn get_capture_info() -> std::result::Result<GetCaptureInfo, DriverError> {
    static FUNCTION: OnceLock<Option<GetCaptureInfo>> = OnceLock::new();
    init()?;
    // SAFETY: the library loads (checked by `init`); the symbol has this signature in
    // every driver that exports it.
    let found = *FUNCTION
        .get_or_init(|| unsafe { sys::culib().get::<GetCaptureInfo>("cuStreamGetCaptureInfo_v2").ok().map(|f| *f) });
    found.ok_or_else(|| DriverError::Unusable("it has no function cuStreamGetCaptureInfo_v2".into()))
}

/// The driver handle of an interface stream: `CU_STREAM_LEGACY` is 1 and
/// `CU_STREAM_PER_THREAD` is 2, the same integers as in the interface.
fn raw_stream(stream: Stream) -> std::result::Result<sys::CUstream, DriverError> {
    match stream.to_raw() {
        Some(raw) => Ok(raw as sys::CUstream),
        None => Err(DriverError::Invalid("stream None has no driver handle".into())),
    }
}

/// For the duration of one operation: the relaxed capture mode on this thread (so that a
/// capture under way elsewhere is not invalidated by the calls below) and, when given, a
/// context made current. Both are restored on drop, in reverse order.
struct Scope {
    previous: Option<sys::CUcontext>,
    changed: bool,
    mode: sys::CUstreamCaptureMode,
}

impl Scope {
    fn enter(context: Option<usize>) -> std::result::Result<Scope, DriverError> {
        init()?;
        let mut mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: `mode` is a valid in-out pointer; the previous mode is written back.
        check("cuThreadExchangeStreamCaptureMode", unsafe {
            sys::cuThreadExchangeStreamCaptureMode(std::ptr::addr_of_mut!(mode))
        })?;
        let mut scope = Scope { previous: None, changed: false, mode };
        if let Some(context) = context {
            scope.previous = result::ctx::get_current().map_err(|e| call_error("cuCtxGetCurrent", e))?;
            let context = context as sys::CUcontext;
            if scope.previous != Some(context) {
                // SAFETY: `context` is a live context: a retained primary context or the
                // context of a stream the caller keeps alive.
                unsafe { result::ctx::set_current(context) }.map_err(|e| call_error("cuCtxSetCurrent", e))?;
                scope.changed = true;
            }
        }
        Ok(scope)
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        if self.changed {
            // SAFETY: restores the context that was current (or none) before `enter`.
            let _ = unsafe { result::ctx::set_current(self.previous.unwrap_or(std::ptr::null_mut())) };
        }
        // SAFETY: restores this thread's capture mode from before `enter`.
        let _ = unsafe { sys::cuThreadExchangeStreamCaptureMode(std::ptr::addr_of_mut!(self.mode)) };
    }
}

/// Restores the context current at its creation (none included) when dropped: for code
/// that calls into cudarc, which binds contexts to the thread and leaves them there.
/// Without a usable driver it does nothing.
#[derive(Debug)]
pub struct KeepCurrent {
    previous: Option<Option<usize>>,
}

impl KeepCurrent {
    /// Remembers the current context.
    pub fn new() -> KeepCurrent {
        let previous =
            if driver_ready() { result::ctx::get_current().ok().map(|c| c.map(|c| c as usize)) } else { None };
        KeepCurrent { previous }
    }
}

impl Default for KeepCurrent {
    fn default() -> Self {
        KeepCurrent::new()
    }
}

impl Drop for KeepCurrent {
    fn drop(&mut self) {
        if let Some(previous) = self.previous {
            let now = result::ctx::get_current().ok().map(|c| c.map(|c| c as usize));
            if now != Some(previous) {
                // SAFETY: the context was current before, and contexts cai or cudarc made
                // current are retained for the life of the process or of their owner.
                let _ = unsafe { result::ctx::set_current(previous.map_or(std::ptr::null_mut(), |c| c as _)) };
            }
        }
    }
}

/// The primary context of device `ordinal`, retained once for the life of the process.
fn primary_context(ordinal: i32) -> std::result::Result<usize, DriverError> {
    static CONTEXTS: Mutex<Vec<(i32, usize)>> = Mutex::new(Vec::new());
    init()?;
    let mut contexts = CONTEXTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&(_, context)) = contexts.iter().find(|(d, _)| *d == ordinal) {
        return Ok(context);
    }
    let device = result::device::get(ordinal).map_err(|e| call_error("cuDeviceGet", e))?;
    // SAFETY: `device` is a valid device handle; the retained context is never released.
    let context =
        unsafe { result::primary_ctx::retain(device) }.map_err(|e| call_error("cuDevicePrimaryCtxRetain", e))?;
    contexts.push((ordinal, context as usize));
    Ok(context as usize)
}

/// cudarc's context of device `ordinal`'s primary context, made once per process
/// without leaving it current (cudarc's constructor binds it to the calling thread).
pub fn cudarc_context(ordinal: i32) -> std::result::Result<Arc<CudaContext>, DriverError> {
    static CONTEXTS: Mutex<Vec<(i32, Arc<CudaContext>)>> = Mutex::new(Vec::new());
    init()?;
    let mut contexts = CONTEXTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, context)) = contexts.iter().find(|(d, _)| *d == ordinal) {
        return Ok(context.clone());
    }
    let index = usize::try_from(ordinal).map_err(|_| DriverError::Invalid(format!("device {ordinal}")))?;
    let _keep = KeepCurrent::new();
    // cudarc retains the primary context and reads device attributes: a failure is one of
    // those calls'.
    let context = CudaContext::new(index)
        .map_err(|e| call_error("cuDevicePrimaryCtxRetain or cuDeviceGetAttribute (cudarc's CudaContext::new)", e))?;
    contexts.push((ordinal, context.clone()));
    Ok(context)
}

/// A new stream of cudarc's in `context` (destroyed when its last `Arc` goes), on which
/// work runs after the work queued so far on `from`, a stream of that context (the
/// per-thread default stream of the calling thread, for one).
///
/// It is forked from `from` (an event recorded there and waited on), in the relaxed
/// capture mode, rather than made with cudarc's `new_stream`: for a context's first
/// stream, that synchronizes the whole context, a host wait that fails, and invalidates
/// the capture, while any stream of the device captures a graph. A capturing `from` is
/// refused, as [`order`] refuses it.
pub fn cudarc_stream_after(
    context: &Arc<CudaContext>,
    from: Stream,
) -> std::result::Result<Arc<CudaStream>, DriverError> {
    let backend = DriverBackend::of_context(context)?;
    let located = Located { stream: from, context: context.cu_ctx() as usize };
    crate::sync::plan(backend.capture(located)?, Capture::Idle, from, &"a new stream")?;
    let handle = raw_stream(from)?;
    let _scope = Scope::enter(None)?;
    // SAFETY: `from` is a stream of `context` that the caller keeps alive for this call;
    // the wrapper does not own it, so dropping the wrapper destroys nothing.
    let borrowed = unsafe { context.wrap_borrowed_stream(handle) };
    borrowed.fork().map_err(|e| call_error("cuStreamCreate, cuEventRecord or cuStreamWaitEvent (cudarc's fork)", e))
}

/// How a [`DriverBackend`] locates the default streams 1 and 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defaults {
    /// In the context current on the calling thread (a consumer's), else in the backend's.
    Current,
    /// Always in the backend's context (a producer's buffers and streams).
    Own,
}

/// The sync engine's backend on the CUDA driver. A stream handle is located in the
/// context it was created in (`cuStreamGetCtx`); the default streams in the context
/// current on the calling thread, or in the backend's own context when none is current
/// ([`primary`](DriverBackend::primary)) or always ([`of_context`](DriverBackend::of_context)).
/// Every call makes the context it needs current for its duration and restores the
/// caller's afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverBackend {
    device: i32,
    context: usize,
    defaults: Defaults,
}

impl DriverBackend {
    /// A consumer's backend: default streams in the calling thread's current context,
    /// else in device `ordinal`'s primary context (the context CuPy, PyTorch, Numba and
    /// JAX use), retained once for the life of the process.
    pub fn primary(ordinal: i32) -> std::result::Result<DriverBackend, DriverError> {
        Ok(DriverBackend { device: ordinal, context: primary_context(ordinal)?, defaults: Defaults::Current })
    }

    /// A producer's backend: default streams in cudarc context `context`.
    pub fn of_context(context: &Arc<CudaContext>) -> std::result::Result<DriverBackend, DriverError> {
        init()?;
        let device = i32::try_from(context.ordinal()).unwrap_or(i32::MAX);
        Ok(DriverBackend { device, context: context.cu_ctx() as usize, defaults: Defaults::Own })
    }

    /// The device ordinal of the backend's own context.
    pub fn device(&self) -> i32 {
        self.device
    }
}

/// A driver event and its context, destroyed on drop.
#[derive(Debug)]
pub struct DriverEvent {
    event: usize,
    context: usize,
}

impl Drop for DriverEvent {
    fn drop(&mut self) {
        if let Ok(_scope) = Scope::enter(Some(self.context)) {
            // SAFETY: the event was created by `cuEventCreate` and is destroyed once.
            let _ = unsafe { sys::cuEventDestroy_v2(self.event as sys::CUevent) };
        }
    }
}

/// The capture state of a stream (see [`Backend::capture`]).
fn capture_of(at: Located<usize>) -> std::result::Result<Capture, DriverError> {
    let get = get_capture_info()?;
    let stream = raw_stream(at.stream)?;
    let _scope = Scope::enter(Some(at.context))?;
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut id = 0u64;
    // SAFETY: the out-pointers are valid or null (allowed for the optional outputs).
    let code =
        unsafe { get(stream, &mut status, &mut id, std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut()) };
    match code {
        sys::CUresult::CUDA_SUCCESS => Ok(match status {
            sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE => Capture::Idle,
            // An invalidated capture is still a capture: touch nothing of it.
            _ => Capture::Active(id),
        }),
        sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT => Ok(Capture::Implicit),
        other => Err(call_error("cuStreamGetCaptureInfo", result::DriverError(other))),
    }
}

/// [`DriverError::Capture`] when the legacy default stream of `context` cannot be used: a
/// blocking stream of the context is capturing a graph, which a synchronous copy on the
/// legacy stream (or a wait for it) would join and invalidate.
fn legacy_usable(context: usize) -> std::result::Result<(), DriverError> {
    match capture_of(Located { stream: Stream::LegacyDefault, context })? {
        Capture::Implicit => Err(crate::sync::implicit_error(Stream::LegacyDefault)),
        Capture::Idle | Capture::Active(_) => Ok(()),
    }
}

impl Backend for DriverBackend {
    type Event = DriverEvent;
    type Context = usize;

    fn locate(&self, stream: Stream) -> std::result::Result<Located<usize>, DriverError> {
        init()?;
        let context = match stream {
            Stream::None => return Err(DriverError::Invalid("stream None is no stream to order".into())),
            Stream::Handle(h) => {
                let mut ctx: sys::CUcontext = std::ptr::null_mut();
                // SAFETY: the out-pointer is valid; the driver validates the handle.
                check("cuStreamGetCtx", unsafe { sys::cuStreamGetCtx(h.get() as sys::CUstream, &mut ctx) })?;
                ctx as usize
            }
            Stream::LegacyDefault | Stream::PerThreadDefault => match self.defaults {
                Defaults::Own => self.context,
                Defaults::Current => result::ctx::get_current()
                    .map_err(|e| call_error("cuCtxGetCurrent", e))?
                    .map_or(self.context, |c| c as usize),
            },
        };
        Ok(Located { stream, context })
    }

    fn capture(&self, at: Located<usize>) -> std::result::Result<Capture, DriverError> {
        capture_of(at)
    }

    fn create_event(&self, context: usize) -> std::result::Result<DriverEvent, DriverError> {
        let _scope = Scope::enter(Some(context))?;
        result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map(|e| DriverEvent { event: e as usize, context })
            .map_err(|e| call_error("cuEventCreate", e))
    }

    fn record(&self, event: &DriverEvent, at: Located<usize>) -> std::result::Result<(), DriverError> {
        let stream = raw_stream(at.stream)?;
        let _scope = Scope::enter(Some(at.context))?;
        // SAFETY: the event is live and of the stream's context; the producer keeps its
        // stream alive while the object it exported from is, which the caller holds.
        check("cuEventRecord", unsafe { sys::cuEventRecord(event.event as sys::CUevent, stream) })
    }

    fn wait(&self, at: Located<usize>, event: &DriverEvent) -> std::result::Result<(), DriverError> {
        let stream = raw_stream(at.stream)?;
        let _scope = Scope::enter(Some(at.context))?;
        // SAFETY: as in `record`; an event of another context may be waited on.
        check("cuStreamWaitEvent", unsafe {
            sys::cuStreamWaitEvent(
                stream,
                event.event as sys::CUevent,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT as u32,
            )
        })
    }

    fn synchronize(&self, at: Located<usize>) -> std::result::Result<(), DriverError> {
        let stream = raw_stream(at.stream)?;
        let _scope = Scope::enter(Some(at.context))?;
        // SAFETY: as in `record`.
        check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(stream) })
    }

    fn wait_host(&self, event: &DriverEvent) -> std::result::Result<(), DriverError> {
        let _scope = Scope::enter(Some(event.context))?;
        // SAFETY: the event is live.
        check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(event.event as sys::CUevent) })
    }
}

/// The process's event pool for the driver backend (one free list per context).
pub fn event_pool() -> &'static EventPool<DriverBackend> {
    static POOL: OnceLock<EventPool<DriverBackend>> = OnceLock::new();
    POOL.get_or_init(EventPool::new)
}

/// What the driver says of a pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointerInfo {
    /// The device the memory belongs to (for host memory, the device it is mapped for).
    pub device: i32,
    /// Where the memory lives.
    pub memory: MemoryType,
    /// The address range the driver knows the pointer in (`CU_POINTER_ATTRIBUTE_RANGE_*`):
    /// the allocation for `cuMemAlloc`, pools and pinned memory; the whole reserved range
    /// for memory mapped through the virtual memory API, of which only parts may be
    /// mapped ([`unmapped`] walks those parts).
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

/// The device, memory type and address range of `ptr`, in one driver call
/// (`cuPointerGetAttributes`). Memory the driver does not know (unregistered host memory,
/// a stale pointer) is `Ok(None)`.
pub fn pointer_info(ptr: usize) -> std::result::Result<Option<PointerInfo>, DriverError> {
    use sys::CUpointer_attribute::*;
    let mut scope = Scope::enter(None)?;
    let mut kind: u32 = 0;
    let mut managed: u32 = 0;
    let mut device: i32 = -1;
    let mut start: sys::CUdeviceptr = 0;
    let mut size: usize = 0;
    let mut attributes = [
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    ];
    let mut data: [*mut c_void; 5] = [
        std::ptr::addr_of_mut!(kind).cast(),
        std::ptr::addr_of_mut!(managed).cast(),
        std::ptr::addr_of_mut!(device).cast(),
        std::ptr::addr_of_mut!(start).cast(),
        std::ptr::addr_of_mut!(size).cast(),
    ];
    // SAFETY: each data pointer addresses a value of the type its attribute writes
    // (unsigned int, unsigned int, int, CUdeviceptr, size_t); unknown pointers leave
    // them at their defaults and return success.
    let mut query = || unsafe {
        sys::cuPointerGetAttributes(
            attributes.len() as u32,
            attributes.as_mut_ptr(),
            data.as_mut_ptr(),
            ptr as sys::CUdeviceptr,
        )
    };
    let mut code = query();
    if code == sys::CUresult::CUDA_ERROR_INVALID_CONTEXT {
        // The attributes asked for need no context, but some drivers want one current all
        // the same: ask again in device 0's primary context (retained only then, while
        // the relaxed capture mode still holds).
        let context = primary_context(0)?;
        drop(scope);
        scope = Scope::enter(Some(context))?;
        code = query();
    }
    check("cuPointerGetAttributes", code)?;
    drop(scope);
    let memory = match (managed != 0, kind) {
        (_, 0) => return Ok(None),
        (true, _) => MemoryType::Managed,
        (false, k) if k == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32 => MemoryType::Host,
        _ => MemoryType::Device,
    };
    let start = start as usize;
    let allocation = (start != 0 && size != 0).then(|| start..start.saturating_add(size));
    Ok(Some(PointerInfo { device, memory, allocation }))
}

/// At most this many mapped segments are walked; past them the reserved range stands.
const MAX_SEGMENTS: usize = 4096;

/// The first part of `bytes` that no mapped allocation covers, walking the physical
/// segments `cuMemGetAddressRange` reports one after the other (memory mapped through
/// the virtual memory API, such as PyTorch's expandable segments, is one segment per
/// mapping); `None` when every byte is mapped. `known` is an address in `bytes` that
/// [`pointer_info`] knows (the array's pointer), and `device` the memory's device.
///
/// Memory the driver knows but reports no segment for at `known` (as may be so of some
/// pools) cannot be walked: nothing is refused there.
pub fn unmapped(
    bytes: Range<usize>,
    known: usize,
    device: i32,
) -> std::result::Result<Option<Range<usize>>, DriverError> {
    let context = primary_context(device)?;
    let _scope = Scope::enter(Some(context))?;
    // The segment that holds `at`, if the driver reports one.
    let segment = |at: usize| -> Option<Range<usize>> {
        let (mut base, mut size): (sys::CUdeviceptr, usize) = (0, 0);
        // SAFETY: both out-pointers are valid; the driver validates the address.
        let code = unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, at as sys::CUdeviceptr) };
        let base = base as usize;
        (code == sys::CUresult::CUDA_SUCCESS && size != 0 && base <= at).then(|| base..base.saturating_add(size))
    };
    if segment(known).is_none() {
        return Ok(None);
    }
    let mut at = bytes.start;
    for _ in 0..MAX_SEGMENTS {
        if at >= bytes.end {
            return Ok(None);
        }
        match segment(at) {
            Some(piece) => at = piece.end,
            None => return Ok(Some(at..bytes.end)),
        }
    }
    Ok(None)
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
            check("cuStreamGetCtx", unsafe { sys::cuStreamGetCtx(h.get() as sys::CUstream, &mut ctx) })?;
            ctx as usize
        }
        Stream::LegacyDefault | Stream::PerThreadDefault => {
            match result::ctx::get_current().map_err(|e| call_error("cuCtxGetCurrent", e))? {
                Some(ctx) => ctx as usize,
                None => return Ok(None),
            }
        }
    };
    context_device(context).map(Some)
}

/// The device of a context.
pub fn context_device(context: usize) -> std::result::Result<i32, DriverError> {
    let _scope = Scope::enter(Some(context))?;
    let mut device: sys::CUdevice = 0;
    // SAFETY: the out-pointer is valid and the context is current.
    check("cuCtxGetDevice", unsafe { sys::cuCtxGetDevice(&mut device) })?;
    Ok(device)
}

/// A producer's pending work on cudarc streams, for a `#[cai(stream)]` field: the stream
/// to export (kept alive as long as the container) and an event per other stream that has
/// used the buffer (two for a stream that also captured work into a graph). Record work with [`record`](TrackedStream::record) after enqueuing it;
/// on export, the export stream waits on every other stream's event (version 3's rule for
/// producers with work on several streams). Streams of several threads' per-thread
/// default streams are kept apart.
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
        let backend = DriverBackend::of_context(export.context())?;
        Ok(TrackedStream { export, work: PendingWork::new(backend) })
    }

    /// Notes that work touching the buffer was enqueued on `stream` (a stream of the
    /// export stream's context).
    pub fn record(&self, stream: &CudaStream) -> std::result::Result<(), DriverError> {
        if stream.context().cu_ctx() != self.export.context().cu_ctx() {
            return Err(DriverError::Invalid(
                "TrackedStream::record: the stream belongs to another context than the export stream".into(),
            ));
        }
        self.work.record(stream_of(stream).map_err(|e| DriverError::Invalid(e.to_string()))?)
    }

    /// The stream the container is exported with.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.export
    }
}

#[allow(unknown_or_malformed_diagnostic_attributes)] // do_not_recommend: Rust 1.85
#[diagnostic::do_not_recommend]
impl AsStream for TrackedStream {
    fn as_stream(&self) -> Result<Stream> {
        let target = stream_of(&self.export)?;
        self.work.export_on(target).map_err(Error::Driver)
    }
}

/// Device memory allocated by cai (`cuMemAlloc` in a device's primary context), freed on
/// drop from any thread: the memory of a DLPack export made with `copy=True`.
#[derive(Debug)]
pub struct DeviceCopy {
    ptr: usize,
    len: usize,
    context: usize,
}

impl DeviceCopy {
    /// A copy of the `len` bytes at `src` on `device`, made on the legacy default stream of
    /// the device's primary context after the work queued so far on it (and so on every
    /// blocking stream); the host waits until the copy is complete.
    pub fn of(src: usize, len: usize, device: i32) -> std::result::Result<DeviceCopy, DriverError> {
        let context = primary_context(device)?;
        let _scope = Scope::enter(Some(context))?;
        legacy_usable(context)?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: a valid out-pointer; the context is current.
        check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut ptr, len.max(1)) })?;
        let copy = DeviceCopy { ptr: ptr as usize, len, context };
        // SAFETY: both ranges are `len` bytes of device memory: the caller's array (checked
        // against its allocation) and the allocation just made.
        check("cuMemcpyDtoD", unsafe { sys::cuMemcpyDtoD_v2(ptr, src as sys::CUdeviceptr, len) })?;
        // A copy from device to device memory may return before it is done: the host waits
        // for it, so that work on any stream (a non-blocking one too, which does not wait
        // for the legacy stream) finds the copy complete.
        // SAFETY: the legacy default stream of the current context.
        check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(1 as sys::CUstream) })?;
        Ok(copy)
    }

    /// The device address of the copy.
    pub fn address(&self) -> usize {
        self.ptr
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for DeviceCopy {
    fn drop(&mut self) {
        if let Ok(_scope) = Scope::enter(Some(self.context)) {
            // SAFETY: the allocation was made by `cuMemAlloc` and is freed once.
            let _ = unsafe { sys::cuMemFree_v2(self.ptr as sys::CUdeviceptr) };
        }
    }
}

/// Copies `dst.len()` bytes of device (or managed) memory at `src` into `dst`, after the
/// work queued so far on the legacy default stream of `device`'s primary context (and so
/// on every blocking stream) has finished.
pub fn copy_to_host(src: usize, dst: &mut [u8], device: i32) -> std::result::Result<(), DriverError> {
    let context = primary_context(device)?;
    let _scope = Scope::enter(Some(context))?;
    legacy_usable(context)?;
    // SAFETY: `dst` is writable for its length; `src` addresses as many bytes of device
    // memory (the caller checked the array against its allocation).
    check("cuMemcpyDtoH", unsafe { sys::cuMemcpyDtoH_v2(dst.as_mut_ptr().cast(), src as sys::CUdeviceptr, dst.len()) })
}
