use cai_core::{CudaArrayInterface, RawDeviceBuffer};
use pyo3::prelude::*;

#[pyclass]
#[derive(CudaArrayInterface)]
struct Cloud {
    #[cai(data, array = "xyz")]
    xyz: RawDeviceBuffer<f32>,
}

#[cai_py::export(arrays(xyz, normals))]
#[pymethods]
impl Cloud {}

fn main() {}
