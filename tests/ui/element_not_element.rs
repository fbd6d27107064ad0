use cai_core::ArrayInterface;

#[derive(Clone, Copy)]
struct Pixel {
    r: u8,
}

#[derive(ArrayInterface)]
struct Image {
    #[cai(data)]
    pixels: Vec<Pixel>,
}

fn main() {}
