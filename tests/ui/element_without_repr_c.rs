use cai_core::{ArrayInterface, Element};

#[derive(Clone, Copy, Element)]
struct Point {
    x: f32,
    y: f32,
}

// Only the missing #[repr(C)] is reported, not also "Point is not an element type" here.
#[derive(ArrayInterface)]
struct Points {
    #[cai(data)]
    points: Vec<Point>,
}

fn main() {}
