//! The derives expanded without a prelude work like any other.

use cai_hygiene::{Device, Grid, Record, Valid};
use renamed::{ArrayInterface, CudaArrayInterface, Element, NamedCudaArrays, RawDeviceBuffer, Stream};

fn raw<T: Element>(len: usize) -> RawDeviceBuffer<T> {
    // SAFETY: only described, never dereferenced.
    unsafe { RawDeviceBuffer::new(0x10_0000, len) }
}

#[test]
fn derived_without_prelude_and_renamed() {
    let g = Grid { values: vec![0.0; 6], rows: 2, cols: 3 };
    let d = g.array_interface().unwrap();
    assert_eq!((d.shape.as_slice(), d.readonly), (&[2, 3][..], true));

    let dev = Device::<f32> {
        values: raw(4),
        shape: [4],
        valid: Valid { bits: raw(4) },
        stream: Stream::LegacyDefault,
        ids: raw(2),
    };
    let d = dev.cuda_array_interface().unwrap();
    assert_eq!((d.stream, d.mask.unwrap().shape.to_vec()), (Stream::LegacyDefault, vec![4]));
    assert_eq!(Device::<f32>::NAMES, ["ids"]);
    assert_eq!(dev.cuda_array("ids").unwrap().unwrap().shape, [2]);

    assert_eq!(Record::descr().to_string(), "[('id', '|u1'), ('', '|V7'), ('value', '<f8')]");
}
