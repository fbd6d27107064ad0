//! The functions of the Python package `cai`.

use pyo3::prelude::*;

use crate::error::Problem;
use crate::parse::{no_interface, Interface, Parsed, Reader};
use crate::sync::synchronize;
use crate::view::{Core, CudaArray, HostArray};

fn strict(result: PyResult<Option<Parsed>>) -> PyResult<Parsed> {
    result?.ok_or_else(|| Problem::type_error("a strict reader returned no result").into())
}

fn cuda_view<'py>(py: Python<'py>, owner: Py<PyAny>, parsed: Parsed, sync: bool) -> PyResult<Bound<'py, CudaArray>> {
    if sync {
        synchronize(py, parsed.descriptor.stream)?;
    }
    CudaArray::from_core(py, Core::from_parsed(owner, parsed)?)
}

/// Reads `obj.__cuda_array_interface__` once, validates it by the version it declares and
/// returns a `cai.CudaArray` view that keeps `obj` alive.
///
/// With `sync=True` (the default) and an integer stream, waits for the producer's stream
/// (needs the CUDA driver; `cai.CudaDriverError` without one); `sync=False` skips that.
#[pyfunction]
#[pyo3(signature = (obj, *, sync = true))]
pub fn as_cuda_array<'py>(obj: &Bound<'py, PyAny>, sync: bool) -> PyResult<Bound<'py, CudaArray>> {
    let parsed = strict(Reader::strict().read_object(obj, Interface::Cuda))?;
    cuda_view(obj.py(), obj.clone().unbind(), parsed, sync)
}

/// The same as `as_cuda_array`, from an interface dict; the view keeps `owner` alive.
#[pyfunction]
#[pyo3(signature = (desc, owner = None, *, sync = true))]
pub fn from_cuda_array_interface<'py>(
    desc: &Bound<'py, PyAny>,
    owner: Option<Bound<'py, PyAny>>,
    sync: bool,
) -> PyResult<Bound<'py, CudaArray>> {
    let py = desc.py();
    let parsed = strict(Reader::strict().parse(desc, Interface::Cuda))?;
    let owner = owner.map_or_else(|| py.None(), Bound::unbind);
    cuda_view(py, owner, parsed, sync)
}

/// Reads `obj.__array_interface__` (NumPy's, host memory) and returns a `cai.HostArray`
/// view that keeps `obj` alive.
#[pyfunction]
pub fn as_array<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, HostArray>> {
    let parsed = strict(Reader::strict().read_object(obj, Interface::Host))?;
    HostArray::from_core(obj.py(), Core::from_parsed(obj.clone().unbind(), parsed)?)
}

/// Checks a producer against the version of the interface it declares and returns every
/// problem found, one message per problem (an empty list when it conforms).
///
/// `obj` is an object exporting `__cuda_array_interface__` (or else `__array_interface__`),
/// or an interface dict, read as a CUDA one. Raises `TypeError` only when `obj` exports no
/// interface at all; an exception raised by the attribute itself is reported as a finding.
#[pyfunction]
pub fn validate<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Vec<String>> {
    let py = obj.py();
    let (value, iface) = if obj.is_instance_of::<pyo3::types::PyDict>() {
        (Ok(obj.clone()), Interface::Cuda)
    } else {
        let attribute = |name: &Bound<'py, pyo3::types::PyString>| match obj.getattr(name) {
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) => None,
            other => Some(other),
        };
        match attribute(pyo3::intern!(py, "__cuda_array_interface__")) {
            Some(value) => (value, Interface::Cuda),
            None => match attribute(pyo3::intern!(py, "__array_interface__")) {
                Some(value) => (value, Interface::Host),
                None => return Err(no_interface(obj, Interface::Cuda).into()),
            },
        }
    };
    let mut findings = Vec::new();
    match value {
        Ok(dict) => {
            Reader::collecting(&mut findings).parse(&dict, iface)?;
        }
        Err(e) => findings.push(format!("{}: reading the attribute raised {}", iface.attribute(), e)),
    }
    Ok(findings)
}
