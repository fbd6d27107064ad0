use cai_core::ArrayInterface;

#[derive(ArrayInterface)]
struct Signal {
    samples: Vec<f32>,
}

fn main() {}
