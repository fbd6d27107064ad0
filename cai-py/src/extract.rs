//! Typed device-array arguments for `#[pyfunction]`s.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Mutex;

use cai_core::{Descriptor, Element, Extent, Stream};
use pyo3::prelude::*;
use pyo3::Borrowed;

use crate::error::{py_tuple, received, Problem};
use crate::parse::{Interface, Reader};
use crate::sync::{consume, ImportOptions};

mod sealed {
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
/// driver and work on the legacy default stream is ordered after the producer's stream
/// (`CAI_IMPORT_SYNC`, `CAI_CHECK_POINTERS` apply); an integer stream needs the CUDA
/// driver. The argument holds the Python object, so the memory stays valid for the call.
///
/// Two extractions of overlapping memory in one call, where either is read-write, are
/// refused with `BufferError`, as rust-numpy does; the check covers the arrays extracted
/// by this extension module.
///
/// ```ignore
/// use cai_py::{Ix2, PyCudaArrayRw};
///
/// #[pyfunction]
/// fn scale(x: PyCudaArrayRw<'_, f32, Ix2>, factor: f32) {
///     let [rows, cols] = x.dims();
///     launch_scale_kernel(x.as_mut_ptr(), rows, cols, factor);
/// }
/// ```
pub struct PyCudaArray<'py, T: Element, D: Dimension = IxDyn, A: Access = ReadOnly> {
    object: Bound<'py, PyAny>,
    descriptor: Descriptor,
    strides: Vec<isize>,
    extent: Extent,
    borrow: Option<u64>,
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
        let parsed = Reader::strict().read_object(&object, Interface::Cuda).map_err(|e| {
            if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py)
                && !object.hasattr("__cuda_array_interface__").unwrap_or(true)
            {
                Problem::type_error(format!("expected {}, received {}", expectation::<T, D, A>(), received(&object)))
                    .into()
            } else {
                e
            }
        })?;
        let parsed = parsed.ok_or_else(|| Problem::type_error("a strict reader returned no result"))?;
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
            consumer: Stream::LegacyDefault,
            check_pointers: config.check_pointers,
            allow_other_device: false,
        };
        consume(py, &parsed, &options)?;
        let d = &parsed.descriptor;
        let strides = d.strides().map_err(crate::error::to_py_err)?.into_owned();
        let borrow = registry::acquire(&parsed.descriptor, parsed.extent, A::WRITABLE)?;
        Ok(PyCudaArray {
            object,
            descriptor: parsed.descriptor,
            strides,
            extent: parsed.extent,
            borrow,
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
    /// The device address of the element at index zero.
    pub fn device_address(&self) -> usize {
        self.descriptor.data
    }

    /// The element at index zero, as a pointer for kernels that only read.
    pub fn as_ptr(&self) -> *const T {
        self.descriptor.data as *const T
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
        &self.strides
    }

    /// Strides in elements of `T`.
    pub fn element_strides(&self) -> Vec<isize> {
        let size = isize::try_from(self.descriptor.itemsize()).unwrap_or(isize::MAX).max(1);
        self.strides.iter().map(|s| s / size).collect()
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

    /// The producer's stream (already synchronized when extraction returned).
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
        let fail = |e: cai_core::cuda::DriverError| {
            crate::error::driver_error(py, format!("data: cannot make a cudarc view: {e}"))
        };
        let device =
            if self.is_empty() { 0 } else { cai_core::cuda::pointer_info(self.device_address()).map_err(fail)?.device };
        let owner = self.object.clone().unbind();
        crate::CudaForeign::new(self.device_address(), self.len(), device, self.descriptor.stream, owner).map_err(fail)
    }
}

impl<T: Element, D: Dimension> PyCudaArray<'_, T, D, ReadWrite> {
    /// The element at index zero, as a pointer for kernels that write.
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.descriptor.data as *mut T
    }
}

/// The memory ranges held by live extractions, to refuse overlapping read-write ones.
mod registry {
    use super::*;

    struct Held {
        id: u64,
        start: usize,
        end: usize,
        writable: bool,
    }

    struct State {
        next: u64,
        held: Vec<Held>,
    }

    static STATE: Mutex<State> = Mutex::new(State { next: 0, held: Vec::new() });

    /// Registers the bytes of `d`; `None` for an array that reaches no byte.
    pub(super) fn acquire(d: &Descriptor, extent: Extent, writable: bool) -> PyResult<Option<u64>> {
        if extent.is_empty() {
            return Ok(None);
        }
        let start = d.data.wrapping_add_signed(extent.start);
        let end = d.data.wrapping_add_signed(extent.end);
        let mut state = STATE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(other) = state.held.iter().find(|h| h.start < end && start < h.end && (writable || h.writable)) {
            let kinds = match (writable, other.writable) {
                (true, true) => "two read-write arguments",
                _ => "a read-write and a read-only argument",
            };
            return Err(Problem::buffer_error(format!(
                "data: bytes 0x{start:x}..0x{end:x} overlap bytes 0x{:x}..0x{:x} of another argument of this call; \
                 {kinds} may not share memory",
                other.start, other.end
            ))
            .into());
        }
        state.next += 1;
        let id = state.next;
        state.held.push(Held { id, start, end, writable });
        Ok(Some(id))
    }

    pub(super) fn release(id: u64) {
        let mut state = STATE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        state.held.retain(|h| h.id != id);
    }
}
