//! Typed device-array arguments for `#[pyfunction]`s.

use std::cell::{Cell, OnceCell, RefCell};
use std::fmt;
use std::marker::PhantomData;
use std::mem::{ManuallyDrop, MaybeUninit};

use cai_core::sync::SyncPolicy;
use cai_core::{ByteOrder, Descriptor, Element, Extent, Stream};
use pyo3::prelude::*;
use pyo3::Borrowed;

use crate::dlpack::Memory;
use crate::error::{py_tuple, received, Problem};
use crate::parse::{self, Interface, Parsed};
use crate::sync::{
    consume, hand_back, order_deferred, report_hand_back, Caller, ConsumerStream, HandBack, ImportOptions,
};

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// A fixed or dynamic number of dimensions.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a cai_py dimension: use `cai_py::Ix1`, `cai_py::Ix2`, ... or `cai_py::IxDyn`",
    label = "not a `cai_py::Dimension`",
    note = "ndarray's `Ix2` and `IxDyn` share these names but are other types: import cai_py's (`use cai_py::Ix2;`) where an argument's type names them"
)]
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
/// device array, a `cai.CudaArray`, a derived `#[pyclass]`), or that offers CUDA memory
/// through DLPack alone.
///
/// Extraction reads the interface once, validates it by its version and checks the
/// element type (the typestr must be `T`'s, in native byte order), the number of
/// dimensions, that the strides stepped are whole elements (that of an axis of length 1,
/// or of an empty array, may be anything) and, for [`ReadWrite`], that the array is
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
///   `Arc<CudaStream>`, or a [`Stream`]): that stream waits on an event of the producer's
///   stream; the host does not block. The other way round as well: when the argument
///   goes (after the function's body, its locals included), the producer's stream is made
///   to wait on an event of that stream, so that the producer's later work neither
///   overwrites nor frees memory the function's work still uses. The argument keeps a
///   cudarc stream alive until then; a `Stream` handle must stay valid until then. A
///   failure there is reported through `sys.unraisablehook`. (Under a graph capture, as
///   for the first wait: work captured into a graph is not waited for, since it runs
///   when the graph is launched; see `cai_core::sync::hand_back`);
/// - [`as_ptr`](Self::as_ptr) / [`as_mut_ptr`](Self::as_mut_ptr), when no stream was
///   named: the host waits for the producer's pending work (once), so that work launched
///   afterwards on any stream sees it. The stream of that work is unknown here, so the
///   function must see it finished before it returns (or name its stream instead);
/// - `cudarc_view` (feature `driver`): a cudarc slice on the producer's own stream, which
///   orders any other stream it is used on.
///
/// `CAI_IMPORT_SYNC` (or `cai.configure(import_sync=...)`) applies: `ignore` skips the
/// ordering, `synchronize` makes every pointer accessor wait on the host. An integer
/// stream needs the CUDA driver: without one, extraction raises `cai.CudaDriverError`.
///
/// Two extractions of overlapping memory in one call, where either is read-write, are
/// refused with `BufferError`; the check covers the arrays extracted by this extension
/// module. As in rust-numpy, arrays whose elements interleave without sharing a byte (the
/// columns of a matrix, the real and imaginary parts of a complex array) do not overlap:
/// two arrays overlap when their byte ranges do and an element of one can share a byte
/// with an element of the other, judged from the greatest common divisor of their strides
/// and their item sizes (which can see an overlap where there is none, never miss one).
///
/// ```no_run
/// use cai_core::Stream;
/// use cai_py::{Ix2, PyCudaArrayRw};
/// use pyo3::prelude::*;
/// # fn my_stream() -> Stream { Stream::LegacyDefault }
/// # fn launch_scale_kernel(_: &Stream, _: *mut f32, _: usize, _: usize, _: f32) {}
///
/// #[pyfunction]
/// fn scale(mut x: PyCudaArrayRw<'_, f32, Ix2>, factor: f32) -> PyResult<()> {
///     let [rows, cols] = x.dims();
///     let stream = my_stream(); // a cudarc stream (feature `driver`), or a `Stream`
///     let ptr = x.as_mut_ptr_on(&stream)?; // `stream` now waits for the producer's work
///     launch_scale_kernel(&stream, ptr, rows, cols, factor);
///     Ok(())
/// }
/// ```
pub struct PyCudaArray<'py, T: Element, D: Dimension = IxDyn, A: Access = ReadOnly> {
    /// Dropped by hand: after the producer's stream waited for the function's streams (the
    /// object may be the memory's last owner), before a failure there is reported (the
    /// hook may extract the same object again).
    argument: ManuallyDrop<Argument<'py>>,
    policy: SyncPolicy,
    device: Option<i32>,
    /// Whether the producer's work is still to be ordered before the pointer is used.
    pending: Cell<bool>,
    /// The streams other than the producer's that the function's work was ordered on:
    /// the producer's stream waits for each when the argument goes. Dropped by hand as
    /// well, and only when it has entries (an empty list never had one, so it owns no
    /// allocation: the common drop then costs one comparison).
    handed: ManuallyDrop<RefCell<Vec<HandBack>>>,
    _marker: PhantomData<(T, D, A)>,
}

impl<T: Element, D: Dimension, A: Access> Drop for PyCudaArray<'_, T, D, A> {
    fn drop(&mut self) {
        if self.handed.get_mut().is_empty() {
            // SAFETY: dropped once, here; the field is not used afterwards.
            unsafe { ManuallyDrop::drop(&mut self.argument) };
        } else {
            self.hand_back_and_release();
        }
    }
}

impl<T: Element, D: Dimension, A: Access> PyCudaArray<'_, T, D, A> {
    /// The drop of an argument whose work went to other streams than the producer's.
    #[cold]
    #[inline(never)]
    fn hand_back_and_release(&mut self) {
        /// Drops the argument when it goes, unwinding included.
        struct Release<'a, 'py>(&'a mut ManuallyDrop<Argument<'py>>);
        impl Drop for Release<'_, '_> {
            fn drop(&mut self) {
                // SAFETY: made once, in `hand_back_and_release` (from `drop`), over a field
                // that is not used afterwards.
                unsafe { ManuallyDrop::drop(self.0) };
            }
        }
        let py = self.argument.py;
        // SAFETY: taken once, here (from `drop`); the field is not used afterwards.
        let handed = unsafe { ManuallyDrop::take(&mut self.handed) }.into_inner();
        let failures: Vec<String> = {
            let _release = Release(&mut self.argument);
            handed.into_iter().filter_map(|h| hand_back(py, h).err()).collect()
        };
        for message in failures {
            report_hand_back(py, message);
        }
    }
}

/// A read-only device array argument.
pub type PyCudaArrayRo<'py, T, D = IxDyn> = PyCudaArray<'py, T, D, ReadOnly>;

/// A read-write device array argument.
pub type PyCudaArrayRw<'py, T, D = IxDyn> = PyCudaArray<'py, T, D, ReadWrite>;

impl<T: Element, D: Dimension, A: Access> fmt::Debug for PyCudaArray<'_, T, D, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.argument.debug::<T, A>(f, "PyCudaArray")
    }
}

/// An array in `memory`, as messages name it.
fn array_of(memory: Memory) -> &'static str {
    match memory {
        Memory::Device => "CUDA array",
        Memory::Host => "host array",
    }
}

/// What an extraction asked for, as messages print it.
pub(crate) fn expectation<T: Element, D: Dimension, A: Access>(memory: Memory) -> String {
    let access = if A::WRITABLE { "a writable" } else { "a" };
    let ndim = match D::NDIM {
        Some(1) => " with 1 dimension".to_owned(),
        Some(n) => format!(" with {n} dimensions"),
        None => String::new(),
    };
    format!("{access} {} of '{}'{ndim}", array_of(memory), T::TYPESTR)
}

fn describe(d: &Descriptor) -> String {
    let access = if d.readonly { "read-only" } else { "writable" };
    format!("a {access} array of '{}' with shape {}", d.typestr, py_tuple(&d.shape))
}

/// What every extracted argument holds: the object and its [`Lifeline`] (so that the
/// memory stays valid for the call), the checked descriptor, and its entry in the overlap
/// registry.
///
/// Boxed: pyo3 moves an extracted argument several times on its way into the function
/// (out of the extraction's result, into the call), and a descriptor inline made each
/// move a copy of some 300 bytes, which cost more than the one allocation. The box of an
/// argument that is dropped becomes its thread's spare, which the next extraction fills
/// (a `malloc` and a `free` were about 130 of the 2,600 instructions of an extraction).
pub(crate) struct Argument<'py> {
    contents: ManuallyDrop<Box<Contents>>,
    py: Python<'py>,
}

/// The contents of an [`Argument`].
pub(crate) struct Contents {
    object: Py<PyAny>,
    pub(crate) descriptor: Descriptor,
    /// C-order strides, computed when first asked for (the descriptor's own otherwise).
    c_strides: OnceCell<Vec<isize>>,
    pub(crate) extent: Extent,
    borrow: Option<u64>,
    /// What the array was read from, kept alive for the call.
    lifeline: Option<Lifeline>,
}

/// What an argument was read from besides its object, which may be all that keeps the
/// memory alive.
pub(crate) enum Lifeline {
    /// The value of the object's interface attribute. A producer may tie the memory to it
    /// rather than to itself: a NumPy scalar's `__array_interface__` describes a 0-d array
    /// made for the read, which only the dict's `'__ref'` entry keeps alive.
    Interface(Py<PyAny>),
    /// The tensor taken from a DLPack producer; its deleter may free the memory.
    Tensor(Py<PyAny>),
}

/// Reads an argument in `memory` from `object`, checked against what `T`, `D` and `A` ask
/// for: through the interface of that memory, or else DLPack (whose producer is asked
/// for its tensor only when its device is of that memory; for device memory it is told
/// the legacy default stream, since DLPack orders work up front). What the array was read
/// from (the interface value, or the tensor taken through DLPack) is put in `lifeline`, to
/// be kept alive with the argument.
///
/// (The tensor is not returned with the array: a pair would be one more copy of the
/// array's few hundred bytes on every extraction.)
// The common read is inlined into the extraction; what an object without the interface
// needs is out of line (inlined as well, it cost each extraction about 50 instructions).
#[inline(always)]
pub(crate) fn read<T: Element, D: Dimension, A: Access>(
    object: &Bound<'_, PyAny>,
    memory: Memory,
    lifeline: &mut Option<Lifeline>,
) -> PyResult<Parsed> {
    // NumPy's arrays are read through DLPack: the same array, a third of the cost.
    if memory == Memory::Host && crate::dlpack::is_numpy_array(object)? {
        if let Some(imported) = crate::dlpack::import_numpy(object)? {
            return checked_dlpack::<T, D, A>(object, imported, memory, lifeline);
        }
    }
    let own = match memory {
        Memory::Device => Interface::Cuda,
        Memory::Host => Interface::Host,
    };
    match parse::attribute(object, own)? {
        Some(value) => {
            let parsed = parse::parse(&value, own, parse::Source::Attribute)?;
            check::<T, D, A>(&parsed, memory)?;
            if A::WRITABLE && memory == Memory::Host && is_numpy_scalar(object)? {
                return Err(Problem::buffer_error(format!(
                    "expected {}, received {}, a NumPy scalar: its __array_interface__ describes a copy made for \
                     the read, which the function's writes would reach instead of the scalar (pass an array, such \
                     as numpy.array(x))",
                    expectation::<T, D, A>(memory),
                    received(object)?
                ))
                .into());
            }
            *lifeline = Some(Lifeline::Interface(value.unbind()));
            Ok(parsed)
        }
        None => read_without_interface::<T, D, A>(object, memory, lifeline),
    }
}

/// Whether `obj` is a NumPy scalar (an instance of `numpy.generic`). No object is one
/// before NumPy is imported; after, `numpy.generic` is looked up once in `sys.modules`
/// and recognized by its static type's name, and the test runs no Python code.
#[cold]
#[inline(never)]
fn is_numpy_scalar(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    static GENERIC: pyo3::sync::PyOnceLock<Py<pyo3::types::PyType>> = pyo3::sync::PyOnceLock::new();
    let py = obj.py();
    let generic = match GENERIC.get(py) {
        Some(generic) => generic.bind(py).clone(),
        None => {
            let none_unless_interrupted = |e: PyErr| if parse::must_propagate(py, &e) { Err(e) } else { Ok(false) };
            // `sys.modules` and the module's attribute may be anything, whose code may
            // call cai again.
            let _nesting = parse::Nesting::enter("numpy.generic")?;
            // SAFETY: the GIL is held; a new reference, or null (with an exception set
            // only when the lookup failed).
            let numpy = unsafe { pyo3::ffi::PyImport_GetModule(pyo3::intern!(py, "numpy").as_ptr()) };
            if numpy.is_null() {
                return PyErr::take(py).map_or(Ok(false), none_unless_interrupted);
            }
            // SAFETY: a new reference, checked above.
            let numpy = unsafe { Bound::from_owned_ptr(py, numpy) };
            let generic = match numpy.getattr(pyo3::intern!(py, "generic")) {
                Ok(g) => g,
                Err(e) => return none_unless_interrupted(e),
            };
            // A module that calls itself numpy without being NumPy has no static type of
            // that name.
            let Ok(generic) = generic.cast_into::<pyo3::types::PyType>() else { return Ok(false) };
            if crate::error::static_class_name(&generic)?.as_deref() != Some("numpy.generic") {
                return Ok(false);
            }
            let _ = GENERIC.set(py, generic.clone().unbind());
            generic
        }
    };
    // SAFETY: two live type objects; PyType_IsSubtype reads their MROs and runs no code.
    Ok(unsafe { pyo3::ffi::PyType_IsSubtype(obj.get_type().as_type_ptr(), generic.as_type_ptr()) } != 0)
}

/// [`read`] for an object without the interface of `memory`: DLPack, or the `TypeError`
/// that says what was received and what would do.
#[cold]
#[inline(never)]
fn read_without_interface<T: Element, D: Dimension, A: Access>(
    object: &Bound<'_, PyAny>,
    memory: Memory,
    lifeline: &mut Option<Lifeline>,
) -> PyResult<Parsed> {
    // What an argument of the other memory is told.
    let (other, other_memory, stream, way_out, accepted) = match memory {
        Memory::Device => (
            Interface::Host,
            "host",
            Some(Stream::LegacyDefault),
            "take it with a host array argument, PyHostArray, or copy it to the device first",
            "an object with __cuda_array_interface__ or __dlpack__",
        ),
        Memory::Host => (
            Interface::Cuda,
            "CUDA",
            None,
            "take it with a device array argument, PyCudaArray, or copy it to the host first",
            "an object with __array_interface__, such as a NumPy array, or a DLPack producer on the CPU",
        ),
    };
    let exports_other = |object| -> PyResult<Option<String>> {
        Ok(parse::attribute(object, other)?
            .map(|_| format!("it exports {}, {other_memory} memory: {way_out}", other.attribute())))
    };
    let wrong_kind = |hint: String| -> PyResult<PyErr> {
        let message = format!("expected {}, received {} ({hint})", expectation::<T, D, A>(memory), received(object)?);
        Ok(Problem::type_error(message).into())
    };
    if crate::dlpack::offers(object)? {
        return match crate::dlpack::import_memory(object, stream, None, memory) {
            Ok(Ok(imported)) => checked_dlpack::<T, D, A>(object, imported, memory, lifeline),
            Ok(Err(_)) => Err(wrong_kind(format!("its DLPack device is {other_memory} memory: {way_out}"))?),
            // A device array's `__dlpack_device__` needs the driver to tell its device
            // (a view of cai's, say, where no driver is loaded): an object that exports
            // `__cuda_array_interface__` is told what it is, not that the driver is missing.
            Err(e) if memory == Memory::Host && crate::error::is_driver_error(object.py(), &e)? => {
                match exports_other(object)? {
                    Some(hint) => {
                        let error = wrong_kind(hint)?;
                        error.set_cause(object.py(), Some(e));
                        Err(error)
                    }
                    None => Err(e),
                }
            }
            Err(e) => Err(e),
        };
    }
    let hint = match exports_other(object)? {
        Some(hint) => hint,
        None => accepted.to_owned(),
    };
    Err(wrong_kind(hint)?)
}

/// Checks an array read through DLPack. A read-write argument needs a versioned capsule:
/// a legacy one cannot say that the memory is read-only (JAX's immutable arrays come in
/// legacy capsules), so writing through it could change an array that must not change.
fn checked_dlpack<T: Element, D: Dimension, A: Access>(
    object: &Bound<'_, PyAny>,
    imported: crate::dlpack::Imported,
    memory: Memory,
    lifeline: &mut Option<Lifeline>,
) -> PyResult<Parsed> {
    // Before the other checks: a legacy tensor is read as read-only, and this says why.
    if A::WRITABLE && !imported.versioned {
        return Err(Problem::buffer_error(format!(
            "expected {}, received {} through a legacy DLPack capsule, which cannot say whether the memory may be \
             written; a writing argument needs a DLPack 1.0 producer or an array interface (pass a copy, such as \
             numpy.array(x))",
            expectation::<T, D, A>(memory),
            received(object)?
        ))
        .into());
    }
    check::<T, D, A>(&imported.parsed, memory)?;
    if A::WRITABLE && imported.copied {
        return Err(Problem::buffer_error(format!(
            "expected {}, received {} whose DLPack producer exported a copy (the tensor's IS_COPIED flag): what the \
             function writes would not reach the producer's array (pass an array that shares its memory)",
            expectation::<T, D, A>(memory),
            received(object)?
        ))
        .into());
    }
    *lifeline = Some(Lifeline::Tensor(imported.owner));
    Ok(imported.parsed)
}

/// The alignment CUDA code reads `T` with: Rust's, but a complex number's whole size, as
/// CUDA's `cuFloatComplex` (`float2`) and `cuDoubleComplex` (`double2`) are aligned.
const fn device_alignment<T: Element>() -> usize {
    match T::TYPESTR.kind() {
        cai_core::Kind::Complex => T::TYPESTR.itemsize(),
        _ => std::mem::align_of::<T>(),
    }
}

/// Checks `parsed` against what `T`, `D` and `A` ask for.
pub(crate) fn check<T: Element, D: Dimension, A: Access>(parsed: &Parsed, memory: Memory) -> PyResult<()> {
    let d = &parsed.descriptor;
    let mismatch = |what: &str| {
        Problem::type_error(format!("expected {}, received {} ({what})", expectation::<T, D, A>(memory), describe(d)))
    };
    // A record type is named by its fields too: its typestr ('|V8') alone says little.
    let record =
        T::TYPESTR.kind() == cai_core::Kind::Void && !T::descr().is_equivalent(&cai_core::Descr::simple(T::TYPESTR));
    if !T::TYPESTR.is_equivalent(&d.typestr) {
        return Err(match (record, d.descr.as_ref()) {
            (true, Some(descr)) => mismatch(&format!("wrong element type: records {descr}, not {}", T::descr())),
            (true, None) => mismatch(&format!("wrong element type: not records {}", T::descr())),
            (false, _) => mismatch("wrong element type"),
        }
        .into());
    }
    // Raw bytes of one byte order (bfloat16, `<V2`) are told from other raw bytes (`|V2`,
    // `>V2`) by the order alone, as the DLPack mapping tells them.
    let ordered_void = T::TYPESTR.kind() == cai_core::Kind::Void && T::TYPESTR.byte_order() != ByteOrder::NotApplicable;
    if ordered_void && d.typestr.byte_order() != T::TYPESTR.byte_order() {
        return Err(mismatch(&format!("raw bytes '{}', not '{}'", d.typestr, T::TYPESTR)).into());
    }
    match d.descr.as_ref() {
        Some(descr) if !T::descr().is_equivalent(descr) => {
            return Err(mismatch(&format!("its record layout {descr} is not {}", T::descr())).into());
        }
        // Opaque records of the right size: their fields, unknown, cannot be checked
        // against `T`'s (NumPy exports none for a dtype whose fields are not in offset
        // order, an object field among them).
        None if record => {
            return Err(mismatch(&format!(
                "its records are opaque: the producer gave no fields to check against {} (NumPy gives none for a \
                 dtype whose fields are not in offset order)",
                T::descr()
            ))
            .into());
        }
        _ => {}
    }
    if D::NDIM.is_some_and(|n| n != d.ndim()) {
        return Err(mismatch("wrong number of dimensions").into());
    }
    if !d.has_element_strides() {
        return Err(Problem::value_error(format!(
            "strides: {} are not whole multiples of the element size {} of '{}'",
            py_tuple(d.strides.as_deref().unwrap_or_default()),
            d.itemsize(),
            T::TYPESTR
        ))
        .into());
    }
    // A kernel given a device pointer not aligned for its elements faults (and the fault
    // ends the CUDA context); an empty array has no element to read. Host memory is
    // checked where Rust takes it as a slice.
    let align = device_alignment::<T>();
    if memory == Memory::Device && d.data % align != 0 && !parsed.extent.is_empty() {
        return Err(Problem::value_error(format!(
            "data: 0x{:x} is not aligned to {align} bytes, as '{}' elements on the device must be (a kernel reading \
             them would fault); a copy is aligned (x.copy() in CuPy or PyTorch)",
            d.data,
            T::TYPESTR
        ))
        .into());
    }
    if parsed.mask.is_some() || d.mask.is_some() {
        return Err(Problem::value_error(format!(
            "mask: expected {} without a mask, received {} with one; a typed argument reads every element, so \
             masked arrays are refused (pass the data and the mask as two arguments)",
            expectation::<T, D, A>(memory),
            describe(d)
        ))
        .into());
    }
    if A::WRITABLE && d.readonly {
        return Err(Problem::buffer_error(format!(
            "expected {}, received {} (the producer marked it read-only)",
            expectation::<T, D, A>(memory),
            describe(d)
        ))
        .into());
    }
    // A stride of 0 on an axis of more than one element gives its elements one address
    // (a broadcast or `as_strided` array): writes to them race (PyTorch refuses such
    // tensors for in-place operations on the same ground). An array that reaches no byte
    // has nothing to share.
    if A::WRITABLE && !parsed.extent.is_empty() {
        let strides = d.strides.as_deref().unwrap_or_default();
        if let Some(axis) = strides.iter().zip(&d.shape).position(|(&s, &n)| s == 0 && n > 1) {
            return Err(Problem::buffer_error(format!(
                "strides: {} give axis {axis} (of {} elements) stride 0, so its elements share memory; expected {} \
                 whose elements are distinct (pass a copy)",
                crate::error::py_tuple(strides),
                d.shape[axis],
                expectation::<T, D, A>(memory)
            ))
            .into());
        }
    }
    Ok(())
}

impl<'py> Argument<'py> {
    /// Registers the bytes of a checked array for the overlap check of this call.
    pub(crate) fn register(
        object: Bound<'py, PyAny>,
        parsed: Parsed,
        lifeline: Option<Lifeline>,
        writable: bool,
    ) -> PyResult<Argument<'py>> {
        let py = object.py();
        let (borrow, spare) = registry::acquire(&parsed.descriptor, parsed.extent, writable)?;
        let mut slot = spare.unwrap_or_else(Box::new_uninit);
        let contents = slot.as_mut_ptr();
        // SAFETY: `contents` is valid for writes of a `Contents`, and each field is written
        // once, in place (a field added to `Contents` fails the build at the pattern in
        // `drop`, which names every field, until it is handled there and written here).
        // (Built whole and then written, as `MaybeUninit::write` does, the contents were
        // copied twice: LLVM cannot tell that a reused box does not overlap the parsed
        // array.)
        unsafe {
            std::ptr::addr_of_mut!((*contents).object).write(object.unbind());
            std::ptr::addr_of_mut!((*contents).descriptor).write(parsed.descriptor);
            std::ptr::addr_of_mut!((*contents).c_strides).write(OnceCell::new());
            std::ptr::addr_of_mut!((*contents).extent).write(parsed.extent);
            std::ptr::addr_of_mut!((*contents).borrow).write(borrow);
            std::ptr::addr_of_mut!((*contents).lifeline).write(lifeline);
        }
        // SAFETY: every field was written just above.
        Ok(Argument { contents: ManuallyDrop::new(unsafe { slot.assume_init() }), py })
    }

    /// The Python object the array came from.
    pub(crate) fn object(&self) -> &Bound<'py, PyAny> {
        self.contents.object.bind(self.py)
    }

    /// The `Debug` output of an argument type `name` of `T` with access `A`.
    pub(crate) fn debug<T: Element, A: Access>(&self, f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
        f.debug_struct(name)
            .field("typestr", &T::TYPESTR.to_string())
            .field("writable", &A::WRITABLE)
            .field("descriptor", &self.descriptor)
            .finish_non_exhaustive()
    }

    /// Strides in bytes, one per dimension (computed for a C-contiguous array).
    pub(crate) fn strides(&self) -> &[isize] {
        match &self.descriptor.strides {
            Some(s) => s,
            // Validation bounded the C-order strides (NumPy's size rule), so they fit.
            None => {
                self.c_strides.get_or_init(|| self.descriptor.strides().map(|s| s.into_owned()).unwrap_or_default())
            }
        }
    }

    /// Strides in elements (extraction checked that those stepped are whole elements; one
    /// never stepped is divided rounding toward zero).
    pub(crate) fn element_strides(&self) -> Vec<isize> {
        let size = isize::try_from(self.descriptor.itemsize()).unwrap_or(isize::MAX).max(1);
        self.strides().iter().map(|s| s / size).collect()
    }

    /// The number of elements.
    pub(crate) fn len(&self) -> usize {
        self.descriptor.shape.iter().product()
    }
}

impl std::ops::Deref for Argument<'_> {
    type Target = Contents;
    fn deref(&self) -> &Contents {
        &self.contents
    }
}

impl Drop for Argument<'_> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; the field is not used afterwards.
        let raw = Box::into_raw(unsafe { ManuallyDrop::take(&mut self.contents) });
        // SAFETY: `raw` points to initialised contents: each field is read out or dropped
        // in place once, and the allocation is then owned as uninitialised memory of the
        // same layout. (Moving the contents out whole cost more copies than the `malloc`
        // and `free` the spare box saves.)
        let (object, lifeline, borrow, spare) = unsafe {
            // Every field named: a new one must be handled here, and written in `register`.
            let Contents { object, descriptor, c_strides, extent: _, borrow, lifeline } = &mut *raw;
            let (object, lifeline, borrow) = (std::ptr::read(object), std::ptr::read(lifeline), *borrow);
            std::ptr::drop_in_place(descriptor);
            std::ptr::drop_in_place(c_strides);
            (object, lifeline, borrow, Box::from_raw(raw.cast::<MaybeUninit<Contents>>()))
        };
        // Released before the references go: dropping them can run Python code (a `__del__`),
        // which may extract arguments on this thread.
        registry::release(borrow, spare);
        drop(object.into_bound(self.py));
        drop(lifeline.map(|l| match l {
            Lifeline::Interface(v) | Lifeline::Tensor(v) => v.into_bound(self.py),
        }));
    }
}

/// The accessors both argument types share, on their `argument` field.
macro_rules! shared_accessors {
    () => {
        /// The shape.
        pub fn shape(&self) -> &[usize] {
            &self.argument.descriptor.shape
        }

        /// The shape as `[usize; N]` for `Ix<N>`, or a `Vec` for `IxDyn`.
        pub fn dims(&self) -> D::Dims {
            D::dims(&self.argument.descriptor.shape)
        }

        /// The number of dimensions.
        pub fn ndim(&self) -> usize {
            self.argument.descriptor.ndim()
        }

        /// Strides in bytes, one per dimension (computed for a C-contiguous array).
        pub fn strides(&self) -> &[isize] {
            self.argument.strides()
        }

        /// Strides in elements of `T`. A stride never stepped (of an axis of length 1, or of
        /// an empty array) need not be whole elements, and is divided rounding toward zero.
        pub fn element_strides(&self) -> Vec<isize> {
            self.argument.element_strides()
        }

        /// The number of elements.
        pub fn len(&self) -> usize {
            self.argument.len()
        }

        /// Whether the array has no element.
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }

        /// Whether the elements lie in C order without gaps.
        pub fn is_c_contiguous(&self) -> bool {
            self.argument.descriptor.is_c_contiguous()
        }

        /// Whether the elements lie in Fortran order without gaps.
        pub fn is_f_contiguous(&self) -> bool {
            self.argument.descriptor.is_f_contiguous()
        }

        /// Whether the producer marked the array read-only.
        pub fn readonly(&self) -> bool {
            self.argument.descriptor.readonly
        }

        /// The bytes the array reaches, as offsets from its pointer.
        pub fn extent(&self) -> Extent {
            self.argument.extent
        }

        /// The validated descriptor.
        pub fn descriptor(&self) -> &Descriptor {
            &self.argument.descriptor
        }

        /// The Python object the array came from.
        pub fn object(&self) -> &Bound<'py, PyAny> {
            self.argument.object()
        }
    };
}
pub(crate) use shared_accessors;

impl<'a, 'py, T: Element, D: Dimension, A: Access> FromPyObject<'a, 'py> for PyCudaArray<'py, T, D, A> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let object = obj.to_owned();
        let py = object.py();
        // The interface first, DLPack otherwise: with the interface, ordering waits until
        // the function names its stream (see "Streams").
        let mut lifeline = None;
        let parsed = read::<T, D, A>(&object, Memory::Device, &mut lifeline)?;
        let (policy, check_pointers) = crate::config::import_defaults(py)?;
        let options = ImportOptions {
            policy,
            consumer: None,
            check_pointers,
            allow_other_device: false,
            caller: Caller::Extractor,
        };
        let device = consume(py, &parsed, &options)?;
        let pending = !parsed.descriptor.stream.is_none() && policy != SyncPolicy::Ignore;
        let argument = Argument::register(object, parsed, lifeline, A::WRITABLE)?;
        Ok(PyCudaArray {
            argument: ManuallyDrop::new(argument),
            policy,
            device,
            pending: Cell::new(pending),
            handed: ManuallyDrop::new(RefCell::new(Vec::new())),
            _marker: PhantomData,
        })
    }
}

impl<'py, T: Element, D: Dimension, A: Access> PyCudaArray<'py, T, D, A> {
    /// The device address of the element at index zero, for describing the array. To
    /// launch work on it, take the pointer with [`as_ptr_on`](Self::as_ptr_on) or
    /// [`as_ptr`](Self::as_ptr), which order the producer's pending work first.
    pub fn device_address(&self) -> usize {
        self.argument.descriptor.data
    }

    /// Makes `stream` wait for the producer's pending work (an event wait; the host does
    /// not block). Work launched on `stream` afterwards sees the producer's writes; the
    /// pointer accessors without a stream no longer wait on the host. When the argument
    /// goes, the producer's stream is made to wait for the work queued on `stream` by then
    /// (see "Streams"). Driver failures and orderings that a CUDA graph capture forbids
    /// are `cai.CudaDriverError`.
    pub fn order_on(&self, stream: &impl ConsumerStream) -> PyResult<()> {
        let py = self.argument.py;
        let handed =
            order_deferred(py, self.argument.descriptor.stream, self.policy, self.device, Some(stream.target()))?;
        if let Some(mut handed) = handed {
            let mut all = self.handed.borrow_mut();
            if !all.iter_mut().any(|h| h.absorbs(&mut handed)) {
                all.push(handed);
            }
        }
        self.pending.set(false);
        Ok(())
    }

    /// The element at index zero, for kernels that only read and are launched on
    /// `stream`, which is first made to wait for the producer's pending work.
    pub fn as_ptr_on(&self, stream: &impl ConsumerStream) -> PyResult<*const T> {
        self.order_on(stream)?;
        Ok(self.device_address() as *const T)
    }

    /// The element at index zero, for kernels that only read. If the producer's pending
    /// work has not been ordered before a stream (see [`order_on`](Self::order_on)), the
    /// host waits for it first, so that work on any stream sees it.
    pub fn as_ptr(&self) -> PyResult<*const T> {
        self.settle()?;
        Ok(self.device_address() as *const T)
    }

    fn settle(&self) -> PyResult<()> {
        if self.pending.get() {
            let py = self.argument.py;
            order_deferred(py, self.argument.descriptor.stream, self.policy, self.device, None)?;
            self.pending.set(false);
        }
        Ok(())
    }

    shared_accessors!();

    /// The producer's stream (its pending work is ordered by the pointer accessors).
    pub fn stream(&self) -> Stream {
        self.argument.descriptor.stream
    }
}

#[cfg(feature = "driver")]
impl<T: Element, D: Dimension, A: Access> PyCudaArray<'_, T, D, A> {
    /// The array as cudarc device memory (a [`CudaForeign`](crate::CudaForeign) of `len()`
    /// elements on the producer's stream), for launching cudarc kernels on it. C-contiguous
    /// arrays only (`ValueError` otherwise); `cai.CudaDriverError` without a driver.
    ///
    /// Not for elements that hold a `bool` (`TypeError`): cudarc copies device bytes into
    /// Rust values without a check, and a byte other than 0 or 1 is no `bool`. Read such an
    /// array as `u8` (or a record of `u8`) instead.
    pub fn cudarc_view(&self) -> PyResult<crate::CudaForeign<T, A>> {
        let py = self.argument.py;
        if !cai_core::bool_bytes::<T>().is_empty() {
            return Err(Problem::type_error(format!(
                "typestr: a cudarc view of '{}' elements would hand Rust bool values that nothing checked (a device \
                 byte may hold any value); read the array as u8",
                T::TYPESTR
            ))
            .into());
        }
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
        // Read through DLPack, the memory lives as long as the producer's tensor (whose
        // deleter may free it), not as long as the object that exported it; read through
        // the interface, as long as the object, and its interface value is kept as well.
        let (owner, also) = match &self.argument.lifeline {
            Some(Lifeline::Tensor(tensor)) => (tensor.clone_ref(py), None),
            Some(Lifeline::Interface(value)) => (self.argument.object().clone().unbind(), Some(value.clone_ref(py))),
            None => (self.argument.object().clone().unbind(), None),
        };
        let stream = self.argument.descriptor.stream;
        crate::CudaForeign::new(self.device_address(), self.len(), device, stream, owner, also).map_err(fail)
    }
}

impl<T: Element, D: Dimension> PyCudaArray<'_, T, D, ReadWrite> {
    /// The element at index zero, for kernels that write and are launched on `stream`,
    /// which is first made to wait for the producer's pending work.
    pub fn as_mut_ptr_on(&mut self, stream: &impl ConsumerStream) -> PyResult<*mut T> {
        self.order_on(stream)?;
        Ok(self.device_address() as *mut T)
    }

    /// The element at index zero, for kernels that write; waits on the host as
    /// [`as_ptr`](Self::as_ptr) does.
    pub fn as_mut_ptr(&mut self) -> PyResult<*mut T> {
        self.settle()?;
        Ok(self.device_address() as *mut T)
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
    use crate::holds::{Holds, Lattice};

    /// What a thread's live extractions hold (scoped by the frame of their call), and the
    /// box of the last one dropped.
    struct Registry {
        holds: Holds<usize>,
        spare: Option<Spare>,
    }

    /// An argument's box, its contents dropped.
    pub(super) type Spare = Box<MaybeUninit<Contents>>;

    thread_local! {
        static REGISTRY: RefCell<Registry> = const { RefCell::new(Registry { holds: Holds::new(), spare: None }) };
    }

    /// The Python frame the current call was made from (0 outside any frame).
    fn calling_frame() -> PyResult<usize> {
        // SAFETY: called with the GIL held (an extraction); the results are only compared.
        unsafe {
            let frame = pyo3::ffi::PyEval_GetFrame();
            // Null with a frame running: CPython could not make its frame object (and
            // dropped the MemoryError). Keyed 0, the call's arguments could miss each other.
            if frame.is_null() && !pyo3::ffi::PyEval_GetGlobals().is_null() {
                return Err(pyo3::exceptions::PyMemoryError::new_err(
                    "data: no memory for the calling frame, which the overlap check of arguments needs",
                ));
            }
            Ok(frame as usize)
        }
    }

    /// Registers the bytes of `d` (no entry for an array that reaches no byte), and takes
    /// the thread's spare box.
    pub(super) fn acquire(d: &Descriptor, extent: Extent, writable: bool) -> PyResult<(Option<u64>, Option<Spare>)> {
        let bytes = if extent.is_empty() {
            None
        } else {
            let lattice = Lattice::of_descriptor(d);
            Some((d.byte_range_of(extent).map_err(crate::error::to_py_err)?, lattice, calling_frame()?))
        };
        let empty = bytes.is_none();
        let taken = REGISTRY.try_with(|registry| {
            let Registry { holds, spare } = &mut *registry.borrow_mut();
            let Some((bytes, lattice, frame)) = bytes else { return Ok((None, spare.take())) };
            let (start, end) = (bytes.start, bytes.end);
            match holds.take(frame, bytes, Some(lattice), writable, None) {
                Ok(id) => Ok((Some(id), spare.take())),
                Err(other) => {
                    let kinds = match (writable, other.writable) {
                        (true, true) => "two read-write arguments",
                        _ => "a read-write and a read-only argument",
                    };
                    let access = if other.writable { "read-write" } else { "read-only" };
                    Err(Problem::buffer_error(format!(
                        "bytes 0x{start:x}..0x{end:x} overlap bytes 0x{:x}..0x{:x} of an earlier array argument of \
                         this call ({access}, the {} that reaches memory); {kinds} may not share memory (a call made \
                         from another with no Python frame between, as through functools.partial, counts as that \
                         call)",
                        other.bytes.start,
                        other.bytes.end,
                        ordinal(other.earlier + 1)
                    )))
                }
            }
        });
        match taken {
            Ok(result) => result.map_err(PyErr::from),
            // An array that reaches no byte needs no entry (nor a spare box).
            Err(_) if empty => Ok((None, None)),
            Err(_) => Err(Problem::buffer_error(
                "data: this thread is ending and its overlap registry is gone; no argument can be extracted".to_owned(),
            )
            .into()),
        }
    }

    /// `n` as an English ordinal: 1st, 2nd, 3rd, 4th, ..., 11th, 21st.
    fn ordinal(n: usize) -> String {
        let suffix = match (n % 10, n % 100) {
            (_, 11..=13) => "th",
            (1, _) => "st",
            (2, _) => "nd",
            (3, _) => "rd",
            _ => "th",
        };
        format!("{n}{suffix}")
    }

    #[cfg(test)]
    #[test]
    fn ordinals() {
        let words: Vec<_> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 103, 111].into_iter().map(ordinal).collect();
        assert_eq!(words, ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "103rd", "111th"]);
    }

    /// Removes entry `id` and keeps `spare` as the thread's spare box (when it has none).
    pub(super) fn release(id: Option<u64>, spare: Spare) {
        // During thread teardown the registry may be gone already: nothing to release.
        let _ = REGISTRY.try_with(|registry| {
            let Registry { holds, spare: kept } = &mut *registry.borrow_mut();
            if let Some(id) = id {
                holds.give_back(id);
            }
            kept.get_or_insert(spare);
        });
    }
}
