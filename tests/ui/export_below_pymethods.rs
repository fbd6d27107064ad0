use cai_core::{CudaArrayInterface, RawDeviceBuffer};
use pyo3::prelude::*;

#[pyclass]
#[derive(CudaArrayInterface)]
struct Buffer {
    #[cai(data)]
    values: RawDeviceBuffer<f32>,
}

#[pymethods]
#[cai_py::export]
impl Buffer {}

fn main() {}
