// A record field type promises what `Element` promises (every bit pattern valid): it is
// no safe impl to write. (`char` is not an `Element`: a consumer could write 0xD800.)
use cai_core::{FieldType, TypeStr};

#[derive(Clone, Copy)]
struct Letter(char);

impl cai_core::__private::RecordField for Letter {
    fn describe() -> (FieldType, Vec<usize>) {
        (FieldType::Scalar(TypeStr::parse("<u4").unwrap()), Vec::new())
    }
}

fn main() {}
