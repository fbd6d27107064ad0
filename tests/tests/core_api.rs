//! cai-core as a user sees it: only the public API.

use cai_core::{ArrayInterface, Descriptor, Element, Error, ErrorKind, Stream, TypeStr};

fn assert_element<T: Element>() {
    let parsed = TypeStr::parse(&T::TYPESTR.to_string()).unwrap();
    assert_eq!(parsed.itemsize(), std::mem::size_of::<T>(), "{}", std::any::type_name::<T>());
    assert_eq!(parsed, T::TYPESTR);
    assert!(T::descr().check_typestr(&T::TYPESTR).is_ok());
}

#[test]
fn every_element_typestr_parses_to_its_size() {
    assert_element::<bool>();
    assert_element::<i8>();
    assert_element::<i16>();
    assert_element::<i32>();
    assert_element::<i64>();
    assert_element::<u8>();
    assert_element::<u16>();
    assert_element::<u32>();
    assert_element::<u64>();
    assert_element::<f32>();
    assert_element::<f64>();
    assert_element::<half::f16>();
    assert_element::<half::bf16>();
    assert_element::<num_complex::Complex<f32>>();
    assert_element::<num_complex::Complex<f64>>();
}

/// The README's example.
struct Image {
    pixels: Vec<u16>,
    height: usize,
    width: usize,
}

impl ArrayInterface for Image {
    fn array_interface(&self) -> Result<Descriptor, Error> {
        Ok(Descriptor::new::<u16>(self.pixels.as_ptr() as usize, [self.height, self.width]).with_readonly(true))
    }
}

#[test]
fn readme_example() {
    let img = Image { pixels: vec![0; 640 * 480], height: 480, width: 640 };
    let d = img.array_interface().unwrap();
    let extent = d.validate().unwrap();
    assert_eq!(extent.len(), 640 * 480 * 2);
    assert!(d.is_c_contiguous());
    assert!(d.to_string().starts_with("{'shape': (480, 640), 'typestr': '<u2'"));
}

#[test]
fn consumer_errors_classify_and_name_their_key() {
    let received = Descriptor::new::<f32>(0x10_0000, [4]).with_version(2);
    let e = received.with_stream(Stream::from_raw(Some(5)).unwrap()).validate().unwrap_err();
    assert_eq!((e.key(), e.kind()), ("stream", ErrorKind::Value));
    let e = Stream::from_raw(Some(0)).unwrap_err();
    assert_eq!((e.key(), e.kind()), ("stream", ErrorKind::Value));
    let e = "<f3".parse::<TypeStr>().unwrap_err();
    assert_eq!(e.to_string(), "typestr: '<f3' is malformed: a float is 2, 4, 8, 10, 12 or 16 bytes");
}

#[test]
fn edges_of_the_public_api_are_errors_that_say_what() {
    use cai_core::{ByteOrder, Descr, Field, Kind};

    // `TypeStr::void` (a const fn) takes any size; validation refuses one past NumPy's.
    let huge = TypeStr::void(1 << 31);
    assert!(TypeStr::parse(&huge.to_string()).is_err());
    let e = Descriptor::from_typestr(huge, 0x1000, [1usize]).validate().unwrap_err();
    assert!(e.to_string().starts_with("typestr: '|V2147483648' is malformed: bytes and raw bytes"), "{e}");
    assert!(Descriptor::from_typestr(TypeStr::void(1 << 30), 0x1000, [1usize]).validate().is_ok());

    // A unicode type is named by its bytes, which its typestr would count in characters.
    let e = TypeStr::new(ByteOrder::Little, Kind::Unicode, 3).unwrap_err();
    assert!(e.to_string().starts_with("typestr: '<U of 3 bytes' is malformed"), "{e}");

    // A descr too large to describe is quoted by its start, not whole.
    let f8 = TypeStr::parse("<f8").unwrap();
    let mut fields: Vec<Field> = (0..5000).map(|i| Field::new(format!("field_{i}"), f8)).collect();
    fields.push(Field::new("big", f8).with_shape([usize::MAX / 8]));
    let e = Descr::new(fields).check().unwrap_err().to_string();
    assert!(e.len() < 300 && e.contains("characters)"), "{} characters: {}", e.len(), &e[..200]);

    // Names print as Python literals, on one line.
    let odd = Descr::new(vec![Field::new("a\nb\0'\u{85}\u{2028}", f8)]);
    assert_eq!(odd.to_string(), r"[('a\nb\x00\'\x85\u2028', '<f8')]");

    // A long text keeps its quotes when cut, and counts its own characters.
    assert_eq!(cai_core::quoted(&"a".repeat(100)), format!("'{}'... (100 characters)", "a".repeat(80)));
    assert_eq!(cai_core::quoted("f\n4"), r"'f\n4'");
    // Cut before escaping: no escape is cut in two.
    let dels = "\x7f".repeat(100);
    assert_eq!(cai_core::quoted(&dels), format!("'{}'... (100 characters)", r"\u{7f}".repeat(80)));

    // Strides of another length than the shape (a descriptor not validated) are refused.
    let d = Descriptor::new::<f32>(0x1000, [3usize, 4]).with_strides([16isize]);
    let mut out = [-99i64; 2];
    let e = cai_core::dlpack::write_element_strides(&d, &mut out).unwrap_err();
    assert_eq!(e, "1 strides given for a 2-d array");
}
