use cai_core::ArrayInterface;

#[derive(ArrayInterface)]
struct Image {
    #[cai(data)]
    pixels: Vec<u8>,
    #[cai(shape)]
    height: usize,
    #[cai(shape)]
    width: usize,
}

fn main() {}
