use cai_core::ArrayInterface;

#[derive(ArrayInterface)]
#[cai(version = 3, version = 2)]
struct Signal {
    #[cai(data)]
    samples: Vec<f32>,
}

fn main() {}
