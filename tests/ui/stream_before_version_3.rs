use cai_core::{CudaArrayInterface, Stream};

#[derive(CudaArrayInterface)]
#[cai(version = 2)]
struct Old {
    #[cai(data)]
    values: cai_core::RawDeviceBuffer<f32>,
    #[cai(stream)]
    stream: Stream,
}

fn main() {}
