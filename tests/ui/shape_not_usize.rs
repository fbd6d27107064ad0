use cai_core::ArrayInterface;

#[derive(ArrayInterface)]
struct Image {
    #[cai(data)]
    pixels: Vec<u8>,
    #[cai(shape)]
    shape: [u32; 2],
}

fn main() {}
