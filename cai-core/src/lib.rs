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
//! | `dims` | [`DimVec`], the shape and strides, inline up to six dimensions |
//! | `stream` | the [`Stream`] value of version 3 |
//! | `interface` | the producer traits |
//! | `buffer` | [`DeviceBuffer`], [`HostBuffer`], [`RawDeviceBuffer`], shape/strides/stream sources |
//! | `cuda` | cudarc impls (feature `cuda`): the only module that touches the driver |
//! | `sync` | the stream rules of version 3 (the sync engine), driver-free |
//! | `dlpack` | DLPack's C ABI and its correspondence with typestrs |
//! | `error` | [`Error`], [`DriverError`] |
//!
//! # Deriving
//!
//! With the `derive` feature, `#[derive(CudaArrayInterface)]`, `#[derive(ArrayInterface)]`
//! and `#[derive(Element)]` come with the traits of the same names:
//!
//! ```
//! # #[cfg(feature = "derive")] {
//! use cai_core::{ArrayInterface, Element};
//!
//! #[derive(ArrayInterface)]
//! struct Image<B> {
//!     #[cai(data)]
//!     pixels: B, // Vec<T> here; cudarc's CudaSlice<T> with #[derive(CudaArrayInterface)]
//!     #[cai(shape)]
//!     shape: [usize; 2],
//! }
//!
//! let image = Image { pixels: vec![0u8; 6], shape: [2, 3] };
//! let d = image.array_interface().unwrap();
//! assert_eq!((d.shape.as_slice(), d.typestr.to_string().as_str()), (&[2, 3][..], "|u1"));
//! # }
//! ```
//!
//! Each derive macro's page here has its whole attribute grammar and an example; the
//! repository's `examples/` has a multi-array struct and a record element.
//!
//! # Features
//!
//! - `half` (default): [`Element`] for `half::f16` (`<f2`) and `half::bf16` (`<V2`, as
//!   PyTorch exports it).
//! - `num-complex` (default): [`Element`] for `num_complex::Complex<f32>` (`<c8`) and
//!   `Complex<f64>` (`<c16`).
//! - `derive`: the derive macros, `cai-array-core = { version = "0.1", features = ["derive"] }`.
//!   Without it, `#[derive(CudaArrayInterface)]` is "cannot find derive macro".
//! - `cuda`: [`DeviceBuffer`] for cudarc 0.19's `CudaSlice`, `CudaView` and `CudaViewMut`,
//!   and [`AsStream`] for its streams. cudarc is loaded dynamically and no CUDA version is
//!   chosen here: the application depends on cudarc itself with the version feature it
//!   targets, e.g. `cudarc = { version = "0.19", default-features = false, features =
//!   ["cuda-12080"] }`. Any version feature builds without a CUDA toolkit.
#![deny(missing_docs)]

mod buffer;
#[cfg(feature = "cuda")]
pub mod cuda;
mod descr;
mod descriptor;
pub mod dims;
pub mod dlpack;
mod element;
mod error;
mod interface;
mod stable;
mod stream;
pub mod sync;
pub mod typestr;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use buffer::{AsShape, AsStream, AsStrides, DeviceBuffer, HostBuffer, RawDeviceBuffer};

pub use descr::{Descr, Field, FieldLayout, FieldType};
pub use descriptor::{Descriptor, Extent, CURRENT_VERSION};
pub use dims::{DimVec, INLINE_DIMS, MAX_DIMS};
pub use element::{bool_bytes, Element};
pub use error::{quoted, shortened, DriverError, Error, ErrorKind, PyTuple, Result};
pub use interface::{ArrayInterface, CudaArrayInterface, NamedArrays, NamedCudaArrays};

/// Derives [`CudaArrayInterface`](trait@CudaArrayInterface) and [`NamedCudaArrays`] for a
/// struct of device buffers (feature `derive`).
///
/// ```
/// use cai_core::{CudaArrayInterface, NamedCudaArrays, RawDeviceBuffer, Stream};
///
/// #[derive(CudaArrayInterface)]
/// #[cai(readonly)]
/// struct Frame {
///     #[cai(data)]
///     pixels: RawDeviceBuffer<f32>, // or cudarc's CudaSlice<f32> (feature `cuda`)
///     #[cai(shape)]
///     shape: [usize; 2],
///     #[cai(stream)]
///     stream: Stream,
///     #[cai(data, array = "depth")]
///     depth: RawDeviceBuffer<u16>,
/// }
///
/// // SAFETY: the addresses are only described here, never read; real ones come from
/// // cudarc or from the library that made the allocation.
/// let (pixels, depth) =
///     unsafe { (RawDeviceBuffer::new(0x7f00_0000_0000, 6), RawDeviceBuffer::new(0x7f00_1000_0000, 6)) };
/// let frame = Frame { pixels, shape: [2, 3], stream: Stream::PerThreadDefault, depth };
///
/// let d = frame.cuda_array_interface()?;
/// assert_eq!(d.shape, [2, 3]);
/// assert_eq!((d.readonly, d.stream), (true, Stream::PerThreadDefault));
/// assert_eq!(Frame::NAMES, ["depth"]);
/// assert_eq!(frame.cuda_array("depth").unwrap()?.shape, [6]);
/// # Ok::<(), cai_core::Error>(())
/// ```
#[cfg(feature = "derive")]
#[doc(inline)]
pub use cai_derive::CudaArrayInterface;

/// Derives [`ArrayInterface`](trait@ArrayInterface) and [`NamedArrays`] for a struct of
/// host memory (feature `derive`).
///
/// ```
/// use cai_core::{ArrayInterface, NamedArrays};
///
/// // An image whose shape is computed from two fields, with its histogram as a named array.
/// #[derive(ArrayInterface)]
/// #[cai(shape = [self.height, self.width])]
/// struct Image {
///     #[cai(data)]
///     pixels: Vec<u8>,
///     height: usize,
///     width: usize,
///     #[cai(data, array = "histogram")]
///     histogram: Box<[u32]>,
/// }
///
/// let image = Image { pixels: vec![0; 6], height: 2, width: 3, histogram: vec![0; 256].into() };
/// let d = image.array_interface()?;
/// assert_eq!((d.shape.as_slice(), d.typestr.to_string().as_str()), (&[2, 3][..], "|u1"));
/// let (name, histogram) = &image.arrays()[0];
/// assert_eq!((*name, histogram.as_ref().unwrap().shape.as_slice()), ("histogram", &[256][..]));
/// # Ok::<(), cai_core::Error>(())
/// ```
#[cfg(feature = "derive")]
#[doc(inline)]
pub use cai_derive::ArrayInterface;

/// Derives [`Element`](trait@Element) for a `#[repr(C)]` record (feature `derive`).
///
/// ```
/// use cai_core::{ArrayInterface, Element};
///
/// #[derive(Clone, Copy, Element)]
/// #[repr(C)]
/// struct Particle {
///     id: u16,
///     position: [f32; 3],
/// }
///
/// assert_eq!(Particle::TYPESTR.to_string(), "|V16");
/// let descr = Particle::descr();
/// let layout: Vec<_> = descr.layout()?.iter().map(|f| (f.field.name.as_str(), f.offset, f.size)).collect();
/// assert_eq!(layout, [("id", 0, 2), ("position", 4, 12)]); // the descr pads bytes 2 and 3
///
/// // An array of records exports like any other.
/// #[derive(ArrayInterface)]
/// struct Particles {
///     #[cai(data)]
///     items: Vec<Particle>,
/// }
/// let particles = Particles { items: vec![Particle { id: 1, position: [0.0; 3] }; 4] };
/// assert_eq!(particles.array_interface()?.shape, [4]);
/// # Ok::<(), cai_core::Error>(())
/// ```
#[cfg(feature = "derive")]
#[doc(inline)]
pub use cai_derive::Element;
/// The `half` crate whose `f16` and `bf16` are elements (feature `half`): `cai_core::half::f16`.
#[cfg(feature = "half")]
pub use half;
/// The `num-complex` crate whose `Complex<f32>` and `Complex<f64>` are elements (feature
/// `num-complex`): `cai_core::num_complex::Complex<f64>`.
#[cfg(feature = "num-complex")]
pub use num_complex;
pub use stable::StableVec;
pub use stream::{Stream, StreamHandle};
pub use typestr::{ByteOrder, DateTimeUnit, Kind, TimeUnit, TypeStr, MAX_ITEMSIZE};
