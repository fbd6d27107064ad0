use cai_core::ArrayInterface;

#[derive(ArrayInterface)]
struct Signal {
    #[cai(data, data)]
    samples: Vec<f32>,
}

fn main() {}
