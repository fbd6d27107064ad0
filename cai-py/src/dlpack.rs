//! DLPack both ways: `__dlpack__` / `__dlpack_device__` for everything cai exports, and
//! `cai.from_dlpack` (and the extractors) for any DLPack producer.
//!
//! The capsule protocol (the array API standard's, DLPack 1.x):
//!
//! - A capsule is named `dltensor_versioned` (a `DLManagedTensorVersioned`, when the
//!   consumer's `max_version` is 1 or more) or `dltensor` (the legacy `DLManagedTensor`).
//!   A consumer that takes the tensor renames it `used_...` and calls the tensor's deleter
//!   when done; a capsule dropped unconsumed calls the deleter itself. Either way the
//!   deleter runs exactly once.
//! - The producer makes the consumer's `stream` wait for its pending work (the reverse of
//!   the CUDA Array Interface, where the consumer waits on the producer's stream).
//! - Strides count elements.

use std::ffi::{c_void, CStr};
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

use cai_core::dlpack::{
    self, device_type, flags, DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLTensor,
};
use cai_core::{Descriptor, DimVec, Extent, Stream};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};
use pyo3::{ffi, intern, Borrowed, PyTypeInfo};

use crate::error::{received, received_int, Problem};
use crate::parse::{int_like, IntLike, Parsed};
use crate::sync::{copy_device, export_device, order_export, Copied, HostCopy};

const DLTENSOR: &CStr = c"dltensor";
const USED_DLTENSOR: &CStr = c"used_dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";

/// Whose memory an array is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Memory {
    /// CUDA device (or managed) memory, exported through `__cuda_array_interface__`.
    Device,
    /// Host memory, exported through `__array_interface__`.
    Host,
}

/// The arguments of `__dlpack__`, as received.
pub(crate) struct Request<'a, 'py> {
    pub(crate) stream: Option<&'a Bound<'py, PyAny>>,
    pub(crate) max_version: Option<&'a Bound<'py, PyAny>>,
    pub(crate) dl_device: Option<&'a Bound<'py, PyAny>>,
    pub(crate) copy: Option<&'a Bound<'py, PyAny>>,
}

/// `__dlpack__`'s keywords, in the order of [`Request`]'s fields.
const KEYWORDS: [&str; 4] = ["stream", "max_version", "dl_device", "copy"];

/// [`KEYWORDS`] as interned Python strings, made once.
fn interned_keywords(py: Python<'_>) -> &[Py<PyString>; 4] {
    static NAMES: PyOnceLock<[Py<PyString>; 4]> = PyOnceLock::new();
    NAMES.get_or_init(py, || KEYWORDS.map(|k| PyString::intern(py, k).unbind()))
}

/// For each keyword, the last name object that matched it by text and not by identity
/// (NumPy's `from_dlpack` passes the same three strings of its own on every call), held
/// by a strong reference: while it is held, an object at that address is that string.
static SEEN: [AtomicPtr<ffi::PyObject>; 4] = [const { AtomicPtr::new(ptr::null_mut()) }; 4];

/// Makes `name` the remembered object of keyword `index`, releasing the one it replaces.
fn remember(index: usize, name: &Borrowed<'_, '_, PyAny>) {
    let held = Borrowed::to_owned(*name).into_ptr();
    let old = SEEN[index].swap(held, Ordering::AcqRel);
    if !old.is_null() {
        // SAFETY: `old` is the strong reference this table held, released once, by the
        // call that replaced it, with the GIL held.
        unsafe { ffi::Py_DecRef(old) };
    }
}

/// Reads the arguments of a `__dlpack__` called the METH_FASTCALL way into `out` (which
/// starts empty), in the order of [`Request`]'s fields. All four are keyword-only: a
/// positional argument, an unknown keyword or a repeated one is a `TypeError`, as
/// Python's own signature check says it of `method` (the qualified name).
///
/// Keywords are matched by identity: with the interned names (a call written in Python
/// passes those very strings), or with the names last matched by text ([`SEEN`]).
///
/// # Safety
///
/// `args`, `nargs` and `kwnames` are what CPython passes to a METH_FASTCALL |
/// METH_KEYWORDS method: `nargs` positional values, then one value for each name of the
/// `kwnames` tuple (null when there is none), all borrowed for the call.
pub(crate) unsafe fn fastcall_arguments<'a, 'py>(
    py: Python<'py>,
    method: &str,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
    out: &mut [Option<Borrowed<'a, 'py, PyAny>>; 4],
) -> PyResult<()> {
    if nargs != 0 {
        let given = if nargs == 1 { "1 was" } else { &format!("{nargs} were") };
        return Err(PyTypeError::new_err(format!("{method}() takes 0 positional arguments but {given} given")));
    }
    if kwnames.is_null() {
        return Ok(());
    }
    let interned = interned_keywords(py);
    // SAFETY: a non-null `kwnames` is a tuple (of str) that CPython holds for the call.
    let count = unsafe { ffi::PyTuple_Size(kwnames) };
    for i in 0..count.max(0) {
        // SAFETY: as above; the item is borrowed from the tuple, non-null below its size.
        let name = unsafe { Borrowed::from_ptr(py, ffi::PyTuple_GetItem(kwnames, i)) };
        let index = interned
            .iter()
            .position(|k| k.as_ptr() == name.as_ptr())
            .or_else(|| SEEN.iter().position(|seen| seen.load(Ordering::Acquire) == name.as_ptr()))
            .or_else(|| {
                let string = name.cast::<PyString>().ok()?;
                let text = string.to_str().ok()?;
                let index = KEYWORDS.iter().position(|k| *k == text)?;
                // Only exact strs are kept: releasing one later runs no code (a subclass
                // may have a `__del__`), and holds nothing else alive.
                if name.is_exact_instance_of::<PyString>() {
                    remember(index, &name);
                }
                Some(index)
            });
        let Some(index) = index else {
            // CPython's calls pass str names, shown as Python shows a str (`'\udc80'` for a
            // lone surrogate; a subclass's own `__repr__` is not asked); a C caller's other
            // object is named by repr and type.
            let text = match name.cast::<PyString>() {
                Ok(s) => {
                    // SAFETY: `s` is a live str; PyUnicode_FromObject returns a new reference
                    // to an exact str of its text, or null with an exception set.
                    let exact = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_FromObject(s.as_ptr())) }?;
                    crate::shown::shown(&exact)?
                }
                Err(_) => received(&name)?,
            };
            return Err(PyTypeError::new_err(format!("{method}() got an unexpected keyword argument {text}")));
        };
        if out[index].is_some() {
            return Err(PyTypeError::new_err(format!(
                "{method}() got multiple values for argument '{}'",
                KEYWORDS[index]
            )));
        }
        // SAFETY: the value of keyword `i` follows the `nargs` (zero) positional values in
        // `args`, borrowed for the call.
        out[index] = Some(unsafe { Borrowed::from_ptr(py, *args.offset(i)) });
    }
    Ok(())
}

fn buffer_error(message: String) -> PyErr {
    Problem::buffer_error(message).into()
}

fn some<'a, 'py>(v: Option<&'a Bound<'py, PyAny>>) -> Option<&'a Bound<'py, PyAny>> {
    v.filter(|v| !v.is_none())
}

/// A tuple of exactly two exact ints that fit in 64 bits, read without running Python
/// code or making an exception; `None` for anything else. (Every consumer passes
/// `max_version` so; this path is a tenth of a generic extraction's cost.)
#[inline]
fn exact_int_pair(value: &Bound<'_, PyAny>) -> Option<(i64, i64)> {
    if !value.is_exact_instance_of::<PyTuple>() {
        return None;
    }
    // SAFETY: `value` is a live tuple; PyTuple_GetItem of an index below its size returns
    // a borrowed, non-null item, which is only read here.
    let item = |i| unsafe { crate::parse::quick_int(ffi::PyTuple_GetItem(value.as_ptr(), i)) };
    // SAFETY: `value` is a live tuple.
    if unsafe { ffi::PyTuple_Size(value.as_ptr()) } != 2 {
        return None;
    }
    Some((item(0)?, item(1)?))
}

fn int_pair(value: &Bound<'_, PyAny>, what: &str) -> PyResult<(i64, i64)> {
    if let Some(pair) = exact_int_pair(value) {
        return Ok(pair);
    }
    let bad = || -> PyResult<PyErr> {
        Ok(PyTypeError::new_err(format!("{what}: expected a tuple of two ints, received {}", received(value)?)))
    };
    let Ok(t) = value.cast::<PyTuple>() else { return Err(bad()?) };
    if t.len() != 2 {
        return Err(bad()?);
    }
    let mut out = [0i64; 2];
    for (slot, item) in out.iter_mut().zip(t.iter()) {
        *slot = match int_like::<i64>(&item)? {
            IntLike::Value(v) => v,
            // An index, but one past 64 bits.
            IntLike::OutOfRange(index) => {
                let shown = received_int(&item, index.as_ref())?;
                return Err(PyValueError::new_err(format!("{what}: {shown} is out of range")));
            }
            IntLike::NotInt(_) => return Err(bad()?),
        };
    }
    Ok((out[0], out[1]))
}

/// The array API's default stream: the legacy default stream for CUDA, none on the host.
fn default_stream(memory: Memory) -> Option<Stream> {
    match memory {
        Memory::Device => Some(Stream::LegacyDefault),
        Memory::Host => None,
    }
}

/// The consumer's `stream` for an export: `None` for no ordering.
fn export_stream(value: Option<&Bound<'_, PyAny>>, memory: Memory) -> PyResult<Option<Stream>> {
    let Some(value) = some(value) else { return Ok(default_stream(memory)) };
    if memory == Memory::Host {
        return Err(buffer_error(format!(
            "stream: host memory is exported with stream=None, received {}",
            received(value)?
        )));
    }
    // An int, or an int-like (NumPy's integers) as for the other arguments; not a bool.
    let raw = match int_like::<i64>(value)? {
        IntLike::Value(raw) => raw,
        IntLike::OutOfRange(index) => {
            let shown = received_int(value, index.as_ref())?;
            return Err(PyValueError::new_err(format!("stream: {shown} is not a stream")));
        }
        IntLike::NotInt(failure) => {
            let shown = crate::error::received_not_int(value, failure)?;
            return Err(PyTypeError::new_err(format!("stream: expected None or an int, received {shown}")));
        }
    };
    match raw {
        -1 => Ok(None),
        0 => Err(PyValueError::new_err(
            "stream: 0 is disallowed (ambiguous between the legacy and the per-thread default stream)",
        )),
        n if n < 0 => {
            Err(PyValueError::new_err(format!("stream: {n} is not a stream (-1 asks for no synchronization)")))
        }
        n => Ok(Some(Stream::from_raw(Some(n as usize)).map_err(crate::error::to_py_err)?)),
    }
}

fn max_version(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<(i64, i64)>> {
    let Some(v) = some(value) else { return Ok(None) };
    match int_pair(v, "max_version")? {
        (major, minor) if major < 0 || minor < 0 => Err(PyValueError::new_err(format!(
            "max_version: ({major}, {minor}) is not a version (a major and a minor number, neither negative)"
        ))),
        version => Ok(Some(version)),
    }
}

fn dl_device(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<DLDevice>> {
    let Some(v) = some(value) else { return Ok(None) };
    let (t, id) = int_pair(v, "dl_device")?;
    // A part that fits in 64 bits but not in DLPack's 32, named as `int_pair` names one
    // past 64 bits: the value as given, and its type (and the int an int-like gave).
    let narrow = |n: i64, index: usize, part: &str| -> PyResult<i32> {
        i32::try_from(n).or_else(|_| {
            let item = v.cast::<PyTuple>().map_err(PyErr::from)?.get_item(index)?;
            let shown = received_int(&item, Some(&n.into_pyobject(v.py())?))?;
            Err(PyValueError::new_err(format!("dl_device: the {part} {shown} is out of range (DLPack's are 32-bit)")))
        })
    };
    Ok(Some(DLDevice { device_type: narrow(t, 0, "device type")?, device_id: narrow(id, 1, "device id")? }))
}

/// `copy`, read as `cai.from_dlpack` reads it (a NumPy bool too).
fn copy_flag(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<bool>> {
    crate::api::flag_argument("copy", value, "None, True or False")
}

fn describe(device: DLDevice) -> String {
    format!("({}, {})", dlpack::device_type_name(device.device_type), device.device_id)
}

/// Host memory, as DLPack names it.
const HOST: DLDevice = DLDevice { device_type: device_type::CPU, device_id: 0 };

/// What a `__dlpack__` call asks for.
pub(crate) struct Wanted {
    /// A versioned capsule (`max_version` 1.0 or later).
    versioned: bool,
    copy: Option<bool>,
    /// The stream to order the export before; `None` for none.
    stream: Option<Stream>,
    /// The device asked for, when one was.
    device: Option<DLDevice>,
}

impl Request<'_, '_> {
    /// What the arguments ask for. Read first, before the exporter describes its array:
    /// they may run Python code (an `__index__`) that changes the exporting object.
    pub(crate) fn read(&self, memory: Memory) -> PyResult<Wanted> {
        // The usual call (NumPy's and JAX's `from_dlpack`): only `max_version`, a tuple of
        // two ints, the others absent or None.
        let usual = some(self.stream).is_none() && some(self.dl_device).is_none() && some(self.copy).is_none();
        if let (true, Some((major, minor))) = (usual, self.max_version.and_then(exact_int_pair)) {
            if major >= 0 && minor >= 0 {
                return Ok(Wanted { versioned: major >= 1, copy: None, stream: default_stream(memory), device: None });
            }
        }
        // The values' own code (`__index__`, `__repr__` for a message) may call cai again.
        let _nesting = crate::parse::Nesting::enter("the arguments of __dlpack__")?;
        Ok(Wanted {
            versioned: max_version(self.max_version)?.is_some_and(|(major, _)| major >= 1),
            copy: copy_flag(self.copy)?,
            stream: export_stream(self.stream, memory)?,
            device: dl_device(self.dl_device)?,
        })
    }
}

/// `__dlpack_device__` of an array.
pub(crate) fn device(py: Python<'_>, descriptor: &Descriptor, extent: Extent, memory: Memory) -> PyResult<DLDevice> {
    match memory {
        Memory::Host => Ok(HOST),
        Memory::Device => {
            let check = crate::config::check_pointers(py, None)?;
            export_device(py, descriptor.data, extent.is_empty(), check)
        }
    }
}

/// The most dimensions whose shape and strides live inside an export's one allocation.
const EXPORT_INLINE_DIMS: usize = 8;

/// One export, in one allocation: the managed tensor a capsule points at (first, so that
/// a pointer to it is a pointer to the whole), the shape and strides it points into, the
/// exporting object (kept alive as long as the tensor), and a copy made for this export.
#[repr(C)]
struct Export<M> {
    managed: M,
    /// The shape and strides of an array of up to [`EXPORT_INLINE_DIMS`] dimensions; only the
    /// first `2 * ndim` are written.
    inline: [MaybeUninit<i64>; 2 * EXPORT_INLINE_DIMS],
    spilled: Option<Box<[i64]>>,
    /// A strong reference, released by [`delete`] (and visited by the collector through
    /// the [`DLPackTensor`] of this module that took the export, if one did).
    owner: ManuallyDrop<Py<PyAny>>,
    _copy: Option<Copied>,
}

/// The two managed tensor structs, and what differs between them.
trait Managed: Sized {
    /// The capsule's name while the tensor is not taken.
    const NAME: &'static CStr;
    /// A tensor of ours, deleted by [`delete`]; a legacy one has no flags.
    fn new(tensor: DLTensor, flags: u64) -> Self;
    fn tensor(&mut self) -> &mut DLTensor;
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
}

impl Managed for DLManagedTensor {
    const NAME: &'static CStr = DLTENSOR;
    fn new(dl_tensor: DLTensor, _flags: u64) -> Self {
        DLManagedTensor { dl_tensor, manager_ctx: ptr::null_mut(), deleter: Some(delete::<DLManagedTensor>) }
    }
    fn tensor(&mut self) -> &mut DLTensor {
        &mut self.dl_tensor
    }
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
}

impl Managed for DLManagedTensorVersioned {
    const NAME: &'static CStr = VERSIONED;
    fn new(dl_tensor: DLTensor, flags: u64) -> Self {
        DLManagedTensorVersioned {
            version: dlpack::VERSION,
            manager_ctx: ptr::null_mut(),
            deleter: Some(delete::<DLManagedTensorVersioned>),
            flags,
            dl_tensor,
        }
    }
    fn tensor(&mut self) -> &mut DLTensor {
        &mut self.dl_tensor
    }
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
}

/// Calls a managed tensor's deleter, if it has one.
///
/// A deleter may run Python code (a producer's written in Python through ctypes; ours
/// drops a reference, which may run a `__del__`), and it may be called while an exception
/// is on its way up (a view freed as an exception unwinds the frame that held it). The
/// exception is set aside meanwhile, as CPython's finalizers set theirs aside, so that the
/// deleter neither sees nor loses it; one a deleter leaves set is reported as unraisable.
///
/// # Safety
///
/// `tensor` is null or a live managed tensor whose deleter is the caller's to call, once;
/// the GIL is held.
unsafe fn call_deleter<M: Managed>(tensor: *mut M) {
    // SAFETY: as the caller promises.
    unsafe {
        let Some(deleter) = tensor.as_ref().and_then(Managed::deleter) else { return };
        crate::error::with_exception_aside(|| deleter(tensor));
    }
}

/// Frees an export's memory and releases its strong reference to its exporting object. A
/// consumer may call the deleter from a thread that does not hold the GIL, so it is taken,
/// as NumPy's deleter takes it (when the thread holds it already, that is a check of a
/// thread-local). From the start of finalization (`Py_IsInitialized` is 0 once the
/// `atexit` handlers have run, while modules are still torn down and `__del__`s run) the
/// memory and the reference are left, as NumPy's deleter leaves them: no check in the
/// stable ABI tells a deleter whether the interpreter can still free them (the thread
/// state checks pass even once it is gone), and a leak at exit is the safe side.
///
/// # Safety
///
/// `block` is the `PyMem_Malloc` memory of an export that is no longer read, and `owner`
/// a strong reference the export owned; both are given up here, once.
unsafe fn release(block: *mut c_void, owner: ptr::NonNull<ffi::PyObject>) {
    // SAFETY: as the caller promises; both calls need the GIL, which is held.
    unsafe {
        if ffi::Py_IsInitialized() == 0 {
            return;
        }
        let state = ffi::PyGILState_Ensure();
        ffi::PyMem_Free(block);
        // The owner may be a view whose producer is a tensor exported the same way, and so
        // on: released without a C frame per link.
        crate::freeing::release(owner);
        ffi::PyGILState_Release(state);
    }
}

/// The deleter of a tensor made by [`export`].
unsafe extern "C" fn delete<M: Managed>(tensor: *mut M) {
    // The managed tensor is left undropped below: it must own nothing.
    const { assert!(!std::mem::needs_drop::<M>(), "a managed tensor owns nothing") };
    if !tensor.is_null() {
        let export = tensor.cast::<Export<M>>();
        // SAFETY: the tensor is the first field of an `Export` written by `boxed` into
        // `PyMem_Malloc` memory, and the deleter runs once (the protocol's rule, which our
        // capsule destructor follows): the fields that own something are dropped in
        // place (the managed tensor and the inline dims own nothing), and the memory is
        // not read again. The shape and a copy's memory are freed without the
        // interpreter; moving the export out to drop it would copy its few hundred bytes.
        unsafe {
            let owner = ManuallyDrop::take(&mut (*export).owner).into_ptr();
            let owner = ptr::NonNull::new_unchecked(owner);
            ptr::drop_in_place(ptr::addr_of_mut!((*export).spilled));
            ptr::drop_in_place(ptr::addr_of_mut!((*export)._copy));
            release(tensor.cast(), owner);
        }
    }
}

/// The destructor of our capsules: deletes the tensor unless a consumer took it (and
/// renamed the capsule).
unsafe extern "C" fn capsule_destructor<M: Managed>(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with one of our capsules, whose pointer is never null, so
    // neither call sets an exception; an untaken tensor's deleter is the capsule's to call.
    // A consumer that takes the tensor renames the capsule to a name of its own: the name
    // is compared by address first (a string comparison costs more than the rest of
    // this), then by text.
    unsafe {
        let name = ffi::PyCapsule_GetName(capsule);
        if name == M::NAME.as_ptr() || (!name.is_null() && CStr::from_ptr(name) == M::NAME) {
            call_deleter(ffi::PyCapsule_GetPointer(capsule, name).cast::<M>());
        }
    }
}

/// What an export's tensor takes from the array alone: its DLPack type, and its shape
/// and strides in elements. A view computes it at its first export and keeps it (a view
/// never changes); other exporters compute it on each.
#[derive(Debug)]
pub(crate) struct Layout {
    dtype: DLDataType,
    /// The shape, then the strides.
    dims: Box<[i64]>,
}

impl Layout {
    /// The layout of `descriptor`, or the `BufferError` of an array DLPack cannot carry.
    fn of(descriptor: &Descriptor) -> PyResult<Layout> {
        if descriptor.descr.is_some() {
            return Err(buffer_error(format!("descr: a record type ({}) has no DLPack data type", descriptor.descr())));
        }
        if descriptor.mask.is_some() {
            // Exported without it, the masked-out elements would read as valid ones.
            return Err(buffer_error(
                "mask: a masked array has no DLPack form (DLPack carries no mask); read it through its interface"
                    .to_owned(),
            ));
        }
        let dtype = dlpack::data_type(&descriptor.typestr).map_err(|e| buffer_error(format!("typestr: {e}")))?;
        let ndim = descriptor.ndim();
        let mut dims = vec![0; 2 * ndim].into_boxed_slice();
        let (shape, strides) = dims.split_at_mut(ndim);
        for (slot, &n) in shape.iter_mut().zip(&descriptor.shape) {
            *slot = i64::try_from(n)
                .map_err(|_| buffer_error(format!("shape: dimension {n} does not fit DLPack's int64")))?;
        }
        dlpack::write_element_strides(descriptor, strides).map_err(|e| buffer_error(format!("strides: {e}")))?;
        Ok(Layout { dtype, dims })
    }

    /// The layout kept in `cache`, computed into it at first; computed for this export
    /// alone without a cache. Failures are not kept.
    fn get<'a>(
        descriptor: &Descriptor,
        cache: Option<&'a OnceLock<Layout>>,
        scratch: &'a mut Option<Layout>,
    ) -> PyResult<&'a Layout> {
        match cache {
            Some(cell) => match cell.get() {
                Some(layout) => Ok(layout),
                None => {
                    let layout = Layout::of(descriptor)?;
                    Ok(cell.get_or_init(|| layout))
                }
            },
            None => Ok(scratch.insert(Layout::of(descriptor)?)),
        }
    }

    fn ndim(&self) -> usize {
        self.dims.len() / 2
    }

    /// The same type and shape, C-contiguous: the layout of a compact copy.
    fn c_order(&self) -> Layout {
        let ndim = self.ndim();
        let mut dims = self.dims.clone();
        let (shape, strides) = dims.split_at_mut(ndim);
        let mut step = 1i64;
        for (stride, &n) in strides.iter_mut().zip(shape.iter()).rev() {
            *stride = step;
            // The element count fits (validation bounded it), so every partial product
            // does; an empty array's strides do not matter, and saturate.
            step = step.saturating_mul(n.max(1));
        }
        Layout { dtype: self.dtype, dims }
    }
}

/// The elements of a host array, copied in C order into memory of their own: only the
/// elements are read, never the bytes between strided ones. A copy that cannot be
/// allocated is a `MemoryError` (broadcast arrays can need far more than they span).
fn compact_copy(descriptor: &Descriptor) -> PyResult<HostCopy> {
    let itemsize = descriptor.itemsize();
    let nbytes = descriptor.nbytes().map_err(crate::error::to_py_err)?;
    let strides = descriptor.strides().map_err(crate::error::to_py_err)?;
    let mut copy = HostCopy::zeroed(nbytes, "a copy of the array")?;
    let out = copy.bytes_mut().as_mut_ptr();
    let mut dims: Vec<(usize, isize)> = descriptor.shape.iter().copied().zip(strides.iter().copied()).collect();
    // Rows of consecutive elements are copied whole.
    let mut run = itemsize;
    if let Some(&(n, stride)) = dims.last() {
        if stride == isize::try_from(itemsize).unwrap_or(isize::MAX) {
            dims.pop();
            run = n * itemsize;
        }
    }
    let mut written = 0;
    crate::host::visit(descriptor.data as *const u8, &dims, &mut |from| {
        // SAFETY: `from` is an element (or a row of consecutive elements) of the array, in
        // memory its producer keeps alive while the exporting object, which the caller
        // holds, is; validation checked it lies in the address space. The runs add up to
        // `nbytes`, the size of all the elements, so the writes stay in the copy.
        unsafe { std::ptr::copy_nonoverlapping(from, out.add(written), run) };
        written += run;
        true
    });
    Ok(copy)
}

/// Boxes an export of `managed` (whose tensor's shape and strides are set here, from
/// `layout`) and returns the pointer a capsule holds. The export owns `owner` from here.
fn boxed<M: Managed>(managed: M, layout: &Layout, owner: Py<PyAny>, copy: Option<Copied>) -> PyResult<*mut M> {
    const { assert!(std::mem::align_of::<Export<M>>() <= 16, "PyMem_Malloc aligns to 16 bytes") };
    let ndim = layout.ndim();
    let spilled = (ndim > EXPORT_INLINE_DIMS).then(|| layout.dims.clone());
    // The export is written in place, field by field, into memory of Python's allocator
    // (as NumPy allocates its exports: small blocks cost less there than from malloc). Built
    // on the stack and moved into a box, its few hundred bytes would be copied once more.
    // SAFETY: the GIL is held (`owner` is a `Py`, whose holder holds it).
    let p = unsafe { ffi::PyMem_Malloc(std::mem::size_of::<Export<M>>()) }.cast::<Export<M>>();
    if p.is_null() {
        return Err(pyo3::exceptions::PyMemoryError::new_err("cannot allocate a DLPack export"));
    }
    // SAFETY: `p` is fresh memory, aligned for an export (above) and valid for writes;
    // every field is written below (`inline` is `MaybeUninit`, and its first `2 * ndim`
    // items are written when the dims are inline) before a tensor pointer is handed out.
    unsafe {
        ptr::addr_of_mut!((*p).managed).write(managed);
        let dims = match spilled {
            Some(mut b) => {
                let dims = b.as_mut_ptr();
                ptr::addr_of_mut!((*p).spilled).write(Some(b));
                dims
            }
            None => {
                let dims = ptr::addr_of_mut!((*p).inline).cast::<i64>();
                ptr::copy_nonoverlapping(layout.dims.as_ptr(), dims, 2 * ndim);
                ptr::addr_of_mut!((*p).spilled).write(None);
                dims
            }
        };
        // The export owns the reference from here, and `delete` releases it.
        ptr::addr_of_mut!((*p).owner).write(ManuallyDrop::new(owner));
        ptr::addr_of_mut!((*p)._copy).write(copy);
        let tensor = (*p).managed.tensor();
        tensor.shape = dims;
        tensor.strides = dims.add(ndim);
        Ok(p.cast::<M>())
    }
}

/// A capsule holding an export of `managed`, or the error of making it (the export is
/// then freed).
fn capsule<'py, M: Managed>(
    py: Python<'py>,
    tensor: DLTensor,
    flags: u64,
    layout: &Layout,
    owner: Py<PyAny>,
    copy: Option<Copied>,
) -> PyResult<Bound<'py, PyAny>> {
    let managed = boxed(M::new(tensor, flags), layout, owner, copy)?;
    // SAFETY: `managed` is a tensor made by `boxed`; the capsule's destructor frees it
    // once unless a consumer takes it, and if the capsule cannot be made it is freed here.
    unsafe {
        let capsule = ffi::PyCapsule_New(managed.cast(), M::NAME.as_ptr(), Some(capsule_destructor::<M>));
        if capsule.is_null() {
            call_deleter(managed);
        }
        Bound::from_owned_ptr_or_err(py, capsule)
    }
}

/// `__dlpack__` of an array exported by `owner`.
pub(crate) fn export<'py>(
    owner: &Bound<'py, PyAny>,
    descriptor: &Descriptor,
    extent: Extent,
    memory: Memory,
    wanted: Wanted,
    cache: Option<&OnceLock<Layout>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = owner.py();
    let Wanted { versioned, copy, stream, device: wanted } = wanted;
    // An array DLPack cannot carry is refused before any side effect (ordering, copies).
    let mut scratch = None;
    let layout = Layout::get(descriptor, cache, &mut scratch)?;
    if descriptor.readonly && !versioned && copy != Some(true) {
        return Err(buffer_error(
            "data: a read-only array cannot be exported through a legacy DLPack capsule, which cannot say read-only; \
             ask for a versioned one (max_version=(1, 0)) or a copy (copy=True); a consumer that asks for neither \
             (jax.numpy.from_dlpack) can copy it through the array interfaces instead (jax.numpy.array)"
                .to_owned(),
        ));
    }
    let own = device(py, descriptor, extent, memory)?;
    let target = wanted.unwrap_or(own);
    let to_host = target != own;
    if to_host {
        let device_memory = matches!(own.device_type, device_type::CUDA | device_type::CUDA_MANAGED);
        if !(device_memory && target == HOST) {
            return Err(buffer_error(format!(
                "dl_device: the array is in {} memory and cannot be exported to {}; only device to host copies are made",
                describe(own),
                describe(target)
            )));
        }
        if copy == Some(false) {
            return Err(buffer_error(format!(
                "dl_device: exporting {} memory to {} needs a copy, and copy=False forbids one",
                describe(own),
                describe(target)
            )));
        }
    }
    if let Some(consumer) = stream.filter(|_| memory == Memory::Device && !to_host) {
        order_export(py, descriptor.stream, consumer, own.device_id)?;
    }
    // A host copy holds the elements alone, in C order (the gaps between strided elements
    // may be memory that cannot be read); a device copy keeps the array's layout, the
    // first element at the same offset from the lowest byte (the driver copies the span
    // or fails; the pointer check, when on, found it in one allocation).
    let mut compact = None;
    let (copied, data) = if to_host || copy == Some(true) {
        if extent.is_empty() {
            // Nothing to copy (an empty array's pointer may be null): no byte is read, and
            // the copy points at nothing, as DLPack's empty tensors do.
            (Some(Copied::Host(HostCopy::zeroed(0, "an empty copy")?)), 0)
        } else {
            match memory {
                Memory::Host => {
                    let copied = Copied::Host(compact_copy(descriptor)?);
                    let data = copied.address();
                    compact = Some(layout.c_order());
                    (Some(copied), data)
                }
                Memory::Device => {
                    let bytes = descriptor.byte_range_of(extent).map_err(crate::error::to_py_err)?;
                    let len = bytes.end - bytes.start;
                    let copied = copy_device(py, descriptor.stream, bytes.start, len, own.device_id, to_host)?;
                    let data = copied.address() + (descriptor.data - bytes.start);
                    (Some(copied), data)
                }
            }
        }
    } else {
        (None, descriptor.data)
    };
    let layout = compact.as_ref().unwrap_or(layout);
    let mut flag_bits = 0;
    if copied.is_some() {
        flag_bits |= flags::IS_COPIED;
    } else if descriptor.readonly {
        flag_bits |= flags::READ_ONLY;
    }
    let tensor = DLTensor {
        data: data as *mut c_void,
        device: target,
        ndim: i32::try_from(layout.ndim()).map_err(|_| buffer_error("shape: too many dimensions".to_owned()))?,
        dtype: layout.dtype,
        shape: ptr::null_mut(),
        strides: ptr::null_mut(),
        byte_offset: 0,
    };
    let owner = owner.clone().unbind();
    if versioned {
        capsule::<DLManagedTensorVersioned>(py, tensor, flag_bits, layout, owner, copied)
    } else {
        capsule::<DLManagedTensor>(py, tensor, flag_bits, layout, owner, copied)
    }
}

// ---------------------------------------------------------------------------------------
// Import.

/// A capsule's tensor: looked at by [`peek`], then taken from the consumed capsule by
/// [`take`] (in a [`DLPackTensor`], whose drop runs its deleter).
#[derive(Clone, Copy)]
enum Taken {
    Legacy(*mut DLManagedTensor),
    Versioned(*mut DLManagedTensorVersioned),
}

/// The owner of an imported DLPack tensor, kept alive by the views of it; the producer's
/// deleter runs once, when the last view goes.
///
/// A tensor exported by this extension module holds its exporting object, which the
/// collector is shown (`__traverse__`), so that a cycle through the export is freed: an
/// object that keeps `cai.from_dlpack` of a view of itself. Another producer's tensor
/// (another module's built on cai-py included) holds what the collector cannot see, as
/// through NumPy's own exports: such a cycle stays, and nothing is freed early.
#[pyclass(frozen, module = "cai", name = "DLPackTensor")]
pub struct DLPackTensor {
    taken: Taken,
}

impl std::fmt::Debug for DLPackTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.__repr__())
    }
}

// SAFETY: the tensor is a pointer the producer gave away with the capsule; DLPack lets
// its deleter run on any thread, and nothing else touches it through this object.
unsafe impl Send for DLPackTensor {}
// SAFETY: as above; shared access reads only fields a producer does not change once it
// has exported the tensor (its flags; the deleter and an export's owner, in
// `__traverse__`), with the GIL held or during a collection.
unsafe impl Sync for DLPackTensor {}

impl Drop for DLPackTensor {
    fn drop(&mut self) {
        // SAFETY: the pointer came from a capsule this process renamed `used_...`, so the
        // deleter is ours to call, once.
        unsafe {
            match self.taken {
                Taken::Legacy(t) => call_deleter(t),
                Taken::Versioned(t) => call_deleter(t),
            }
        }
    }
}

impl DLPackTensor {
    fn is_versioned(&self) -> bool {
        matches!(self.taken, Taken::Versioned(_))
    }

    /// Whether the producer flagged the tensor as a copy it made for the export (a legacy
    /// tensor cannot say).
    fn is_copied(&self) -> bool {
        match self.taken {
            Taken::Legacy(_) => false,
            // SAFETY: the tensor is alive as long as `self` (its deleter has not run).
            Taken::Versioned(t) => unsafe { (*t).flags & flags::IS_COPIED != 0 },
        }
    }
}

#[pymethods]
impl DLPackTensor {
    fn __repr__(&self) -> &'static str {
        match self.taken {
            Taken::Legacy(_) => "cai.DLPackTensor(legacy)",
            Taken::Versioned(_) => "cai.DLPackTensor(versioned)",
        }
    }

    /// A tensor cannot be pickled or copied: it owns a producer's memory in this process.
    fn __reduce_ex__(&self, _protocol: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::error::not_picklable("cai.DLPackTensor"))
    }

    fn __reduce__(&self) -> PyResult<()> {
        Err(crate::error::not_picklable("cai.DLPackTensor"))
    }

    fn __copy__(&self) -> PyResult<()> {
        Err(crate::error::not_copyable("cai.DLPackTensor"))
    }

    fn __deepcopy__(&self, _memo: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::error::not_copyable("cai.DLPackTensor"))
    }

    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        match self.own_export_owner() {
            Some(owner) => visit.call(owner),
            None => Ok(()),
        }
    }
}

impl DLPackTensor {
    /// The exporting object of the tensor when it is one of this extension module's own
    /// exports (its deleter is this module's [`delete`], so it heads an [`Export`]); `None`
    /// for any other producer's tensor, another module's built on cai-py included. Reads
    /// two fields and runs nothing: a collection's traversal calls it. Recognized by the
    /// deleter's address: a miss (Rust promises no single address per function) only
    /// leaves a cycle uncollected; a false match would need another function at the
    /// address of `delete`, whose code is that of no other.
    ///
    /// Sound because the tensor outlives every traversal: `taken` never changes (the class
    /// is frozen) and the deleter runs only in `Drop`, after pyo3's deallocation has taken
    /// the object out of the collector's reach. A method that ran the deleter earlier (a
    /// `close()`, a `__clear__`) would have to stop this first.
    fn own_export_owner(&self) -> Option<&Py<PyAny>> {
        // SAFETY: the tensor is alive as long as `self` (above).
        unsafe {
            match self.taken {
                Taken::Legacy(t) => own_export_owner(t),
                Taken::Versioned(t) => own_export_owner(t),
            }
        }
    }
}

/// [`DLPackTensor::own_export_owner`] of a tensor of either kind.
///
/// # Safety
///
/// `tensor` is null or a live managed tensor, alive for `'a`.
unsafe fn own_export_owner<'a, M: Managed>(tensor: *mut M) -> Option<&'a Py<PyAny>> {
    // SAFETY: as the caller promises; a tensor whose deleter is `delete::<M>` was written
    // by `boxed::<M>` as the first field of an `Export<M>`, whose owner lives until that
    // deleter runs.
    unsafe {
        let deleter = tensor.as_ref()?.deleter()?;
        let ours: unsafe extern "C" fn(*mut M) = delete::<M>;
        std::ptr::fn_addr_eq(deleter, ours).then(|| &*(*tensor.cast::<Export<M>>()).owner)
    }
}

/// A tensor read from a DLPack producer.
pub(crate) struct Imported {
    pub(crate) parsed: Parsed,
    /// The [`DLPackTensor`] the views keep alive.
    pub(crate) owner: Py<PyAny>,
    pub(crate) memory: Memory,
    /// Whether the capsule was a versioned one, which says whether the memory is
    /// read-only; a legacy capsule cannot (JAX's immutable arrays come in one).
    pub(crate) versioned: bool,
    /// Whether the producer flagged the tensor as a copy (`IS_COPIED`): writes to it do
    /// not reach the producer's array.
    pub(crate) copied: bool,
}

impl Imported {
    /// The import of the tensor `owner` took, read as `parsed`, in `memory`.
    fn new(owner: Bound<'_, DLPackTensor>, parsed: Parsed, memory: Memory) -> Imported {
        let (versioned, copied) = (owner.get().is_versioned(), owner.get().is_copied());
        Imported { parsed, owner: owner.into_any().unbind(), memory, versioned, copied }
    }
}

fn memory_of(device: DLDevice) -> PyResult<Memory> {
    match device.device_type {
        device_type::CPU | device_type::CUDA_HOST => Ok(Memory::Host),
        device_type::CUDA | device_type::CUDA_MANAGED => Ok(Memory::Device),
        other => Err(buffer_error(format!(
            "__dlpack_device__: {} ({other}) memory is neither host nor CUDA memory; cai reads kDLCPU, kDLCUDA, \
             kDLCUDAHost and kDLCUDAManaged",
            dlpack::device_type_name(other)
        ))),
    }
}

/// Whether `obj` offers `__dlpack__`.
pub(crate) fn offers(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    // A `__dlpack__` property may read the object through cai again.
    let _nesting = crate::parse::Nesting::enter("__dlpack__")?;
    Ok(obj.getattr_opt(intern!(obj.py(), "__dlpack__"))?.is_some())
}

/// Reads `obj` through DLPack. `stream` is the consumer's stream for CUDA memory (the
/// producer orders its work before it; `None`: no synchronization); `copy` is passed on.
pub(crate) fn import(obj: &Bound<'_, PyAny>, stream: Option<Stream>, copy: Option<bool>) -> PyResult<Imported> {
    // With no memory asked for, every kind is read.
    import_from(obj, stream, copy, None)?.map_err(|m| buffer_error(format!("__dlpack__: {m:?} memory was refused")))
}

/// As [`import`], for a consumer that reads only `want` memory: a producer whose
/// `__dlpack_device__` reports the other kind gives `Ok(Err(memory))`, and is not asked
/// for its tensor.
pub(crate) fn import_memory(
    obj: &Bound<'_, PyAny>,
    stream: Option<Stream>,
    copy: Option<bool>,
    want: Memory,
) -> PyResult<Result<Imported, Memory>> {
    import_from(obj, stream, copy, Some(want))
}

fn import_from(
    obj: &Bound<'_, PyAny>,
    stream: Option<Stream>,
    copy: Option<bool>,
    want: Option<Memory>,
) -> PyResult<Result<Imported, Memory>> {
    let py = obj.py();
    // A producer's `__dlpack__` may read another array through cai, itself included: the
    // nesting ends in RecursionError, as the interface reads' does, before the C stack does.
    let _nesting = crate::parse::Nesting::enter("__dlpack__")?;
    let Some(dlpack_method) = obj.getattr_opt(intern!(py, "__dlpack__"))? else {
        let type_name = crate::error::type_name(obj)?;
        return Err(PyTypeError::new_err(format!("__dlpack__: objects of type '{type_name}' do not export it")));
    };
    let Some(device_method) = obj.getattr_opt(intern!(py, "__dlpack_device__"))? else {
        let type_name = crate::error::type_name(obj)?;
        return Err(PyTypeError::new_err(format!(
            "__dlpack_device__: objects of type '{type_name}' have __dlpack__ but not __dlpack_device__"
        )));
    };
    for (name, method) in [("__dlpack__", &dlpack_method), ("__dlpack_device__", &device_method)] {
        if !method.is_callable() {
            return Err(PyTypeError::new_err(format!("{name}: expected a method, received {}", received(method)?)));
        }
    }
    let reported = device_method.call0()?;
    let (t, id) = int_pair(&reported, "__dlpack_device__")?;
    // DLPack's device ids are ordinals.
    let reported = match (i32::try_from(t), i32::try_from(id)) {
        (Ok(device_type), Ok(device_id)) if device_id >= 0 => DLDevice { device_type, device_id },
        _ => {
            return Err(PyValueError::new_err(format!(
                "__dlpack_device__: returned ({t}, {id}); a device type and a device ordinal (0 to 2**31-1) were \
                 expected"
            )))
        }
    };
    let memory = memory_of(reported)?;
    if want.is_some_and(|w| w != memory) {
        return Ok(Err(memory));
    }
    // Each call gets a dict of its own: a producer may reach the first one (a builtin
    // `__dlpack__` is handed it, any code can find it through `gc`) and change it.
    let kwargs = |max_version: bool| -> PyResult<Bound<'_, PyDict>> {
        let kwargs = PyDict::new(py);
        if memory == Memory::Device {
            match stream.and_then(Stream::to_raw) {
                Some(raw) => kwargs.set_item(intern!(py, "stream"), raw)?,
                None => kwargs.set_item(intern!(py, "stream"), -1)?,
            }
        }
        if max_version {
            kwargs.set_item(intern!(py, "max_version"), (1u32, 0u32))?;
        }
        if let Some(c) = copy {
            kwargs.set_item(intern!(py, "copy"), c)?;
        }
        Ok(kwargs)
    };
    let capsule = match dlpack_method.call((), Some(&kwargs(true)?)) {
        Ok(c) => c,
        // A producer from before DLPack 1.0 takes no `max_version`: Python says so with a
        // `TypeError` of that very class. A subclass is the producer's own refusal
        // (PyArrow's `ArrowTypeError` for an array with nulls), raised as it is.
        // Asked for a copy, the producer's `TypeError` is its answer: no retry (which would
        // drop `max_version` and keep `copy`).
        Err(e) if e.get_type(py).is(PyTypeError::type_object(py)) && copy.is_some() => {
            if !names_max_version(py, &e)? {
                return Err(e);
            }
            let error = PyTypeError::new_err(format!(
                "copy: {}'s __dlpack__ refused max_version (a producer from before DLPack 1.0, which takes no copy \
                 either); call cai.from_dlpack without copy=, then copy the view",
                crate::error::type_name(obj)?
            ));
            error.set_cause(py, Some(e));
            return Err(error);
        }
        Err(e) if e.get_type(py).is(PyTypeError::type_object(py)) => {
            // The retry's error is the producer's own (a `BufferError` that says why it
            // cannot export, say). It runs as an `except TypeError:` block would, so that
            // Python chains the first error as the context of what the retry raises.
            let retry = kwargs(false)?;
            while_handling(py, &e, || dlpack_method.call((), Some(&retry)))?
        }
        Err(e) => return Err(e),
    };
    let (owner, parsed) = read_and_take(&capsule, reported, stream)?;
    let imported = Imported::new(owner, parsed, memory);
    if imported.copied && copy == Some(false) {
        return Err(buffer_error(
            "__dlpack__: asked for copy=False, the producer returned a tensor it flagged as a copy (IS_COPIED)"
                .to_owned(),
        ));
    }
    Ok(Ok(imported))
}

/// Whether the text of `e` names the keyword `'max_version'`, quoted, as Python's own
/// refusals do ("got an unexpected keyword argument 'max_version'", "'max_version' is an
/// invalid keyword argument"); a text that cannot be read does not, unless reading it
/// raised an exception that [must propagate](crate::parse::must_propagate) (its argument's
/// `__str__` is the producer's code).
fn names_max_version(py: Python<'_>, e: &PyErr) -> PyResult<bool> {
    match e.value(py).str() {
        Ok(text) => Ok(text.to_str().is_ok_and(|t| t.contains("'max_version'"))),
        Err(raised) if crate::parse::must_propagate(py, &raised) => Err(raised),
        Err(_) => Ok(false),
    }
}

/// Runs `f` with `handled` as the exception being handled (`sys.exc_info()`), as in an
/// `except` block: an exception raised meanwhile gets it as its `__context__`, chained by
/// Python's own rules (which cut a link that would close a cycle).
fn while_handling<R>(py: Python<'_>, handled: &PyErr, f: impl FnOnce() -> R) -> R {
    /// The exception state before, put back when dropped.
    struct Saved([*mut ffi::PyObject; 3]);
    impl Drop for Saved {
        fn drop(&mut self) {
            let [t, v, tb] = self.0;
            // SAFETY: the references taken by `PyErr_GetExcInfo`, which this steals; the
            // GIL is held (the guard lives within `while_handling`).
            unsafe { ffi::PyErr_SetExcInfo(t, v, tb) };
        }
    }
    let value = handled.value(py);
    let mut before = [std::ptr::null_mut(); 3];
    // SAFETY: the GIL is held; `PyErr_GetExcInfo` gives new references (or nulls), which
    // `Saved` hands back; `PyErr_SetExcInfo` steals the three new references made here.
    let _saved = unsafe {
        ffi::PyErr_GetExcInfo(&mut before[0], &mut before[1], &mut before[2]);
        let saved = Saved(before);
        let ty = ffi::Py_TYPE(value.as_ptr()).cast::<ffi::PyObject>();
        ffi::Py_INCREF(ty);
        ffi::Py_INCREF(value.as_ptr());
        ffi::PyErr_SetExcInfo(ty, value.as_ptr(), ffi::PyException_GetTraceback(value.as_ptr()));
        saved
    };
    f()
}

/// Whether `obj` is exactly a NumPy array (not a subclass): the type is recognized by name
/// the first time and by identity after, without importing NumPy. Reading the name can
/// only fail with an exception that must propagate (a `KeyboardInterrupt`).
pub(crate) fn is_numpy_array(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    static NDARRAY: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let py = obj.py();
    let ty = obj.get_type();
    if let Some(known) = NDARRAY.get(py) {
        return Ok(ty.is(known.bind(py)));
    }
    // NumPy's ndarray is a static type: a Python class that calls itself so is not.
    let found = crate::error::static_type_name(obj)?.as_deref() == Some("numpy.ndarray");
    if found {
        let _ = NDARRAY.set(py, ty.unbind());
    }
    Ok(found)
}

/// Reads a NumPy array through its `__dlpack__` (a versioned capsule, which carries
/// read-only), much cheaper than NumPy's `__array_interface__`, which builds a dict of
/// Python objects on every read. `None` when NumPy refuses the export (byte orders, record
/// and other dtypes DLPack has no code for, older NumPy that refuses a read-only array):
/// the caller then reads the interface. Exceptions that must propagate do.
pub(crate) fn import_numpy(obj: &Bound<'_, PyAny>) -> PyResult<Option<Imported>> {
    static KWARGS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    let py = obj.py();
    let kwargs = crate::once::get_or_make(&KWARGS, py, || {
        let d = PyDict::new(py);
        d.set_item(intern!(py, "max_version"), (1u32, 0u32))?;
        // Every later call passes it: out of reach, or code could ask NumPy for a copy.
        crate::export::hide(d.as_any());
        Ok(d.unbind())
    })?;
    // NumPy's own method on an exact ndarray: it reads the arguments and leaves them alone.
    let capsule = match obj.call_method(intern!(py, "__dlpack__"), (), Some(kwargs.bind(py))) {
        Ok(c) => c,
        Err(e) if crate::parse::must_propagate(py, &e) => return Err(e),
        Err(_) => return Ok(None),
    };
    let (owner, parsed) = read_and_take(&capsule, DLDevice { device_type: device_type::CPU, device_id: 0 }, None)?;
    Ok(Some(Imported::new(owner, parsed, Memory::Host)))
}

/// Reads the tensor of `capsule` (placed on `reported` by its producer) and, once it is
/// accepted, takes it. It is read before the capsule is consumed: a tensor refused stays
/// the producer's, which its capsule's destructor frees (a deleter read from a malformed
/// struct is never run).
fn read_and_take<'py>(
    capsule: &Bound<'py, PyAny>,
    reported: DLDevice,
    stream: Option<Stream>,
) -> PyResult<(Bound<'py, DLPackTensor>, Parsed)> {
    let peeked = peek(capsule)?;
    // SAFETY: `capsule`, unconsumed, owns the tensor and is held meanwhile; `peek` checked
    // the pointer's alignment.
    let parsed = unsafe { read_tensor(peeked.0, reported, stream)? };
    Ok((take(capsule, peeked)?, parsed))
}

/// The tensor of a capsule not yet consumed, and the name that consumes it: checks the
/// capsule's name and the tensor pointer, and changes nothing.
fn peek(capsule: &Bound<'_, PyAny>) -> PyResult<(Taken, &'static CStr)> {
    let py = capsule.py();
    // SAFETY: a type check of a live object.
    if unsafe { ffi::PyCapsule_CheckExact(capsule.as_ptr()) } == 0 {
        return Err(PyTypeError::new_err(format!("__dlpack__: expected a PyCapsule, received {}", received(capsule)?)));
    }
    // SAFETY: `capsule` is a capsule; GetName sets no exception for a valid one.
    let name = unsafe { ffi::PyCapsule_GetName(capsule.as_ptr()) };
    // SAFETY: a capsule's name is null or a NUL-terminated string that lives as long as it.
    let name = (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) });
    let (versioned, used) = match name {
        Some(n) if n == VERSIONED => (true, USED_VERSIONED),
        Some(n) if n == DLTENSOR => (false, USED_DLTENSOR),
        Some(n) if n == USED_VERSIONED || n == USED_DLTENSOR => {
            return Err(buffer_error(format!(
                "__dlpack__: the capsule was already consumed (it is named '{}')",
                n.to_string_lossy()
            )))
        }
        other => {
            return Err(PyTypeError::new_err(format!(
                "__dlpack__: expected a capsule named 'dltensor' or 'dltensor_versioned', received one named {}",
                other.map_or_else(|| "None".to_owned(), |n| format!("'{}'", n.to_string_lossy()))
            )))
        }
    };
    let name_ptr = if versioned { VERSIONED.as_ptr() } else { DLTENSOR.as_ptr() };
    // SAFETY: the capsule has this name; the pointer is its tensor.
    let pointer = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), name_ptr) };
    if pointer.is_null() {
        return Err(PyErr::take(py).unwrap_or_else(|| PyTypeError::new_err("__dlpack__: the capsule holds no tensor")));
    }
    // Read as its struct, the tensor must be aligned as one; a refused capsule stays the
    // producer's.
    let (aligned, align) = if versioned {
        (pointer.cast::<DLManagedTensorVersioned>().is_aligned(), std::mem::align_of::<DLManagedTensorVersioned>())
    } else {
        (pointer.cast::<DLManagedTensor>().is_aligned(), std::mem::align_of::<DLManagedTensor>())
    };
    if !aligned {
        return Err(PyValueError::new_err(format!(
            "__dlpack__: the capsule's tensor pointer {pointer:p} is not aligned to {align} bytes"
        )));
    }
    let taken = if versioned { Taken::Versioned(pointer.cast()) } else { Taken::Legacy(pointer.cast()) };
    Ok((taken, used))
}

/// Takes the tensor that [`peek`] found out of `capsule` (renaming it `used_...`), into a
/// [`DLPackTensor`], which runs its deleter when dropped.
fn take<'py>(capsule: &Bound<'py, PyAny>, (taken, used): (Taken, &'static CStr)) -> PyResult<Bound<'py, DLPackTensor>> {
    let py = capsule.py();
    // SAFETY: renaming to a static name makes the tensor ours: the capsule's destructor
    // (any conforming one) leaves a used capsule's tensor alone.
    if unsafe { ffi::PyCapsule_SetName(capsule.as_ptr(), used.as_ptr()) } != 0 {
        return Err(PyErr::fetch(py));
    }
    Bound::new(py, DLPackTensor { taken })
}

/// Reads the tensor `taken`, which its producer's `__dlpack_device__` placed on
/// `reported`, and checks it; it reads none of the tensor's memory later.
///
/// # Safety
///
/// The tensor is alive (its capsule, consumed or not, is held, or its owner is) and
/// well-aligned, as [`peek`] checked.
unsafe fn read_tensor(taken: Taken, reported: DLDevice, stream: Option<Stream>) -> PyResult<Parsed> {
    let memory = memory_of(reported)?;
    // SAFETY: as the caller promises; the producer may not change it once exported.
    let (tensor, readonly) = unsafe {
        match taken {
            // A legacy tensor cannot say read-only: it is read-only, as NumPy reads it
            // (JAX's immutable arrays come this way).
            Taken::Legacy(t) => (&(*t).dl_tensor, true),
            Taken::Versioned(t) => {
                let version = (*t).version;
                if version.major != dlpack::VERSION.major {
                    // Versioned capsules began with DLPack 1.0: a 0.x one is malformed (a
                    // legacy tensor misnamed, say), and read no further.
                    let what = if version.major > dlpack::VERSION.major {
                        "is newer than the versions cai reads (1.x)"
                    } else {
                        "is older than versioned capsules (DLPack 1.0 and later): the tensor is malformed"
                    };
                    return Err(buffer_error(format!("__dlpack__: DLPack {}.{} {what}", version.major, version.minor)));
                }
                (&(*t).dl_tensor, (*t).flags & flags::READ_ONLY != 0)
            }
        }
    };
    // The tensor says where its memory is: it must be where `__dlpack_device__` said, or
    // host code could be handed device memory. Device ids are ordinals, on the host too.
    let actual = tensor.device;
    let same_place = actual.device_id >= 0
        && memory_of(actual).ok() == Some(memory)
        && (memory == Memory::Host || actual.device_id == reported.device_id);
    if !same_place {
        return Err(buffer_error(format!(
            "__dlpack__: the tensor is on {} but __dlpack_device__ said {}",
            describe(actual),
            describe(reported)
        )));
    }
    let typestr = dlpack::typestr(tensor.dtype).map_err(|e| buffer_error(format!("dtype: {e}")))?;
    let ndim = usize::try_from(tensor.ndim).ok().filter(|&n| n <= cai_core::MAX_DIMS).ok_or_else(|| {
        PyValueError::new_err(format!(
            "ndim: {} is not a number of dimensions cai reads (0 to {})",
            tensor.ndim,
            cai_core::MAX_DIMS
        ))
    })?;
    let read = |p: *mut i64, what: &str| -> PyResult<DimVec<i64>> {
        if ndim == 0 {
            return Ok(DimVec::new());
        }
        if p.is_null() {
            return Err(PyValueError::new_err(format!("{what}: the tensor has {ndim} dimensions and no {what}")));
        }
        if !p.is_aligned() {
            return Err(PyValueError::new_err(format!("{what}: the pointer {p:p} is not aligned for int64 values")));
        }
        // SAFETY: the producer exports `ndim` entries at `p`, alive with the tensor.
        Ok(DimVec::from(unsafe { std::slice::from_raw_parts(p, ndim) }))
    };
    let shape: DimVec<usize> = read(tensor.shape, "shape")?
        .into_iter()
        .map(|n| usize::try_from(n).map_err(|_| PyValueError::new_err(format!("shape: a dimension is negative: {n}"))))
        .collect::<PyResult<_>>()?;
    let itemsize = isize::try_from(typestr.itemsize()).unwrap_or(isize::MAX);
    let strides = if tensor.strides.is_null() {
        None
    } else {
        let elements = read(tensor.strides, "strides")?;
        let bytes = elements
            .iter()
            .map(|&s| isize::try_from(s).ok().and_then(|s| s.checked_mul(itemsize)))
            .collect::<Option<DimVec<isize>>>()
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "strides: {} elements overflow in bytes",
                    crate::error::py_tuple(&elements)
                ))
            })?;
        Some(bytes)
    };
    if tensor.data.is_null() && tensor.byte_offset != 0 {
        return Err(PyValueError::new_err(format!(
            "data: the tensor's pointer is null and its byte_offset is {}; a null pointer has no offsets",
            tensor.byte_offset
        )));
    }
    let data = (tensor.data as usize)
        .checked_add(usize::try_from(tensor.byte_offset).unwrap_or(usize::MAX))
        .ok_or_else(|| PyValueError::new_err("data: the pointer plus byte_offset leaves the address space"))?;
    let view_stream = match memory {
        Memory::Device => stream.unwrap_or(Stream::None),
        Memory::Host => Stream::None,
    };
    let descriptor = Descriptor {
        shape,
        strides,
        typestr,
        descr: None,
        data,
        readonly,
        version: cai_core::CURRENT_VERSION,
        mask: None,
        stream: view_stream,
    };
    let extent = descriptor.validate().map_err(crate::error::to_py_err)?;
    Ok(Parsed { descriptor, declared_version: u64::from(cai_core::CURRENT_VERSION), mask: None, extent })
}
