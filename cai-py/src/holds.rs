//! The rule of both overlap checks: byte ranges held by live borrows of memory (a call's
//! arguments, in the extractors' registry; Rust's slices of host memory, across calls),
//! each for reading or for writing. Two holds of one scope conflict when their bytes
//! overlap and either writes.

use std::ops::Range;

/// The holds of one registry, each with the scope within which it conflicts.
pub(crate) struct Holds<S> {
    next: u64,
    held: Vec<Hold<S>>,
}

struct Hold<S> {
    id: u64,
    scope: S,
    bytes: Range<usize>,
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

    /// Holds `bytes` in `scope` (`writable`: for writing) in place of `replacing` (the same
    /// borrower's hold, if any), and returns the new hold's id; or the hold it conflicts
    /// with, holding nothing.
    pub(crate) fn take(
        &mut self,
        scope: S,
        bytes: Range<usize>,
        writable: bool,
        replacing: Option<u64>,
    ) -> Result<u64, Clash> {
        let clash = self.held.iter().find(|h| {
            Some(h.id) != replacing
                && h.scope == scope
                && h.bytes.start < bytes.end
                && bytes.start < h.bytes.end
                && (writable || h.writable)
        });
        if let Some(other) = clash {
            let earlier = self.held.iter().filter(|h| h.scope == other.scope && h.id < other.id).count();
            return Err(Clash { bytes: other.bytes.clone(), writable: other.writable, earlier });
        }
        if let Some(id) = replacing {
            self.give_back(id);
        }
        self.next += 1;
        self.held.push(Hold { id: self.next, scope, bytes, writable });
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
