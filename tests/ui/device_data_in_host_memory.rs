use cai_core::CudaArrayInterface;

#[derive(CudaArrayInterface)]
struct Device {
    #[cai(data)]
    values: Vec<f32>,
}

fn main() {}
