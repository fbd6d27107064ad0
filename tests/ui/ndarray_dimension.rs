use cai_py::PyHostArrayRo;
use pyo3::prelude::*;

struct Ix2;

#[pyfunction]
fn total(x: PyHostArrayRo<'_, f64, Ix2>) -> f64 {
    x.len() as f64
}

fn main() {}
