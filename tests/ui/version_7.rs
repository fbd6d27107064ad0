use cai_core::CudaArrayInterface;

#[derive(CudaArrayInterface)]
#[cai(version = 7)]
struct Signal {
    #[cai(data)]
    values: cai_core::RawDeviceBuffer<f32>,
}

fn main() {}
