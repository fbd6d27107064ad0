//! The `stream` entry of a version 3 descriptor.
//!
//! This module is the value type only; recording events and waiting on streams (the
//! sync engine) lives in the module that owns the CUDA driver, behind the `cuda` feature,
//! so that no other module touches the driver.

use std::fmt;
use std::num::NonZeroUsize;

use crate::error::{Error, Result};

/// The stream a producer's pending work on the data is ordered on.
///
/// The integer 0 has no representation: the specification disallows it as ambiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Stream {
    /// `None` (or no key): no synchronization is needed.
    #[default]
    None,
    /// `1`: CUDA's legacy default stream.
    LegacyDefault,
    /// `2`: CUDA's per-thread default stream.
    PerThreadDefault,
    /// Any other integer: a `cudaStream_t` / `CUstream` handle.
    Handle(StreamHandle),
}

/// A raw stream handle other than the three reserved values 0, 1 and 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamHandle(NonZeroUsize);

impl StreamHandle {
    /// The handle `raw`, if it is not 0, 1 or 2 (which are not handles but markers).
    pub const fn new(raw: usize) -> Option<StreamHandle> {
        match NonZeroUsize::new(raw) {
            Some(n) if raw > 2 => Some(StreamHandle(n)),
            _ => None,
        }
    }

    /// The handle as an integer.
    pub const fn get(self) -> usize {
        self.0.get()
    }
}

impl Stream {
    /// The stream an interface dict's `stream` value denotes: `None` for `None`, an error
    /// for 0.
    pub fn from_raw(raw: Option<usize>) -> Result<Stream> {
        Ok(match raw {
            None => Stream::None,
            Some(0) => return Err(Error::StreamZero),
            Some(1) => Stream::LegacyDefault,
            Some(2) => Stream::PerThreadDefault,
            Some(n) => Stream::Handle(StreamHandle::new(n).expect("values above 2 are handles")),
        })
    }

    /// The value to put in an interface dict: `None`, or a non-zero integer.
    pub const fn to_raw(self) -> Option<usize> {
        match self {
            Stream::None => None,
            Stream::LegacyDefault => Some(1),
            Stream::PerThreadDefault => Some(2),
            Stream::Handle(h) => Some(h.get()),
        }
    }

    /// Whether the consumer has nothing to synchronize on.
    pub const fn is_none(self) -> bool {
        matches!(self, Stream::None)
    }
}

/// Prints as Python would: `None` or the integer.
impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_raw() {
            None => f.write_str("None"),
            Some(n) => write!(f, "{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_values_map_to_the_specification() {
        assert_eq!(Stream::from_raw(None).unwrap(), Stream::None);
        assert_eq!(Stream::from_raw(Some(1)).unwrap(), Stream::LegacyDefault);
        assert_eq!(Stream::from_raw(Some(2)).unwrap(), Stream::PerThreadDefault);
        let h = Stream::from_raw(Some(0x7f00_dead_beef)).unwrap();
        assert_eq!(h.to_raw(), Some(0x7f00_dead_beef));
        assert_eq!(h.to_string(), (0x7f00_dead_beefusize).to_string());
        assert_eq!(Stream::None.to_string(), "None");
    }

    #[test]
    fn zero_is_refused() {
        let e = Stream::from_raw(Some(0)).unwrap_err();
        assert_eq!(e, Error::StreamZero);
        assert!(e.to_string().starts_with("stream: 0 is disallowed"));
    }

    #[test]
    fn reserved_values_are_not_handles() {
        assert_eq!(StreamHandle::new(0), None);
        assert_eq!(StreamHandle::new(1), None);
        assert_eq!(StreamHandle::new(2), None);
        assert_eq!(StreamHandle::new(3).map(StreamHandle::get), Some(3));
    }

    #[test]
    fn round_trip() {
        for raw in [None, Some(1), Some(2), Some(3), Some(usize::MAX)] {
            assert_eq!(Stream::from_raw(raw).unwrap().to_raw(), raw);
        }
    }
}
