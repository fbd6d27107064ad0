//! The one error type of cai-core.
//!
//! Every message starts with the interface key it concerns and quotes the value
//! that was received, so that a user reading it from Python knows which entry of
//! which dict to look at.

use std::fmt;

/// A failure to reach or use the CUDA driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The driver library (`libcuda.so`, `nvcuda.dll`) could not be loaded.
    #[error("the CUDA driver library (libcuda) was not found on this machine")]
    NotFound,
    /// The driver library loads but cannot be used: `cuInit` failed (no device, a driver
    /// older than the CUDA version cai was built for), or a function cai needs is missing.
    #[error("the CUDA driver library was found but cannot be used: {0}")]
    Unusable(String),
    /// This build has no driver support (cai-core without its `cuda` feature).
    #[error("this build has no CUDA driver support (cai-core's `cuda` feature is off)")]
    Unsupported,
    /// A driver call returned an error code.
    #[error("{call} failed: {name} ({code}): {description}")]
    Call {
        /// The driver function.
        call: &'static str,
        /// The `CUresult` code.
        code: u32,
        /// The code's name (`CUDA_ERROR_INVALID_HANDLE`).
        name: String,
        /// The driver's description of the code.
        description: String,
    },
    /// Ordering that CUDA graph capture makes impossible: the producer's work is being
    /// captured into a graph that the consumer's stream is not part of, or the legacy
    /// default stream would join a capture under way on a blocking stream.
    #[error("{0}")]
    Capture(String),
    /// An operation the engine cannot perform, such as waiting on stream `None`.
    #[error("{0}")]
    Invalid(String),
}

/// Everything that can be wrong with a descriptor or one of its parts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A required key is absent from an interface dict.
    #[error("{key}: required key is missing")]
    MissingKey {
        /// The key.
        key: &'static str,
    },

    /// A key holds a value of the wrong type.
    #[error("{key}: expected {expected}, received {received}")]
    WrongType {
        /// The key.
        key: &'static str,
        /// What the key must hold.
        expected: &'static str,
        /// The value received, as it prints.
        received: String,
    },

    /// A malformed or impossible type string.
    #[error("typestr: {} is malformed: {reason}", quoted(.value))]
    Typestr {
        /// The string received (the message quotes its first 80 characters and its length).
        value: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A malformed `descr`, or one that disagrees with the typestr.
    #[error("descr: {value} is invalid: {reason}")]
    Descr {
        /// The descr received, in Python's notation.
        value: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A version this crate does not know.
    #[error("version: {value} is not supported: the CUDA Array Interface defines versions 0 to 3")]
    Version {
        /// The version received.
        value: u64,
    },

    /// A `shape` or `strides` with more than [`MAX_DIMS`](crate::MAX_DIMS) entries.
    #[error("{key}: {received} entries; at most {max} dimensions are read (NumPy's limit)", max = crate::MAX_DIMS)]
    TooManyDims {
        /// `"shape"` or `"strides"`.
        key: &'static str,
        /// The number of entries.
        received: usize,
    },

    /// `strides` with a number of entries other than the number of dimensions.
    #[error("strides: {strides} has {received} entries, but shape {shape} has {expected} dimensions")]
    StridesLength {
        /// The strides received.
        strides: String,
        /// The shape they must match.
        shape: String,
        /// Their length.
        received: usize,
        /// The number of dimensions.
        expected: usize,
    },

    /// A null data pointer for an array that has bytes to reach.
    #[error("data: pointer 0 (null) received for an array of shape {shape} and typestr '{typestr}', which reaches {nbytes} bytes; only an empty array may have a null pointer")]
    NullPointer {
        /// The shape of the array.
        shape: String,
        /// Its typestr.
        typestr: String,
        /// How many bytes its extent spans.
        nbytes: usize,
    },

    /// A `mask` in a version that has none.
    #[error("mask: received a mask in a version {version} descriptor; masks exist from version 1")]
    MaskVersion {
        /// The declared version.
        version: u32,
    },

    /// A mask whose shape differs from the array's.
    #[error("mask: shape {mask} does not match the array's shape {shape}")]
    MaskShape {
        /// The mask's shape.
        mask: String,
        /// The array's shape.
        shape: String,
    },

    /// The mask descriptor itself is invalid.
    #[error("mask: {0}")]
    Mask(Box<Error>),

    /// A stream in a version that has none.
    #[error("stream: received {value} in a version {version} descriptor; streams exist from version 3")]
    StreamVersion {
        /// The stream received, as an integer.
        value: usize,
        /// The declared version.
        version: u32,
    },

    /// Stream 0, which the specification disallows.
    #[error("stream: 0 is disallowed (use None for no synchronization, 1 for the legacy default stream, 2 for the per-thread default stream)")]
    StreamZero,

    /// A shape (and strides) that reach bytes outside the buffer exporting them.
    #[error("shape: {shape} with strides {strides} reaches bytes {start} to {end} of field `{field}`, which holds {available} bytes")]
    OutOfBuffer {
        /// The buffer field of the exporting struct.
        field: &'static str,
        /// The shape exported.
        shape: String,
        /// The strides exported.
        strides: String,
        /// The lowest byte offset reached.
        start: isize,
        /// One past the highest byte offset reached.
        end: isize,
        /// The size of the buffer in bytes.
        available: usize,
    },

    /// The CUDA driver failed while ordering the exported stream after pending work.
    #[error("stream: {0}")]
    Driver(DriverError),

    /// An empty array exported with a pointer other than 0 from version 2 on (the
    /// specification asks producers for 0; consumers accept any pointer).
    #[error("data: an empty array exports pointer 0 from version 2 on, received 0x{data:x} for shape {shape}")]
    EmptyPointer {
        /// The pointer received.
        data: usize,
        /// The shape, as Python prints it.
        shape: String,
    },

    /// Arithmetic on a key's values left the range of the machine's integers.
    #[error("{key}: {value} overflows: {detail}")]
    Overflow {
        /// The key whose values overflow.
        key: &'static str,
        /// The value received, as it prints.
        value: String,
        /// Which computation overflowed.
        detail: &'static str,
    },
}

/// The class of an [`Error`], which decides the Python exception it becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A missing key or a value of the wrong type (Python's `TypeError`).
    Type,
    /// A value of the right type that is not acceptable (Python's `ValueError`).
    Value,
    /// The CUDA driver is missing or failed (Python's `cai.CudaDriverError`).
    Driver,
}

impl Error {
    /// The interface key the error concerns (`"typestr"`, `"strides"`, ...).
    pub fn key(&self) -> &'static str {
        match self {
            Error::MissingKey { key }
            | Error::WrongType { key, .. }
            | Error::Overflow { key, .. }
            | Error::TooManyDims { key, .. } => key,
            Error::Typestr { .. } => "typestr",
            Error::Descr { .. } => "descr",
            Error::Version { .. } => "version",
            Error::StridesLength { .. } => "strides",
            Error::NullPointer { .. } | Error::EmptyPointer { .. } => "data",
            Error::MaskVersion { .. } | Error::MaskShape { .. } | Error::Mask(_) => "mask",
            Error::OutOfBuffer { .. } => "shape",
            Error::StreamVersion { .. } | Error::StreamZero | Error::Driver(_) => "stream",
        }
    }

    /// Whether the error is about the type of a value or about the value itself.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::MissingKey { .. } | Error::WrongType { .. } => ErrorKind::Type,
            Error::Mask(inner) => inner.kind(),
            Error::Driver(_) => ErrorKind::Driver,
            _ => ErrorKind::Value,
        }
    }
}

/// A value as a message quotes it: whole up to 80 characters, else its first 80 and its
/// length, so that a 10 MB typestr makes a short message.
#[doc(hidden)]
pub fn shortened(text: String) -> String {
    match cut(&text) {
        None => text,
        Some((head, length)) => format!("{head}... ({length} characters)"),
    }
}

/// How many characters of a value a message shows.
const SHOWN: usize = 80;

/// The first [`SHOWN`] characters of a text longer than that, and its length in
/// characters; `None` for a text that is shown whole.
fn cut(text: &str) -> Option<(&str, usize)> {
    let (at, _) = text.char_indices().nth(SHOWN)?;
    Some((&text[..at], text.chars().count()))
}

/// A text as a message quotes it: in single quotes, its control characters escaped, cut
/// as [`shortened`] cuts it (the quotes kept, the length the text's own).
#[doc(hidden)]
pub fn quoted(text: &str) -> String {
    // Cut before escaping, so that no escape is cut in two.
    match cut(text) {
        None => format!("'{}'", text.escape_debug()),
        Some((head, length)) => format!("'{}'... ({length} characters)", head.escape_debug()),
    }
}

/// A shorthand for results whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Formats values as Python prints a tuple of them (`(3,)` for one, `()` for none), as
/// users see shapes and strides in Python; every message of cai uses it.
///
/// ```
/// assert_eq!(cai_core::PyTuple(&[2usize, 3]).to_string(), "(2, 3)");
/// assert_eq!(cai_core::PyTuple(&[4isize]).to_string(), "(4,)");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct PyTuple<'a, T>(pub &'a [T]);

impl<T: fmt::Display> fmt::Display for PyTuple<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{item}")?;
        }
        if self.0.len() == 1 {
            f.write_str(",")?;
        }
        f.write_str(")")
    }
}

/// `PyTuple` rendered to a string, for error fields.
pub(crate) fn tuple<T: fmt::Display>(items: &[T]) -> String {
    PyTuple(items).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_quoted_shortened_with_their_length() {
        assert_eq!(shortened("<f4".into()), "<f4");
        let long = "é".repeat(100);
        assert_eq!(shortened(long), format!("{}... (100 characters)", "é".repeat(80)));
    }

    #[test]
    fn tuples_print_as_python_does() {
        assert_eq!(tuple::<usize>(&[]), "()");
        assert_eq!(tuple(&[3usize]), "(3,)");
        assert_eq!(tuple(&[3isize, -4]), "(3, -4)");
    }

    #[test]
    fn every_message_names_its_key() {
        let errors = [
            Error::MissingKey { key: "shape" },
            Error::WrongType { key: "data", expected: "a tuple", received: "[1]".into() },
            Error::Typestr { value: "<f3".into(), reason: "r".into() },
            Error::Descr { value: "[]".into(), reason: "r".into() },
            Error::Version { value: 7 },
            Error::TooManyDims { key: "strides", received: 65 },
            Error::StridesLength { strides: "(4,)".into(), shape: "(2, 2)".into(), received: 1, expected: 2 },
            Error::NullPointer { shape: "(2,)".into(), typestr: "<f4".into(), nbytes: 8 },
            Error::MaskVersion { version: 0 },
            Error::MaskShape { mask: "(2,)".into(), shape: "(3,)".into() },
            Error::StreamVersion { value: 5, version: 2 },
            Error::StreamZero,
            Error::Overflow { key: "shape", value: "(1,)".into(), detail: "d" },
            Error::OutOfBuffer {
                field: "data",
                shape: "(4, 4)".into(),
                strides: "None".into(),
                start: 0,
                end: 64,
                available: 48,
            },
        ];
        for e in errors {
            assert!(e.to_string().starts_with(&format!("{}: ", e.key())), "{e}");
        }
        let nested = Error::Mask(Box::new(Error::Version { value: 9 }));
        assert_eq!(
            nested.to_string(),
            "mask: version: 9 is not supported: the CUDA Array Interface defines versions 0 to 3"
        );
    }

    #[test]
    fn kinds_follow_python_exception_classes() {
        assert_eq!(Error::MissingKey { key: "shape" }.kind(), ErrorKind::Type);
        assert_eq!(Error::StreamZero.kind(), ErrorKind::Value);
        assert_eq!(Error::Mask(Box::new(Error::MissingKey { key: "shape" })).kind(), ErrorKind::Type);
        let driver = Error::Driver(DriverError::NotFound);
        assert_eq!((driver.kind(), driver.key()), (ErrorKind::Driver, "stream"));
        assert_eq!(driver.to_string(), "stream: the CUDA driver library (libcuda) was not found on this machine");
    }
}
