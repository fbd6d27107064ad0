use cai_core::ArrayInterface;

#[derive(ArrayInterface)]
#[cai(readonly = true)]
struct Flag {
    #[cai(data)]
    values: Vec<f32>,
}

#[derive(ArrayInterface)]
struct Roles {
    #[cai(data(1))]
    values: Vec<f32>,
    #[cai(array(x))]
    nested: Flag,
}

fn main() {}
