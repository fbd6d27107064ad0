//! [`DimVec`]: one value per dimension (a shape, or strides), stored inline up to six
//! dimensions.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, DerefMut};

/// How many dimensions a [`DimVec`] holds without a heap allocation: six, the most that
/// the fixed-dimension extractors name (`Ix6`), and more than common arrays have.
pub const INLINE_DIMS: usize = 6;

/// The most dimensions a descriptor may have: 64, NumPy's limit (`NPY_MAXDIMS` from NumPy
/// 2.0), which DLPack consumers share. A view with more could be handed to no consumer.
pub const MAX_DIMS: usize = 64;

/// One value per dimension: a shape (`DimVec<usize>`) or strides (`DimVec<isize>`).
///
/// It reads as a slice (`Deref<Target = [T]>`); up to [`INLINE_DIMS`] values are stored in
/// the value itself, so reading a descriptor allocates nothing for common arrays, and more
/// go to the heap. It compares and hashes as its slice, and with slices, arrays and
/// `Vec`s of the same values.
///
/// ```
/// use cai_core::DimVec;
///
/// let shape = DimVec::from([4usize, 3]);
/// assert_eq!(shape, [4, 3]);
/// assert_eq!(shape.iter().product::<usize>(), 12);
/// assert_eq!(format!("{shape:?}"), "[4, 3]");
/// let strides: DimVec<isize> = (0..8).collect(); // eight dimensions: on the heap
/// assert_eq!(strides.len(), 8);
/// assert_eq!(Vec::from(strides), (0..8).collect::<Vec<isize>>());
/// ```
#[derive(Clone)]
pub struct DimVec<T: Copy + Default>(Repr<T>);

#[derive(Clone)]
enum Repr<T> {
    /// The first `len` values of `items` (the rest are unused).
    Inline { len: u8, items: [T; INLINE_DIMS] },
    /// More than [`INLINE_DIMS`] values (or fewer, after [`DimVec::truncate`]): only a
    /// push past them, or a longer `Vec`, makes one.
    Heap(Vec<T>),
}

impl<T: Copy + Default> DimVec<T> {
    /// No dimensions (a 0-d array's shape).
    pub fn new() -> DimVec<T> {
        DimVec(Repr::Inline { len: 0, items: [T::default(); INLINE_DIMS] })
    }

    /// The values as a slice.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        match &self.0 {
            Repr::Inline { len, items } => &items[..usize::from(*len)],
            Repr::Heap(v) => v,
        }
    }

    /// The values as a mutable slice.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match &mut self.0 {
            Repr::Inline { len, items } => &mut items[..usize::from(*len)],
            Repr::Heap(v) => v,
        }
    }

    /// The first `len` of `items` (all of them when `len` is larger), stored inline: a
    /// reader fills a fixed array and says how much of it counts, with no copy of a
    /// length known only at run time.
    #[inline]
    pub fn from_prefix(items: [T; INLINE_DIMS], len: usize) -> DimVec<T> {
        // At most INLINE_DIMS, so it fits.
        DimVec(Repr::Inline { len: len.min(INLINE_DIMS) as u8, items })
    }

    /// Appends a value (moving to the heap past [`INLINE_DIMS`]).
    #[inline]
    pub fn push(&mut self, value: T) {
        match &mut self.0 {
            Repr::Inline { len, items } if usize::from(*len) < INLINE_DIMS => {
                items[usize::from(*len)] = value;
                *len += 1;
            }
            Repr::Inline { len, items } => {
                let mut v = Vec::with_capacity(INLINE_DIMS * 2);
                v.extend_from_slice(&items[..usize::from(*len)]);
                v.push(value);
                self.0 = Repr::Heap(v);
            }
            Repr::Heap(v) => v.push(value),
        }
    }

    /// Removes the last value and returns it.
    pub fn pop(&mut self) -> Option<T> {
        let last = self.last().copied()?;
        self.truncate(self.len() - 1);
        Some(last)
    }

    /// Removes every value.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Keeps the first `len` values.
    pub fn truncate(&mut self, len: usize) {
        match &mut self.0 {
            Repr::Inline { len: n, .. } => *n = (*n).min(u8::try_from(len).unwrap_or(u8::MAX)),
            Repr::Heap(v) => v.truncate(len),
        }
    }

    /// Whether the values are stored in the value itself, not on the heap.
    pub fn is_inline(&self) -> bool {
        match &self.0 {
            Repr::Inline { .. } => true,
            // A `Vec` of a zero-sized type has no allocation.
            Repr::Heap(_) => std::mem::size_of::<T>() == 0,
        }
    }

    /// The values as a `Vec`.
    pub fn into_vec(self) -> Vec<T> {
        match self.0 {
            Repr::Inline { len, items } => items[..usize::from(len)].to_vec(),
            Repr::Heap(v) => v,
        }
    }
}

impl<T: Copy + Default> Default for DimVec<T> {
    fn default() -> DimVec<T> {
        DimVec::new()
    }
}

impl<T: Copy + Default> Deref for DimVec<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Copy + Default> DerefMut for DimVec<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: Copy + Default> AsRef<[T]> for DimVec<T> {
    fn as_ref(&self) -> &[T] {
        self
    }
}

impl<T: Copy + Default> Borrow<[T]> for DimVec<T> {
    fn borrow(&self) -> &[T] {
        self
    }
}

impl<T: Copy + Default + fmt::Debug> fmt::Debug for DimVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

impl<T: Copy + Default + PartialEq> PartialEq for DimVec<T> {
    fn eq(&self, other: &DimVec<T>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy + Default + Eq> Eq for DimVec<T> {}

impl<T: Copy + Default + Hash> Hash for DimVec<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl<T: Copy + Default + PartialEq> PartialEq<[T]> for DimVec<T> {
    fn eq(&self, other: &[T]) -> bool {
        self.as_slice() == other
    }
}

impl<T: Copy + Default + PartialEq> PartialEq<&[T]> for DimVec<T> {
    fn eq(&self, other: &&[T]) -> bool {
        self.as_slice() == *other
    }
}

impl<T: Copy + Default + PartialEq, const N: usize> PartialEq<[T; N]> for DimVec<T> {
    fn eq(&self, other: &[T; N]) -> bool {
        self.as_slice() == other
    }
}

impl<T: Copy + Default + PartialEq, const N: usize> PartialEq<&[T; N]> for DimVec<T> {
    fn eq(&self, other: &&[T; N]) -> bool {
        self.as_slice() == *other
    }
}

impl<T: Copy + Default + PartialEq, const N: usize> PartialEq<DimVec<T>> for [T; N] {
    fn eq(&self, other: &DimVec<T>) -> bool {
        self == other.as_slice()
    }
}

impl<T: Copy + Default + PartialEq> PartialEq<DimVec<T>> for &[T] {
    fn eq(&self, other: &DimVec<T>) -> bool {
        *self == other.as_slice()
    }
}

impl<T: Copy + Default + PartialOrd> PartialOrd for DimVec<T> {
    fn partial_cmp(&self, other: &DimVec<T>) -> Option<std::cmp::Ordering> {
        self.as_slice().partial_cmp(other.as_slice())
    }
}

impl<T: Copy + Default + Ord> Ord for DimVec<T> {
    fn cmp(&self, other: &DimVec<T>) -> std::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl<T: Copy + Default + PartialEq> PartialEq<Vec<T>> for DimVec<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy + Default + PartialEq> PartialEq<DimVec<T>> for Vec<T> {
    fn eq(&self, other: &DimVec<T>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy + Default + PartialEq> PartialEq<DimVec<T>> for [T] {
    fn eq(&self, other: &DimVec<T>) -> bool {
        self == other.as_slice()
    }
}

impl<T: Copy + Default> From<&[T]> for DimVec<T> {
    #[inline]
    fn from(values: &[T]) -> DimVec<T> {
        if values.len() <= INLINE_DIMS {
            let mut items = [T::default(); INLINE_DIMS];
            items[..values.len()].copy_from_slice(values);
            // At most INLINE_DIMS, so it fits.
            DimVec(Repr::Inline { len: values.len() as u8, items })
        } else {
            DimVec(Repr::Heap(values.to_vec()))
        }
    }
}

impl<T: Copy + Default> From<&mut [T]> for DimVec<T> {
    fn from(values: &mut [T]) -> DimVec<T> {
        DimVec::from(&*values)
    }
}

impl<T: Copy + Default, const N: usize> From<[T; N]> for DimVec<T> {
    fn from(values: [T; N]) -> DimVec<T> {
        DimVec::from(&values[..])
    }
}

impl<T: Copy + Default, const N: usize> From<&[T; N]> for DimVec<T> {
    fn from(values: &[T; N]) -> DimVec<T> {
        DimVec::from(&values[..])
    }
}

/// Keeps the `Vec`'s allocation when it has more than [`INLINE_DIMS`] values; copies the
/// values inline otherwise.
impl<T: Copy + Default> From<Vec<T>> for DimVec<T> {
    fn from(values: Vec<T>) -> DimVec<T> {
        if values.len() <= INLINE_DIMS {
            DimVec::from(values.as_slice())
        } else {
            DimVec(Repr::Heap(values))
        }
    }
}

impl<T: Copy + Default> From<&Vec<T>> for DimVec<T> {
    fn from(values: &Vec<T>) -> DimVec<T> {
        DimVec::from(values.as_slice())
    }
}

impl<T: Copy + Default> From<Box<[T]>> for DimVec<T> {
    fn from(values: Box<[T]>) -> DimVec<T> {
        DimVec::from(values.into_vec())
    }
}

impl<T: Copy + Default> From<DimVec<T>> for Vec<T> {
    fn from(values: DimVec<T>) -> Vec<T> {
        values.into_vec()
    }
}

impl<T: Copy + Default> FromIterator<T> for DimVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> DimVec<T> {
        let mut out = DimVec::new();
        out.extend(iter);
        out
    }
}

impl<T: Copy + Default> Extend<T> for DimVec<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for value in iter {
            self.push(value);
        }
    }
}

impl<'a, T: Copy + Default + 'a> Extend<&'a T> for DimVec<T> {
    fn extend<I: IntoIterator<Item = &'a T>>(&mut self, iter: I) {
        self.extend(iter.into_iter().copied());
    }
}

impl<'a, T: Copy + Default> IntoIterator for &'a mut DimVec<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl<'a, T: Copy + Default> IntoIterator for &'a DimVec<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: Copy + Default> IntoIterator for DimVec<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(self) -> IntoIter<T> {
        let end = self.len();
        IntoIter { values: self, next: 0, end }
    }
}

/// The values of a [`DimVec`], by value.
#[derive(Debug, Clone)]
pub struct IntoIter<T: Copy + Default> {
    values: DimVec<T>,
    next: usize,
    /// One past the last value not yet taken from the back.
    end: usize,
}

impl<T: Copy + Default> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        if self.next == self.end {
            return None;
        }
        self.next += 1;
        self.values.get(self.next - 1).copied()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.end - self.next;
        (left, Some(left))
    }
}

impl<T: Copy + Default> DoubleEndedIterator for IntoIter<T> {
    fn next_back(&mut self) -> Option<T> {
        if self.next == self.end {
            return None;
        }
        self.end -= 1;
        self.values.get(self.end).copied()
    }
}

impl<T: Copy + Default> ExactSizeIterator for IntoIter<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_up_to_six_then_heap() {
        let mut d = DimVec::<usize>::new();
        assert!(d.is_inline() && d.is_empty());
        for i in 0..INLINE_DIMS {
            d.push(i);
            assert!(d.is_inline());
        }
        d.push(6);
        assert!(!d.is_inline());
        assert_eq!(d, (0..7).collect::<Vec<_>>());
        d.truncate(2);
        assert_eq!(d, [0, 1]);
        assert_eq!(DimVec::from(vec![1usize; 7]).len(), 7);
        assert!(DimVec::from(vec![1usize; 6]).is_inline());
        assert_eq!(DimVec::from_prefix([1usize, 2, 3, 4, 5, 6], 2), [1, 2]);
        assert_eq!(DimVec::from_prefix([1usize, 2, 3, 4, 5, 6], 9), [1, 2, 3, 4, 5, 6]);
        assert_eq!(DimVec::from_prefix([1usize, 2, 3, 4, 5, 6], 0), DimVec::new());
    }

    #[test]
    #[allow(clippy::op_ref)] // the comparisons with references are what is tested
    fn compares_and_hashes_as_its_slice() {
        use std::collections::hash_map::DefaultHasher;
        let hash = |v: &dyn Fn(&mut DefaultHasher)| {
            let mut h = DefaultHasher::new();
            v(&mut h);
            h.finish()
        };
        let long: Vec<isize> = (0..9).collect();
        let inline = DimVec::from([3isize, -4]);
        assert_eq!(hash(&|h| inline.hash(h)), hash(&|h| [3isize, -4][..].hash(h)));
        assert_eq!(DimVec::from(long.clone()), long);
        assert_eq!(DimVec::from(long.clone()).into_iter().collect::<Vec<_>>(), long);
        assert_eq!(inline.clone().into_iter().len(), 2);
        assert_eq!(inline.clone().into_iter().rev().collect::<Vec<_>>(), [-4, 3]);
        let mut it = DimVec::from(long.clone()).into_iter();
        assert_eq!((it.next(), it.next_back(), it.len()), (Some(0), Some(8), 7));
        assert!([3isize, -4] == inline && &[3isize, -4][..] == inline && inline == &[3, -4]);
        let mut doubled = inline.clone();
        for x in &mut doubled {
            *x *= 2;
        }
        assert_eq!((doubled.pop(), doubled.as_slice()), (Some(-8), &[6][..]));
        doubled.clear();
        doubled.extend(&[1, 2]);
        let bigger = DimVec::from([1isize, 3]);
        assert!(doubled == [1, 2] && doubled < bigger);
        assert_ne!(inline, DimVec::from([3isize]));
        // Equal values compare equal whether inline or not.
        let mut spilled: DimVec<isize> = (0..7).collect();
        spilled.truncate(2);
        assert_eq!(spilled, DimVec::from([0isize, 1]));
    }
}
