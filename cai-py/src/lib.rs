//! Python bindings for cai: the CUDA Array Interface for `#[pyclass]` containers, the
//! views and functions of the Python package `cai`, and typed extractors for
//! `#[pyfunction]` arguments.
//!
//! # Exporting a container
//!
//! Derive the producer trait (cai-core's `derive` feature), then write
//! `#[cai_py::export]` above the class's `#[pymethods]` block. It adds the
//! `__cuda_array_interface__` property, `__dlpack__` and `__dlpack_device__` to the block
//! (`__array_interface__` with `export(host)`), so no `multiple-pymethods` feature is
//! needed (an empty `#[pymethods] impl Buffer {}` will do when the class has no methods):
//!
//! ```no_run
//! use cai_core::{CudaArrayInterface, RawDeviceBuffer};
//! use pyo3::prelude::*;
//!
//! #[pyclass]
//! #[derive(CudaArrayInterface)]
//! struct Buffer {
//!     #[cai(data)]
//!     values: RawDeviceBuffer<f32>,
//!     #[cai(shape)]
//!     shape: [usize; 2],
//! }
//!
//! #[cai_py::export]
//! #[pymethods]
//! impl Buffer {}
//! ```
//!
//! Arguments of `#[cai_py::export]`: `cuda` (the default), `host` for NumPy's
//! `__array_interface__` (with `#[derive(ArrayInterface)]`), and `arrays(a, b)` /
//! `host_arrays(a, b)` for the named arrays of a multi-array struct: each becomes a
//! property returning a [`CudaArray`] (or [`HostArray`]) view that keeps the object alive.
//! The names are checked against the derive's at compile time.
//!
//! The dict is read from the container on every access (the pointer and the stream may
//! change; an unchanged array's dict is copied from a cache) and
//! carries `shape`, `typestr`, `data`, `version`, `strides` (`None` when C-contiguous),
//! `descr` for records, `mask` when present and `stream` from version 3.
//!
//! The named-array views are instances of the `cai` package's `cai.CudaArray` and
//! `cai.HostArray` when that package can be imported (it need not be: without it, this
//! module's own classes are used), so `isinstance` checks hold across every module built
//! on cai-py.
//!
//! # Accepting arrays
//!
//! [`PyCudaArray`] (and its aliases [`PyCudaArrayRo`], [`PyCudaArrayRw`]) is a
//! `#[pyfunction]` argument that accepts any CUDA Array Interface or DLPack CUDA producer,
//! checked for element type, dimensionality and writability. [`PyHostArray`]
//! ([`PyHostArrayRo`], [`PyHostArrayRw`]) does the same for host memory (NumPy arrays,
//! `__array_interface__` producers, DLPack CPU producers), with safe slices and, behind the
//! `ndarray` feature, `ndarray` views.
//!
//! # Features
//!
//! - `driver`: stream ordering and pointer checks through the CUDA driver (cudarc, loaded
//!   at run time), and cudarc views of device arguments.
//! - `ndarray`: `as_array()` / `as_array_mut()` on host array arguments.
//!
//! # Errors
//!
//! Bad input raises `TypeError`, `ValueError` or `BufferError` (see [`error`](crate::to_py_err)),
//! and a stream that cannot be synchronized raises [`CudaDriverError`]; nothing panics.

mod api;
mod config;
#[cfg(feature = "driver")]
mod cudarc_view;
mod dlpack;
mod entry;
mod error;
mod export;
mod extract;
mod freeing;
mod holds;
mod host;
mod once;
mod parse;
mod shown;
mod sync;
mod view;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use api::{
    as_array, as_cuda_array, configure, cuda_driver_present, from_cuda_array_interface, from_dlpack,
    pointer_attributes, validate,
};
pub use cai_derive::export;
pub use config::ExportOptions;
#[cfg(feature = "driver")]
pub use cudarc_view::CudaForeign;
pub use dlpack::DLPackTensor;
pub use error::{driver_err, driver_error, to_py_err, CudaDriverError};
pub use export::interface_dict;
pub use extract::{
    Access, Dimension, Ix, Ix0, Ix1, Ix2, Ix3, Ix4, Ix5, Ix6, IxDyn, PyCudaArray, PyCudaArrayRo, PyCudaArrayRw,
    ReadOnly, ReadWrite,
};
#[cfg(feature = "ndarray")]
pub use host::NdDimension;
pub use host::{PyHostArray, PyHostArrayRo, PyHostArrayRw};
/// The `ndarray` crate whose views `as_array()` returns (feature `ndarray`), so that a user
/// names the same version: `cai_py::ndarray::ArrayView2<f64>`.
#[cfg(feature = "ndarray")]
pub use ndarray;
pub use parse::Interface;
pub use sync::ConsumerStream;
pub use view::{CudaArray, HostArray};

use pyo3::prelude::*;

/// `ImportError` unless this is the main interpreter. cai-py keeps Python objects (its
/// classes, interned strings, options) in process-wide statics, which subinterpreters must
/// not share; a module built on cai-py calls this first in its `#[pymodule]` function,
/// with its own name.
pub fn main_interpreter_only(_py: Python<'_>, module: &str) -> PyResult<()> {
    // SAFETY: with the GIL held (`_py`), the current interpreter is live.
    let id = unsafe { pyo3::ffi::PyInterpreterState_GetID(pyo3::ffi::PyInterpreterState_Get()) };
    match id {
        0 => Ok(()),
        _ => Err(pyo3::exceptions::PyImportError::new_err(format!(
            "{module} does not support subinterpreters: it can be imported in the main interpreter only (this is \
             interpreter {id})"
        ))),
    }
}

/// Adds the classes, functions and exception of the Python package `cai` to `module`, and
/// publishes its process-wide options for other modules built on cai-py. Only the
/// package's own `cai._cai` module should call it.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    main_interpreter_only(py, "cai")?;
    view::mark_package();
    module.add_class::<CudaArray>()?;
    module.add_class::<HostArray>()?;
    view::install_methods(py)?;
    module.add("CudaDriverError", py.get_type::<CudaDriverError>())?;
    entry::add_import_functions(module)?; // as_cuda_array, as_array, from_cuda_array_interface
    module.add_function(pyo3::wrap_pyfunction!(from_dlpack, module)?)?;
    module.add_class::<DLPackTensor>()?;
    module.add_function(pyo3::wrap_pyfunction!(validate, module)?)?;
    module.add_function(pyo3::wrap_pyfunction!(configure, module)?)?;
    module.add_function(pyo3::wrap_pyfunction!(cuda_driver_present, module)?)?;
    module.add_function(pyo3::wrap_pyfunction!(pointer_attributes, module)?)?;
    module.add_function(pyo3::wrap_pyfunction!(view::_make_view_v1, module)?)?;
    module.add_function(pyo3::wrap_pyfunction!(view::_make_view_v2, module)?)?;
    module.add_function(pyo3::wrap_pyfunction!(view::_make_view_v3, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    config::publish(module)?;
    Ok(())
}
