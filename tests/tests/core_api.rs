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
