//! The descriptor model of the CUDA Array Interface (`__cuda_array_interface__`), and of
//! its host twin, NumPy's `__array_interface__`.
//!
//! cai-core knows what an interface dict may say and what it means: the type string
//! grammar ([`TypeStr`]), record layouts ([`Descr`]), the Rust types that can be elements
//! ([`Element`]), the array itself ([`Descriptor`]) with its shape, strides, checked byte
//! extent and contiguity, the rules each interface version (0 to 3) adds
//! ([`Descriptor::validate`]), and the traits a container implements to be exported
//! ([`CudaArrayInterface`], [`ArrayInterface`]). It needs no GPU, no CUDA driver and no
//! Python.
//!
//! ```
//! use cai_core::{Descriptor, Error, TypeStr};
//!
//! // What a producer exports: a read-only 2x3 array of f32, C-contiguous.
//! let exported = Descriptor::new::<f32>(0x7f00_0000_0000, [2, 3]).with_readonly(true);
//! assert_eq!(exported.validate()?.len(), 24);
//! assert_eq!(exported.typestr.to_string(), "<f4");
//!
//! // What a consumer might receive: every rule is checked by the declared version.
//! let received = Descriptor::from_typestr(TypeStr::parse("<f8")?, 0, [4]).with_version(2);
//! let err = received.validate().unwrap_err();
//! assert!(matches!(err, Error::NullPointer { .. }));
//! assert_eq!(err.key(), "data");
//! # Ok::<(), Error>(())
//! ```
//!
//! # Layout
//!
//! | module | holds |
//! |---|---|
//! | `typestr`, `descr` | the element-type grammar |
//! | `element` | [`Element`] and its impls |
//! | `descriptor` | [`Descriptor`], [`Extent`], validation |
//! | `stream` | the [`Stream`] value of version 3 |
//! | `interface` | the producer traits |
//! | `error` | [`Error`] |
//!
//! Driver calls (events, stream waits, pointer attributes) will live in one module of
//! their own behind a `cuda` feature; nothing else in the crate touches the driver.
//!
//! # Features
//!
//! - `half` (default): [`Element`] for `half::f16` (`<f2`) and `half::bf16` (`<V2`, as
//!   PyTorch exports it).
//! - `num-complex` (default): [`Element`] for `num_complex::Complex<f32>` (`<c8`) and
//!   `Complex<f64>` (`<c16`).
#![deny(missing_docs)]

mod descr;
mod descriptor;
mod element;
mod error;
mod interface;
mod stream;
pub mod typestr;

pub use descr::{Descr, Field, FieldLayout, FieldType};
pub use descriptor::{Descriptor, Extent, CURRENT_VERSION};
pub use element::Element;
pub use error::{Error, ErrorKind, Result};
pub use interface::{ArrayInterface, CudaArrayInterface};
pub use stream::{Stream, StreamHandle};
pub use typestr::{ByteOrder, DateTimeUnit, Kind, TimeUnit, TypeStr};
