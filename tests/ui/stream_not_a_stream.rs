use cai_core::{CudaArrayInterface, RawDeviceBuffer};

#[derive(CudaArrayInterface)]
struct Signal {
    #[cai(data)]
    values: RawDeviceBuffer<f32>,
    #[cai(stream)]
    stream: i64,
}

fn main() {}
