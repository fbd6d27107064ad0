use cai_core::{CudaArrayInterface, RawDeviceBuffer};
use pyo3::prelude::*;

#[pyclass]
#[derive(CudaArrayInterface)]
struct Cloud {
    #[cai(data, array = "xyz")]
    xyz: RawDeviceBuffer<f32>,
    #[cai(data, array = "rgb")]
    rgb: RawDeviceBuffer<u8>,
}

#[cai_py::export(arrays(xy, rgb))]
#[pymethods]
impl Cloud {}

fn main() {}
