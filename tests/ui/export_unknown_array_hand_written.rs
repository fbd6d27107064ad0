use cai_core::{CudaArrayInterface, Descriptor, NamedCudaArrays, RawDeviceBuffer, Result};
use pyo3::prelude::*;

#[pyclass]
#[derive(CudaArrayInterface)]
struct Buffer {
    #[cai(data)]
    values: RawDeviceBuffer<f32>,
}

/// A hand-written impl: the derive's array names are not there to check against, so the
/// names are checked against `NAMES` when the constant is evaluated.
struct Pair {
    left: Buffer,
}

#[pyclass]
struct Holder(Pair);

impl NamedCudaArrays for Holder {
    const NAMES: &'static [&'static str] = &["left"];

    fn cuda_array(&self, name: &str) -> Option<Result<Descriptor>> {
        (name == "left").then(|| self.0.left.cuda_array_interface())
    }
}

#[cai_py::export(arrays(left, right))]
#[pymethods]
impl Holder {}

fn main() {}
