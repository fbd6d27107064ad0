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
//! Each variable is read at the first use of its option, and its value kept. A malformed
//! value is kept nowhere: it is a `ValueError` naming the variable, raised by each call
//! that needs that option (which reads the variable again) until `cai.configure` sets the
//! option, and by no other call: a malformed `CAI_EXPORT_VERSION` stops no import, a
//! malformed `CAI_IMPORT_SYNC` no export.
//!
//! Every extension module built on cai-py shares one set of options: the Python package
//! `cai` publishes its own as a capsule (`cai._cai._config_v1`), and the others use it when
//! `cai` can be imported (their own copy otherwise), so `cai.configure` also governs the
//! extractors and exports of other modules.

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
        if let Some(version) = self.version {
            descriptor.lower_version(version);
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
/// share one instance through a capsule. Each holds [`UNREAD`] until its first use reads
/// its variable or `cai.configure` sets it.
#[repr(C)]
struct Shared {
    layout: AtomicU32,
    import_sync: AtomicU8,
    check_pointers: AtomicU8,
    export_stream: AtomicU8,
    export_version: AtomicU8,
}

/// Version 2: each option read from the environment on its own (version 1 read all four
/// at once, behind a `ready` flag).
const LAYOUT: u32 = 2;
const CAPSULE: &CStr = c"cai._cai._config_v1";

/// The code of an option whose variable has not been read yet.
const UNREAD: u8 = u8::MAX;

static OWN: Shared = Shared {
    layout: AtomicU32::new(LAYOUT),
    import_sync: AtomicU8::new(UNREAD),
    check_pointers: AtomicU8::new(UNREAD),
    export_stream: AtomicU8::new(UNREAD),
    export_version: AtomicU8::new(UNREAD),
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
/// choice lasts (not while the package's module is still being executed, nor after an
/// import that failed for a reason other than the package's absence). The import
/// runs Python code (import hooks, finalizers), which may configure cai itself or wait
/// for a thread that does; an exception that must propagate does, and nothing is chosen.
/// (`PyCapsule_Import` would turn a `KeyboardInterrupt` into an `ImportError`.)
#[cold]
fn choose(py: Python<'_>) -> PyResult<(usize, bool)> {
    let own = std::ptr::addr_of!(OWN) as usize;
    let capsule = match crate::once::package_attr(py, "_config_v1")? {
        Package::Found(capsule) => capsule,
        Package::Missing => return Ok((own, true)),
        Package::NotNow => return Ok((own, false)),
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

/// One option: where it is kept, its `cai.configure` keyword, its variable, how the
/// variable's text reads as the code kept, and the code when the variable is absent.
struct Setting {
    field: fn(&Shared) -> &AtomicU8,
    option: &'static str,
    env: &'static str,
    parse: fn(&str) -> Result<u8, Problem>,
    absent: u8,
}

const IMPORT_SYNC: Setting = Setting {
    field: |s| &s.import_sync,
    option: "import_sync",
    env: SyncPolicy::ENV,
    parse: |v| {
        SyncPolicy::parse(v).map(policy_code).map_err(|e| Problem::value_error(format!("{}: {e}", SyncPolicy::ENV)))
    },
    absent: policy_code(SyncPolicy::Wait),
};

const CHECK_POINTERS: Setting = Setting {
    field: |s| &s.check_pointers,
    option: "check_pointers",
    env: "CAI_CHECK_POINTERS",
    parse: |v| parse_flag("CAI_CHECK_POINTERS", v).map(u8::from),
    absent: 1,
};

/// Codes: 0 the variable absent (the stream is reported), 1 `report`, 2 `none`.
const EXPORT_STREAM: Setting = Setting {
    field: |s| &s.export_stream,
    option: "export_stream",
    env: "CAI_EXPORT_STREAM",
    parse: |v| parse_export_stream("CAI_EXPORT_STREAM", v).map(stream_code),
    absent: 0,
};

/// Codes: 0 the variable absent (the derived version), else the version.
const EXPORT_VERSION: Setting = Setting {
    field: |s| &s.export_version,
    option: "export_version",
    env: "CAI_EXPORT_VERSION",
    parse: |v| parse_export_version("CAI_EXPORT_VERSION", v).map(|v| v as u8),
    absent: 0,
};

/// Every option, in the order of [`update`]'s arrays.
const SETTINGS: [&Setting; 4] = [&IMPORT_SYNC, &CHECK_POINTERS, &EXPORT_STREAM, &EXPORT_VERSION];

impl Setting {
    /// The option's code, its variable read at its first use. A malformed variable is
    /// raised by each use, until `cai.configure` sets the option: a use of another
    /// option does not read it.
    #[inline(always)]
    fn code(&self, s: &Shared) -> Result<u8, Problem> {
        match (self.field)(s).load(Ordering::Acquire) {
            UNREAD => self.read(s),
            code => Ok(code),
        }
    }

    #[cold]
    #[inline(never)]
    fn read(&self, s: &Shared) -> Result<u8, Problem> {
        let parsed = env(self.env).and_then(|v| v.map_or(Ok(self.absent), |v| (self.parse)(&v)));
        let code = match parsed {
            Ok(code) => code,
            // Set meanwhile by `cai.configure` on another thread: that value counts.
            Err(e) => match (self.field)(s).load(Ordering::Acquire) {
                UNREAD => return Err(e),
                code => return Ok(code),
            },
        };
        // A value set meanwhile (by `cai.configure` on another thread) is kept.
        match (self.field)(s).compare_exchange(UNREAD, code, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Ok(code),
            Err(current) => Ok(current),
        }
    }
}

const fn policy_code(p: SyncPolicy) -> u8 {
    match p {
        SyncPolicy::Wait => 0,
        SyncPolicy::Synchronize => 1,
        SyncPolicy::Ignore => 2,
    }
}

fn policy_of(code: u8) -> SyncPolicy {
    match code {
        1 => SyncPolicy::Synchronize,
        2 => SyncPolicy::Ignore,
        _ => SyncPolicy::Wait,
    }
}

fn stream_code(none: bool) -> u8 {
    if none {
        2
    } else {
        1
    }
}

/// `ExportOptions::stream_none` of an `EXPORT_STREAM` code.
fn stream_none_of(code: u8) -> Option<bool> {
    match code {
        1 => Some(false),
        2 => Some(true),
        _ => None,
    }
}

/// `ExportOptions::version` of an `EXPORT_VERSION` code.
fn version_of(code: u8) -> Option<u32> {
    (code != 0).then_some(u32::from(code))
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
        _ => Err(Problem::value_error(format!(
            "{name}: {} is not a flag (expected 1, true, yes or on; or 0, false, no or off)",
            cai_core::quoted(value)
        ))),
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

/// The two options every import reads when none is given: the sync policy and whether
/// pointers are checked (two loads once read).
#[inline(always)]
pub(crate) fn import_defaults(py: Python<'_>) -> PyResult<(SyncPolicy, bool)> {
    let s = shared(py)?;
    Ok((policy_of(IMPORT_SYNC.code(s)?), CHECK_POINTERS.code(s)? != 0))
}

/// The sync policy of imports that give none.
pub(crate) fn import_sync(py: Python<'_>) -> PyResult<SyncPolicy> {
    Ok(policy_of(IMPORT_SYNC.code(shared(py)?)?))
}

/// Whether pointers are checked: `given` by the call, else the process-wide option (read
/// only then).
pub(crate) fn check_pointers(py: Python<'_>, given: Option<bool>) -> PyResult<bool> {
    match given {
        Some(check) => Ok(check),
        None => Ok(CHECK_POINTERS.code(shared(py)?)? != 0),
    }
}

/// The process-wide export options, which an object's own options override. Finding them
/// may import the `cai` package (running Python code); completing options with them runs
/// none.
pub(crate) fn export_defaults(py: Python<'_>) -> PyResult<ExportDefaults> {
    Ok(ExportDefaults(shared(py)?))
}

/// The process-wide export options (see [`export_defaults`]).
pub(crate) struct ExportDefaults(&'static Shared);

impl ExportDefaults {
    /// `own`, with the options it leaves `None` taken from the process-wide ones, whose
    /// variables are read for those only (an object that sets both reads neither).
    pub(crate) fn complete(&self, own: ExportOptions) -> PyResult<ExportOptions> {
        let s = self.0;
        let stream_none = match own.stream_none {
            Some(none) => Some(none),
            None => stream_none_of(EXPORT_STREAM.code(s)?),
        };
        let version = match own.version {
            Some(v) => Some(v),
            None => version_of(EXPORT_VERSION.code(s)?),
        };
        Ok(ExportOptions { stream_none, version })
    }
}

/// Changes the options `overrides` sets and returns them all. The others keep their
/// value, read from the environment if no use has read it yet; a malformed variable not
/// overridden is raised, and then nothing is changed.
pub(crate) fn update(py: Python<'_>, overrides: Overrides) -> PyResult<Config> {
    let s = shared(py)?;
    let given = [
        overrides.import_sync.map(policy_code),
        overrides.check_pointers.map(u8::from),
        overrides.stream_none.map(stream_code),
        overrides.version.map(|v| v as u8),
    ];
    let mut codes = [0; 4];
    for ((setting, given), code) in SETTINGS.iter().zip(given).zip(&mut codes) {
        *code = match given {
            Some(c) => c,
            // The call fails, and changes nothing: it says how to make it pass.
            None => setting.code(s).map_err(|e| {
                Problem::value_error(format!("{}; pass {}= to cai.configure to set it", e.message, setting.option))
            })?,
        };
    }
    for (setting, given) in SETTINGS.iter().zip(given) {
        if let Some(c) = given {
            (setting.field)(s).store(c, Ordering::Release);
        }
    }
    let [sync, check, stream, version] = codes;
    let export = ExportOptions { stream_none: stream_none_of(stream), version: version_of(version) };
    Ok(Config { import_sync: policy_of(sync), check_pointers: check != 0, export })
}
