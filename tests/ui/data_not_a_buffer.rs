use cai_core::{ArrayInterface, CudaArrayInterface};

#[derive(ArrayInterface)]
struct Host {
    #[cai(data)]
    name: String,
}

#[derive(CudaArrayInterface)]
struct Device {
    #[cai(data)]
    values: Vec<f32>,
}

fn main() {}
