use cai_core::Element;

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Record {
    #[cai(data)]
    id: u32,
    #[cai(padding = 4)]
    pad: [u8; 4],
    #[cai(padding, padding)]
    more: u8,
}

fn main() {}
