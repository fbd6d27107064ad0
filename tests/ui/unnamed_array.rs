use cai_core::ArrayInterface;

#[derive(ArrayInterface)]
struct Samples(#[cai(data)] Vec<f32>);

#[derive(ArrayInterface)]
struct Pair(#[cai(array)] Samples, #[cai(array = "right")] Samples);

fn main() {}
