//! Property tests: the typestr grammar round-trips, and the byte extent and contiguity
//! flags agree with a walk over every index.

// Shapes, strides and sizes here are tiny, far from isize::MAX.
#![allow(clippy::cast_possible_wrap)]

use std::num::NonZeroU32;

use cai_core::{ByteOrder, DateTimeUnit, Descriptor, Kind, TimeUnit, TypeStr};
use proptest::prelude::*;

fn byte_order() -> impl Strategy<Value = ByteOrder> {
    prop_oneof![Just(ByteOrder::Little), Just(ByteOrder::Big), Just(ByteOrder::NotApplicable)]
}

fn itemsize(kind: Kind) -> BoxedStrategy<usize> {
    match kind {
        Kind::Bool => Just(1).boxed(),
        Kind::Int | Kind::UInt => prop::sample::select(vec![1, 2, 4, 8]).boxed(),
        Kind::Float => prop::sample::select(vec![2, 4, 8, 10, 12, 16]).boxed(),
        Kind::Complex => prop::sample::select(vec![4, 8, 16, 20, 24, 32]).boxed(),
        Kind::TimeDelta | Kind::DateTime => Just(8).boxed(),
        Kind::Object => Just(std::mem::size_of::<usize>()).boxed(),
        Kind::Unicode => (0usize..1 << 20).prop_map(|n| n * 4).boxed(),
        Kind::Bytes | Kind::Void => (0usize..1 << 30).boxed(),
    }
}

fn unit() -> impl Strategy<Value = Option<DateTimeUnit>> {
    prop::option::of(
        (prop::sample::select(TimeUnit::ALL.to_vec()), 1u32..=u32::MAX)
            .prop_map(|(unit, count)| DateTimeUnit { unit, count: NonZeroU32::new(count).unwrap() }),
    )
}

/// Every valid type string: any order, any kind, every size the kind allows, and a unit
/// (with multiplier) for datetimes and timedeltas.
fn typestr() -> impl Strategy<Value = TypeStr> {
    (byte_order(), prop::sample::select(Kind::ALL.to_vec()))
        .prop_flat_map(|(order, kind)| (Just(order), Just(kind), itemsize(kind), unit()))
        .prop_map(|(order, kind, size, unit)| {
            let t = TypeStr::new(order, kind, size).unwrap();
            if matches!(kind, Kind::DateTime | Kind::TimeDelta) {
                t.with_unit(unit).unwrap()
            } else {
                t
            }
        })
}

proptest! {
    #[test]
    fn typestr_display_parse_round_trips(t in typestr()) {
        let written = t.to_string();
        prop_assert_eq!(TypeStr::parse(&written).unwrap(), t);
        prop_assert_eq!(TypeStr::parse(&written).unwrap().to_string(), written);
        prop_assert!(t.is_equivalent(&t.normalized()));
    }

    #[test]
    fn typestr_parse_never_panics(s in "[<>|=]?[a-zA-Z?]?[0-9+-]{0,4}(\\[[0-9]{0,3}[a-zA-Z]{0,3}\\]?)?", junk in "\\PC{0,8}") {
        for input in [s.clone(), format!("{s}{junk}"), junk.clone()] {
            match TypeStr::parse(&input) {
                Ok(t) => {
                    // Whatever parses prints back to something that parses to it.
                    prop_assert_eq!(TypeStr::parse(&t.to_string()).unwrap(), t);
                }
                Err(e) => {
                    prop_assert_eq!(e.key(), "typestr");
                    let quoted = format!("'{}'", input.escape_debug());
                    prop_assert!(e.to_string().contains(&quoted), "{} does not quote {}", e, quoted);
                }
            }
        }
    }
}

/// The byte offset of every element, by walking all indices.
fn offsets(shape: &[usize], strides: &[isize]) -> Vec<isize> {
    let mut out = vec![0isize];
    for (&n, &s) in shape.iter().zip(strides) {
        out = out.iter().flat_map(|&base| (0..n).map(move |i| base + s * i as isize)).collect();
    }
    out
}

fn layout() -> impl Strategy<Value = (Vec<usize>, Vec<isize>, usize)> {
    (0usize..=4)
        .prop_flat_map(|ndim| (prop::collection::vec(0usize..=4, ndim), prop::collection::vec(-40isize..=40, ndim)))
        .prop_flat_map(|(shape, strides)| (Just(shape), Just(strides), prop::sample::select(vec![1usize, 2, 4, 8, 16])))
}

fn descriptor(shape: &[usize], strides: &[isize], itemsize: usize) -> Descriptor {
    let t = TypeStr::new(ByteOrder::NotApplicable, Kind::Void, itemsize).unwrap();
    Descriptor::from_typestr(t, 0x1000_0000, shape).with_strides(strides)
}

proptest! {
    #[test]
    fn extent_matches_a_walk_over_every_index((shape, strides, itemsize) in layout()) {
        let d = descriptor(&shape, &strides, itemsize);
        let extent = d.extent().unwrap();
        if shape.contains(&0) {
            prop_assert!(extent.is_empty());
            prop_assert_eq!((extent.start, extent.end), (0, 0));
        } else {
            let all = offsets(&shape, &strides);
            prop_assert_eq!(extent.start, *all.iter().min().unwrap());
            prop_assert_eq!(extent.end, *all.iter().max().unwrap() + itemsize as isize);
        }
        prop_assert_eq!(d.validate().unwrap(), extent);
    }

    #[test]
    fn contiguity_matches_a_walk_over_every_index((shape, strides, itemsize) in layout()) {
        let d = descriptor(&shape, &strides, itemsize);
        let dense = |offsets: &[isize]| offsets.iter().enumerate().all(|(k, &o)| o == (k * itemsize) as isize);
        let c = offsets(&shape, &strides);
        let rev_shape: Vec<usize> = shape.iter().rev().copied().collect();
        let rev_strides: Vec<isize> = strides.iter().rev().copied().collect();
        let f = offsets(&rev_shape, &rev_strides);
        let empty = shape.contains(&0);
        prop_assert_eq!(d.is_c_contiguous(), empty || dense(&c));
        prop_assert_eq!(d.is_f_contiguous(), empty || dense(&f));
    }

    #[test]
    fn implicit_strides_are_c_order(shape in prop::collection::vec(0usize..=5, 0..=4), itemsize in 1usize..=16) {
        let t = TypeStr::void(itemsize);
        let implicit = Descriptor::from_typestr(t, 0x1000, shape.clone());
        let strides = implicit.strides().unwrap().into_owned();
        let explicit = implicit.clone().with_strides(strides);
        prop_assert!(explicit.is_c_contiguous());
        prop_assert_eq!(explicit.extent().unwrap(), implicit.extent().unwrap());
        prop_assert_eq!(explicit.is_f_contiguous(), implicit.is_f_contiguous());
        if !shape.contains(&0) {
            prop_assert_eq!(implicit.extent().unwrap().len(), implicit.nbytes().unwrap());
        }
    }
}
