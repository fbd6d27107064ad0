use cai_core::Element;

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Record {
    id: u16,
    #[cai(padding)]
    spare: u16,
    value: f32,
}

fn main() {}
