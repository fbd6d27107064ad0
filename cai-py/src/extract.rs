//! Typed device-array arguments for `#[pyfunction]`s.

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

use cai_core::sync::SyncPolicy;
use cai_core::{Descriptor, Element, Extent, Stream};
use pyo3::prelude::*;
use pyo3::Borrowed;

use crate::error::{py_tuple, received, Problem};
use crate::parse::{self, Interface};
use crate::sync::{consume, order_deferred, Caller, ConsumerStream, ImportOptions};

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// A fixed or dynamic number of dimensions.
pub trait Dimension: sealed::Sealed + 'static {
    /// The number of dimensions, or `None` for any.
    const NDIM: Option<usize>;
    /// The shape in its natural Rust form: `[usize; N]` or `Vec<usize>`.
    type Dims: fmt::Debug + Clone;
    /// Builds [`Dims`](Self::Dims) from a shape whose length was checked against `NDIM`.
    fn dims(shape: &[usize]) -> Self::Dims;
}

/// Exactly `N` dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ix<const N: usize>;

/// Any number of dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IxDyn;

/// A 0-d array (one element).
pub type Ix0 = Ix<0>;
/// One dimension.
pub type Ix1 = Ix<1>;
/// Two dimensions.
pub type Ix2 = Ix<2>;
/// Three dimensions.
pub type Ix3 = Ix<3>;
/// Four dimensions.
pub type Ix4 = Ix<4>;
/// Five dimensions.
pub type Ix5 = Ix<5>;
/// Six dimensions.
pub type Ix6 = Ix<6>;

impl<const N: usize> sealed::Sealed for Ix<N> {}
impl<const N: usize> Dimension for Ix<N> {
    const NDIM: Option<usize> = Some(N);
    type Dims = [usize; N];
    fn dims(shape: &[usize]) -> [usize; N] {
        std::array::from_fn(|i| shape.get(i).copied().unwrap_or(0))
    }
}

impl sealed::Sealed for IxDyn {}
impl Dimension for IxDyn {
    const NDIM: Option<usize> = None;
    type Dims = Vec<usize>;
    fn dims(shape: &[usize]) -> Vec<usize> {
        shape.to_vec()
    }
}

/// Whether an extraction may write: [`ReadOnly`] or [`ReadWrite`].
pub trait Access: sealed::Sealed + 'static {
    /// Whether the array is extracted for writing.
    const WRITABLE: bool;
}

/// Extracted for reading; any array, read-only or not, is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOnly;

/// Extracted for writing; a read-only array is refused with `BufferError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadWrite;

impl sealed::Sealed for ReadOnly {}
impl Access for ReadOnly {
    const WRITABLE: bool = false;
}
impl sealed::Sealed for ReadWrite {}
impl Access for ReadWrite {
    const WRITABLE: bool = true;
}

/// A device array argument of element type `T` and dimensionality `D`, taken from any
/// object that exports `__cuda_array_interface__` (a CuPy array, a torch tensor, a Numba
/// device array, a `cai.CudaArray`, a derived `#[pyclass]`).
///
/// Extraction reads the interface once, validates it by its version and checks the
/// element type (the typestr must be `T`'s, in native byte order), the number of
/// dimensions, that strides are whole elements and, for [`ReadWrite`], that the array is
/// writable. As `cai.as_cuda_array` does with its defaults, the pointer is checked with the
/// driver (`CAI_CHECK_POINTERS` applies). The argument holds the Python object, so the
/// memory stays valid for the call.
///
/// # Streams
///
/// The producer may still have work pending on its stream. Which stream the function
/// launches on is the function's to say, so ordering happens when the pointer is taken,
/// and is correct on any stream:
///
/// - [`as_ptr_on`](Self::as_ptr_on) / [`as_mut_ptr_on`](Self::as_mut_ptr_on) (or
///   [`order_on`](Self::order_on)) with the stream the work goes to (a cudarc
///   `CudaStream`, or a [`Stream`]): that stream waits on an event of the producer's
///   stream; the host does not block;
/// - [`as_ptr`](Self::as_ptr) / [`as_mut_ptr`](Self::as_mut_ptr), when no stream was
///   named: the host waits for the producer's pending work (once), so that work launched
///   afterwards on any stream sees it;
/// - [`cudarc_view`](Self::cudarc_view): a cudarc slice on the producer's own stream, which
///   orders any other stream it is used on.
///
/// `CAI_IMPORT_SYNC` (or `cai.configure(import_sync=...)`) applies: `ignore` skips the
/// ordering, `synchronize` makes every pointer accessor wait on the host. An integer
/// stream needs the CUDA driver: without one, extraction raises `cai.CudaDriverError`.
///
/// Two extractions of overlapping memory in one call, where either is read-write, are
/// refused with `BufferError`, as rust-numpy does; the check covers the arrays extracted
/// by this extension module.
///
/// ```ignore
/// use cai_py::{Ix2, PyCudaArrayRw};
///
/// #[pyfunction]
/// fn scale(mut x: PyCudaArrayRw<'_, f32, Ix2>, factor: f32) -> PyResult<()> {
///     let [rows, cols] = x.dims();
///     let stream = my_stream(); // a cudarc stream
///     let ptr = x.as_mut_ptr_on(&stream)?; // `stream` now waits for the producer's work
///     launch_scale_kernel(&stream, ptr, rows, cols, factor);
///     Ok(())
/// }
/// ```
pub struct PyCudaArray<'py, T: Element, D: Dimension = IxDyn, A: Access = ReadOnly> {
    object: Bound<'py, PyAny>,
    descriptor: Descriptor,
    /// C-order strides, computed when first asked for (the descriptor's own otherwise).
    c_strides: std::cell::OnceCell<Vec<isize>>,
    extent: Extent,
    borrow: Option<u64>,
    policy: SyncPolicy,
    device: Option<i32>,
    /// Whether the producer's work is still to be ordered before the pointer is used.
    pending: Cell<bool>,
    /// The tensor taken from a DLPack producer, kept alive for the call.
    _dlpack: Option<Py<PyAny>>,
    _marker: PhantomData<(T, D, A)>,
}

/// A read-only device array argument.
pub type PyCudaArrayRo<'py, T, D = IxDyn> = PyCudaArray<'py, T, D, ReadOnly>;

/// A read-write device array argument.
pub type PyCudaArrayRw<'py, T, D = IxDyn> = PyCudaArray<'py, T, D, ReadWrite>;

impl<T: Element, D: Dimension, A: Access> fmt::Debug for PyCudaArray<'_, T, D, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PyCudaArray")
            .field("typestr", &T::TYPESTR.to_string())
            .field("writable", &A::WRITABLE)
            .field("descriptor", &self.descriptor)
            .finish_non_exhaustive()
    }
}

/// What an extraction asked for, as messages print it.
fn expectation<T: Element, D: Dimension, A: Access>() -> String {
    let access = if A::WRITABLE { "a writable" } else { "a" };
    let ndim = match D::NDIM {
        Some(1) => " with 1 dimension".to_owned(),
        Some(n) => format!(" with {n} dimensions"),
        None => String::new(),
    };
    format!("{access} CUDA array of '{}'{ndim}", T::TYPESTR)
}

fn describe(d: &Descriptor) -> String {
    let access = if d.readonly { "read-only" } else { "writable" };
    format!("a {access} array of '{}' with shape {}", d.typestr, py_tuple(&d.shape))
}

impl<'a, 'py, T: Element, D: Dimension, A: Access> FromPyObject<'a, 'py> for PyCudaArray<'py, T, D, A> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let object = obj.to_owned();
        let py = object.py();
        // The interface first, DLPack otherwise: with the interface, ordering waits until
        // the function names its stream (see "Streams"); DLPack asks for the consumer's
        // stream up front, so the producer is told the legacy default stream.
        let (parsed, dlpack) = match parse::attribute(&object, Interface::Cuda)? {
            Some(value) => (parse::parse(&value, Interface::Cuda)?, None),
            None if crate::dlpack::offers(&object)? => {
                let imported = crate::dlpack::import(&object, Some(Stream::LegacyDefault), None)?;
                if imported.memory != crate::dlpack::Memory::Device {
                    let message = format!(
                        "expected {}, received {} whose DLPack device is host memory",
                        expectation::<T, D, A>(),
                        received(&object)?
                    );
                    return Err(Problem::type_error(message).into());
                }
                (imported.parsed, Some(imported.owner))
            }
            None => {
                let message = format!("expected {}, received {}", expectation::<T, D, A>(), received(&object)?);
                return Err(Problem::type_error(message).into());
            }
        };
        let d = &parsed.descriptor;
        let mismatch = |what: &str| {
            Problem::type_error(format!("expected {}, received {} ({what})", expectation::<T, D, A>(), describe(d)))
        };
        let element_ok =
            T::TYPESTR.is_equivalent(&d.typestr) && d.descr.as_ref().is_none_or(|descr| *descr == T::descr());
        if !element_ok {
            return Err(mismatch("wrong element type").into());
        }
        if D::NDIM.is_some_and(|n| n != d.ndim()) {
            return Err(mismatch("wrong number of dimensions").into());
        }
        if !d.has_element_strides() {
            return Err(Problem::value_error(format!(
                "strides: {:?} are not whole multiples of the element size {} of '{}'",
                d.strides.as_deref().unwrap_or_default(),
                d.itemsize(),
                T::TYPESTR
            ))
            .into());
        }
        if A::WRITABLE && d.readonly {
            return Err(Problem::buffer_error(format!(
                "expected {}, received {} (the producer marked it read-only)",
                expectation::<T, D, A>(),
                describe(d)
            ))
            .into());
        }
        let config = crate::config::get(py)?;
        let options = ImportOptions {
            policy: config.import_sync,
            consumer: None,
            check_pointers: config.check_pointers,
            allow_other_device: false,
            caller: Caller::Extractor,
        };
        let device = consume(py, &parsed, &options)?;
        let pending = !parsed.descriptor.stream.is_none() && config.import_sync != SyncPolicy::Ignore;
        let borrow = registry::acquire(&parsed.descriptor, parsed.extent, A::WRITABLE)?;
        Ok(PyCudaArray {
            object,
            descriptor: parsed.descriptor,
            c_strides: std::cell::OnceCell::new(),
            extent: parsed.extent,
            borrow,
            policy: config.import_sync,
            device,
            pending: Cell::new(pending),
            _dlpack: dlpack,
            _marker: PhantomData,
        })
    }
}

impl<T: Element, D: Dimension, A: Access> Drop for PyCudaArray<'_, T, D, A> {
    fn drop(&mut self) {
        if let Some(id) = self.borrow {
            registry::release(id);
        }
    }
}

impl<'py, T: Element, D: Dimension, A: Access> PyCudaArray<'py, T, D, A> {
    /// The device address of the element at index zero, for describing the array. To
    /// launch work on it, take the pointer with [`as_ptr_on`](Self::as_ptr_on) or
    /// [`as_ptr`](Self::as_ptr), which order the producer's pending work first.
    pub fn device_address(&self) -> usize {
        self.descriptor.data
    }

    /// Makes `stream` wait for the producer's pending work (an event wait; the host does
    /// not block). Work launched on `stream` afterwards sees the producer's writes; the
    /// pointer accessors without a stream no longer wait on the host. Driver failures and
    /// orderings that a CUDA graph capture forbids are `cai.CudaDriverError`.
    pub fn order_on(&self, stream: &impl ConsumerStream) -> PyResult<()> {
        order_deferred(self.object.py(), self.descriptor.stream, self.policy, self.device, Some(stream.target()))?;
        self.pending.set(false);
        Ok(())
    }

    /// The element at index zero, for kernels that only read and are launched on
    /// `stream`, which is first made to wait for the producer's pending work.
    pub fn as_ptr_on(&self, stream: &impl ConsumerStream) -> PyResult<*const T> {
        self.order_on(stream)?;
        Ok(self.descriptor.data as *const T)
    }

    /// The element at index zero, for kernels that only read. If the producer's pending
    /// work has not been ordered before a stream (see [`order_on`](Self::order_on)), the
    /// host waits for it first, so that work on any stream sees it.
    pub fn as_ptr(&self) -> PyResult<*const T> {
        self.settle()?;
        Ok(self.descriptor.data as *const T)
    }

    fn settle(&self) -> PyResult<()> {
        if self.pending.get() {
            order_deferred(self.object.py(), self.descriptor.stream, self.policy, self.device, None)?;
            self.pending.set(false);
        }
        Ok(())
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.descriptor.shape
    }

    /// The shape as `[usize; N]` for `Ix<N>`, or a `Vec` for `IxDyn`.
    pub fn dims(&self) -> D::Dims {
        D::dims(&self.descriptor.shape)
    }

    /// The number of dimensions.
    pub fn ndim(&self) -> usize {
        self.descriptor.ndim()
    }

    /// Strides in bytes, one per dimension (computed for a C-contiguous array).
    pub fn strides(&self) -> &[isize] {
        match &self.descriptor.strides {
            Some(s) => s,
            // Validation bounded the C-order strides (NumPy's size rule), so they fit.
            None => {
                self.c_strides.get_or_init(|| self.descriptor.strides().map(|s| s.into_owned()).unwrap_or_default())
            }
        }
    }

    /// Strides in elements of `T`.
    pub fn element_strides(&self) -> Vec<isize> {
        let size = isize::try_from(self.descriptor.itemsize()).unwrap_or(isize::MAX).max(1);
        self.strides().iter().map(|s| s / size).collect()
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.descriptor.shape.iter().product()
    }

    /// Whether the array has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the elements lie in C order without gaps.
    pub fn is_c_contiguous(&self) -> bool {
        self.descriptor.is_c_contiguous()
    }

    /// Whether the elements lie in Fortran order without gaps.
    pub fn is_f_contiguous(&self) -> bool {
        self.descriptor.is_f_contiguous()
    }

    /// Whether the producer marked the array read-only.
    pub fn readonly(&self) -> bool {
        self.descriptor.readonly
    }

    /// The producer's stream (its pending work is ordered by the pointer accessors).
    pub fn stream(&self) -> Stream {
        self.descriptor.stream
    }

    /// The bytes the array reaches, as offsets from its pointer.
    pub fn extent(&self) -> Extent {
        self.extent
    }

    /// The validated descriptor.
    pub fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    /// The Python object the array came from.
    pub fn object(&self) -> &Bound<'py, PyAny> {
        &self.object
    }
}

#[cfg(feature = "driver")]
impl<T: Element, D: Dimension, A: Access> PyCudaArray<'_, T, D, A> {
    /// The array as cudarc device memory (a [`CudaForeign`](crate::CudaForeign) of `len()`
    /// elements on the producer's stream), for launching cudarc kernels on it. C-contiguous
    /// arrays only (`ValueError` otherwise); `cai.CudaDriverError` without a driver.
    pub fn cudarc_view(&self) -> PyResult<crate::CudaForeign<T, A>> {
        let py = self.object.py();
        if !self.is_c_contiguous() {
            return Err(Problem::value_error(format!(
                "strides: a cudarc view needs a C-contiguous array, received shape {} with strides {}",
                py_tuple(self.shape()),
                py_tuple(self.strides())
            ))
            .into());
        }
        let fail =
            |e: cai_core::DriverError| crate::error::driver_error(py, format!("data: cannot make a cudarc view: {e}"));
        let device = match self.device {
            Some(d) => d,
            None if self.is_empty() => cai_core::cuda::stream_device(Stream::LegacyDefault).ok().flatten().unwrap_or(0),
            None => match cai_core::cuda::pointer_info(self.device_address()).map_err(fail)? {
                Some(info) => info.device,
                None => {
                    return Err(Problem::value_error(format!(
                        "data: cannot make a cudarc view: pointer 0x{:x} is not memory the CUDA driver knows",
                        self.device_address()
                    ))
                    .into())
                }
            },
        };
        let owner = self.object.clone().unbind();
        crate::CudaForeign::new(self.device_address(), self.len(), device, self.descriptor.stream, owner).map_err(fail)
    }
}

impl<T: Element, D: Dimension> PyCudaArray<'_, T, D, ReadWrite> {
    /// The element at index zero, for kernels that write and are launched on `stream`,
    /// which is first made to wait for the producer's pending work.
    pub fn as_mut_ptr_on(&mut self, stream: &impl ConsumerStream) -> PyResult<*mut T> {
        self.order_on(stream)?;
        Ok(self.descriptor.data as *mut T)
    }

    /// The element at index zero, for kernels that write; waits on the host as
    /// [`as_ptr`](Self::as_ptr) does.
    pub fn as_mut_ptr(&mut self) -> PyResult<*mut T> {
        self.settle()?;
        Ok(self.descriptor.data as *mut T)
    }
}

/// The memory ranges held by the live extractions of each call, to refuse overlapping
/// read-write arguments of one call.
///
/// A call's arguments are extracted one after the other on one thread, from the caller's
/// Python frame, and live until the call returns; so the ranges are kept per thread and
/// keyed by the frame that made the call. Another thread's call, and a call made from an
/// argument's property while the arguments of the outer call are being extracted (its
/// frame is the property's), are other calls and never conflict.
mod registry {
    use std::cell::RefCell;

    use super::*;

    struct Held {
        id: u64,
        frame: usize,
        start: usize,
        end: usize,
        writable: bool,
    }

    thread_local! {
        static HELD: RefCell<(u64, Vec<Held>)> = const { RefCell::new((0, Vec::new())) };
    }

    /// The Python frame the current call was made from (0 outside any frame).
    fn calling_frame() -> usize {
        // SAFETY: called with the GIL held (an extraction); the result is only compared.
        unsafe { pyo3::ffi::PyEval_GetFrame() as usize }
    }

    /// Registers the bytes of `d`; `None` for an array that reaches no byte.
    pub(super) fn acquire(d: &Descriptor, extent: Extent, writable: bool) -> PyResult<Option<u64>> {
        if extent.is_empty() {
            return Ok(None);
        }
        let bytes = d.byte_range_of(extent).map_err(crate::error::to_py_err)?;
        let (start, end) = (bytes.start, bytes.end);
        let frame = calling_frame();
        HELD.with(|held| {
            let (next, held) = &mut *held.borrow_mut();
            let clash =
                held.iter().find(|h| h.frame == frame && h.start < end && start < h.end && (writable || h.writable));
            if let Some(other) = clash {
                let kinds = match (writable, other.writable) {
                    (true, true) => "two read-write arguments",
                    _ => "a read-write and a read-only argument",
                };
                return Err(Problem::buffer_error(format!(
                    "data: bytes 0x{start:x}..0x{end:x} overlap bytes 0x{:x}..0x{:x} of another argument of this \
                     call; {kinds} may not share memory",
                    other.start, other.end
                ))
                .into());
            }
            *next += 1;
            held.push(Held { id: *next, frame, start, end, writable });
            Ok(Some(*next))
        })
    }

    pub(super) fn release(id: u64) {
        // During thread teardown the registry may be gone already: nothing to release.
        let _ = HELD.try_with(|held| held.borrow_mut().1.retain(|h| h.id != id));
    }
}
