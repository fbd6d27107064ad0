//! `cargo run --example record`: a `#[repr(C)]` struct as a record element type.
//!
//! The derive gives the record typestr `|V{size}` and a descr with every field at its
//! Rust offset and padding in the gaps, so `numpy.dtype(descr)` (or CuPy's) has the same
//! layout as Rust. An array of records is exported as any other array is, with two
//! differences this record shows:
//!
//! - it holds a `bool`, so it is exported read-only (`'data': (..., True)`): a consumer
//!   could write a byte other than 0 or 1, which no Rust `bool` may hold;
//! - Rust leaves its padding (two bytes after `id`, seven after `alive`) uninitialised:
//!   consumers may see leftover bytes there, and Rust code must not read those bytes back
//!   as `u8`. Where consumers may look at a record's bytes, declare the padding as fields
//!   (`_pad: [u8; 2]`) set to 0.
//!
//! On a GPU, use a `CudaSlice` of a record that implements cudarc's `DeviceRepr` and holds
//! no `bool` (store it as `u8`): cudarc copies device bytes into Rust values unchecked, and
//! cai's `cudarc_view` refuses elements that hold a `bool`.

use std::mem::{offset_of, size_of};

use cai_core::{ArrayInterface, Element, Error};

#[derive(Clone, Copy, Debug, Element)]
#[repr(C)]
struct Particle {
    id: u16,
    position: [f32; 3],
    mass: f64,
    alive: bool,
}

#[derive(ArrayInterface)]
struct Particles {
    #[cai(data)]
    items: Vec<Particle>,
}

fn main() -> Result<(), Error> {
    println!("typestr: {}", Particle::TYPESTR);
    println!("descr:   {}", Particle::descr());
    for field in Particle::descr().layout()? {
        println!("  {:<9} offset {:>2}, {:>2} bytes", field.field.name, field.offset, field.size);
    }
    println!(
        "Rust:    size {}, offsets id {} position {} mass {} alive {}",
        size_of::<Particle>(),
        offset_of!(Particle, id),
        offset_of!(Particle, position),
        offset_of!(Particle, mass),
        offset_of!(Particle, alive)
    );
    let p = Particle { id: 7, position: [1.0, 2.0, 3.0], mass: 0.5, alive: true };
    println!("array:   {}", Particles { items: vec![p; 4] }.array_interface()?);
    Ok(())
}
