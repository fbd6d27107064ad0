use cai_core::Element;

#[derive(Clone, Copy, Element)]
#[repr(C)]
union Bits {
    f: f32,
    u: u32,
}

fn main() {}
