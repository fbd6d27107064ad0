//! `cargo run --example descriptors`: what cai-core describes and what it refuses.
//!
//! A host container describes itself as NumPy's `__array_interface__` would, then a
//! consumer checks descriptors that peers could send, each by its declared version.

use cai_core::{ArrayInterface, Descr, Descriptor, Error, Field, Stream, TypeStr};

/// A row-major matrix in host memory.
struct Matrix {
    values: Vec<f32>,
    rows: usize,
    cols: usize,
}

impl ArrayInterface for Matrix {
    fn array_interface(&self) -> Result<Descriptor, Error> {
        Ok(Descriptor::new::<f32>(self.values.as_ptr() as usize, [self.rows, self.cols]))
    }
}

fn report(label: &str, d: &Descriptor) {
    println!("{label}\n  {d}");
    match d.validate() {
        Ok(extent) => println!(
            "  valid: {} elements, bytes [{}, {}) from data, C-contiguous {}, F-contiguous {}\n",
            d.size().unwrap_or(0),
            extent.start,
            extent.end,
            d.is_c_contiguous(),
            d.is_f_contiguous()
        ),
        Err(e) => println!("  refused: {e}\n"),
    }
}

fn main() -> Result<(), Error> {
    let m = Matrix { values: (0..12).map(|v| v as f32).collect(), rows: 3, cols: 4 };
    let exported = m.array_interface()?;
    report("A 3x4 f32 matrix, as its producer exports it:", &exported);

    let transposed = Descriptor { shape: [4, 3].into(), strides: Some([4, 16].into()), ..exported.clone() };
    report("Its transpose (Fortran order):", &transposed);

    let reversed = Descriptor::new::<f32>(exported.data + 32, [3, 2]).with_strides([-16, 8]);
    report("Rows reversed, every other column (negative strides):", &reversed);

    let t = |s: &str| TypeStr::parse(s);
    let record =
        Descr::new(vec![Field::new("id", t("|u1")?), Field::padding(3), Field::new("xyz", t("<f4")?).with_shape([3])]);
    let points = Descriptor::from_typestr(TypeStr::void(16), 0x7f00_0000_0000, [1024]).with_descr(record);
    report("A record type with padding:", &points);

    let on_stream = exported.clone().with_stream(Stream::from_raw(Some(0x5a5a_0000))?);
    report("Version 3, with pending work on a stream:", &on_stream);

    println!("What a careful consumer refuses:\n");
    report("A stream in a version 2 dict:", &on_stream.clone().with_version(2));
    report("A null pointer for a non-empty array:", &Descriptor { data: 0, ..exported.clone() });
    report("Strides that do not match the shape:", &exported.clone().with_strides([16]));
    report("Strides whose extent overflows:", &exported.clone().with_strides([isize::MAX, 4]));
    println!("A typestr that cannot be:\n  refused: {}\n", TypeStr::parse("<f3").unwrap_err());
    println!("Stream 0:\n  refused: {}", Stream::from_raw(Some(0)).unwrap_err());
    Ok(())
}
