use cai_core::ArrayInterface;

#[derive(ArrayInterface)]
struct Signal {
    #[cai(dat)]
    samples: Vec<f32>,
}

fn main() {}
