use cai_core::{ArrayInterface, CudaArrayInterface, Stream};

#[derive(CudaArrayInterface)]
#[cai(version = 2)]
struct Old {
    #[cai(data)]
    values: cai_core::RawDeviceBuffer<f32>,
    #[cai(stream)]
    stream: Stream,
}

#[derive(ArrayInterface)]
struct Host {
    #[cai(data)]
    values: Vec<f32>,
    #[cai(stream)]
    stream: Stream,
}

fn main() {}
