use cai_core::CudaArrayInterface;

#[derive(CudaArrayInterface)]
enum Either {
    Left,
    Right,
}

fn main() {}
