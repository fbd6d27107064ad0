use cai_core::ArrayInterface;

#[derive(ArrayInterface)]
struct Pair {
    #[cai(data)]
    left: Vec<f32>,
    #[cai(data)]
    right: Vec<f32>,
}

fn main() {}
