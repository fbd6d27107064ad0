use cai_core::{CudaArrayInterface, RawDeviceBuffer};
use pyo3::prelude::*;

#[pyclass]
#[derive(CudaArrayInterface)]
struct Buffer {
    #[cai(data)]
    values: RawDeviceBuffer<f32>,
}

#[cai_py::export(host)]
#[pymethods]
impl Buffer {}

fn main() {}
