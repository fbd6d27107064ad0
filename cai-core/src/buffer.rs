//! Buffers (what holds the elements) and the field types the derives read shapes,
//! strides and streams from.

use std::marker::PhantomData;

use crate::dims::DimVec;
use crate::element::Element;
use crate::error::Result;
use crate::stream::Stream;

/// Memory on a CUDA device that holds `len()` elements of one [`Element`] type.
///
/// # Safety
///
/// For as long as `self` is borrowed, [`device_address`](DeviceBuffer::device_address) must be the
/// device-accessible address of `len()` initialized, contiguous values of `Self::Elem`
/// (any address, 0 included, when `len()` is 0). When
/// [`readonly`](DeviceBuffer::readonly) is false, writes through it by a consumer must not
/// break Rust's aliasing rules for the owner (the buffer is not shared immutably).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a device buffer: a `#[cai(data)]` field of `#[derive(CudaArrayInterface)]` is a `RawDeviceBuffer<T>` or cudarc's `CudaSlice<T>`, `CudaView<T>`, `CudaViewMut<T>` (feature `cuda`)",
    label = "not a `DeviceBuffer`",
    note = "the element type `T` must implement `Element` (`f32`, `u8`, ..., or a `#[derive(Element)]` record)",
    note = "host memory (`Vec<T>`, `Box<[T]>`, arrays, slices) goes in a struct with `#[derive(ArrayInterface)]`"
)]
pub unsafe trait DeviceBuffer {
    /// The element type.
    type Elem: Element;

    /// The address of the first element.
    fn device_address(&self) -> usize;

    /// The number of elements.
    fn len(&self) -> usize;

    /// Whether there are no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether consumers must not write (true for shared borrows).
    fn readonly(&self) -> bool {
        false
    }

    /// The stream the buffer's pending work is ordered on, when it knows one.
    fn stream(&self) -> Result<Stream> {
        Ok(Stream::None)
    }

    /// Makes `stream`'s later work wait for the work pending on the buffer, when the
    /// container exports the buffer on a stream other than the buffer's own (version 3:
    /// the exported stream must be enough to see all pending work). The default does
    /// nothing: a buffer without a stream of its own has nothing to order.
    fn order_before(&self, stream: Stream) -> Result<()> {
        let _ = stream;
        Ok(())
    }
}

/// Host memory that holds `len()` elements of one [`Element`] type, for NumPy's
/// `__array_interface__`.
///
/// # Safety
///
/// For as long as `self` is borrowed, [`as_ptr`](HostBuffer::as_ptr) must point to `len()`
/// initialized, contiguous values of `Self::Elem` (any well-aligned pointer when `len()`
/// is 0), and when [`readonly`](HostBuffer::readonly) is false, the buffer must be
/// uniquely owned or mutably borrowed, so that writes by a consumer are not writes
/// through a shared reference.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a host buffer: a `#[cai(data)]` field of `#[derive(ArrayInterface)]` is a `Vec<T>`, `StableVec<T>`, `Box<[T]>`, `[T; N]`, `&[T]` or `&mut [T]`",
    label = "not a `HostBuffer`",
    note = "the element type `T` must implement `Element` (`f32`, `u8`, ..., or a `#[derive(Element)]` record)",
    note = "device memory (`RawDeviceBuffer<T>`, cudarc's `CudaSlice<T>`) goes in a struct with `#[derive(CudaArrayInterface)]`"
)]
pub unsafe trait HostBuffer {
    /// The element type.
    type Elem: Element;

    /// A pointer to the first element.
    fn as_ptr(&self) -> *const Self::Elem;

    /// The number of elements.
    fn len(&self) -> usize;

    /// Whether there are no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether consumers must not write (true for shared borrows). Elements that hold a
    /// `bool` are exported read-only whatever this says.
    fn readonly(&self) -> bool {
        false
    }
}

// SAFETY: a Vec's pointer addresses `len` initialized elements and the Vec owns them.
unsafe impl<T: Element> HostBuffer for Vec<T> {
    type Elem = T;
    fn as_ptr(&self) -> *const T {
        self.as_slice().as_ptr()
    }
    fn len(&self) -> usize {
        self.as_slice().len()
    }
}

// SAFETY: an owned boxed slice, as for Vec.
unsafe impl<T: Element> HostBuffer for Box<[T]> {
    type Elem = T;
    fn as_ptr(&self) -> *const T {
        (**self).as_ptr()
    }
    fn len(&self) -> usize {
        (**self).len()
    }
}

// SAFETY: an owned array of N initialized elements.
unsafe impl<T: Element, const N: usize> HostBuffer for [T; N] {
    type Elem = T;
    fn as_ptr(&self) -> *const T {
        self.as_slice().as_ptr()
    }
    fn len(&self) -> usize {
        N
    }
}

// SAFETY: a shared borrow of initialized elements, exported read-only.
unsafe impl<T: Element> HostBuffer for &[T] {
    type Elem = T;
    fn as_ptr(&self) -> *const T {
        <[T]>::as_ptr(self)
    }
    fn len(&self) -> usize {
        <[T]>::len(self)
    }
    fn readonly(&self) -> bool {
        true
    }
}

// SAFETY: a unique borrow of initialized elements, so consumer writes alias nothing.
unsafe impl<T: Element> HostBuffer for &mut [T] {
    type Elem = T;
    fn as_ptr(&self) -> *const T {
        <[T]>::as_ptr(self)
    }
    fn len(&self) -> usize {
        <[T]>::len(self)
    }
}

/// A non-owning device allocation made elsewhere (a foreign library, a raw
/// `cuMemAlloc`), described by its address and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawDeviceBuffer<T> {
    ptr: usize,
    len: usize,
    readonly: bool,
    stream: Stream,
    elem: PhantomData<fn() -> T>,
}

impl<T: Element> RawDeviceBuffer<T> {
    /// Describes `len` elements of `T` at device address `ptr`, writable, with no stream.
    ///
    /// # Safety
    ///
    /// `ptr` must address `len` initialized values of `T` in device-accessible memory for
    /// as long as this value, or anything exported from it, is in use; and writes by
    /// consumers must be allowed unless [`readonly`](RawDeviceBuffer::readonly) is set.
    pub const unsafe fn new(ptr: usize, len: usize) -> Self {
        RawDeviceBuffer { ptr, len, readonly: false, stream: Stream::None, elem: PhantomData }
    }

    /// The same buffer, read-only for consumers.
    pub const fn readonly(self) -> Self {
        RawDeviceBuffer { readonly: true, ..self }
    }

    /// The same buffer with its pending work ordered on `stream`.
    pub const fn on_stream(self, stream: Stream) -> Self {
        RawDeviceBuffer { stream, ..self }
    }
}

// Not recommended in errors: the trait's message lists the device buffers, so an error
// does not point into this file.
#[allow(unknown_or_malformed_diagnostic_attributes)] // do_not_recommend: Rust 1.85
#[diagnostic::do_not_recommend]
// SAFETY: the constructor's contract is this trait's contract.
unsafe impl<T: Element> DeviceBuffer for RawDeviceBuffer<T> {
    type Elem = T;
    fn device_address(&self) -> usize {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn readonly(&self) -> bool {
        self.readonly
    }
    fn stream(&self) -> Result<Stream> {
        Ok(self.stream)
    }
}

/// A value that gives a shape: `[usize; N]`, `Vec<usize>`, `[usize]`, a tuple of up to
/// six `usize`, or a single `usize` (1-d). Implement it for your own shape types.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a shape: shapes are `usize`, e.g. `[usize; N]` or `Vec<usize>`",
    label = "not a shape: use `usize` dimensions",
    note = "a `#[cai(shape)]` field is a `[usize; N]`, `Vec<usize>`, `[usize]`, a tuple of up to six `usize`, a single `usize` (1-d), or a type of yours that implements `AsShape`"
)]
pub trait AsShape {
    /// The size of each dimension (`vec.into()` or `DimVec::from(array)` makes one).
    fn as_shape(&self) -> DimVec<usize>;
}

/// A value that gives strides in bytes: `[isize; N]`, `Vec<isize>`, `[isize]`, or a tuple
/// of up to six `isize`. Implement it for your own types.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a list of strides: strides are `isize` byte counts, e.g. `[isize; N]` or `Vec<isize>`",
    label = "not strides: use `isize` byte counts",
    note = "a `#[cai(strides)]` field is a `[isize; N]`, `Vec<isize>`, `[isize]`, a tuple of up to six `isize`, or a type of yours that implements `AsStrides`"
)]
pub trait AsStrides {
    /// The stride of each dimension, in bytes (`vec.into()` or `DimVec::from(array)`
    /// makes one).
    fn as_strides(&self) -> DimVec<isize>;
}

/// A value that names the stream a buffer's work is ordered on: a [`Stream`], a raw
/// handle as `usize` (1 and 2 are the default streams; 0 is an error), an `Option` of
/// either, or (feature `cuda`) a cudarc `CudaStream` or `Arc<CudaStream>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a stream: a `#[cai(stream)]` field is a `cai_core::Stream`, a raw handle as `usize`, an `Option` of either, or cudarc's `Arc<CudaStream>` (feature `cuda`)",
    label = "not a stream",
    note = "implement `AsStream` for a stream type of your own"
)]
pub trait AsStream {
    /// The stream.
    fn as_stream(&self) -> Result<Stream>;
}

#[allow(unknown_or_malformed_diagnostic_attributes)] // do_not_recommend: Rust 1.85
#[diagnostic::do_not_recommend]
impl<S: AsShape + ?Sized> AsShape for &S {
    fn as_shape(&self) -> DimVec<usize> {
        (**self).as_shape()
    }
}

#[allow(unknown_or_malformed_diagnostic_attributes)] // do_not_recommend: Rust 1.85
#[diagnostic::do_not_recommend]
impl<S: AsStrides + ?Sized> AsStrides for &S {
    fn as_strides(&self) -> DimVec<isize> {
        (**self).as_strides()
    }
}

#[allow(unknown_or_malformed_diagnostic_attributes)] // do_not_recommend: Rust 1.85
#[diagnostic::do_not_recommend]
impl<S: AsStream + ?Sized> AsStream for &S {
    fn as_stream(&self) -> Result<Stream> {
        (**self).as_stream()
    }
}

macro_rules! sequences {
    ($trait:ident, $method:ident, $int:ty) => {
        #[allow(unknown_or_malformed_diagnostic_attributes)]
        #[diagnostic::do_not_recommend]
        impl $trait for [$int] {
            fn $method(&self) -> DimVec<$int> {
                DimVec::from(self)
            }
        }
        #[allow(unknown_or_malformed_diagnostic_attributes)]
        #[diagnostic::do_not_recommend]
        impl<const N: usize> $trait for [$int; N] {
            fn $method(&self) -> DimVec<$int> {
                DimVec::from(self)
            }
        }
        #[allow(unknown_or_malformed_diagnostic_attributes)]
        #[diagnostic::do_not_recommend]
        impl $trait for Vec<$int> {
            fn $method(&self) -> DimVec<$int> {
                DimVec::from(self)
            }
        }
        #[allow(unknown_or_malformed_diagnostic_attributes)]
        #[diagnostic::do_not_recommend]
        impl $trait for DimVec<$int> {
            fn $method(&self) -> DimVec<$int> {
                self.clone()
            }
        }
        sequences!(@tuples $trait, $method, $int; (a) (a b) (a b c) (a b c d) (a b c d e) (a b c d e f));
    };
    (@tuples $trait:ident, $method:ident, $int:ty; $(($($x:ident)+))+) => {$(
        #[allow(unknown_or_malformed_diagnostic_attributes)]
        #[diagnostic::do_not_recommend]
        impl $trait for ($(sequences!(@ty $x $int),)+) {
            fn $method(&self) -> DimVec<$int> {
                #[allow(non_snake_case)]
                let ($($x,)+) = *self;
                DimVec::from([$($x),+])
            }
        }
    )+};
    (@ty $x:ident $int:ty) => { $int };
}

sequences!(AsShape, as_shape, usize);
sequences!(AsStrides, as_strides, isize);

#[allow(unknown_or_malformed_diagnostic_attributes)] // do_not_recommend: Rust 1.85
#[diagnostic::do_not_recommend]
impl AsShape for usize {
    fn as_shape(&self) -> DimVec<usize> {
        DimVec::from([*self])
    }
}

#[allow(unknown_or_malformed_diagnostic_attributes)] // do_not_recommend: Rust 1.85
#[diagnostic::do_not_recommend]
impl AsStream for Stream {
    fn as_stream(&self) -> Result<Stream> {
        Ok(*self)
    }
}

#[allow(unknown_or_malformed_diagnostic_attributes)] // do_not_recommend: Rust 1.85
#[diagnostic::do_not_recommend]
impl AsStream for usize {
    fn as_stream(&self) -> Result<Stream> {
        Stream::from_raw(Some(*self))
    }
}

#[allow(unknown_or_malformed_diagnostic_attributes)] // do_not_recommend: Rust 1.85
#[diagnostic::do_not_recommend]
impl<S: AsStream> AsStream for Option<S> {
    fn as_stream(&self) -> Result<Stream> {
        self.as_ref().map_or(Ok(Stream::None), S::as_stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn host_buffers() {
        let v = vec![1.0f32, 2.0, 3.0];
        assert_eq!((HostBuffer::len(&v), HostBuffer::readonly(&v), HostBuffer::as_ptr(&v)), (3, false, v.as_ptr()));
        let b: Box<[u16]> = vec![1, 2].into_boxed_slice();
        assert_eq!(HostBuffer::len(&b), 2);
        let a = [0u8; 5];
        assert_eq!(HostBuffer::len(&a), 5);
        let shared: &[f64] = &[1.0, 2.0];
        assert!(HostBuffer::readonly(&shared));
        let mut owned = [1i32, 2];
        let unique: &mut [i32] = &mut owned;
        assert!(!HostBuffer::readonly(&unique));
        assert!(HostBuffer::is_empty(&Vec::<f32>::new()));
    }

    #[test]
    fn raw_device_buffers() {
        // SAFETY: never dereferenced; only described.
        let raw = unsafe { RawDeviceBuffer::<f32>::new(0x7000_0000, 16) };
        assert_eq!(
            (raw.device_address(), DeviceBuffer::len(&raw), DeviceBuffer::readonly(&raw)),
            (0x7000_0000, 16, false)
        );
        assert_eq!(raw.stream().unwrap(), Stream::None);
        let ro = raw.readonly().on_stream(Stream::LegacyDefault);
        assert!(DeviceBuffer::readonly(&ro));
        assert_eq!(ro.stream().unwrap(), Stream::LegacyDefault);
    }

    #[test]
    fn shapes_strides_and_streams() {
        assert_eq!([2usize, 3].as_shape(), [2, 3]);
        assert_eq!(vec![4usize].as_shape(), [4]);
        assert_eq!((2usize, 3usize, 4usize).as_shape(), [2, 3, 4]);
        assert_eq!(7usize.as_shape(), [7]);
        assert_eq!(AsShape::as_shape(&&[1usize, 2][..]), [1, 2]);
        assert_eq!((-8isize, 4isize).as_strides(), [-8, 4]);
        assert_eq!(vec![16isize, 4].as_strides(), [16, 4]);
        assert_eq!(1usize.as_stream().unwrap(), Stream::LegacyDefault);
        assert_eq!(0usize.as_stream().unwrap_err(), Error::StreamZero);
        assert_eq!(None::<usize>.as_stream().unwrap(), Stream::None);
        assert_eq!(Some(2usize).as_stream().unwrap(), Stream::PerThreadDefault);
    }
}
