use cai_core::Element;

// A generic record needs no bound of its own: the derive asks each field's type for what
// a record field is, and names the type that is not one where the record is used.
#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Pair<T> {
    first: T,
    second: T,
}

fn descr_of<T: Element>() -> String {
    T::descr().to_string()
}

fn main() {
    let _ = descr_of::<Pair<f32>>();
    let _ = descr_of::<Pair<char>>();
}
