use cai_core::{CudaArrayInterface, Element};

#[derive(CudaArrayInterface)]
enum Either {
    Left,
    Right,
}

#[derive(Element)]
#[repr(C)]
union Bits {
    f: f32,
    u: u32,
}

fn main() {}
