use cai_core::{CudaArrayInterface, RawDeviceBuffer};
use cai_py::ExportOptions;
use pyo3::prelude::*;

#[pyclass]
#[derive(CudaArrayInterface)]
struct Buffer {
    #[cai(data)]
    values: RawDeviceBuffer<f32>,
    first: ExportOptions,
    second: ExportOptions,
}

// The second `options` would silently replace the first.
#[cai_py::export(cuda, options = first, options = second)]
#[pymethods]
impl Buffer {
    fn len(&self) -> usize {
        0
    }
}

fn main() {
    let _ = Buffer::len;
}
