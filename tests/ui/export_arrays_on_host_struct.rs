use cai_core::ArrayInterface;
use pyo3::prelude::*;

#[pyclass]
#[derive(ArrayInterface)]
struct Cloud {
    #[cai(data, array = "xyz")]
    xyz: Vec<f32>,
}

#[cai_py::export(arrays(xyz))]
#[pymethods]
impl Cloud {}

fn main() {}
