use cai_core::ArrayInterface;
use pyo3::prelude::*;

#[pyclass]
#[derive(ArrayInterface)]
struct Image {
    #[cai(data)]
    pixels: Vec<f32>,
    options: cai_py::ExportOptions,
}

#[cai_py::export(host, options = options)]
#[pymethods]
impl Image {
    fn len(&self) -> usize {
        self.pixels.len()
    }
}

fn main() {
    let _ = Image::len;
}
