use pyo3::prelude::*;

#[pyclass]
struct Cloud {}

// One property per name: the second getter would hide the first.
#[cai_py::export(arrays(xyz), host_arrays(xyz))]
#[pymethods]
impl Cloud {
    fn len(&self) -> usize {
        0
    }
}

fn main() {
    let _ = Cloud::len;
}
