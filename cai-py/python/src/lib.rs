//! The extension module `cai._cai`; the Python package `cai` re-exports it.

use pyo3::prelude::*;

#[pymodule]
fn _cai(module: &Bound<'_, PyModule>) -> PyResult<()> {
    cai_py::register(module)
}
