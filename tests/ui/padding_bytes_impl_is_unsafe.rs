// A padding type promises that every bit pattern is valid (a consumer may write any byte
// into padding, which no check reads): it is no safe impl to write.
#[derive(Clone, Copy)]
#[repr(u8)]
enum One {
    A = 1,
}

impl cai_core::__private::PaddingBytes for One {}

fn main() {
    let _ = One::A;
}
