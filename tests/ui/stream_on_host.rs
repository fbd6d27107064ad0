use cai_core::{ArrayInterface, Stream};

#[derive(ArrayInterface)]
struct Host {
    #[cai(data)]
    values: Vec<f32>,
    #[cai(stream)]
    stream: Stream,
}

fn main() {}
