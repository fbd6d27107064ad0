use cai_core::ArrayInterface;

struct Normals;

#[derive(ArrayInterface)]
struct Cloud {
    #[cai(data)]
    xyz: Vec<f32>,
    #[cai(array)]
    normals: Normals,
}

fn main() {}
