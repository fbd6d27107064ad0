use cai_core::ArrayInterface;

#[derive(ArrayInterface)]
struct Image {
    #[cai(data)]
    pixels: Vec<u8>,
    #[cai(shape)]
    shape: [usize; 2],
    #[cai(strides)]
    strides: [usize; 2],
}

fn main() {}
