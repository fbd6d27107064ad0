//! How failures become Python exceptions.
//!
//! | failure | exception |
//! |---|---|
//! | not a mapping, a missing key, a value of the wrong type, no interface at all | `TypeError` |
//! | a value of the right type that is not acceptable (stream 0, a malformed typestr, ...) | `ValueError` |
//! | writing through a read-only array, overlapping read-write extractions | `BufferError` |
//! | a stream that cannot be synchronized (no CUDA driver, a driver error) | `cai.CudaDriverError`, a `RuntimeError` |
//!
//! Every message starts with the key or attribute concerned and quotes the value received.

use cai_core::ErrorKind;
use pyo3::exceptions::{PyBufferError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;

pyo3::create_exception!(
    cai,
    CudaDriverError,
    PyRuntimeError,
    "The CUDA driver is missing or failed while synchronizing on an imported stream."
);

/// One problem with an interface dict: its class and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) kind: ProblemKind,
    pub(crate) message: String,
}

/// Which Python exception a [`Problem`] becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProblemKind {
    Type,
    Value,
    Buffer,
}

impl Problem {
    pub(crate) fn type_error(message: impl Into<String>) -> Problem {
        Problem { kind: ProblemKind::Type, message: message.into() }
    }

    pub(crate) fn value_error(message: impl Into<String>) -> Problem {
        Problem { kind: ProblemKind::Value, message: message.into() }
    }

    pub(crate) fn buffer_error(message: impl Into<String>) -> Problem {
        Problem { kind: ProblemKind::Buffer, message: message.into() }
    }
}

impl From<cai_core::Error> for Problem {
    fn from(e: cai_core::Error) -> Problem {
        let kind = match e.kind() {
            ErrorKind::Type => ProblemKind::Type,
            _ => ProblemKind::Value,
        };
        Problem { kind, message: e.to_string() }
    }
}

impl From<Problem> for PyErr {
    fn from(p: Problem) -> PyErr {
        match p.kind {
            ProblemKind::Type => PyTypeError::new_err(p.message),
            ProblemKind::Value => PyValueError::new_err(p.message),
            ProblemKind::Buffer => PyBufferError::new_err(p.message),
        }
    }
}

/// A cai-core error as the Python exception its kind calls for.
pub fn to_py_err(e: cai_core::Error) -> PyErr {
    Problem::from(e).into()
}

/// How a value prints in a message: its `repr` (shortened) and its type, as in
/// `'f4' (str)` or `3.5 (float)`.
pub(crate) fn received(value: &Bound<'_, PyAny>) -> String {
    const LIMIT: usize = 80;
    let type_name = value.get_type().name().map_or_else(|_| "?".to_owned(), |n| n.to_string());
    let repr = value.repr().map_or_else(|_| "<unprintable>".to_owned(), |r: Bound<'_, PyString>| r.to_string());
    let repr = if repr.chars().count() > LIMIT {
        let cut: String = repr.chars().take(LIMIT).collect();
        format!("{cut}...")
    } else {
        repr
    };
    format!("{repr} ({type_name})")
}
