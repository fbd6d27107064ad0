//! Rust element types and the type strings they export.

use crate::descr::{Descr, FieldType};
use crate::typestr::{Kind, TypeStr};

/// A Rust type whose values can be elements of an exported array.
///
/// # Safety
///
/// Implementors promise that [`TYPESTR`](Element::TYPESTR) (and [`descr`](Element::descr)
/// for records) describe the memory layout of `Self` exactly:
///
/// - `TYPESTR.itemsize() == size_of::<Self>()`;
/// - the kind and byte order are those of the bytes of a `Self` on this machine;
/// - for a record, every named field of `descr()` lies at the offset and has the type of
///   the Rust field it names, and padding entries cover the bytes in between.
///
/// Consumers rely on this to reinterpret foreign memory as `[Self]`, so a wrong impl is
/// undefined behaviour. Apart from `bool` bytes (0 or 1 only, which cai's host
/// extractors check before they make a slice, and whose host memory it exports
/// read-only), every bit pattern of a `Self` must be a valid value: host memory of
/// `Self` is exported writable, and a consumer may write any bytes into it.
///
/// `#[derive(Element)]` writes a correct impl for `#[repr(C)]` records. It comes with
/// cai-core's `derive` feature: `cai-array-core = { version = "0.1", features = ["derive"] }`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an element type: add `#[derive(Clone, Copy, Element)]` and `#[repr(C)]` to a record struct, or use one of the element types below",
    label = "not an `Element`",
    note = "elements are `bool`, `i8` to `i64`, `u8` to `u64`, `isize`, `usize`, `f32`, `f64`, `half::f16` and `half::bf16` (feature `half`), `num_complex::Complex<f32>` and `Complex<f64>` (feature `num-complex`), and `#[derive(Element)]` records",
    note = "the derives come with the `derive` feature of cai-array-core (used as `cai_core`): `cai-array-core = {{ version = \"0.1\", features = [\"derive\"] }}`"
)]
pub unsafe trait Element: Copy + Send + Sync + 'static {
    /// The type string of one element.
    const TYPESTR: TypeStr;

    /// The `descr` of one element: `[('', typestr)]` unless `Self` is a record.
    fn descr() -> Descr {
        Descr::simple(Self::TYPESTR)
    }
}

/// The byte offsets, within one element of `T`, of the bytes that hold `bool`s, alone or
/// in a record: the bytes whose only valid values are 0 and 1 (every other byte of an
/// [`Element`] may hold any value). cai-py checks them before it hands Rust a slice.
pub fn bool_bytes<T: Element>() -> Vec<usize> {
    fn walk(descr: &Descr, base: usize, out: &mut Vec<usize>) {
        let Ok(layout) = descr.layout() else { return };
        for f in layout {
            match f.field.flattened() {
                (FieldType::Scalar(t), _) if t.kind() == Kind::Bool => {
                    out.extend(base + f.offset..base + f.offset + f.size)
                }
                (FieldType::Record(inner), shape) => {
                    let count: usize = shape.iter().product();
                    let size = inner.itemsize().unwrap_or(0);
                    for i in 0..count {
                        walk(inner, base + f.offset + i * size, out);
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    if T::TYPESTR.kind() == Kind::Bool {
        out.push(0);
    } else if T::TYPESTR.kind() == Kind::Void {
        walk(&T::descr(), 0, &mut out);
    }
    out
}

macro_rules! native_element {
    ($($ty:ty => $kind:ident),* $(,)?) => {$(
        // SAFETY: a primitive of this kind and exactly this size, in native byte order.
        unsafe impl Element for $ty {
            const TYPESTR: TypeStr = TypeStr::native(Kind::$kind, std::mem::size_of::<$ty>());
        }
    )*};
}

native_element! {
    bool => Bool,
    i8 => Int, i16 => Int, i32 => Int, i64 => Int, isize => Int,
    u8 => UInt, u16 => UInt, u32 => UInt, u64 => UInt, usize => UInt,
    f32 => Float, f64 => Float,
}

#[cfg(feature = "half")]
native_element! { half::f16 => Float }

/// `bfloat16` has no NumPy type. It is exported as native-order two raw bytes
/// (`<V2` on little-endian machines), which is what PyTorch and `ml_dtypes` (JAX's
/// NumPy dtype for it) export, so a tensor from either is accepted as `bf16` and
/// ours is accepted by them. A consumer that sees `<V2` cannot tell bf16 from other
/// two-byte data; code that needs to must agree on the type out of band.
#[cfg(feature = "half")]
// SAFETY: bf16 is two bytes, the size of `|V2`; raw bytes place no constraint on them.
unsafe impl Element for half::bf16 {
    const TYPESTR: TypeStr = match TypeStr::try_new(crate::ByteOrder::NATIVE, Kind::Void, 2) {
        Some(t) => t,
        None => unreachable!(),
    };
}

#[cfg(feature = "num-complex")]
native_element! { num_complex::Complex<f32> => Complex, num_complex::Complex<f64> => Complex }

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ByteOrder;

    fn check<T: Element>(expected_little_endian: &str) {
        let t = T::TYPESTR;
        assert_eq!(t.itemsize(), std::mem::size_of::<T>(), "{}", std::any::type_name::<T>());
        assert_eq!(TypeStr::parse(&t.to_string()).unwrap(), t);
        assert!(t.byte_order().is_native());
        assert_eq!(T::descr().as_simple(), Some(t));
        assert!(T::descr().check_typestr(&t).is_ok());
        if cfg!(target_endian = "little") {
            assert_eq!(t.to_string(), expected_little_endian);
        }
    }

    #[test]
    fn bool_bytes_are_those_of_bools() {
        assert_eq!(bool_bytes::<bool>(), [0]);
        assert!(bool_bytes::<u8>().is_empty() && bool_bytes::<f64>().is_empty());
    }

    #[test]
    fn primitives() {
        check::<bool>("|b1");
        check::<i8>("|i1");
        check::<i16>("<i2");
        check::<i32>("<i4");
        check::<i64>("<i8");
        check::<u8>("|u1");
        check::<u16>("<u2");
        check::<u32>("<u4");
        check::<u64>("<u8");
        check::<f32>("<f4");
        check::<f64>("<f8");
        if cfg!(target_pointer_width = "64") {
            check::<isize>("<i8");
            check::<usize>("<u8");
        }
    }

    #[cfg(feature = "half")]
    #[test]
    fn half_types() {
        check::<half::f16>("<f2");
        check::<half::bf16>("<V2");
        assert_eq!(<half::bf16 as Element>::TYPESTR.byte_order(), ByteOrder::NATIVE);
        // As PyTorch's `<V2` bf16 is the same type as ours.
        assert!(<half::bf16 as Element>::TYPESTR.is_equivalent(&TypeStr::parse("<V2").unwrap()));
        assert!(!<half::bf16 as Element>::TYPESTR.is_equivalent(&<half::f16 as Element>::TYPESTR));
    }

    #[cfg(feature = "num-complex")]
    #[test]
    fn complex_types() {
        check::<num_complex::Complex<f32>>("<c8");
        check::<num_complex::Complex<f64>>("<c16");
    }
}
