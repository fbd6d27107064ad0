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

/// A descriptor that may break any set of the rules `validate` checks: a version past 3,
/// strides of the wrong length, an item size past the bound, a descr of another size, a
/// count that overflows, a null or wrapping pointer, a mask (in version 0, of another
/// shape, itself broken) and a stream before version 3.
fn any_descriptor(depth: u32) -> BoxedStrategy<Descriptor> {
    let shape = prop::collection::vec(prop::sample::select(vec![0usize, 1, 3, usize::MAX / 2]), 0..=3);
    let strides = prop::option::of(prop::collection::vec(-16isize..=16, 0..=4));
    let itemsize = prop::sample::select(vec![0usize, 4, cai_core::MAX_ITEMSIZE + 1]);
    let descr = prop::option::of(prop::sample::select(vec![2usize, 4]));
    let data = prop::sample::select(vec![0usize, 8, 0x1000_0000, usize::MAX - 4]);
    let stream = prop::sample::select(vec![None, Some(7usize)]);
    let base = (shape, strides, itemsize, descr, data, 0u32..=4, stream).prop_map(
        |(shape, strides, itemsize, descr, data, version, stream)| {
            let mut d = Descriptor::from_typestr(TypeStr::void(itemsize), data, shape);
            d.strides = strides.map(Into::into);
            d.descr = descr.map(|n| cai_core::Descr::simple(TypeStr::void(n)));
            d.version = version;
            d.stream = cai_core::Stream::from_raw(stream).unwrap();
            d
        },
    );
    if depth == 0 {
        return base.boxed();
    }
    (base, prop::option::of(any_descriptor(depth - 1)))
        .prop_map(|(mut d, mask)| {
            d.mask = mask.map(Box::new);
            d
        })
        .boxed()
}

proptest! {
    #[test]
    fn problems_begin_with_the_error_of_validate(d in any_descriptor(2)) {
        let problems = d.problems(false);
        match d.validate() {
            Ok(_) => prop_assert!(problems.is_empty(), "{:?}", problems),
            Err(e) => prop_assert_eq!(problems.first(), Some(&e)),
        }
        // Each problem once.
        for (i, p) in problems.iter().enumerate() {
            prop_assert!(!problems[..i].contains(p), "{} twice in {:?}", p, problems);
        }
    }
}

#[test]
fn problems_lists_each_rule_broken() {
    // A null pointer, a stream in version 2 and a mask of another shape: three problems,
    // where validate stops at the first.
    let mut d = Descriptor::from_typestr(TypeStr::void(4), 0, [2usize, 3]);
    d.version = 2;
    d.stream = cai_core::Stream::from_raw(Some(5)).unwrap();
    d.mask = Some(Box::new(Descriptor::from_typestr(TypeStr::void(1), 0x1000, [2usize])));
    let messages: Vec<String> = d.problems(false).iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert!(messages[0].starts_with("data: pointer 0 (null) received"), "{messages:?}");
    assert!(messages[1].starts_with("mask: shape (2,)"), "{messages:?}");
    assert!(messages[2].starts_with("stream: received 5 in a version 2 descriptor"), "{messages:?}");
    assert_eq!(d.validate().unwrap_err().to_string(), messages[0]);
    // The producer rule: an empty array exports pointer 0 from version 2.
    let empty = Descriptor::from_typestr(TypeStr::void(4), 0x1000, [0usize]);
    assert!(empty.problems(false).is_empty());
    assert_eq!(empty.problems(true), vec![empty.check_producer_rules(empty.validate().unwrap()).unwrap_err()]);
}

#[test]
fn problems_past_the_dimension_limit_stay_short() {
    // A million dimensions, strides and mask dimensions: each limit is one short finding,
    // and no rule prints a million-entry tuple.
    let big = vec![1usize; 1_000_000];
    let mut d = Descriptor::from_typestr(TypeStr::void(4), 0x1000, big.clone());
    d.strides = Some(vec![4isize; 1_000_000].into());
    d.mask = Some(Box::new(Descriptor::from_typestr(TypeStr::void(1), 0x2000, big)));
    let messages: Vec<String> = d.problems(true).iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert!(messages[0].starts_with("shape: "), "{messages:?}");
    assert!(messages[1].starts_with("strides: "), "{messages:?}");
    assert!(messages[2].starts_with("mask: shape: "), "{messages:?}");
    assert!(messages.iter().map(String::len).sum::<usize>() < 1_000, "{messages:?}");
    assert_eq!(d.validate().unwrap_err().to_string(), messages[0]);
    // A mask's shape and the array's are compared only when both are within the limit.
    for (shape, mask) in [(vec![1usize; 1_000_000], vec![5usize]), (vec![5usize], vec![1usize; 1_000_000])] {
        let mut d = Descriptor::from_typestr(TypeStr::void(4), 0x1000, shape);
        d.mask = Some(Box::new(Descriptor::from_typestr(TypeStr::void(1), 0x2000, mask)));
        let messages: Vec<String> = d.problems(false).iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(messages[0].len() < 200 && messages[0].contains("dimensions"), "{messages:?}");
    }
    // Strides past the limit leave the shapes to compare with the mask's.
    let mut d = Descriptor::from_typestr(TypeStr::void(4), 0x1000, [2usize, 3]);
    d.strides = Some(vec![4isize; 100].into());
    d.mask = Some(Box::new(Descriptor::from_typestr(TypeStr::void(1), 0x2000, [5usize])));
    let messages: Vec<String> = d.problems(false).iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[0].starts_with("strides: ") && messages[1].starts_with("mask: shape (5,)"), "{messages:?}");
}
