//! Python bindings for cai-core: the pyo3 layer is being built; this crate is a workspace
//! member so that the layout is settled.
