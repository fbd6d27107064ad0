//! Derive macros for cai-core: `#[derive(CudaArrayInterface)]`, `#[derive(ArrayInterface)]`
//! and `#[derive(Element)]`. The macros themselves are being built; this crate is a
//! workspace member so that the layout is settled.
