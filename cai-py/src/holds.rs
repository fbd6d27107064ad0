//! The rule of both overlap checks: byte ranges held by live borrows of memory (a call's
//! arguments, in the extractors' registry; Rust's slices of host memory, across calls),
//! each for reading or for writing. Two holds of one scope conflict when their bytes
//! overlap, either writes, and (where both give their [`Lattice`]) an element of one can
//! share a byte with an element of the other.

use std::ops::Range;

/// Where a strided array's elements can lie: each starts at `origin` plus a multiple of
/// `step` (the greatest common divisor of the strides of its dimensions longer than 1; 0
/// for an array of one element) and covers `item` bytes. A superset of its elements, so
/// that two lattices that cannot meet prove that the arrays share no byte: the columns of
/// a matrix, the real and imaginary parts of a complex array, the even and the odd
/// elements of a vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lattice {
    pub(crate) origin: usize,
    pub(crate) step: usize,
    pub(crate) item: usize,
}

impl Lattice {
    /// The lattice of an array whose element zero is at `origin`, with these dimensions,
    /// strides in bytes (`None`: C order) and item size.
    pub(crate) fn of(origin: usize, shape: &[usize], strides: Option<&[isize]>, item: usize) -> Lattice {
        let step = match strides {
            Some(strides) => {
                shape.iter().zip(strides).filter(|&(&n, _)| n > 1).fold(0, |g, (_, s)| gcd(g, s.unsigned_abs()))
            }
            // In C order each stride is a multiple of the last one of a dimension longer
            // than 1, which is the item size.
            None if shape.iter().any(|&n| n > 1) => item,
            None => 0,
        };
        Lattice { origin, step, item }
    }

    /// The lattice of the array `d` describes.
    pub(crate) fn of_descriptor(d: &cai_core::Descriptor) -> Lattice {
        Lattice::of(d.data, &d.shape, d.strides.as_deref(), d.typestr.itemsize())
    }

    /// Whether an element of `self` can share a byte with an element of `other`. Element
    /// starts `x` of `self` and `y` of `other` differ by `d = self.origin - other.origin`
    /// plus a multiple of `g`, the gcd of both steps; the elements share a byte when
    /// `-self.item < x - y < other.item`. So they can meet when the difference nearest
    /// above or below zero falls in that window.
    pub(crate) fn can_meet(&self, other: &Lattice) -> bool {
        // Addresses and sizes are below 2^64: their differences fit in an i128.
        let d = self.origin as i128 - other.origin as i128;
        let (below, above) = (-(self.item as i128), other.item as i128);
        let g = gcd(self.step, other.step) as i128;
        if g == 0 {
            // One element each.
            return below < d && d < above;
        }
        let r = d.rem_euclid(g);
        r < above || below < r - g
    }
}

/// The greatest common divisor (`gcd(0, n) = n`), by shifts and subtractions: strides
/// are mostly powers of two times small numbers, and a division costs more.
fn gcd(mut a: usize, mut b: usize) -> usize {
    if a == 0 || b == 0 {
        return a | b;
    }
    let shift = (a | b).trailing_zeros();
    a >>= a.trailing_zeros();
    loop {
        b >>= b.trailing_zeros();
        if a > b {
            std::mem::swap(&mut a, &mut b);
        }
        b -= a;
        if b == 0 {
            return a << shift;
        }
    }
}

/// The holds of one registry, each with the scope within which it conflicts.
pub(crate) struct Holds<S> {
    next: u64,
    held: Vec<Hold<S>>,
}

struct Hold<S> {
    id: u64,
    scope: S,
    bytes: Range<usize>,
    /// Where its elements lie within `bytes`; `None`: every byte may be reached.
    lattice: Option<Lattice>,
    writable: bool,
}

/// The hold a new one conflicts with.
pub(crate) struct Clash {
    /// Its bytes.
    pub(crate) bytes: Range<usize>,
    /// Whether it is for writing.
    pub(crate) writable: bool,
    /// How many holds of its scope were taken before it and are still held.
    pub(crate) earlier: usize,
}

impl<S: PartialEq> Holds<S> {
    pub(crate) const fn new() -> Holds<S> {
        Holds { next: 0, held: Vec::new() }
    }

    /// Holds `bytes` in `scope` (`writable`: for writing; `lattice`: where its elements
    /// lie, `None` for every byte) in place of `replacing` (the same borrower's hold, if
    /// any), and returns the new hold's id; or the hold it conflicts with, holding nothing.
    pub(crate) fn take(
        &mut self,
        scope: S,
        bytes: Range<usize>,
        lattice: Option<Lattice>,
        writable: bool,
        replacing: Option<u64>,
    ) -> Result<u64, Clash> {
        let clash = self.held.iter().find(|h| {
            Some(h.id) != replacing
                && h.scope == scope
                && h.bytes.start < bytes.end
                && bytes.start < h.bytes.end
                && (writable || h.writable)
                && match (&h.lattice, &lattice) {
                    (Some(a), Some(b)) => a.can_meet(b),
                    _ => true,
                }
        });
        if let Some(other) = clash {
            let earlier = self.held.iter().filter(|h| h.scope == other.scope && h.id < other.id).count();
            return Err(Clash { bytes: other.bytes.clone(), writable: other.writable, earlier });
        }
        if let Some(id) = replacing {
            self.give_back(id);
        }
        self.next += 1;
        self.held.push(Hold { id: self.next, scope, bytes, lattice, writable });
        Ok(self.next)
    }

    /// Gives hold `id` back.
    pub(crate) fn give_back(&mut self, id: u64) {
        // Borrows mostly end in the reverse order of their taking: the last first.
        if let Some(i) = self.held.iter().rposition(|h| h.id == id) {
            self.held.swap_remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes each element of a small strided array covers.
    fn bytes_of(origin: isize, shape: &[isize], strides: &[isize], item: isize) -> Vec<isize> {
        if shape.contains(&0) {
            return Vec::new();
        }
        let mut starts = vec![origin];
        for (&n, &s) in shape.iter().zip(strides) {
            starts = starts.iter().flat_map(|&o| (0..n).map(move |i| o + i * s)).collect();
        }
        starts.into_iter().flat_map(|o| (0..item).map(move |b| o + b)).collect()
    }

    fn lattice(origin: isize, shape: &[isize], strides: &[isize], item: isize) -> Lattice {
        let size = |n: isize| usize::try_from(n).unwrap();
        Lattice::of(size(origin), &shape.iter().map(|&n| size(n)).collect::<Vec<_>>(), Some(strides), size(item))
    }

    #[test]
    fn lattices_that_cannot_meet_share_no_byte() {
        // Every pair of small arrays: where their bytes meet, the lattices say they can.
        let mut arrays = Vec::new();
        for origin in 64..76 {
            for item in [1, 2, 3, 4, 8] {
                for (shape, strides) in [
                    (vec![1], vec![0]),
                    (vec![3], vec![item]),
                    (vec![3], vec![8]),
                    (vec![3], vec![-6]),
                    (vec![2, 3], vec![12, 4]),
                    (vec![2, 2], vec![16, -8]),
                    (vec![4], vec![0]),
                    (vec![2, 1], vec![10, 7]),
                ] {
                    arrays.push((origin, shape, strides, item));
                }
            }
        }
        let (mut met, mut apart) = (0, 0);
        for a in &arrays {
            let a_bytes = bytes_of(a.0, &a.1, &a.2, a.3);
            let la = lattice(a.0, &a.1, &a.2, a.3);
            for b in &arrays {
                let b_bytes = bytes_of(b.0, &b.1, &b.2, b.3);
                let lb = lattice(b.0, &b.1, &b.2, b.3);
                let share = a_bytes.iter().any(|x| b_bytes.contains(x));
                assert!(!share || la.can_meet(&lb), "{a:?} and {b:?} share a byte; lattices {la:?}, {lb:?}");
                assert_eq!(la.can_meet(&lb), lb.can_meet(&la), "{a:?} and {b:?}");
                if la.can_meet(&lb) {
                    met += 1
                } else {
                    apart += 1
                }
            }
        }
        // The test means something only where both answers occur.
        assert!(met > 1000 && apart > 1000, "{met} pairs can meet, {apart} cannot");
    }

    #[test]
    fn columns_parts_and_interleaved_elements_are_apart() {
        // The columns of a 4x3 matrix of f4.
        let col = |j: usize| Lattice::of(1000 + 4 * j, &[4], Some(&[12]), 4);
        assert!(!col(0).can_meet(&col(1)) && !col(1).can_meet(&col(2)) && col(1).can_meet(&col(1)));
        // The real and imaginary parts of c8 (each an f4 with stride 8).
        let (re, im) = (Lattice::of(2000, &[5], Some(&[8]), 4), Lattice::of(2004, &[5], Some(&[8]), 4));
        assert!(!re.can_meet(&im));
        // f8 elements with stride 8, four bytes apart: they share bytes.
        assert!(Lattice::of(3000, &[5], Some(&[8]), 8).can_meet(&Lattice::of(3004, &[5], Some(&[8]), 8)));
        // A row and a column of a matrix meet.
        assert!(Lattice::of(1000, &[3], Some(&[4]), 4).can_meet(&col(0)));
    }

    #[test]
    fn c_order_steps_by_the_item_and_gcd_agrees_with_euclid() {
        for shape in [&[3, 4, 5][..], &[1, 7], &[4, 1], &[1, 1], &[], &[2, 3, 1]] {
            let item = 4;
            let mut strides = vec![0; shape.len()];
            let mut step = 4;
            for (s, &n) in strides.iter_mut().zip(shape).rev() {
                *s = step;
                step *= isize::try_from(n).unwrap();
            }
            assert_eq!(Lattice::of(0, shape, None, item), Lattice::of(0, shape, Some(&strides), item), "{shape:?}");
        }
        let euclid = |mut a: usize, mut b: usize| {
            while b != 0 {
                (a, b) = (b, a % b);
            }
            a
        };
        for a in 0..200 {
            for b in [0, 1, 2, 3, 6, 8, 12, 48, 96, 97, 1 << 20, 3 << 40] {
                assert_eq!(gcd(a, b), euclid(a, b), "{a} {b}");
                assert_eq!(gcd(b, a), euclid(a, b), "{b} {a}");
            }
        }
    }

    #[test]
    fn holds_with_lattices() {
        let mut holds = Holds::new();
        let re = Lattice { origin: 2000, step: 8, item: 4 };
        let im = Lattice { origin: 2004, step: 8, item: 4 };
        let a = holds.take((), 2000..2036, Some(re), true, None).ok().unwrap();
        assert!(holds.take((), 2004..2040, Some(im), true, None).is_ok());
        // Without a lattice every byte of the range counts.
        let clash = holds.take((), 2030..2031, None, false, None).err().unwrap();
        assert_eq!(clash.bytes, 2000..2036);
        holds.give_back(a);
        assert!(holds.take((), 2000..2036, Some(re), false, None).is_ok());
    }
}
