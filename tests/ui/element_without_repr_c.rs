use cai_core::Element;

#[derive(Clone, Copy, Element)]
struct Point {
    x: f32,
    y: f32,
}

fn main() {}
