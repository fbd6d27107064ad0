//! What the derives export, checked at run time.

use std::mem::{offset_of, size_of};

use cai_core::{
    bool_bytes, ArrayInterface, CudaArrayInterface, Descr, Element, Error, Field, FieldType, NamedArrays,
    NamedCudaArrays, RawDeviceBuffer, Stream, StreamHandle, TypeStr,
};

const DEVICE: usize = 0x7f00_0000_0000;

fn raw<T: Element>(len: usize) -> RawDeviceBuffer<T> {
    // SAFETY: only described, never dereferenced.
    unsafe { RawDeviceBuffer::new(DEVICE, len) }
}

#[derive(ArrayInterface)]
struct Signal {
    #[cai(data)]
    samples: Vec<f32>,
}

#[test]
fn one_dimensional_over_the_whole_buffer() {
    let s = Signal { samples: vec![0.0; 5] };
    let d = s.array_interface().unwrap();
    assert_eq!(d.shape, [5]);
    assert_eq!(d.typestr, f32::TYPESTR);
    assert_eq!(d.data, s.samples.as_ptr() as usize);
    assert_eq!((d.strides.as_ref(), d.readonly, d.version, d.stream), (None, false, 3, Stream::None));
    assert!(Signal::NAMES.is_empty());
}

#[derive(ArrayInterface, CudaArrayInterface)]
struct Image<B> {
    #[cai(data)]
    pixels: B,
    #[cai(shape)]
    shape: [usize; 2],
}

#[test]
fn two_dimensional_host_and_device_from_one_generic_struct() {
    let host = Image { pixels: vec![0u16; 12], shape: [3, 4] };
    let d = host.array_interface().unwrap();
    assert_eq!((d.shape.as_slice(), d.typestr.to_string()), (&[3, 4][..], "<u2".to_owned()));
    assert!(d.is_c_contiguous());
    let device = Image { pixels: raw::<f32>(12), shape: [3, 4] };
    let d = device.cuda_array_interface().unwrap();
    assert_eq!((d.data, d.shape.as_slice(), d.version), (DEVICE, &[3, 4][..], 3));
}

#[derive(CudaArrayInterface)]
#[cai(shape = (self.cols, self.rows), strides = [4, self.row_bytes])]
struct Transposed {
    #[cai(data)]
    values: RawDeviceBuffer<f32>,
    rows: usize,
    cols: usize,
    row_bytes: isize,
}

#[derive(ArrayInterface)]
struct Strided<'a> {
    #[cai(data)]
    values: &'a mut [f64],
    #[cai(shape)]
    shape: (usize, usize),
    #[cai(strides)]
    strides: Vec<isize>,
}

#[test]
fn strided_from_fields_and_from_expressions() {
    let t = Transposed { values: raw(6), rows: 2, cols: 3, row_bytes: 12 };
    let d = t.cuda_array_interface().unwrap();
    assert_eq!((d.shape.as_slice(), d.strides.as_deref()), (&[3, 2][..], Some(&[4, 12][..])));
    assert!(d.is_f_contiguous());
    let mut values = vec![0.0; 10];
    let every_other = Strided { values: &mut values, shape: (5, 1), strides: vec![16, 8] };
    let d = every_other.array_interface().unwrap();
    assert_eq!(d.extent().unwrap().end, 72);
    assert!(!d.readonly, "a unique borrow is writable");
}

#[derive(ArrayInterface)]
#[cai(readonly)]
struct Frozen {
    #[cai(data)]
    values: Box<[i32]>,
}

#[derive(ArrayInterface)]
struct Borrowed<'a> {
    #[cai(data)]
    values: &'a [u8],
}

#[derive(CudaArrayInterface)]
struct View {
    #[cai(data)]
    values: RawDeviceBuffer<u8>,
}

#[test]
fn readonly_from_the_struct_or_from_the_buffer() {
    assert!(Frozen { values: vec![1, 2].into() }.array_interface().unwrap().readonly);
    assert!(Borrowed { values: &[1, 2, 3] }.array_interface().unwrap().readonly);
    assert!(View { values: raw::<u8>(4).readonly() }.cuda_array_interface().unwrap().readonly);
    assert!(!View { values: raw::<u8>(4) }.cuda_array_interface().unwrap().readonly);
}

#[test]
fn empty_arrays_export_a_null_device_pointer() {
    let d = View { values: raw(0) }.cuda_array_interface().unwrap();
    assert_eq!((d.data, d.shape.as_slice()), (0, &[0][..]));
    let host = Signal { samples: Vec::new() }.array_interface().unwrap();
    assert_eq!(host.shape, [0]);
    let zero_rows = Image { pixels: raw::<f32>(0), shape: [0, 4] }.cuda_array_interface().unwrap();
    assert_eq!(zero_rows.data, 0);
}

#[derive(CudaArrayInterface)]
struct Tensor<T: Element> {
    #[cai(data)]
    buf: RawDeviceBuffer<T>,
    #[cai(shape)]
    shape: Vec<usize>,
}

#[test]
fn generic_element_types() {
    let t = Tensor::<half::bf16> { buf: raw(8), shape: vec![2, 2, 2] };
    assert_eq!(t.cuda_array_interface().unwrap().typestr.to_string(), "<V2");
    let t = Tensor::<num_complex::Complex<f64>> { buf: raw(3), shape: vec![3] };
    assert_eq!(t.cuda_array_interface().unwrap().typestr.to_string(), "<c16");
}

/// A point cloud: three arrays of its own, and a nested container as a fourth.
#[derive(CudaArrayInterface)]
struct PointCloud {
    #[cai(data, array = "xyz")]
    xyz: RawDeviceBuffer<f32>,
    #[cai(shape, array = "xyz")]
    xyz_shape: [usize; 2],
    #[cai(data, array = "rgb")]
    rgb: RawDeviceBuffer<u8>,
    #[cai(shape, array = "rgb")]
    rgb_shape: [usize; 2],
    #[cai(array)]
    normals: Tensor<f32>,
    #[cai(stream)]
    stream: Stream,
}

#[test]
fn several_named_arrays() {
    let n = 100;
    let cloud = PointCloud {
        xyz: raw(3 * n),
        xyz_shape: [n, 3],
        rgb: raw(3 * n),
        rgb_shape: [n, 3],
        normals: Tensor { buf: raw(3 * n), shape: vec![n, 3] },
        stream: Stream::PerThreadDefault,
    };
    assert_eq!(PointCloud::NAMES, ["xyz", "rgb", "normals"]);
    let arrays = cloud.cuda_arrays();
    let summary: Vec<_> = arrays.iter().map(|(name, d)| (*name, d.as_ref().unwrap().typestr.to_string())).collect();
    assert_eq!(summary, [("xyz", "<f4".to_owned()), ("rgb", "|u1".to_owned()), ("normals", "<f4".to_owned())]);
    let xyz = cloud.cuda_array("xyz").unwrap().unwrap();
    assert_eq!((xyz.shape.as_slice(), xyz.stream), (&[n, 3][..], Stream::PerThreadDefault));
    assert!(cloud.cuda_array("nope").is_none());
}

#[derive(ArrayInterface)]
struct Column {
    #[cai(data)]
    values: Vec<f32>,
}

/// Nested arrays held every way a field can hold them.
#[derive(ArrayInterface)]
struct Holders<'a> {
    #[cai(array)]
    owned: Column,
    #[cai(array)]
    boxed: Box<Column>,
    #[cai(array)]
    unique: &'a mut Column,
    #[cai(array)]
    borrowed: &'a Column,
    #[cai(array)]
    rc: std::rc::Rc<Column>,
    #[cai(array)]
    arc: std::sync::Arc<Column>,
}

/// Buffer and nested arrays interleaved, a raw name, a name that is no identifier.
#[derive(ArrayInterface)]
#[cai(readonly)]
struct ReadOnlyMixed {
    #[cai(array)]
    first: Column,
    #[cai(data, array = "second")]
    second: Vec<u8>,
    #[cai(array)]
    r#in: Column,
    #[cai(data, array = "1e")]
    odd: Vec<u16>,
}

/// A host array with a mask, for the read-only rules of masks.
#[derive(ArrayInterface)]
struct HostMasked {
    #[cai(data)]
    values: Vec<f32>,
    #[cai(mask)]
    valid: Column,
}

/// A read-only struct's own mask.
#[derive(ArrayInterface)]
#[cai(readonly)]
struct ReadOnlyMasked {
    #[cai(data)]
    values: Vec<f32>,
    #[cai(mask)]
    valid: Column,
    #[cai(data, array = "self")]
    itself: Vec<u8>,
}

#[test]
fn masks_are_read_only_with_their_array() {
    let masked = || HostMasked { values: vec![0.0; 2], valid: Column { values: vec![1.0; 2] } };
    let own = masked().array_interface().unwrap();
    assert!(!own.readonly && !own.mask.unwrap().readonly);
    let shared = std::sync::Arc::new(masked()).array_interface().unwrap();
    assert!(shared.readonly && shared.mask.unwrap().readonly, "a mask reached through an Arc");
    let values = vec![0.0; 2];
    let read_only = ReadOnlyMasked { values, valid: Column { values: vec![1.0; 2] }, itself: vec![0; 3] }
        .array_interface()
        .unwrap();
    assert!(read_only.readonly && read_only.mask.unwrap().readonly, "a readonly struct's mask");
    // A name that no field could have (`r#self` is no identifier) is still a name.
    assert_eq!(ReadOnlyMasked::NAMES, ["self"]);
}

#[test]
fn nested_arrays_behind_shared_pointers_or_in_a_readonly_struct_are_read_only() {
    let column = || Column { values: vec![1.0; 3] };
    let (mut unique, borrowed) = (column(), column());
    let holders = Holders {
        owned: column(),
        boxed: Box::new(column()),
        unique: &mut unique,
        borrowed: &borrowed,
        rc: std::rc::Rc::new(column()),
        arc: std::sync::Arc::new(column()),
    };
    assert_eq!(Holders::NAMES, ["owned", "boxed", "unique", "borrowed", "rc", "arc"]);
    let readonly: Vec<_> = holders.arrays().into_iter().map(|(name, d)| (name, d.unwrap().readonly)).collect();
    assert_eq!(
        readonly,
        [("owned", false), ("boxed", false), ("unique", false), ("borrowed", true), ("rc", true), ("arc", true)]
    );

    let mixed = ReadOnlyMixed { first: column(), second: vec![0; 2], r#in: column(), odd: vec![0; 4] };
    // Declaration order, nested and buffer arrays alike; `r#in` is `in`.
    assert_eq!(ReadOnlyMixed::NAMES, ["first", "second", "in", "1e"]);
    let arrays = mixed.arrays();
    assert!(arrays.iter().all(|(_, d)| d.as_ref().unwrap().readonly), "{arrays:?}");
    assert_eq!(mixed.array("1e").unwrap().unwrap().shape, [4]);
}

#[derive(CudaArrayInterface)]
struct Masked {
    #[cai(data)]
    values: RawDeviceBuffer<f64>,
    #[cai(mask)]
    valid: View,
}

#[test]
fn masks_are_exported_and_checked() {
    let m = Masked { values: raw(4), valid: View { values: raw(4) } };
    let d = m.cuda_array_interface().unwrap();
    assert_eq!(d.mask.as_ref().unwrap().typestr.to_string(), "|u1");
    let wrong = Masked { values: raw(4), valid: View { values: raw(3) } };
    let e = wrong.cuda_array_interface().unwrap_err();
    assert_eq!(e.to_string(), "mask: shape (3,) does not match the array's shape (4,)");
}

#[derive(CudaArrayInterface)]
struct OnStream {
    #[cai(data)]
    values: RawDeviceBuffer<i64>,
    #[cai(stream)]
    stream: usize,
}

#[derive(CudaArrayInterface)]
#[cai(version = 2)]
struct Version2 {
    #[cai(data)]
    values: RawDeviceBuffer<i64>,
}

#[test]
fn streams_from_the_field_or_the_buffer() {
    let d = OnStream { values: raw(2), stream: 0x5000 }.cuda_array_interface().unwrap();
    assert_eq!(d.stream, Stream::Handle(StreamHandle::new(0x5000).unwrap()));
    let e = OnStream { values: raw(2), stream: 0 }.cuda_array_interface().unwrap_err();
    assert_eq!(e, Error::StreamZero);
    let own = View { values: raw::<u8>(2).on_stream(Stream::LegacyDefault) }.cuda_array_interface().unwrap();
    assert_eq!(own.stream, Stream::LegacyDefault);
    let v2 = Version2 { values: raw::<i64>(2).on_stream(Stream::LegacyDefault) }.cuda_array_interface().unwrap();
    assert_eq!((v2.version, v2.stream), (2, Stream::None), "version 2 has no stream");
}

#[test]
fn a_shape_beyond_the_buffer_is_refused() {
    let too_big = Image { pixels: vec![0u8; 12], shape: [4, 4] };
    let e = too_big.array_interface().unwrap_err();
    assert_eq!(
        e.to_string(),
        "shape: (4, 4) with strides None reaches bytes 0 to 16 of field `pixels`, which holds 12 bytes"
    );
    let mut values = vec![0.0; 4];
    let backwards = Strided { values: &mut values, shape: (2, 1), strides: vec![-8, 8] };
    assert!(matches!(backwards.array_interface().unwrap_err(), Error::OutOfBuffer { start: -8, .. }));
}

#[derive(ArrayInterface)]
struct Flags {
    #[cai(data)]
    values: Vec<bool>,
}

#[derive(ArrayInterface)]
struct Pairs {
    #[cai(data)]
    items: Vec<Pair>,
}

#[derive(ArrayInterface)]
struct Tags {
    #[cai(data)]
    items: Vec<Packed>,
}

#[test]
fn elements_holding_bools_are_exported_read_only() {
    // A consumer could write a byte that is no bool, which the container's own code would
    // then read: a bool anywhere in the element makes the export read-only.
    assert!(Flags { values: vec![true, false] }.array_interface().unwrap().readonly);
    let particle = Particle { id: 1, position: [0.0; 3], mass: 1.0, alive: true };
    assert!(Particles { items: vec![particle] }.array_interface().unwrap().readonly);
    assert!(Pairs { items: vec![Pair(1, particle)] }.array_interface().unwrap().readonly, "a bool in a nested record");
    assert!(!Tags { items: vec![Packed { tag: 1, value: 2.0 }] }.array_interface().unwrap().readonly);
    assert!(!Signal { samples: vec![1.0] }.array_interface().unwrap().readonly);
}

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Particle {
    id: u8,
    position: [f32; 3],
    mass: f64,
    alive: bool,
}

#[derive(Clone, Copy, Element)]
#[repr(C, packed)]
struct Packed {
    tag: u8,
    value: f32,
}

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Pair(u16, Particle);

/// A generic record: its fields' types are asked for what a record field is, nothing more.
#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Generic<T> {
    tag: u8,
    value: T,
}

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Keyworded {
    r#type: u8,
    r#match: f32,
}

#[test]
fn records_match_rust_layout() {
    assert_eq!(Particle::TYPESTR, TypeStr::void(size_of::<Particle>()));
    let descr = Particle::descr();
    descr.check_typestr(&Particle::TYPESTR).unwrap();
    let layout: Vec<_> = descr.layout().unwrap().iter().map(|l| (l.field.name.clone(), l.offset)).collect();
    assert_eq!(
        layout,
        [
            ("id".to_owned(), offset_of!(Particle, id)),
            ("position".to_owned(), offset_of!(Particle, position)),
            ("mass".to_owned(), offset_of!(Particle, mass)),
            ("alive".to_owned(), offset_of!(Particle, alive)),
        ]
    );
    assert_eq!(descr.itemsize().unwrap(), size_of::<Particle>());
    assert_eq!(descr.fields[2], Field::new("position", f32::TYPESTR).with_shape([3]));
    assert_eq!(
        descr.to_string(),
        "[('id', '|u1'), ('', '|V3'), ('position', '<f4', (3,)), ('mass', '<f8'), ('alive', '|b1'), ('', '|V7')]"
    );
    let packed = Packed::descr();
    assert_eq!(packed.to_string(), "[('tag', '|u1'), ('value', '<f4')]");
    assert_eq!(packed.itemsize().unwrap(), 5);
    let pair = Pair::descr();
    assert_eq!(pair.layout().unwrap()[1].offset, offset_of!(Pair, 1));
    assert!(matches!(&pair.fields[2].ty, FieldType::Record(inner) if *inner == Particle::descr()));
    // Named by their place in the descr: NumPy names the padding between them `f1`.
    let names: Vec<_> = pair.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["f0", "", "f2"]);
    assert_eq!(pair.fields[1], Field::padding(offset_of!(Pair, 1) - size_of::<u16>()));
    assert_eq!(Keyworded::descr().to_string(), "[('type', '|u1'), ('', '|V3'), ('match', '<f4')]");
    assert_eq!(Generic::<f64>::descr().to_string(), "[('tag', '|u1'), ('', '|V7'), ('value', '<f8')]");
    assert_eq!(Generic::<[u16; 2]>::TYPESTR, TypeStr::void(6));
}

/// NumPy's `align=True` layout of `[('value', '<f4'), ('ok', '?')]`, its padding declared
/// (so that its bytes are set) and exported as padding.
#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Flagged {
    value: f32,
    ok: bool,
    #[cai(padding)]
    _pad: [u8; 3],
}

/// Padding fields in a tuple struct, one of them generic, and two of them side by side.
#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Spaced<P: Copy>(u8, #[cai(padding)] u8, #[cai(padding)] P, f32);

#[test]
fn padding_fields_are_exported_as_padding() {
    assert_eq!(Flagged::descr().to_string(), "[('value', '<f4'), ('ok', '|b1'), ('', '|V3')]");
    assert_eq!(Flagged::TYPESTR, TypeStr::void(8));
    // NumPy names a tuple struct's fields by their place, padding counted: f0 and f2.
    let spaced = Spaced::<[u8; 2]>::descr();
    assert_eq!(spaced.to_string(), "[('f0', '|u1'), ('', '|V3'), ('f2', '<f4')]");
    assert_eq!(spaced.layout().unwrap()[1].offset, offset_of!(Spaced<[u8; 2]>, 3), "layouts list fields, not padding");
    // The bool's byte is still checked; the padding bytes are not.
    assert_eq!(bool_bytes::<Flagged>(), [4]);
}

#[derive(ArrayInterface)]
struct Particles {
    #[cai(data)]
    items: Vec<Particle>,
}

#[test]
fn arrays_of_records_export_their_descr() {
    let p = Particle { id: 1, position: [0.0; 3], mass: 1.0, alive: true };
    let d = Particles { items: vec![p; 3] }.array_interface().unwrap();
    assert_eq!(d.typestr.to_string(), format!("|V{}", size_of::<Particle>()));
    assert_eq!(d.descr.as_ref(), Some(&Particle::descr()));
    assert_eq!(d.descr().as_ref(), &Descr::clone(&Particle::descr()));
}

/// A device buffer with a stream of its own that notes what it is asked to order.
struct Ordered {
    stream: Stream,
    asked: std::cell::RefCell<Vec<Stream>>,
}

// SAFETY: only described, never dereferenced; len() is 0.
unsafe impl cai_core::DeviceBuffer for Ordered {
    type Elem = f32;
    fn device_address(&self) -> usize {
        0
    }
    fn len(&self) -> usize {
        0
    }
    fn stream(&self) -> Result<Stream, Error> {
        Ok(self.stream)
    }
    fn order_before(&self, stream: Stream) -> Result<(), Error> {
        self.asked.borrow_mut().push(stream);
        Ok(())
    }
}

#[derive(CudaArrayInterface)]
struct ExportedOnAnotherStream {
    #[cai(data)]
    values: Ordered,
    #[cai(stream)]
    stream: Stream,
}

#[test]
fn a_buffer_on_its_own_stream_is_ordered_before_the_exported_one() {
    let s = |n| Stream::Handle(StreamHandle::new(n).unwrap());
    let c = ExportedOnAnotherStream { values: Ordered { stream: s(7), asked: Default::default() }, stream: s(3) };
    assert_eq!(c.cuda_array_interface().unwrap().stream, s(3));
    assert_eq!(c.values.asked.borrow().as_slice(), &[s(3)], "stream 3 waits for the buffer's stream 7");
    // Same stream, or the producer's opt-out: nothing to order.
    let same = ExportedOnAnotherStream { values: Ordered { stream: s(7), asked: Default::default() }, stream: s(7) };
    same.cuda_array_interface().unwrap();
    let none =
        ExportedOnAnotherStream { values: Ordered { stream: s(7), asked: Default::default() }, stream: Stream::None };
    assert_eq!(none.cuda_array_interface().unwrap().stream, Stream::None);
    assert!(same.values.asked.borrow().is_empty() && none.values.asked.borrow().is_empty());
}
