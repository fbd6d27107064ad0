use cai_core::Element;

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Record {
    #[cai(padding)]
    pad: [u8; 4],
}

fn main() {}
