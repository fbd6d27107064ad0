use cai_core::Element;

#[derive(Clone, Copy)]
struct Opaque;

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Record {
    id: u32,
    payload: Opaque,
}

fn main() {}
