use cai_core::ArrayInterface;

#[derive(ArrayInterface)]
#[cai(read_only)]
struct Signal {
    #[cai(data)]
    samples: Vec<f32>,
}

fn main() {}
