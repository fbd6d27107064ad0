//! The package's import functions as the module exposes them: a C function that reads the
//! common call, one positional argument and no keyword, itself and hands every other call
//! to pyo3's own function, which reads and checks the arguments (and words their errors).
//!
//! pyo3's argument reader is general: for `cai.as_cuda_array(obj)` it cost about 90 of
//! the call's 6,000 instructions, and one more function entered on every import.

use std::cell::UnsafeCell;
use std::ffi::{c_int, CStr, CString};
use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyString};
use pyo3::{ffi, intern, Borrowed};

/// The C signature of a METH_FASTCALL | METH_KEYWORDS function.
pub(crate) type Fastcall = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *const *mut ffi::PyObject,
    ffi::Py_ssize_t,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// `METH_FASTCALL`: in the limited API from Python 3.10 (cai's floor), honoured by
/// CPython since 3.7.
pub(crate) const METH_FASTCALL: c_int = 0x0080;

/// A definition CPython takes by pointer (a method's, a getter's), which it reads and
/// nothing writes, for the life of the process.
pub(crate) struct StaticDef<T>(UnsafeCell<T>);

// SAFETY: the definition is never written after it is made; CPython only reads it.
unsafe impl<T> Sync for StaticDef<T> {}

impl<T> StaticDef<T> {
    /// The definition, for CPython's functions that take one.
    pub(crate) fn as_ptr(&self) -> *mut T {
        self.0.get()
    }
}

/// A METH_FASTCALL | METH_KEYWORDS method definition.
pub(crate) type MethodDef = StaticDef<ffi::PyMethodDef>;

/// A read-only attribute's definition.
pub(crate) type GetterDef = StaticDef<ffi::PyGetSetDef>;

impl MethodDef {
    /// The definition of `method`, named `name`, whose docstring `doc` starts with its
    /// signature as CPython reads one (`name(...)\n--\n\n`).
    pub(crate) const fn fastcall(name: &'static CStr, doc: &'static CStr, method: Fastcall) -> MethodDef {
        // SAFETY: CPython calls `ml_meth` with the signature its flags name (C casts every
        // function to `PyCFunction` the same way); function pointers have one size.
        let method = unsafe { std::mem::transmute::<Fastcall, ffi::PyCFunction>(method) };
        StaticDef(UnsafeCell::new(ffi::PyMethodDef {
            ml_name: name.as_ptr(),
            ml_meth: ffi::PyMethodDefPointer { PyCFunction: method },
            ml_flags: METH_FASTCALL | ffi::METH_KEYWORDS,
            ml_doc: doc.as_ptr(),
        }))
    }
}

impl GetterDef {
    /// The definition of a read-only attribute `name`, read by `get`.
    pub(crate) const fn getter(name: &'static CStr, doc: &'static CStr, get: ffi::getter) -> GetterDef {
        StaticDef(UnsafeCell::new(ffi::PyGetSetDef {
            name: name.as_ptr(),
            get: Some(get),
            set: None,
            doc: doc.as_ptr(),
            closure: std::ptr::null_mut(),
        }))
    }
}

/// One function's two readers: the C function of pyo3's (set once, at registration) and
/// the method definition of the module's function.
struct Entry {
    full: OnceLock<Fastcall>,
    def: OnceLock<&'static MethodDef>,
}

static AS_CUDA_ARRAY: Entry = Entry { full: OnceLock::new(), def: OnceLock::new() };
static AS_ARRAY: Entry = Entry { full: OnceLock::new(), def: OnceLock::new() };
static FROM_CUDA_ARRAY_INTERFACE: Entry = Entry { full: OnceLock::new(), def: OnceLock::new() };

/// The common call read here; any other handed to pyo3's function.
///
/// # Safety
///
/// The arguments are those CPython passes to a METH_FASTCALL | METH_KEYWORDS function,
/// with the GIL held.
#[inline(always)]
unsafe fn dispatch(
    entry: &Entry,
    common: Fastcall,
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    if nargs == 1 && kwnames.is_null() {
        // SAFETY: as the caller promises.
        return unsafe { common(slf, args, nargs, kwnames) };
    }
    match entry.full.get() {
        // SAFETY: as the caller promises; pyo3's function reads any call and raises for a
        // wrong one.
        Some(full) => unsafe { full(slf, args, nargs, kwnames) },
        None => {
            // Set before the module's function exists: not reached.
            // SAFETY: the GIL is held; the message is a static C string.
            unsafe { ffi::PyErr_SetString(ffi::PyExc_SystemError, c"cai: an import function is not set up".as_ptr()) };
            std::ptr::null_mut()
        }
    }
}

/// The module's C function `$entry` for `$reader`: its common call, `$call(obj)`, read
/// through pyo3's trampoline (which holds the GIL count and catches panics); any other
/// call handed to pyo3's function.
macro_rules! entry {
    ($entry:ident, $common:ident, $reader:expr, $call:path) => {
        /// The common call, `f(obj)`.
        ///
        /// # Safety
        ///
        /// `args` holds one live object, borrowed for the call.
        unsafe fn $common(
            py: Python<'_>,
            _slf: *mut ffi::PyObject,
            args: *const *mut ffi::PyObject,
            _nargs: ffi::Py_ssize_t,
            _kwnames: *mut ffi::PyObject,
        ) -> PyResult<*mut ffi::PyObject> {
            // SAFETY: as the caller promises.
            let obj = unsafe { Borrowed::from_ptr(py, *args) };
            $call(&obj).map(Bound::into_ptr)
        }

        /// # Safety
        ///
        /// Called by CPython as a METH_FASTCALL | METH_KEYWORDS function.
        unsafe extern "C" fn $entry(
            slf: *mut ffi::PyObject,
            args: *const *mut ffi::PyObject,
            nargs: ffi::Py_ssize_t,
            kwnames: *mut ffi::PyObject,
        ) -> *mut ffi::PyObject {
            let common = pyo3::impl_::trampoline::get_trampoline_function!(fastcall_cfunction_with_keywords, $common);
            // SAFETY: as CPython promises.
            unsafe { dispatch(&$reader, common, slf, args, nargs, kwnames) }
        }
    };
}

/// `cai.as_cuda_array(obj)`, with every option at its default.
fn as_cuda_array_defaults<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    crate::api::as_cuda_array(obj, None, None, None, None, None)
}

/// `cai.from_cuda_array_interface(desc)`: no owner, every option at its default.
fn from_cuda_array_interface_defaults<'py>(desc: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    crate::api::from_cuda_array_interface(desc, None, None, None, None, None, None)
}

entry!(as_cuda_array_entry, as_cuda_array_common, AS_CUDA_ARRAY, as_cuda_array_defaults);
entry!(as_array_entry, as_array_common, AS_ARRAY, crate::api::as_array);
entry!(
    from_cuda_array_interface_entry,
    from_cuda_array_interface_common,
    FROM_CUDA_ARRAY_INTERFACE,
    from_cuda_array_interface_defaults
);

/// Adds `as_cuda_array`, `as_array` and `from_cuda_array_interface` to `module`, each
/// reading its common call itself.
pub(crate) fn add_import_functions(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let as_cuda_array = pyo3::wrap_pyfunction!(crate::api::as_cuda_array, module)?;
    add(module, &AS_CUDA_ARRAY, &as_cuda_array, as_cuda_array_entry)?;
    let as_array = pyo3::wrap_pyfunction!(crate::api::as_array, module)?;
    add(module, &AS_ARRAY, &as_array, as_array_entry)?;
    let from_interface = pyo3::wrap_pyfunction!(crate::api::from_cuda_array_interface, module)?;
    add(module, &FROM_CUDA_ARRAY_INTERFACE, &from_interface, from_cuda_array_interface_entry)
}

/// Adds to `module` a function named as pyo3's `full`, with its signature and docstring,
/// whose C function is `c_entry`.
fn add(
    module: &Bound<'_, PyModule>,
    entry: &'static Entry,
    full: &Bound<'_, PyCFunction>,
    c_entry: Fastcall,
) -> PyResult<()> {
    let py = module.py();
    // SAFETY: `full` is a live builtin function; these read its method definition.
    let (function, flags) =
        unsafe { (ffi::PyCFunction_GetFunction(full.as_ptr()), ffi::PyCFunction_GetFlags(full.as_ptr())) };
    let (Some(function), true) = (function, flags == METH_FASTCALL | ffi::METH_KEYWORDS) else {
        return Err(pyo3::exceptions::PyImportError::new_err(
            "cai: pyo3's function is not a METH_FASTCALL | METH_KEYWORDS function",
        ));
    };
    // SAFETY: CPython calls a function with the signature its flags name, checked above;
    // function pointers have one size.
    let _ = entry.full.set(unsafe { std::mem::transmute::<ffi::PyCFunction, Fastcall>(function) });
    let def = match entry.def.get() {
        Some(def) => *def,
        None => {
            let name: String = full.getattr(intern!(py, "__name__"))?.extract()?;
            let signature: String = full.getattr(intern!(py, "__text_signature__"))?.extract()?;
            let doc: String = full.getattr(intern!(py, "__doc__"))?.extract()?;
            // CPython takes `name(signature)\n--\n\n` at the start of the docstring as the
            // function's `__text_signature__`, as pyo3 writes it.
            let to_c = |text: String| -> PyResult<&'static CStr> {
                let c = CString::new(text).map_err(|e| pyo3::exceptions::PyImportError::new_err(e.to_string()))?;
                Ok(Box::leak(c.into_boxed_c_str()))
            };
            let ml_name = to_c(name.clone())?;
            let ml_doc = to_c(format!("{name}{signature}\n--\n\n{doc}"))?;
            let made: &'static MethodDef = Box::leak(Box::new(MethodDef::fastcall(ml_name, ml_doc, c_entry)));
            *entry.def.get_or_init(|| made)
        }
    };
    let module_name: Bound<'_, PyString> = module.name()?;
    // SAFETY: `def` lives for the process; `module` and its name are live. The new
    // reference, or null with an exception set, is taken by `from_owned_ptr_or_err`.
    let function = unsafe {
        Bound::from_owned_ptr_or_err(py, ffi::PyCFunction_NewEx(def.as_ptr(), module.as_ptr(), module_name.as_ptr()))
    }?;
    module.add(function.getattr(intern!(py, "__name__"))?.cast_into::<PyString>()?, function)
}
