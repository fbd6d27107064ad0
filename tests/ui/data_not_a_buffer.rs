use cai_core::ArrayInterface;

#[derive(ArrayInterface)]
struct Host {
    #[cai(data)]
    name: String,
}

fn main() {}
