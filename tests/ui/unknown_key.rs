use cai_core::ArrayInterface;

#[derive(ArrayInterface)]
#[cai(read_only)]
struct Signal {
    #[cai(dat)]
    samples: Vec<f32>,
}

fn main() {}
