//! Values made once (per process, or per object) by code that can run Python.
//!
//! pyo3's `PyOnceLock::get_or_init` (and `intern!` and `PyOnceLock::import`, built on it)
//! holds the cell while the value is made. Making it can run any Python code: an import
//! runs import hooks, and any allocation can start a collection whose finalizers run. Code
//! that asks the same cell on the same thread meanwhile waits for itself forever, and an
//! error raised meanwhile had to be swallowed or cached. Here the value is made with no
//! cell held, and the first value stored wins; an error is returned and nothing is kept,
//! so the next call tries again.

use pyo3::exceptions::PySystemError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;

/// The value of `cell`, made by `make` when there is none yet (see the module's text).
#[inline]
pub(crate) fn get_or_make<'a, T>(
    cell: &'a PyOnceLock<T>,
    py: Python<'_>,
    make: impl FnOnce() -> PyResult<T>,
) -> PyResult<&'a T> {
    match cell.get(py) {
        Some(value) => Ok(value),
        None => keep(cell, py, make()?),
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

/// `text` as an interned Python string, made once per process and call site: pyo3's
/// `intern!`, without its hold on the cell (see the module's text).
macro_rules! interned {
    ($py:expr, $text:expr) => {{
        static CELL: pyo3::sync::PyOnceLock<pyo3::Py<pyo3::types::PyString>> = pyo3::sync::PyOnceLock::new();
        $crate::once::string(&CELL, $py, $text)
    }};
}
pub(crate) use interned;

/// The string of `cell`, `text` interned (for [`interned!`]).
#[inline]
pub(crate) fn string<'a, 'py>(
    cell: &'a PyOnceLock<Py<PyString>>,
    py: Python<'py>,
    text: &str,
) -> PyResult<&'a Bound<'py, PyString>> {
    get_or_make(cell, py, || Ok(PyString::intern(py, text).unbind())).map(|s| s.bind(py))
}
