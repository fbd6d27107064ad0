//! `cargo bench -p cai-core`: typestr parsing and descriptor validation.

use std::hint::black_box;

use cai_core::{Descr, Descriptor, Field, TypeStr};
use criterion::{criterion_group, criterion_main, Criterion};

fn typestr(c: &mut Criterion) {
    let mut g = c.benchmark_group("typestr");
    for s in ["<f4", ">c16", "<M8[25ns]"] {
        g.bench_function(format!("parse {s}"), |b| b.iter(|| TypeStr::parse(black_box(s))));
    }
    let t = TypeStr::parse("<M8[25ns]").unwrap();
    g.bench_function("display <M8[25ns]", |b| b.iter(|| black_box(t).to_string()));
    g.finish();
}

fn validate(c: &mut Criterion) {
    let t = |s: &str| TypeStr::parse(s).unwrap();
    // A 4-d strided (reversed, sliced) view of 16-byte records with padding.
    let record = Descr::new(vec![
        Field::new("x", t("<f4")),
        Field::new("flags", t("|u1")),
        Field::padding(3),
        Field::new("uv", t("<f2")).with_shape([2]),
        Field::padding(4),
    ]);
    let d = Descriptor::from_typestr(TypeStr::void(16), 0x7f00_0000_0000, [8, 16, 32, 4])
        .with_strides([-65536, 4096, 64, 16])
        .with_descr(record);
    assert!(d.validate().is_ok());
    let mut g = c.benchmark_group("descriptor");
    g.bench_function("validate 4-d strided with descr", |b| b.iter(|| black_box(&d).validate()));
    let plain = Descriptor::new::<f32>(0x7f00_0000_0000, [1024, 1024]);
    g.bench_function("validate 2-d contiguous", |b| b.iter(|| black_box(&plain).validate()));
    g.finish();
}

criterion_group!(benches, typestr, validate);
criterion_main!(benches);
