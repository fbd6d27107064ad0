use cai_core::{CudaArrayInterface, RawDeviceBuffer};
use pyo3::prelude::*;

#[pyclass]
#[derive(CudaArrayInterface)]
struct Buffer {
    #[cai(data)]
    values: RawDeviceBuffer<f32>,
}

#[cai_py::export(device)]
#[pymethods]
impl Buffer {
    fn len(&self) -> usize {
        0
    }
}

fn main() {
    let _ = Buffer::len;
}
