//! [`StableVec`]: a growable host buffer whose exported memory is never freed early.

use std::collections::TryReserveError;
use std::ops::{Deref, DerefMut};

use crate::buffer::HostBuffer;
use crate::element::Element;

/// A growable host buffer for containers whose arrays Python may be viewing.
///
/// # The rule it keeps
///
/// A Python view of a container's memory (a NumPy array made from
/// `__array_interface__`, a `cai.HostArray`, a DLPack capsule) holds a reference to the
/// container object, not to the memory: the view reads whatever the address it was given
/// holds. So memory exported from a container **must stay allocated, at the same address,
/// for as long as the container object lives**. A `Vec` breaks that the moment Rust
/// grows it past its capacity (`push`, `extend`, `resize`) or replaces it: the old
/// allocation is freed and every existing view reads freed memory.
///
/// Views keep the container alive, so memory freed only when the container is dropped is
/// never freed under a view. `StableVec` relies on exactly that: when it must grow, it
/// moves to a new allocation and *keeps the old one* until it is dropped itself. Views made
/// before the move keep reading the elements as they were (take a new view to see the
/// new ones); nothing reads freed memory. The price is memory: [`retired_bytes`] says how
/// much old allocations hold, and [`release_retired`] frees them when you know that no
/// view remains.
///
/// Never replace a `StableVec` field (`self.data = StableVec::new()` drops the old one
/// while views may read it): change its contents through its methods instead.
///
/// ```
/// use cai_core::{HostBuffer, StableVec};
///
/// let mut v = StableVec::from(vec![1.0f32, 2.0]);
/// let exported = v.as_ptr(); // what a NumPy view would read
/// v.extend_from_slice(&[3.0; 100]); // grows: a new allocation
/// assert_ne!(v.as_ptr(), exported);
/// // The old allocation is still alive, with its old contents.
/// assert_eq!(unsafe { *exported.add(1) }, 2.0);
/// assert!(v.retired_bytes() >= 8);
/// ```
///
/// [`retired_bytes`]: StableVec::retired_bytes
/// [`release_retired`]: StableVec::release_retired
#[derive(Debug, Default)]
pub struct StableVec<T> {
    current: Vec<T>,
    /// Allocations that views made earlier may still read.
    retired: Vec<Vec<T>>,
}

impl<T: Copy> StableVec<T> {
    /// An empty buffer.
    pub const fn new() -> StableVec<T> {
        StableVec { current: Vec::new(), retired: Vec::new() }
    }

    /// An empty buffer with room for `capacity` elements before it has to move.
    pub fn with_capacity(capacity: usize) -> StableVec<T> {
        StableVec { current: Vec::with_capacity(capacity), retired: Vec::new() }
    }

    /// Room for `additional` more elements; moves to a new allocation (keeping the old one)
    /// when the current one is too small.
    ///
    /// # Panics
    ///
    /// When the capacity would exceed `isize::MAX` bytes or the allocator fails (where
    /// `Vec` would abort the process). For sizes that come from outside the program (a
    /// Python argument), use [`try_reserve`](Self::try_reserve) and the other `try_`
    /// methods, which return the failure instead.
    pub fn reserve(&mut self, additional: usize) {
        if let Err(e) = self.try_reserve(additional) {
            panic!("StableVec: {e}");
        }
    }

    /// Room for `additional` more elements, as [`reserve`](Self::reserve) makes it, or the
    /// error when the capacity would exceed `isize::MAX` bytes or the allocator fails. On
    /// an error nothing changed: the elements, the allocation and the retired ones are
    /// as they were.
    pub fn try_reserve(&mut self, additional: usize) -> Result<(), TryReserveError> {
        let len = self.current.len();
        let Some(needed) = len.checked_add(additional) else {
            // `Vec` reports the overflow, and changes nothing.
            return self.current.try_reserve(additional);
        };
        if needed <= self.current.capacity() {
            return Ok(());
        }
        // Room for the retired allocation first, so that a failure below leaves nothing
        // half done.
        if self.current.capacity() > 0 {
            self.retired.try_reserve(1)?;
        }
        // Twice the capacity when the allocator can give it (amortized growth), else
        // exactly what is needed.
        let mut moved = Vec::new();
        let doubled = needed.max(self.current.capacity().saturating_mul(2));
        if moved.try_reserve_exact(doubled).is_err() {
            moved.try_reserve_exact(needed)?;
        }
        moved.extend_from_slice(&self.current);
        let old = std::mem::replace(&mut self.current, moved);
        if old.capacity() > 0 {
            self.retired.push(old);
        }
        Ok(())
    }

    /// Appends an element.
    ///
    /// # Panics
    ///
    /// As [`reserve`](Self::reserve).
    pub fn push(&mut self, value: T) {
        self.reserve(1);
        self.current.push(value);
    }

    /// Appends an element, or returns the error of [`try_reserve`](Self::try_reserve)
    /// with nothing changed.
    pub fn try_push(&mut self, value: T) -> Result<(), TryReserveError> {
        self.try_reserve(1)?;
        self.current.push(value);
        Ok(())
    }

    /// Appends the elements of `values`.
    ///
    /// # Panics
    ///
    /// As [`reserve`](Self::reserve).
    pub fn extend_from_slice(&mut self, values: &[T]) {
        self.reserve(values.len());
        self.current.extend_from_slice(values);
    }

    /// Appends the elements of `values`, or returns the error of
    /// [`try_reserve`](Self::try_reserve) with nothing changed.
    pub fn try_extend_from_slice(&mut self, values: &[T]) -> Result<(), TryReserveError> {
        self.try_reserve(values.len())?;
        self.current.extend_from_slice(values);
        Ok(())
    }

    /// Makes the length `len`, filling new elements with `value`.
    ///
    /// # Panics
    ///
    /// As [`reserve`](Self::reserve).
    pub fn resize(&mut self, len: usize, value: T) {
        self.reserve(len.saturating_sub(self.current.len()));
        self.current.resize(len, value);
    }

    /// Makes the length `len`, filling new elements with `value`, or returns the error of
    /// [`try_reserve`](Self::try_reserve) with nothing changed.
    pub fn try_resize(&mut self, len: usize, value: T) -> Result<(), TryReserveError> {
        self.try_reserve(len.saturating_sub(self.current.len()))?;
        self.current.resize(len, value);
        Ok(())
    }

    /// Shortens the buffer to `len` elements (the allocation stays).
    pub fn truncate(&mut self, len: usize) {
        self.current.truncate(len);
    }

    /// Removes every element (the allocation stays).
    pub fn clear(&mut self) {
        self.current.clear();
    }

    /// The number of elements the current allocation holds before the buffer moves.
    pub fn capacity(&self) -> usize {
        self.current.capacity()
    }

    /// The bytes held by allocations the buffer moved out of.
    pub fn retired_bytes(&self) -> usize {
        self.retired.iter().map(|v| v.capacity() * std::mem::size_of::<T>()).sum()
    }

    /// Frees the allocations the buffer moved out of.
    ///
    /// # Safety
    ///
    /// No view of them may remain: no Python object made from this buffer's memory before
    /// it moved (a NumPy array, a `cai.HostArray`, a DLPack capsule or tensor) is alive.
    pub unsafe fn release_retired(&mut self) {
        self.retired = Vec::new();
    }

    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        &self.current
    }

    /// The elements, for writing in place (views see the writes).
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.current
    }
}

/// A clone holds the elements only: views of the original keep it, not the clone, alive.
impl<T: Copy> Clone for StableVec<T> {
    fn clone(&self) -> StableVec<T> {
        StableVec::from(self.current.clone())
    }
}

/// Buffers are equal when their elements are.
impl<T: Copy + PartialEq> PartialEq for StableVec<T> {
    fn eq(&self, other: &StableVec<T>) -> bool {
        self.current == other.current
    }
}

impl<T: Copy> From<Vec<T>> for StableVec<T> {
    fn from(current: Vec<T>) -> StableVec<T> {
        StableVec { current, retired: Vec::new() }
    }
}

impl<T: Copy> FromIterator<T> for StableVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> StableVec<T> {
        StableVec::from(iter.into_iter().collect::<Vec<T>>())
    }
}

impl<T: Copy> Deref for StableVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.current
    }
}

impl<T: Copy> DerefMut for StableVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.current
    }
}

// SAFETY: the current Vec's pointer addresses `len` initialized elements it owns.
unsafe impl<T: Element> HostBuffer for StableVec<T> {
    type Elem = T;
    fn as_ptr(&self) -> *const T {
        self.current.as_ptr()
    }
    fn len(&self) -> usize {
        self.current.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growing_keeps_every_old_allocation_until_dropped() {
        let mut v = StableVec::<u32>::with_capacity(2);
        v.push(1);
        v.push(2);
        let first = HostBuffer::as_ptr(&v);
        for i in 3..100 {
            v.push(i);
        }
        assert_eq!(v.len(), 99);
        assert_eq!(v.as_slice()[..3], [1, 2, 3]);
        // SAFETY: the first allocation is retired, not freed.
        assert_eq!(unsafe { *first.add(1) }, 2);
        assert!(v.retired_bytes() >= 8);
        let before = v.retired_bytes();
        v.truncate(1);
        v.clear();
        v.resize(50, 7);
        assert_eq!(v.retired_bytes(), before, "shrinking and refilling within capacity does not move");
        // SAFETY: no view exists in this test.
        unsafe { v.release_retired() };
        assert_eq!(v.retired_bytes(), 0);
        assert_eq!(v.iter().copied().collect::<StableVec<u32>>(), v);
    }

    #[test]
    fn a_failed_growth_changes_nothing() {
        let mut v = StableVec::from(vec![1u64, 2, 3]);
        let (address, capacity) = (v.as_ptr(), v.capacity());
        // Past usize::MAX elements, past isize::MAX bytes, and past any address space
        // (2**55 bytes: the allocator fails).
        for additional in [usize::MAX, usize::MAX / 8, 1 << 52] {
            assert!(v.try_reserve(additional).is_err(), "{additional}");
            assert!(v.try_resize(3 + additional.min(usize::MAX - 3), 9).is_err(), "{additional}");
        }
        assert!(v.try_extend_from_slice(&[]).is_ok());
        assert_eq!((v.as_slice(), v.as_ptr(), v.capacity()), (&[1, 2, 3][..], address, capacity));
        assert_eq!(v.retired_bytes(), 0);
        v.try_push(4).unwrap();
        v.try_extend_from_slice(&[5, 6]).unwrap();
        v.try_resize(8, 7).unwrap();
        assert_eq!(v.as_slice(), [1, 2, 3, 4, 5, 6, 7, 7]);
        assert_eq!(v.retired_bytes(), (3 + 6) * 8, "the allocations of 3 and of 6 elements, kept");
    }

    #[test]
    #[should_panic(expected = "StableVec: memory allocation failed")]
    fn infallible_growth_panics_instead_of_aborting() {
        StableVec::<u64>::new().resize(1 << 52, 0);
    }
}
