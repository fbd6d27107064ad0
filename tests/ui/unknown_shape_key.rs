use cai_core::ArrayInterface;

#[derive(ArrayInterface)]
struct Image {
    #[cai(data)]
    pixels: Vec<u8>,
    #[cai(shpe)]
    shape: [usize; 2],
}

fn main() {}
