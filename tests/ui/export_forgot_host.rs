use cai_core::ArrayInterface;
use pyo3::prelude::*;

#[pyclass]
#[derive(ArrayInterface)]
struct Frame {
    #[cai(data)]
    pixels: Vec<u8>,
}

#[cai_py::export]
#[pymethods]
impl Frame {}

fn main() {}
