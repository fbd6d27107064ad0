//! The functions of the Python package `cai`.

use cai_core::sync::SyncPolicy;
use cai_core::Stream;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString};

use crate::config::{self, Config};
use crate::error::{received, received_int, Problem};
use crate::parse::{self, int_like, must_propagate, no_interface, IntLike, Interface, Parsed, Source};
use crate::sync::{consume, Caller, ImportOptions};
use crate::view::Core;

/// The consumer's stream: `None` (the legacy default stream), an int, or a stream object
/// (`__cuda_stream__`, or `.cuda_stream` as in PyTorch, or `.ptr` as in CuPy), whose null
/// handle is the legacy default stream. An array is not a stream, whatever its attributes.
/// Where `no_sync` allows it, the int -1 (DLPack's "no synchronization") gives `None`.
fn consumer_stream(stream: Option<&Bound<'_, PyAny>>, no_sync: bool) -> PyResult<Option<Stream>> {
    let Some(obj) = stream.filter(|s| !s.is_none()) else { return Ok(Some(Stream::LegacyDefault)) };
    let py = obj.py();
    // The stream object's code (`__index__`, `__cuda_stream__`, properties) may call cai
    // again, with a stream object again.
    let _nesting = parse::Nesting::enter("stream")?;
    let not_a_stream = |failure: Option<PyErr>| -> PyErr {
        match crate::error::received_not_int(obj, failure) {
            Ok(r) => Problem::type_error(format!(
                "stream: expected None, an int or a stream object (with __cuda_stream__, .cuda_stream or .ptr), \
                 received {r}"
            ))
            .into(),
            Err(e) => e,
        }
    };
    // The stream object's own code runs below (`__index__`, properties): an exception
    // that must propagate does; any other is reported with what the object gave.
    let not_handle = |value: &Bound<'_, PyAny>, source: &str, why: &str| -> PyErr {
        match (received(value), source) {
            (Ok(r), "") => Problem::value_error(format!("stream: {r} is not a stream handle")).into(),
            (Ok(r), _) => {
                Problem::value_error(format!("stream: {source} gave {r}, which is not a stream handle{why}")).into()
            }
            (Err(e), _) => e,
        }
    };
    // A value of the wrong type where a handle (or the protocol's pair) was expected.
    let wrong_handle = |value: &Bound<'_, PyAny>, source: &str, expected: &str, why: &str| -> PyErr {
        match received(value) {
            Ok(r) => Problem::type_error(format!("stream: {source} gave {r}, expected {expected}{why}")).into(),
            Err(e) => e,
        }
    };
    const AN_INT: &str = "an int handle";
    let from_int = |raw: i64| -> PyResult<Option<Stream>> {
        if raw == -1 && no_sync {
            return Ok(None);
        }
        if raw == 0 {
            // The consumer's stream: None is the legacy default stream here, not "no
            // synchronization" as in an interface dict.
            let skip = if no_sync { "-1 for no synchronization" } else { "or sync=False to skip synchronization" };
            return Err(Problem::value_error(format!(
                "stream: 0 is disallowed (ambiguous between the legacy and the per-thread default stream); pass \
                 None or 1 for the legacy default stream, 2 for the per-thread default stream, {skip}"
            ))
            .into());
        }
        let raw = usize::try_from(raw).map_err(|_| Problem::value_error(format!("stream: {raw} is not a stream")))?;
        Stream::from_raw(Some(raw)).map(Some).map_err(|e| Problem::from(e).into())
    };
    if obj.is_instance_of::<PyBool>() {
        return Err(not_a_stream(None));
    }
    if obj.is_instance_of::<pyo3::types::PyInt>() {
        return match int_like::<i64>(obj)? {
            IntLike::Value(raw) => from_int(raw),
            IntLike::OutOfRange(_) | IntLike::NotInt(_) => Err(not_handle(obj, "", "")),
        };
    }
    // A handle that `value` gave through `source`: an int that is not a bool.
    let read_handle = |h: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, source: &str| -> PyResult<usize> {
        if h.is_instance_of::<PyBool>() {
            return Err(wrong_handle(value, source, AN_INT, " (a bool)"));
        }
        match int_like::<usize>(h)? {
            IntLike::Value(handle) => Ok(handle),
            // An int-like's text may not show the int its `__index__` gave.
            IntLike::OutOfRange(index) => {
                let shown = crate::shown::shown(h)?;
                match crate::error::index_not_shown(h, &shown, index.as_ref())? {
                    Some(n) if n.by_index => {
                        Err(not_handle(value, source, &format!(" (the handle's __index__ gave {})", n.int)))
                    }
                    Some(n) => Err(not_handle(value, source, &format!(" (the handle's value is {})", n.int))),
                    None => Err(not_handle(value, source, "")),
                }
            }
            IntLike::NotInt(None) => Err(wrong_handle(value, source, AN_INT, "")),
            IntLike::NotInt(Some(e)) => {
                let why = format!(" (the handle's __index__ failed with {})", parse::exception_text(py, e)?);
                Err(wrong_handle(value, source, AN_INT, &why))
            }
        }
    };
    let handle = if let Some(method) = obj.getattr_opt(pyo3::intern!(py, "__cuda_stream__"))? {
        if !method.is_callable() {
            let r = received(&method)?;
            return Err(Problem::type_error(format!("stream: __cuda_stream__ is not a method, received {r}")).into());
        }
        let pair = method.call0()?;
        let source = "__cuda_stream__()";
        const PAIR: &str = "a (version: 0, handle: int) tuple";
        let (version, h) = pair.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>().map_err(|e| {
            if must_propagate(py, &e) {
                return e;
            }
            wrong_handle(&pair, source, PAIR, "")
        })?;
        // The protocol's answer is (0, handle): version 0 is the only one defined. An
        // int-like version is read as a handle is (its `__index__`), a bool never.
        match int_like::<i64>(&version)? {
            IntLike::Value(0) if !version.is_instance_of::<PyBool>() => {}
            IntLike::NotInt(_) => return Err(wrong_handle(&pair, source, PAIR, " (its version is not an int)")),
            _ => return Err(not_handle(&pair, source, " (its version is not 0, the protocol's one version)")),
        }
        read_handle(&h, &pair, source)?
    } else if let Some(h) = obj.getattr_opt(pyo3::intern!(py, "cuda_stream"))? {
        read_handle(&h, &h, ".cuda_stream")?
    } else if let Some(h) = obj.getattr_opt(pyo3::intern!(py, "ptr"))? {
        // A cai view's `.ptr` is its data pointer, not a stream.
        for key in ["__cuda_array_interface__", "__array_interface__", "__dlpack__"] {
            if obj.get_type().getattr_opt(key)?.is_some() {
                return Err(not_a_stream(None));
            }
        }
        read_handle(&h, &h, ".ptr")?
    } else {
        // An int-like object (NumPy's integers): its `__index__`.
        return match int_like::<i64>(obj)? {
            IntLike::Value(raw) => from_int(raw),
            // An index, but one no stream handle has.
            IntLike::OutOfRange(index) => match received_int(obj, index.as_ref()) {
                Ok(r) => Err(Problem::value_error(format!("stream: {r} is not a stream handle")).into()),
                Err(e) => Err(e),
            },
            IntLike::NotInt(failure) => Err(not_a_stream(failure)),
        };
    };
    match handle {
        0 => Ok(Some(Stream::LegacyDefault)),
        h => Stream::from_raw(Some(h)).map(Some).map_err(|e| Problem::from(e).into()),
    }
}

/// Warns that nothing will be checked when `check_pointers=True` was asked for where no
/// CUDA driver can be used (none, or one whose `cuInit` fails): the checks are skipped
/// there. (`cai.configure(check_pointers=True)` stays silent: restoring saved options is
/// common.)
fn warn_unchecked(py: Python<'_>, check_pointers: Option<bool>) -> PyResult<()> {
    if check_pointers != Some(true) {
        return Ok(());
    }
    let Some(reason) = crate::sync::unchecked_reason() else { return Ok(()) };
    // The driver's text holds no NUL; any would be dropped (a C string cannot hold one).
    let message = format!("check_pointers=True: {reason}, so pointers are not checked").replace('\0', "");
    let message = std::ffi::CString::new(message).unwrap_or_default();
    let category = py.get_type::<pyo3::exceptions::PyRuntimeWarning>();
    // A warnings hook may import again, with `check_pointers=True` again.
    let _nesting = parse::Nesting::enter("a warning's hook")?;
    PyErr::warn(py, &category, &message, 1)
}

/// The options of one import, from its arguments and the process-wide settings.
// Inlined, an import that passes no option (the common call) costs two loads here; the
// arguments are read out of line.
#[inline(always)]
fn import_options(py: Python<'_>, given: Options<'_, '_>) -> PyResult<ImportOptions> {
    if given.is_empty() {
        let (policy, check_pointers) = config::import_defaults(py)?;
        let consumer = Some(Stream::LegacyDefault);
        return Ok(ImportOptions {
            policy,
            consumer,
            check_pointers,
            allow_other_device: false,
            caller: Caller::Function,
        });
    }
    given_options(py, given)
}

/// The keyword options of an import, as received (None, or absent, is the default).
#[derive(Clone, Copy)]
struct Options<'a, 'py> {
    sync: Option<&'a Bound<'py, PyAny>>,
    stream: Option<&'a Bound<'py, PyAny>>,
    policy: Option<&'a Bound<'py, PyAny>>,
    check_pointers: Option<&'a Bound<'py, PyAny>>,
    allow_other_device: Option<&'a Bound<'py, PyAny>>,
}

impl Options<'_, '_> {
    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.sync.is_none()
            && self.stream.is_none()
            && self.policy.is_none()
            && self.check_pointers.is_none()
            && self.allow_other_device.is_none()
    }
}

/// [`import_options`] where some option is given.
#[inline(never)]
fn given_options(py: Python<'_>, given: Options<'_, '_>) -> PyResult<ImportOptions> {
    let Options { sync, stream, policy, check_pointers, allow_other_device } = given;
    let sync = bool_argument("sync", sync)?.unwrap_or(true);
    let check_pointers = bool_argument("check_pointers", check_pointers)?;
    let allow_other_device = bool_argument("allow_other_device", allow_other_device)?.unwrap_or(false);
    warn_unchecked(py, check_pointers)?;
    // `sync=False` is `policy='ignore'`: another policy given with it contradicts it. Options
    // the call gives are not read (a malformed variable for one of them does not matter).
    let given_policy = policy;
    let policy = match (sync, policy_argument("policy", policy)?) {
        (false, Some(p)) if p != SyncPolicy::Ignore => {
            let shown = given_policy.map(crate::shown::shown).transpose()?.unwrap_or_default();
            // An alias ('sync' for 'synchronize', say) is followed by the policy it names.
            let name = format!("'{}'", p.name());
            let named = if shown == name { String::new() } else { format!(" ({name})") };
            return Err(Problem::value_error(format!(
                "policy: {shown}{named} contradicts sync=False, which is policy='ignore'; give one of the two"
            ))
            .into());
        }
        (false, _) => SyncPolicy::Ignore,
        (true, Some(p)) => p,
        (true, None) => config::import_sync(py)?,
    };
    let check_pointers = config::check_pointers(py, check_pointers)?;
    Ok(ImportOptions {
        policy,
        consumer: consumer_stream(stream, false)?,
        check_pointers,
        allow_other_device,
        caller: Caller::Function,
    })
}

#[inline(always)]
fn cuda_view<'py>(
    py: Python<'py>,
    owner: Py<PyAny>,
    interface: Bound<'py, PyAny>,
    parsed: Parsed,
    options: &ImportOptions,
) -> PyResult<Bound<'py, PyAny>> {
    consume(py, &parsed, options)?;
    Core::from_parsed(owner, Some(interface.unbind()), parsed).into_view(py, Interface::Cuda)
}

/// Reads `obj.__cuda_array_interface__` once, validates it by the version it declares,
/// checks the pointer with the driver, orders the caller's work after the producer's, and
/// returns a `cai.CudaArray` view that keeps `obj` alive.
///
/// - `stream`: the stream the caller will use (None: the legacy default stream; an int;
///   or a CuPy / PyTorch / cuda.core stream object).
/// - `policy`: `'wait'` (the caller's stream waits on an event recorded on the producer's
///   stream; the host does not block), `'synchronize'` (the host waits) or `'ignore'`;
///   default from `CAI_IMPORT_SYNC`, else `'wait'`. `sync=False` is `'ignore'` (another
///   policy given with it is a `ValueError`).
/// - `check_pointers`: refuse a pointer the driver does not know, an extent that leaves its
///   allocation, and (unless `allow_other_device`) memory of another device than the
///   stream's; default from `CAI_CHECK_POINTERS`, else on. Skipped without a driver.
#[pyfunction]
#[pyo3(
    signature = (obj, *, sync = None, stream = None, policy = None, check_pointers = None, allow_other_device = None),
    text_signature = "(obj, *, sync=True, stream=None, policy=None, check_pointers=None, allow_other_device=False)"
)]
pub fn as_cuda_array<'py>(
    obj: &Bound<'py, PyAny>,
    sync: Option<&Bound<'py, PyAny>>,
    stream: Option<&Bound<'py, PyAny>>,
    policy: Option<&Bound<'py, PyAny>>,
    check_pointers: Option<&Bound<'py, PyAny>>,
    allow_other_device: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let given = Options { sync, stream, policy, check_pointers, allow_other_device };
    let options = import_options(obj.py(), given)?;
    let value = parse::read_attribute(obj, Interface::Cuda)?;
    let parsed = parse::parse(&value, Interface::Cuda, Source::Attribute)?;
    cuda_view(obj.py(), obj.clone().unbind(), value, parsed, &options)
}

/// The same as `as_cuda_array`, from an interface dict (or another mapping, read through a
/// copy; a producer's attribute must be a dict); the view keeps `owner` alive. Without an
/// `owner`, nothing keeps the memory alive: it must outlive the view.
#[pyfunction]
#[pyo3(
    signature = (desc, owner = None, *, sync = None, stream = None, policy = None, check_pointers = None, allow_other_device = None),
    text_signature = "(desc, owner=None, *, sync=True, stream=None, policy=None, check_pointers=None, allow_other_device=False)"
)]
#[allow(clippy::too_many_arguments)]
pub fn from_cuda_array_interface<'py>(
    desc: &Bound<'py, PyAny>,
    owner: Option<Bound<'py, PyAny>>,
    sync: Option<&Bound<'py, PyAny>>,
    stream: Option<&Bound<'py, PyAny>>,
    policy: Option<&Bound<'py, PyAny>>,
    check_pointers: Option<&Bound<'py, PyAny>>,
    allow_other_device: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = desc.py();
    let options = import_options(py, Options { sync, stream, policy, check_pointers, allow_other_device })?;
    let parsed = parse::parse(desc, Interface::Cuda, Source::Argument)?;
    let owner = owner.map_or_else(|| py.None(), Bound::unbind);
    cuda_view(py, owner, desc.clone(), parsed, &options)
}

/// Reads `obj` through DLPack (`obj.__dlpack__()`) and returns a `cai.CudaArray` for CUDA
/// memory or a `cai.HostArray` for host memory, which keeps the producer's tensor alive
/// and runs its deleter once, when the last view goes.
///
/// - `stream`: the stream the caller will use, for CUDA memory (None: the legacy default
///   stream; an int; a CuPy / PyTorch / cuda.core stream; -1: no synchronization). The
///   producer makes it wait for its pending work, and the view reports it as its stream.
/// - `copy`: passed to the producer (True: a copy; False: never a copy; None: either).
///
/// Pointer checks apply as for `as_cuda_array` (`check_pointers`, `CAI_CHECK_POINTERS`).
#[pyfunction]
#[pyo3(signature = (obj, *, stream = None, copy = None, check_pointers = None))]
pub fn from_dlpack<'py>(
    obj: &Bound<'py, PyAny>,
    stream: Option<&Bound<'py, PyAny>>,
    copy: Option<&Bound<'py, PyAny>>,
    check_pointers: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    // As `__dlpack__(copy=...)` reads it: None (either) is a value of its own.
    let copy = flag_argument("copy", copy, "None, True or False")?;
    let check_pointers = bool_argument("check_pointers", check_pointers)?;
    let consumer = consumer_stream(stream, true)?;
    warn_unchecked(py, check_pointers)?;
    let imported = crate::dlpack::import(obj, consumer, copy)?;
    match imported.memory {
        crate::dlpack::Memory::Device => {
            let check_pointers = config::check_pointers(py, check_pointers)?;
            // The producer ordered its work before our stream: only the pointer is checked.
            let options = ImportOptions {
                policy: SyncPolicy::Ignore,
                consumer: None,
                check_pointers,
                allow_other_device: true,
                caller: Caller::Function,
            };
            consume(py, &imported.parsed, &options)?;
            Core::from_parsed(imported.owner, None, imported.parsed).into_view(py, Interface::Cuda)
        }
        crate::dlpack::Memory::Host => {
            Core::from_parsed(imported.owner, None, imported.parsed).into_view(py, Interface::Host)
        }
    }
}

/// Reads `obj.__array_interface__` (NumPy's, host memory) and returns a `cai.HostArray`
/// view that keeps `obj` alive.
#[pyfunction]
pub fn as_array<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let value = parse::read_attribute(obj, Interface::Host)?;
    let parsed = parse::parse(&value, Interface::Host, Source::Attribute)?;
    Core::from_parsed(obj.clone().unbind(), Some(value.unbind()), parsed).into_view(obj.py(), Interface::Host)
}

/// Checks a producer against the version of the interface it declares and returns every
/// problem found, one message per problem (an empty list when it conforms).
///
/// `obj` is an object exporting an interface, or an interface dict (a dict, or another
/// mapping, that exports neither interface, read as a CUDA one unless `interface='host'`).
/// `interface`: `'cuda'` checks `__cuda_array_interface__`, `'host'` NumPy's
/// `__array_interface__`, and None (the default) the CUDA one when `obj` has it, else the
/// host one; findings about the host interface start with `__array_interface__: `, so a
/// list always says which was checked. An exception raised by the attribute itself is a
/// finding, except an `AttributeError` (no interface) and the exceptions that are not an
/// `Exception` or are a `MemoryError` or `RecursionError`, which propagate. Raises
/// `TypeError` when `obj` exports no interface that was asked for and is no mapping, or
/// when `interface` is not a str; `ValueError` for a str other than those.
#[pyfunction]
#[pyo3(signature = (obj, *, interface = None))]
pub fn validate<'py>(obj: &Bound<'py, PyAny>, interface: Option<&Bound<'py, PyAny>>) -> PyResult<Vec<String>> {
    let py = obj.py();
    let interface = text_argument("interface", interface, "'cuda', 'host' or None")?;
    let interface = interface.as_deref();
    let wanted: &[Interface] = match interface {
        None => &[Interface::Cuda, Interface::Host],
        Some("cuda") => &[Interface::Cuda],
        Some("host") => &[Interface::Host],
        Some(other) => {
            return Err(Problem::value_error(format!("interface: '{other}' is not 'cuda', 'host' or None")).into())
        }
    };
    // An object's interface first, as the imports read it: a dict subclass or another
    // mapping may export one.
    for &iface in wanted {
        match parse::attribute(obj, iface) {
            Ok(Some(value)) => return parse::findings(py, Ok(value), iface, Source::Attribute),
            Ok(None) => {}
            Err(e) if must_propagate(py, &e) => return Err(e),
            Err(e) => return parse::findings(py, Err(e), iface, Source::Attribute),
        }
    }
    // An interface dict itself: a dict, or another mapping (a `MappingProxyType`, say), as
    // `from_cuda_array_interface` reads it.
    if obj.is_instance_of::<PyDict>() || parse::is_mapping(obj)? {
        let iface = if interface == Some("host") { Interface::Host } else { Interface::Cuda };
        return parse::findings(py, Ok(obj.clone()), iface, Source::Argument);
    }
    match wanted {
        [only] => Err(no_interface(obj, *only)),
        _ => Err(Problem::type_error(format!(
            "objects of type '{}' export neither __cuda_array_interface__ nor __array_interface__ (DLPack \
             producers are read by cai.from_dlpack)",
            crate::error::type_name(obj)?
        ))
        .into()),
    }
}

fn config_dict<'py>(py: Python<'py>, c: &Config) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("import_sync", c.import_sync.name())?;
    d.set_item("check_pointers", c.check_pointers)?;
    d.set_item("export_stream", if c.export.stream_none == Some(true) { "none" } else { "report" })?;
    d.set_item("export_version", c.export.version.unwrap_or(3))?;
    Ok(d)
}

/// Changes the process-wide options and returns them all as a dict: one set, shared by
/// every extension module built on cai-py while the `cai` package can be imported. Options
/// left as None keep their value (initially from the environment: `CAI_IMPORT_SYNC`,
/// `CAI_CHECK_POINTERS`, `CAI_EXPORT_STREAM`, `CAI_EXPORT_VERSION`).
///
/// - `import_sync`: `'wait'` (or `'1'`), `'synchronize'` (or `'sync'`) or `'ignore'` (or `'0'`).
/// - `check_pointers`: bool.
/// - `export_stream`: `'report'` or `'none'` (always export `stream: None`).
/// - `export_version`: 3, or 2 (no `stream` key).
#[pyfunction]
#[pyo3(signature = (*, import_sync = None, check_pointers = None, export_stream = None, export_version = None))]
pub fn configure<'py>(
    py: Python<'py>,
    import_sync: Option<&Bound<'py, PyAny>>,
    check_pointers: Option<&Bound<'py, PyAny>>,
    export_stream: Option<&Bound<'py, PyAny>>,
    export_version: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let import_sync = policy_argument("import_sync", import_sync)?;
    let check_pointers = bool_argument("check_pointers", check_pointers)?;
    let stream_none = text_argument("export_stream", export_stream, "'report' or 'none'")?
        .map(|v| config::parse_export_stream("export_stream", &v))
        .transpose()?;
    let version = match some_value(export_version) {
        None => None,
        Some(v) => {
            // An int-like value's `__index__` may call cai again.
            let _nesting = parse::Nesting::enter("export_version")?;
            let wrong_type = |failure| -> PyResult<PyErr> {
                let shown = crate::error::received_not_int(v, failure)?;
                Ok(Problem::type_error(format!("export_version: expected 2 or 3, received {shown}")).into())
            };
            match int_like::<i64>(v)? {
                IntLike::Value(2) => Some(2),
                IntLike::Value(3) => Some(3),
                IntLike::NotInt(failure) => return Err(wrong_type(failure)?),
                // An int-like's message says what its `__index__` gave as well.
                IntLike::Value(n) => {
                    let shown = received_int(v, Some(&n.into_pyobject(py)?))?;
                    return Err(Problem::value_error(format!("export_version: {shown} is not 2 or 3")).into());
                }
                IntLike::OutOfRange(index) => {
                    let shown = received_int(v, index.as_ref())?;
                    return Err(Problem::value_error(format!("export_version: {shown} is not 2 or 3")).into());
                }
            }
        }
    };
    let c = config::update(py, config::Overrides { import_sync, check_pointers, stream_none, version })?;
    config_dict(py, &c)
}

/// `value`, unless it is absent or `None`.
fn some_value<'a, 'py>(value: Option<&'a Bound<'py, PyAny>>) -> Option<&'a Bound<'py, PyAny>> {
    value.filter(|v| !v.is_none())
}

/// The text of an argument that takes a str (`None` when absent or None). Anything else,
/// and a str with no UTF-8 form (a lone surrogate), is an error that names the argument
/// and the value received.
fn text_argument(name: &str, value: Option<&Bound<'_, PyAny>>, expected: &str) -> PyResult<Option<String>> {
    let Some(v) = some_value(value) else { return Ok(None) };
    let wrong = || -> PyResult<String> { Ok(format!("{name}: expected {expected}, received {}", received(v)?)) };
    match v.cast::<PyString>() {
        Ok(s) => match s.to_cow() {
            Ok(text) => Ok(Some(text.into_owned())),
            Err(e) if must_propagate(v.py(), &e) => Err(e),
            Err(_) => Err(Problem::value_error(wrong()?).into()),
        },
        Err(_) => Err(Problem::type_error(wrong()?).into()),
    }
}

/// A flag given as the argument `name` (`None` when absent or None): True or False (a
/// NumPy bool too); anything else is a `TypeError` that names the argument and the value.
fn bool_argument(name: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<bool>> {
    flag_argument(name, value, "True or False")
}

/// [`bool_argument`], whose error says that `expected` is.
pub(crate) fn flag_argument(name: &str, value: Option<&Bound<'_, PyAny>>, expected: &str) -> PyResult<Option<bool>> {
    let Some(v) = some_value(value) else { return Ok(None) };
    match parse::flag_value(v)? {
        Some(b) => Ok(Some(b)),
        None => Err(Problem::type_error(format!("{name}: expected {expected}, received {}", received(v)?)).into()),
    }
}

/// A sync policy given as the argument `name` (`None` when absent or None).
fn policy_argument(name: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<SyncPolicy>> {
    let Some(text) = text_argument(name, value, "'wait', 'synchronize' or 'ignore'")? else { return Ok(None) };
    SyncPolicy::parse(&text).map(Some).map_err(|e| Problem::value_error(format!("{name}: {e}")).into())
}

/// Whether the CUDA driver library can be loaded on this machine.
#[pyfunction]
pub fn cuda_driver_present() -> bool {
    crate::sync::driver_present()
}

/// What the CUDA driver says of a pointer: `{'device': int, 'memory': 'device' | 'host' |
/// 'managed', 'allocation': (start, end) or None}`. `cai.CudaDriverError` without a driver;
/// `ValueError` for memory the driver does not know.
#[pyfunction]
pub fn pointer_attributes<'py>(ptr: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let py = ptr.py();
    // An int-like value's `__index__` may call cai again.
    let nesting = parse::Nesting::enter("ptr")?;
    let value = match int_like::<usize>(ptr)? {
        IntLike::Value(value) => value,
        IntLike::OutOfRange(index) => {
            return Err(Problem::value_error(format!(
                "ptr: {} is not an address (a non-negative int that fits in a pointer)",
                received_int(ptr, index.as_ref())?
            ))
            .into());
        }
        IntLike::NotInt(failure) => {
            let shown = crate::error::received_not_int(ptr, failure)?;
            return Err(Problem::type_error(format!("ptr: expected an int, received {shown}")).into());
        }
    };
    drop(nesting);
    pointer_attributes_impl(py, value)
}

#[cfg(feature = "driver")]
fn pointer_attributes_impl<'py>(py: Python<'py>, ptr: usize) -> PyResult<Bound<'py, PyDict>> {
    use cai_core::cuda;
    let driver =
        |e: cai_core::DriverError| crate::error::driver_error(py, format!("ptr: cannot query pointer 0x{ptr:x}: {e}"));
    cuda::driver_status().map_err(driver)?;
    let info = cuda::pointer_info(ptr).map_err(driver)?.ok_or_else(|| {
        Problem::value_error(format!(
            "ptr: 0x{ptr:x} is not memory the CUDA driver knows (neither device, managed nor pinned host memory)"
        ))
    })?;
    let d = PyDict::new(py);
    d.set_item("device", info.device)?;
    d.set_item("memory", info.memory.to_string())?;
    d.set_item("allocation", info.allocation.map(|r| (r.start, r.end)))?;
    Ok(d)
}

#[cfg(not(feature = "driver"))]
fn pointer_attributes_impl<'py>(py: Python<'py>, ptr: usize) -> PyResult<Bound<'py, PyDict>> {
    Err(crate::error::driver_error(
        py,
        format!("ptr: cannot query pointer 0x{ptr:x}: {}", cai_core::DriverError::Unsupported),
    ))
}
