//! Values made once (per process, or per object) by code that can run Python.
//!
//! pyo3's `PyOnceLock::get_or_init` (and `PyOnceLock::import`, built on it) holds the
//! cell while the value is made. Making it can run any Python code: an import runs
//! import hooks, and any allocation can start a collection whose finalizers run. Code
//! that asks the same cell on the same thread meanwhile waits for itself forever, and an
//! error raised meanwhile had to be swallowed or cached. Here the value is made with no
//! cell held, and the first value stored wins; an error is returned and nothing is kept,
//! so the next call tries again.

use pyo3::exceptions::{PyModuleNotFoundError, PySystemError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// The value of `cell`, made by `make` when there is none yet (see the module's text).
#[inline]
pub(crate) fn get_or_make<'a, T>(
    cell: &'a PyOnceLock<T>,
    py: Python<'_>,
    make: impl FnOnce() -> PyResult<T>,
) -> PyResult<&'a T> {
    match cell.get(py) {
        Some(value) => Ok(value),
        None => {
            // Making it may run Python code (an import hook) that calls cai again, which
            // looks for the value again.
            let made = {
                let _nesting = crate::parse::Nesting::enter("a value cai looks up once")?;
                make()?
            };
            keep(cell, py, made)
        }
    }
}

/// Stores `value` in `cell` unless a value is there already (a call that ran while this
/// one made its value), and returns the stored one. A value not stored is dropped here,
/// with no cell held.
#[cold]
pub(crate) fn keep<'a, T>(cell: &'a PyOnceLock<T>, py: Python<'_>, value: T) -> PyResult<&'a T> {
    // `set` returns once the cell is full, with this value or the one stored first.
    let _ = cell.set(py, value);
    cell.get(py).ok_or_else(|| PySystemError::new_err("cai: a value made once was not kept"))
}

/// What the installed `cai` package offers a module built on cai-py.
pub(crate) enum Package<'py> {
    /// `cai._cai.<name>`.
    Found(Bound<'py, PyAny>),
    /// The package is not installed (`ModuleNotFoundError`), or lacks the attribute (an
    /// older package): lasting, so the caller keeps its own fallback for good.
    Missing,
    /// Not now: the package's module is being executed (an import hook or a finalizer
    /// called in mid-import) and has no such attribute yet, or importing or reading it
    /// raised an exception other than its absence (an import hook's, a module
    /// `__getattr__`'s). The fallback serves this call only, and the next call looks again.
    NotNow,
}

/// Looks `cai._cai.<name>` up. Importing runs Python code; an exception that must
/// propagate does, and any other is [`Package::NotNow`] unless it says that the package
/// is not installed.
///
/// The package is imported, and its extension module read as its attribute: importing
/// `cai._cai` by name takes the submodule's import lock before the package's, the
/// reverse of an `import cai` running on another thread, and importlib breaks such a
/// cycle by failing one of the two imports (`_DeadlockError`). Importing the package
/// alone waits for that other import to finish.
pub(crate) fn package_attr<'py>(py: Python<'py>, name: &str) -> PyResult<Package<'py>> {
    // The import, and the lookups on what it finds, run Python code (an import hook, a
    // module's `__getattr__`) that may call cai again, which looks the value up again.
    let _nesting = crate::parse::Nesting::enter("a value cai looks up once")?;
    let package = match py.import("cai") {
        Ok(package) => package,
        Err(e) if crate::parse::must_propagate(py, &e) => return Err(e),
        Err(e) if e.is_instance_of::<PyModuleNotFoundError>(py) => return Ok(Package::Missing),
        Err(_) => return Ok(Package::NotNow),
    };
    let found = package.getattr_opt("_cai").and_then(|module| match module {
        Some(module) => module.getattr_opt(name),
        None => Ok(None),
    });
    match found {
        Ok(Some(value)) => return Ok(Package::Found(value)),
        Err(e) if crate::parse::must_propagate(py, &e) => return Err(e),
        Err(_) => return Ok(Package::NotNow),
        Ok(None) => {}
    }
    // importlib sets `__spec__._initializing` while it executes a module: while the
    // package's `__init__` runs (and the extension module it imports), what it will
    // hold may not be there yet.
    let initializing = package
        .getattr_opt("__spec__")
        .and_then(|spec| match spec {
            Some(spec) if !spec.is_none() => spec.getattr_opt("_initializing"),
            _ => Ok(None),
        })
        .and_then(|flag| flag.map_or(Ok(false), |f| f.is_truthy()));
    match initializing {
        Ok(true) => Ok(Package::NotNow),
        Err(e) if crate::parse::must_propagate(py, &e) => Err(e),
        Err(_) => Ok(Package::NotNow),
        Ok(false) => Ok(Package::Missing),
    }
}
