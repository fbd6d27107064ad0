use cai_core::CudaArrayInterface;

#[derive(CudaArrayInterface)]
struct Valid {
    #[cai(data)]
    bits: cai_core::RawDeviceBuffer<bool>,
}

#[derive(CudaArrayInterface)]
#[cai(version = 0)]
struct Masked {
    #[cai(data)]
    values: cai_core::RawDeviceBuffer<f32>,
    #[cai(mask)]
    valid: Valid,
}

fn main() {}
