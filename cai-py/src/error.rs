//! How failures become Python exceptions.
//!
//! | failure | exception |
//! |---|---|
//! | not a mapping, a missing key, a value of the wrong type, no interface at all | `TypeError` |
//! | a value of the right type that is not acceptable (stream 0, a malformed typestr, ...) | `ValueError` |
//! | writing through a read-only array, overlapping read-write extractions | `BufferError` |
//! | a stream that cannot be synchronized (no CUDA driver, a driver error) | `cai.CudaDriverError`, a `RuntimeError` |
//!
//! Every message starts with the key or attribute concerned and quotes the value received.

use cai_core::ErrorKind;
use pyo3::exceptions::{PyBufferError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyInt, PyString, PyType};

use crate::once::Package;

pyo3::create_exception!(
    cai,
    CudaDriverError,
    PyRuntimeError,
    "The CUDA driver is missing or failed where cai needs it: synchronizing on an imported stream, telling \
     the device of a pointer (checked imports, a device array's DLPack export, pointer_attributes) or copying \
     device memory."
);

/// A `cai.CudaDriverError` carrying `message`.
///
/// Every extension module built on cai-py raises the same class: the one of the installed
/// Python package `cai` when it can be imported, so that `except cai.CudaDriverError`
/// catches errors from any module; this module's own class otherwise.
pub fn driver_error(py: Python<'_>, message: impl Into<String>) -> PyErr {
    // The class is made here, not when the error is raised: a class put in the package's
    // place may run code as it is made (which may call cai again), and made by CPython as
    // it normalizes the error, a recursion there is a fatal error, not a `RecursionError`.
    let made = driver_error_class(py).and_then(|class| {
        let _nesting = crate::parse::Nesting::enter_message("the class of cai's driver errors")?;
        class.call1((message.into(),))
    });
    match made {
        Ok(value) => PyErr::from_value(value),
        // A `KeyboardInterrupt` (say) raised while the class was looked up or made.
        Err(e) => e,
    }
}

/// Whether `e` is a `cai.CudaDriverError`: of [`driver_error`]'s class (which another
/// module built on cai-py raises too) or of this module's own. Looking the class up may
/// import the package, whose exception, if any, is the error.
pub(crate) fn is_driver_error(py: Python<'_>, e: &PyErr) -> PyResult<bool> {
    // Every driver error is a RuntimeError: any other exception (a KeyboardInterrupt, say)
    // is not one, and neither it nor a RecursionError may be replaced by what looking the
    // class up raises.
    if !e.is_instance_of::<PyRuntimeError>(py) || crate::parse::must_propagate(py, e) {
        return Ok(false);
    }
    Ok(e.is_instance_of::<CudaDriverError>(py) || e.is_instance(py, driver_error_class(py)?.as_any()))
}

/// [`driver_error_class`]'s class, once looked up.
static DRIVER_ERROR_CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The class [`driver_error`] raises, looked up once. The import runs Python code (import
/// hooks), which may raise an exception that must propagate: that is returned, and the
/// lookup is tried again at the next error.
fn driver_error_class(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    if let Some(class) = DRIVER_ERROR_CLASS.get(py) {
        return Ok(class.bind(py).clone());
    }
    let own = || py.get_type::<CudaDriverError>().unbind();
    let shared = match crate::once::package_attr(py, "CudaDriverError")? {
        Package::Found(found) => {
            let class = found
                .cast_into::<PyType>()
                .map_err(PyErr::from)
                .and_then(|class| Ok(class.is_subclass_of::<PyRuntimeError>()?.then_some(class)));
            match class {
                Ok(class) => class.map(Bound::unbind),
                Err(e) if crate::parse::must_propagate(py, &e) => return Err(e),
                // A check that raised (a metaclass's): this module's class, this time.
                Err(_) => return Ok(own().into_bound(py)),
            }
        }
        Package::Missing => None,
        // The package's module is still being executed, or could not be read for now:
        // this module's class, this time.
        Package::NotNow => return Ok(own().into_bound(py)),
    };
    // `own` may build the class (pyo3 makes it once), which runs no Python code.
    let class = crate::once::keep(&DRIVER_ERROR_CLASS, py, shared.unwrap_or_else(own))?;
    Ok(class.bind(py).clone())
}

/// One problem with an interface dict: its class and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) kind: ProblemKind,
    pub(crate) message: String,
}

/// Which Python exception a [`Problem`] becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProblemKind {
    Type,
    Value,
    Buffer,
    Driver,
}

impl Problem {
    pub(crate) fn type_error(message: impl Into<String>) -> Problem {
        Problem { kind: ProblemKind::Type, message: message.into() }
    }

    pub(crate) fn value_error(message: impl Into<String>) -> Problem {
        Problem { kind: ProblemKind::Value, message: message.into() }
    }

    pub(crate) fn buffer_error(message: impl Into<String>) -> Problem {
        Problem { kind: ProblemKind::Buffer, message: message.into() }
    }
}

impl From<cai_core::Error> for Problem {
    fn from(e: cai_core::Error) -> Problem {
        let kind = match e.kind() {
            ErrorKind::Type => ProblemKind::Type,
            ErrorKind::Driver => ProblemKind::Driver,
            _ => ProblemKind::Value,
        };
        Problem { kind, message: e.to_string() }
    }
}

impl From<Problem> for PyErr {
    fn from(p: Problem) -> PyErr {
        match p.kind {
            ProblemKind::Type => PyTypeError::new_err(p.message),
            ProblemKind::Value => PyValueError::new_err(p.message),
            ProblemKind::Buffer => PyBufferError::new_err(p.message),
            ProblemKind::Driver => Python::attach(|py| driver_error(py, p.message)),
        }
    }
}

/// A `cai.CudaDriverError` with the text of `e` (a cudarc `DriverError`, cai-core's, ...),
/// for `.map_err(cai_py::driver_err)` where no `Python` token is at hand.
pub fn driver_err(e: impl std::fmt::Display) -> PyErr {
    Python::attach(|py| driver_error(py, e.to_string()))
}

/// A cai-core error as the Python exception its kind calls for.
pub fn to_py_err(e: cai_core::Error) -> PyErr {
    Problem::from(e).into()
}

/// How a value prints in a message: its `repr` ([bounded](crate::shown::shown)) and its type, as in
/// `'f4' (str)` or `3.5 (float)`. The `repr` is the producer's code: an ordinary
/// exception from it gives a placeholder; one that must propagate (`KeyboardInterrupt`,
/// `MemoryError`, ...) is the error.
pub(crate) fn received(value: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(format!("{} ({})", crate::shown::shown(value)?, type_name(value)?))
}

/// [`received`] for a value read as an int that is not one, with how its `__index__`
/// failed where it has one that raised (`failure`, as [`IntLike::NotInt`] carries it).
///
/// [`IntLike::NotInt`]: crate::parse::IntLike::NotInt
pub(crate) fn received_not_int(value: &Bound<'_, PyAny>, failure: Option<PyErr>) -> PyResult<String> {
    let shown = received(value)?;
    match failure {
        None => Ok(shown),
        Some(e) => Ok(format!("{shown}, {}", crate::parse::index_failure(value.py(), e)?)),
    }
}

/// [`received`] for a value read as an int: an int-like object (one with `__index__`)
/// whose text does not show `index`, the int its `__index__` gave, is shown with it, as in
/// `<Size object at 0x7f..> (Size; its __index__ gave 1180591620717411303424)`.
pub(crate) fn received_int(value: &Bound<'_, PyAny>, index: Option<&Bound<'_, PyInt>>) -> PyResult<String> {
    let shown = crate::shown::shown(value)?;
    let note = index_not_shown(value, &shown, index)?;
    let name = type_name(value)?;
    Ok(match note {
        Some(NotShown { int, by_index: true }) => format!("{shown} ({name}; its __index__ gave {int})"),
        Some(NotShown { int, by_index: false }) => format!("{shown} ({name}; its value is {int})"),
        None => format!("{shown} ({name})"),
    })
}

/// The int of a value read as an int, where the value's text does not show it.
pub(crate) struct NotShown {
    /// The int's text.
    pub(crate) int: String,
    /// Whether `__index__` gave it; else the value is an int subclass, and it is its value
    /// (read without its `__index__`, as Python reads an int subclass).
    pub(crate) by_index: bool,
}

/// `index`, the int that `value` reads as, unless `value` is an exact int or its text
/// `shown` shows that int already (as a whole number, not a part of a number, a hex
/// address or a name).
pub(crate) fn index_not_shown(
    value: &Bound<'_, PyAny>,
    shown: &str,
    index: Option<&Bound<'_, PyInt>>,
) -> PyResult<Option<NotShown>> {
    let Some(index) = index.filter(|_| !value.is_exact_instance_of::<PyInt>()) else { return Ok(None) };
    let gave = crate::shown::shown(index.as_any())?;
    let joined = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
    let whole = shown
        .match_indices(gave.as_str())
        .any(|(at, _)| !joined(shown[..at].chars().next_back()) && !joined(shown[at + gave.len()..].chars().next()));
    Ok((!whole).then(|| NotShown { int: gave, by_index: !value.is_instance_of::<PyInt>() }))
}

/// The `TypeError` of pickling or copying a view or tensor of class `name`, for every
/// protocol (protocols 0 and 1 would otherwise write a pickle that cannot be loaded).
pub(crate) fn not_picklable(name: &str) -> PyErr {
    PyTypeError::new_err(format!(
        "cannot pickle '{name}' object: it points at memory of this process; pickle the data instead (for example \
         numpy.asarray(view) of a host array, cupy.asarray(view) of a device one)"
    ))
}

/// The `TypeError` of `copy.copy` or `copy.deepcopy` of a view or tensor.
pub(crate) fn not_copyable(name: &str) -> PyErr {
    PyTypeError::new_err(format!(
        "cannot copy '{name}' object: it points at memory it does not own; copy the data instead (for example \
         numpy.array(view) of a host array, cupy.array(view) of a device one), or use the object itself, which \
         never changes"
    ))
}

/// The name of `obj`'s type, or `?` when it cannot be read.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    let _nesting = name_nesting(obj)?;
    // A class may name itself with a million characters: quoted by its start, as values are.
    Ok(cai_core::shortened(name_text(obj.py(), obj.get_type().name(), "?")?))
}

/// A level of nesting for reading the name of `obj`'s type where that runs Python code (a
/// metaclass of the producer's, which may call cai again); none for a class whose
/// metaclass is `type`, whose name is read without any.
fn name_nesting(obj: &Bound<'_, PyAny>) -> PyResult<Option<crate::parse::Nesting>> {
    class_name_nesting(&obj.get_type())
}

/// [`name_nesting`] for reading the name of the class `ty` itself.
fn class_name_nesting(ty: &Bound<'_, PyType>) -> PyResult<Option<crate::parse::Nesting>> {
    // SAFETY: reading the type of a live type object.
    let plain = unsafe { pyo3::ffi::Py_TYPE(ty.as_ptr()) == std::ptr::addr_of_mut!(pyo3::ffi::PyType_Type) };
    if plain {
        return Ok(None);
    }
    crate::parse::Nesting::enter_message("a type's name").map(Some)
}

/// The module-qualified name of `obj`'s type when it is a static type (a C type, such as
/// NumPy's `ndarray` and `bool`), `None` for a Python class, which may call itself by any
/// name. No Python code runs to read a static type's name.
pub(crate) fn static_type_name(obj: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    static_class_name(&obj.get_type())
}

/// [`static_type_name`] of the class `ty` itself.
pub(crate) fn static_class_name(ty: &Bound<'_, PyType>) -> PyResult<Option<String>> {
    // SAFETY: reading the flags of a live type object.
    let heap = unsafe { pyo3::ffi::PyType_GetFlags(ty.as_type_ptr()) } & pyo3::ffi::Py_TPFLAGS_HEAPTYPE != 0;
    if heap {
        return Ok(None);
    }
    qualified_class_name(ty).map(Some)
}

/// The module-qualified name of `obj`'s type (`numpy.ndarray`; builtins unqualified), with
/// `?` for a part that cannot be read. Built here, not by pyo3's `fully_qualified_name`,
/// which formats the module through `str()` (see [`name_text`]).
pub(crate) fn qualified_type_name(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    qualified_class_name(&obj.get_type())
}

/// [`qualified_type_name`] of the class `ty` itself.
fn qualified_class_name(ty: &Bound<'_, PyType>) -> PyResult<String> {
    let py = ty.py();
    let _nesting = class_name_nesting(ty)?;
    let module = ty.getattr(pyo3::intern!(py, "__module__")).and_then(|m| Ok(m.cast_into::<PyString>()?));
    let module = name_text(py, module, "?")?;
    let qualname = name_text(py, ty.qualname(), "?")?;
    Ok(if module == "builtins" { qualname } else { format!("{module}.{qualname}") })
}

/// A name pyo3 read, as text, or `fallback` when it could not be read. The text is copied
/// out of the str: formatting it through Python (`Display`) runs `str()`, where a signal
/// handler may raise `KeyboardInterrupt`, which pyo3 would report as unraisable and drop.
/// Exceptions that [must propagate](crate::parse::must_propagate) are returned.
pub(crate) fn name_text(py: Python<'_>, name: PyResult<Bound<'_, PyString>>, fallback: &str) -> PyResult<String> {
    match name {
        Ok(n) => Ok(n.to_string_lossy().into_owned()),
        Err(e) if crate::parse::must_propagate(py, &e) => Err(e),
        Err(_) => Ok(fallback.to_owned()),
    }
}

/// Integers as Python prints a tuple of them: `(3,)`, `(2, 3)`, `()`.
pub(crate) fn py_tuple<T: std::fmt::Display>(items: &[T]) -> String {
    cai_core::PyTuple(items).to_string()
}

/// Runs `f` with the exception that is set, if any, put aside, and sets it again after,
/// as CPython's finalizers do: `f` neither sees nor loses it. An exception `f` leaves set
/// is reported through `sys.unraisablehook` (see [`write_unraisable`]).
///
/// # Safety
///
/// The GIL is held.
pub(crate) unsafe fn with_exception_aside<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: as the caller promises; the three pointers PyErr_Fetch fills are restored,
    // references and all, by PyErr_Restore. (Not `PyErr::take`: a pending
    // `PanicException` would resume its panic there.)
    unsafe {
        let (mut kind, mut value, mut traceback) = (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
        // The stable ABI's pair from 3.10 on (pyo3 marks it deprecated for 3.12 builds,
        // which have a newer one besides).
        #[allow(deprecated)]
        pyo3::ffi::PyErr_Fetch(&mut kind, &mut value, &mut traceback);
        let result = f();
        if !pyo3::ffi::PyErr_Occurred().is_null() {
            write_unraisable();
        }
        #[allow(deprecated)]
        pyo3::ffi::PyErr_Restore(kind, value, traceback);
        result
    }
}

/// Reports the exception that is set through `sys.unraisablehook`, one nesting level
/// deeper (the levels of nested interface reads, [`crate::parse::Nesting`]). The hook is
/// Python code, which may call into cai again and cause another report: past
/// [`crate::parse::MAX_NESTING`] levels, or past [`crate::parse::MAX_NESTED_ENTRIES`]
/// levels entered deep inside the thread's outermost one, the exception is dropped and a
/// line on the process's standard error (file descriptor 2, written with no Python code
/// run) says so, once for each limit in the thread's outermost level, so that such a loop
/// ends before the C stack does, and soon.
///
/// # Safety
///
/// The GIL is held and an exception is set.
unsafe fn write_unraisable() {
    use crate::parse::{Nesting, Refused, MAX_NESTED_ENTRIES, MAX_NESTING};
    thread_local! {
        /// The outermost level in which each limit's line was written (depth, count).
        static TOLD: std::cell::Cell<[Option<u64>; 2]> = const { std::cell::Cell::new([None, None]) };
    }
    match Nesting::try_enter(MAX_NESTING) {
        // SAFETY: as the caller promises.
        Ok(_level) => unsafe { pyo3::ffi::PyErr_WriteUnraisable(std::ptr::null_mut()) },
        Err(refused) => {
            // SAFETY: as the caller promises.
            unsafe { pyo3::ffi::PyErr_Clear() };
            // One line for each limit within one outermost level: a hook that branches
            // would make thousands.
            let (kind, why) = match refused {
                Refused::TooDeep => (0, format!("{MAX_NESTING} levels of nested reads and reports deep on this thread")),
                Refused::TooMany => (
                    1,
                    format!("{MAX_NESTED_ENTRIES} levels of reads and reports entered deep inside this thread's outermost one"),
                ),
            };
            let window = Nesting::window();
            let mut told = TOLD.with(std::cell::Cell::get);
            if told[kind] == Some(window) {
                return;
            }
            told[kind] = Some(window);
            TOLD.with(|t| t.set(told));
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "Exception ignored: cai dropped an exception instead of reporting it through sys.unraisablehook, \
                 {why}, and drops any more so without a line until that level is left (a hook that causes the \
                 failures it reports?)"
            );
        }
    }
}

/// Reports the error `make` builds through `sys.unraisablehook`, as CPython reports an
/// exception raised in a `__del__`: for failures on paths that cannot raise (a drop). An
/// exception already set is put aside first (building the error may run Python code, an
/// import) and set again for its caller.
pub(crate) fn report_unraisable(py: Python<'_>, make: impl FnOnce() -> PyErr) {
    // SAFETY: `py` is the proof that the GIL is held.
    unsafe { with_exception_aside(|| make().restore(py)) }
}
