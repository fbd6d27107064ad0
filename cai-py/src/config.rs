//! Process-wide options, read from the environment on first use and changed at run time
//! with `cai.configure(...)`.
//!
//! | variable | values | default |
//! |---|---|---|
//! | `CAI_IMPORT_SYNC` | `wait` (1), `synchronize`, `ignore` (0) | `wait` |
//! | `CAI_CHECK_POINTERS` | 1, 0: check the device and the allocation of imported pointers | 1 |
//! | `CAI_EXPORT_STREAM` | `report`, `none` (always export `stream: None`) | `report` |
//! | `CAI_EXPORT_VERSION` | 3, 2 (no `stream` key, as CuPy's `..._EXPORT_VERSION=2`) | 3 |
//!
//! A malformed value is a `ValueError` naming the variable, raised by the first call that
//! needs it. Every extension module built on cai-py shares one set of options: the Python
//! package `cai` publishes its own as a capsule (`cai._cai._config_v1`), and the others use
//! it when `cai` can be imported (their own copy otherwise), so `cai.configure` also
//! governs the extractors and exports of other modules.

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use cai_core::sync::SyncPolicy;
use cai_core::{Descriptor, Stream};

use crate::error::Problem;
use crate::once::Package;

/// How a `#[pyclass]` exports its interface; `None` fields follow the process-wide
/// settings. Pass a field of this type to `#[cai_py::export(options = field)]` for
/// per-object control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExportOptions {
    /// `Some(true)`: always export `stream: None` (the producer's opt-out: the user orders
    /// the work). `Some(false)`: report the stream.
    pub stream_none: Option<bool>,
    /// `Some(2)`: export version 2, without a stream. `Some(3)`: the derived version. Any
    /// other version makes the export raise `ValueError`.
    pub version: Option<u32>,
}

impl ExportOptions {
    /// These options, with `None` fields taken from `defaults`.
    pub fn or(self, defaults: ExportOptions) -> ExportOptions {
        ExportOptions {
            stream_none: self.stream_none.or(defaults.stream_none),
            version: self.version.or(defaults.version),
        }
    }

    /// These options, or the `ValueError` of a version other than 2 or 3 (which the
    /// fields, being public, can hold; `cai.configure` and the environment refuse it).
    pub(crate) fn checked(self) -> PyResult<ExportOptions> {
        match self.version {
            None | Some(2 | 3) => Ok(self),
            Some(v) => {
                Err(Problem::value_error(format!("export_version: {v} is not 2 or 3 (the object's ExportOptions)"))
                    .into())
            }
        }
    }

    /// Applies the options to a descriptor about to be exported.
    pub fn apply(self, descriptor: &mut Descriptor) {
        if self.version == Some(2) && descriptor.version > 2 {
            descriptor.version = 2;
            descriptor.stream = Stream::None;
        }
        self.apply_to_dlpack(descriptor);
    }

    /// Applies the options that concern a DLPack export: the stream opt-out only. The
    /// version is the interface's; DLPack's handshake orders the consumer's stream
    /// whatever version the interface exports.
    pub(crate) fn apply_to_dlpack(self, descriptor: &mut Descriptor) {
        if self.stream_none == Some(true) {
            descriptor.stream = Stream::None;
        }
    }
}

/// Every process-wide option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Config {
    pub(crate) import_sync: SyncPolicy,
    pub(crate) check_pointers: bool,
    pub(crate) export: ExportOptions,
}

/// The options as plain atomics, `#[repr(C)]`, so that modules compiled separately can
/// share one instance through a capsule.
#[repr(C)]
struct Shared {
    layout: AtomicU32,
    ready: AtomicU8,
    import_sync: AtomicU8,
    check_pointers: AtomicU8,
    export_stream: AtomicU8,
    export_version: AtomicU8,
}

const LAYOUT: u32 = 1;
const CAPSULE: &CStr = c"cai._cai._config_v1";

static OWN: Shared = Shared {
    layout: AtomicU32::new(LAYOUT),
    ready: AtomicU8::new(0),
    import_sync: AtomicU8::new(0),
    check_pointers: AtomicU8::new(1),
    export_stream: AtomicU8::new(0),
    export_version: AtomicU8::new(0),
};

/// Publishes this module's options as the shared ones (called by the `cai` package).
pub(crate) fn publish(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let pointer = NonNull::from(&OWN).cast::<c_void>();
    // SAFETY: `OWN` is a static, valid for the life of the process; no destructor.
    let capsule = unsafe { PyCapsule::new_with_pointer(module.py(), pointer, CAPSULE) }?;
    module.add("_config_v1", capsule)
}

/// The options every module shares: the `cai` package's when it can be imported.
#[inline(always)]
fn shared(py: Python<'_>) -> PyResult<&'static Shared> {
    static CHOSEN: OnceLock<usize> = OnceLock::new();
    let address = match CHOSEN.get() {
        Some(&address) => address,
        // Looked up with the cell free (see `choose`); the first address stored wins.
        None => match choose(py)? {
            (address, true) => *CHOSEN.get_or_init(|| address),
            (address, false) => address,
        },
    };
    // SAFETY: `address` is `OWN` or a static `Shared` of the same layout in the `cai`
    // package, which stays loaded for the life of the process.
    Ok(unsafe { &*(address as *const Shared) })
}

/// The address of the shared options, the `cai` package's or else `OWN`, and whether the
/// choice lasts (not while the package's module is still being executed). The import
/// runs Python code (import hooks, finalizers), which may configure cai itself or wait
/// for a thread that does; an exception that must propagate does, and nothing is chosen.
/// (`PyCapsule_Import` would turn a `KeyboardInterrupt` into an `ImportError`.)
#[cold]
fn choose(py: Python<'_>) -> PyResult<(usize, bool)> {
    let own = std::ptr::addr_of!(OWN) as usize;
    let capsule = match crate::once::package_attr(py, "_config_v1")? {
        Package::Found(capsule) => capsule,
        Package::Missing => return Ok((own, true)),
        Package::Importing => return Ok((own, false)),
    };
    let pointer = capsule.cast_into::<PyCapsule>().map_err(PyErr::from).and_then(|c| c.pointer_checked(Some(CAPSULE)));
    match pointer {
        Ok(p) => {
            // SAFETY: the capsule of this name points at a static `Shared` of some cai-py
            // build; its first field, the layout number, is read before anything else.
            let layout = unsafe { p.cast::<AtomicU32>().as_ref() }.load(Ordering::Acquire);
            Ok((if layout == LAYOUT { p.as_ptr() as usize } else { own }, true))
        }
        Err(e) if crate::parse::must_propagate(py, &e) => Err(e),
        Err(_) => Ok((own, true)),
    }
}

fn policy_code(p: SyncPolicy) -> u8 {
    match p {
        SyncPolicy::Wait => 0,
        SyncPolicy::Synchronize => 1,
        SyncPolicy::Ignore => 2,
    }
}

fn store(s: &Shared, c: &Config) {
    s.import_sync.store(policy_code(c.import_sync), Ordering::Release);
    s.check_pointers.store(u8::from(c.check_pointers), Ordering::Release);
    s.export_stream.store(c.export.stream_none.map_or(0, |none| if none { 2 } else { 1 }), Ordering::Release);
    s.export_version.store(c.export.version.map_or(0, |v| v as u8), Ordering::Release);
    s.ready.store(1, Ordering::Release);
}

fn load(s: &Shared) -> Config {
    let import_sync = policy_of(s.import_sync.load(Ordering::Acquire));
    let stream_none = match s.export_stream.load(Ordering::Acquire) {
        1 => Some(false),
        2 => Some(true),
        _ => None,
    };
    let version = match s.export_version.load(Ordering::Acquire) {
        0 => None,
        v => Some(u32::from(v)),
    };
    Config {
        import_sync,
        check_pointers: s.check_pointers.load(Ordering::Acquire) != 0,
        export: ExportOptions { stream_none, version },
    }
}

fn env(name: &str) -> Result<Option<String>, Problem> {
    match std::env::var(name) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(e) => Err(Problem::value_error(format!("{name}: {e}"))),
    }
}

pub(crate) fn parse_flag(name: &str, value: &str) -> Result<bool, Problem> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(Problem::value_error(format!("{name}: {} is not 1 or 0", cai_core::quoted(value)))),
    }
}

pub(crate) fn parse_export_stream(name: &str, value: &str) -> Result<bool, Problem> {
    match value.trim().to_ascii_lowercase().as_str() {
        "report" => Ok(false),
        "none" => Ok(true),
        _ => Err(Problem::value_error(format!("{name}: {} is not 'report' or 'none'", cai_core::quoted(value)))),
    }
}

pub(crate) fn parse_export_version(name: &str, value: &str) -> Result<u32, Problem> {
    match value.trim() {
        "2" => Ok(2),
        "3" => Ok(3),
        _ => Err(Problem::value_error(format!("{name}: {} is not 2 or 3", cai_core::quoted(value)))),
    }
}

/// The options a `cai.configure` call sets; the environment is not read for them, so a
/// malformed variable can be overridden in-process.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Overrides {
    pub(crate) import_sync: Option<SyncPolicy>,
    pub(crate) check_pointers: Option<bool>,
    pub(crate) stream_none: Option<bool>,
    pub(crate) version: Option<u32>,
}

impl Overrides {
    fn apply(self, c: &mut Config) {
        if let Some(v) = self.import_sync {
            c.import_sync = v;
        }
        if let Some(v) = self.check_pointers {
            c.check_pointers = v;
        }
        if let Some(v) = self.stream_none {
            c.export.stream_none = Some(v);
        }
        if let Some(v) = self.version {
            c.export.version = Some(v);
        }
    }
}

/// The options from the environment, except those `overrides` sets.
fn from_env(overrides: Overrides) -> Result<Config, Problem> {
    let import_sync = match (overrides.import_sync, env(SyncPolicy::ENV)?) {
        (Some(v), _) => v,
        (None, Some(v)) => {
            SyncPolicy::parse(&v).map_err(|e| Problem::value_error(format!("{}: {e}", SyncPolicy::ENV)))?
        }
        (None, None) => SyncPolicy::Wait,
    };
    let check_pointers = match (overrides.check_pointers, env("CAI_CHECK_POINTERS")?) {
        (Some(v), _) => v,
        (None, Some(v)) => parse_flag("CAI_CHECK_POINTERS", &v)?,
        (None, None) => true,
    };
    let stream_none = match overrides.stream_none {
        Some(v) => Some(v),
        None => env("CAI_EXPORT_STREAM")?.map(|v| parse_export_stream("CAI_EXPORT_STREAM", &v)).transpose()?,
    };
    let version = match overrides.version {
        Some(v) => Some(v),
        None => env("CAI_EXPORT_VERSION")?.map(|v| parse_export_version("CAI_EXPORT_VERSION", &v)).transpose()?,
    };
    Ok(Config { import_sync, check_pointers, export: ExportOptions { stream_none, version } })
}

/// The two options every import reads when none is given: the sync policy and whether
/// pointers are checked (the first read of [`get`], as cheap as two loads after it).
#[inline(always)]
pub(crate) fn import_defaults(py: Python<'_>) -> PyResult<(SyncPolicy, bool)> {
    let s = loaded(py)?;
    Ok((policy_of(s.import_sync.load(Ordering::Acquire)), s.check_pointers.load(Ordering::Acquire) != 0))
}

fn policy_of(code: u8) -> SyncPolicy {
    match code {
        1 => SyncPolicy::Synchronize,
        2 => SyncPolicy::Ignore,
        _ => SyncPolicy::Wait,
    }
}

/// The current options (read from the environment the first time).
pub(crate) fn get(py: Python<'_>) -> PyResult<Config> {
    Ok(load(loaded(py)?))
}

/// The shared options, read from the environment first if nothing has set them yet.
#[inline(always)]
fn loaded(py: Python<'_>) -> PyResult<&'static Shared> {
    let s = shared(py)?;
    if s.ready.load(Ordering::Acquire) == 0 {
        store(s, &from_env(Overrides::default())?);
    }
    Ok(s)
}

/// Changes the options `overrides` sets and returns them all. Before the first read, the
/// others come from the environment, which is not read for those set here.
pub(crate) fn update(py: Python<'_>, overrides: Overrides) -> PyResult<Config> {
    let s = shared(py)?;
    let c = if s.ready.load(Ordering::Acquire) == 0 {
        from_env(overrides)?
    } else {
        let mut c = load(s);
        overrides.apply(&mut c);
        c
    };
    store(s, &c);
    Ok(c)
}
