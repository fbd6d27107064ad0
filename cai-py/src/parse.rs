//! Reading an interface dict into a [`Descriptor`], by the rules of the version it declares.
//!
//! Two typed entry points share every rule: [`parse`] (of the value [`read_attribute`]
//! reads) stops at the first problem and returns `PyResult<Parsed>`; [`findings`] notes
//! every problem and returns them as messages, for `cai.validate`.
//!
//! # What a hostile producer can do
//!
//! Reading a dict runs the producer's code: `__index__` of an integer-like value,
//! `__repr__` of a value an error message quotes, a mask's property, a `warnings` hook.
//! That code may change or free the dict. So the values are taken as strong references
//! in one pass over the dict during which no Python code runs, and everything after works
//! on those references, never on the dict. Exceptions that must not be turned into a
//! `TypeError` or a finding (anything that is not an `Exception`, and `MemoryError` and
//! `RecursionError`) propagate unchanged. Reads that nest (a property or a mask that
//! imports again) end in `RecursionError` after [`MAX_NESTING`] levels, and no more than
//! [`MAX_NESTED_ENTRIES`] levels are entered while three or more are under way, between
//! two reads from outside all levels.
//!
//! The common dict (an exact dict of exact ints, tuples and strs, as every producer
//! builds it) is read first by [`quick`], which runs no Python code at all and so may
//! read the dict's values as borrowed references; anything else, and any dict with a
//! problem, goes to the full reader, which reports the problem.

use std::cell::Cell;

use cai_core::{
    Descr, Descriptor, DimVec, Error, Extent, Field, FieldType, Kind, Stream, TypeStr, CURRENT_VERSION, INLINE_DIMS,
};
use pyo3::exceptions::{PyMemoryError, PyOverflowError, PyRecursionError, PyRuntimeWarning};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple, PyType};
use pyo3::{ffi, intern, Borrowed, PyTypeInfo};

use crate::error::{received, received_int, received_not_int, Problem};

/// Which of the two interfaces a dict belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interface {
    /// `__cuda_array_interface__`: device memory, versions 0 to 3, with a stream in 3.
    Cuda,
    /// NumPy's `__array_interface__` (its version 3): host memory, no stream.
    Host,
}

impl Interface {
    /// The attribute a producer exports it as.
    pub fn attribute(self) -> &'static str {
        match self {
            Interface::Cuda => "__cuda_array_interface__",
            Interface::Host => "__array_interface__",
        }
    }

    /// The attribute name as an interned Python string.
    pub(crate) fn interned(self, py: Python<'_>) -> &Bound<'_, PyString> {
        match self {
            Interface::Cuda => intern!(py, "__cuda_array_interface__"),
            Interface::Host => intern!(py, "__array_interface__"),
        }
    }

    /// The keys some version of the interface defines; which version allows which key is
    /// a rule of [`Descriptor::validate`].
    fn keys(self) -> &'static [&'static str] {
        match self {
            Interface::Cuda => &KEYS,
            Interface::Host => &KEYS[..KEYS.len() - 1],
        }
    }
}

/// Where an interface value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A producer's interface attribute, which the spec has return a dict (a subclass of
    /// one too): NumPy and PyTorch read no other mapping, so neither does cai.
    Attribute,
    /// A value given to cai as the interface (`cai.from_cuda_array_interface(desc)`,
    /// `cai.validate(d)`): any mapping, read through a copy.
    Argument,
}

/// Every key some version defines, `stream` (CUDA only) last.
const KEYS: [&str; 8] = ["shape", "typestr", "descr", "data", "version", "strides", "mask", "stream"];

/// A dict that passed every rule of its version.
#[derive(Debug)]
pub(crate) struct Parsed {
    /// The array; its `version` is the declared one, or 3 for a newer dict read by 3's rules.
    pub(crate) descriptor: Descriptor,
    /// The version the dict declared.
    pub(crate) declared_version: u64,
    /// The `mask` object, kept so that the mask's memory stays alive.
    pub(crate) mask: Option<Py<PyAny>>,
    /// The bytes the array reaches.
    pub(crate) extent: Extent,
}

/// Why a read stopped: a problem with the dict, or an exception to propagate as it is.
/// Boxed, so that the results of the readers stay small on the success path.
pub(crate) struct Failure(Box<Why>);

enum Why {
    Problem(Problem),
    Raised(PyErr),
}

impl Failure {
    fn raised(e: PyErr) -> Failure {
        Failure(Box::new(Why::Raised(e)))
    }
}

impl From<Problem> for Failure {
    fn from(p: Problem) -> Failure {
        Failure(Box::new(Why::Problem(p)))
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Problem::from(e).into()
    }
}

impl From<PyErr> for Failure {
    fn from(e: PyErr) -> Failure {
        Failure::raised(e)
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match *f.0 {
            Why::Problem(p) => p.into(),
            Why::Raised(e) => e,
        }
    }
}

/// Whether an exception raised by a producer's code must reach the caller unchanged:
/// anything that is not an `Exception` (`KeyboardInterrupt`, `SystemExit`, ...), and
/// `MemoryError` and `RecursionError`.
pub(crate) fn must_propagate(py: Python<'_>, e: &PyErr) -> bool {
    !e.is_instance_of::<pyo3::exceptions::PyException>(py)
        || e.is_instance_of::<PyMemoryError>(py)
        || e.is_instance_of::<PyRecursionError>(py)
}

/// `whose __index__ failed with TypeName: message`: how an int-like value's `__index__`
/// failed (the error [`IntLike::NotInt`] carries), for a message about the value.
pub(crate) fn index_failure(py: Python<'_>, e: PyErr) -> PyResult<String> {
    Ok(format!("whose __index__ failed with {}", exception_text(py, e)?))
}

/// What an int-like value holds, read as a `T` by [`int_like`].
pub(crate) enum IntLike<'py, T> {
    /// The value, within `T`'s range.
    Value(T),
    /// An int outside `T`'s range: the int (for an int-like, the one its `__index__` gave,
    /// which its text may not show), or `None` for an `__index__` that raised
    /// `OverflowError`.
    OutOfRange(Option<Bound<'py, PyInt>>),
    /// Not an int: a bool, an object without `__index__`, or (with the exception it raised)
    /// one whose `__index__` raised another ordinary exception.
    NotInt(Option<PyErr>),
}

/// Reads an int-like value (an int, or an object with `__index__`, such as NumPy's
/// integers) as a `T`; a bool is not one (`True` given as a number is taken for a
/// mistake). `__index__` runs the producer's code, once, and an exception there that
/// [must propagate](must_propagate) does; `value` is held meanwhile.
pub(crate) fn int_like<'py, T>(value: &Bound<'py, PyAny>) -> PyResult<IntLike<'py, T>>
where
    T: for<'a> FromPyObject<'a, 'py, Error = PyErr>,
{
    if value.is_instance_of::<PyBool>() {
        return Ok(IntLike::NotInt(None));
    }
    let py = value.py();
    let index = match value.cast_exact::<PyInt>() {
        Ok(int) => int.clone(),
        Err(_) => {
            // SAFETY: `value` is live; PyNumber_Index returns a new reference (an int of
            // exact type, from 3.10 on: of an int subclass, a copy of its value, with no
            // code of the subclass run) or null with an exception set.
            match unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyNumber_Index(value.as_ptr())) } {
                Ok(index) => index.cast_into::<PyInt>().map_err(PyErr::from)?,
                Err(e) if must_propagate(py, &e) => return Err(e),
                Err(e) if e.is_instance_of::<PyOverflowError>(py) => return Ok(IntLike::OutOfRange(None)),
                // SAFETY: `value` is live; the check reads its type's slot and runs no code.
                Err(e) if unsafe { ffi::PyIndex_Check(value.as_ptr()) } != 0 => return Ok(IntLike::NotInt(Some(e))),
                Err(_) => return Ok(IntLike::NotInt(None)),
            }
        }
    };
    match index.extract::<T>() {
        Ok(v) => Ok(IntLike::Value(v)),
        Err(e) if must_propagate(py, &e) => Err(e),
        Err(e) if e.is_instance_of::<PyOverflowError>(py) => Ok(IntLike::OutOfRange(Some(index))),
        Err(_) => Ok(IntLike::NotInt(None)),
    }
}

/// How many reads may nest (a property, a mask or a `__dlpack__` that imports the object
/// again) before the innermost raises `RecursionError`.
pub(crate) const MAX_NESTING: u32 = 64;

/// How many levels past [`MAX_NESTING`] the code a message runs may nest.
const MESSAGE_HEADROOM: u32 = 8;

/// How many levels may be entered on a thread while [`COUNTED_FROM`] or more are under
/// way, between two entries from outside all levels. The depth limit bounds a recursion's
/// depth, not its breadth: code that calls cai again from each of several values that cai
/// runs it for (the `__repr__` of each bad key a validation quotes, the `__index__` of
/// each shape item, a `sys.unraisablehook` hearing each failure) would make 3^64 calls
/// within it. Past this count every such level raises `RecursionError` at once, until the
/// thread's outermost level is left.
pub(crate) const MAX_NESTED_ENTRIES: u32 = 65536;

/// How many levels must be under way for the next one to be counted: a read, the levels
/// that code it runs enters, and theirs are not (a property that reads many children
/// through cai, each of which reads its mask or a wrapped array), so such work has no
/// bound but its own.
const COUNTED_FROM: u32 = 3;

/// The levels under way on a thread, and how many were entered while [`COUNTED_FROM`] or
/// more were, since the outermost of them.
#[derive(Clone, Copy)]
struct Levels {
    depth: u32,
    counted: u32,
    /// Which outermost level this is, of those entered on the thread (64 bits: no
    /// thread enters that many).
    window: u64,
}

thread_local! {
    static NESTING: Cell<Levels> = const { Cell::new(Levels { depth: 0, counted: 0, window: 0 }) };
}

/// One level of nested reading on this thread, left on drop.
pub(crate) struct Nesting(());

impl Nesting {
    /// The `RecursionError` of one read too many.
    #[cold]
    fn too_deep(attribute: &str) -> PyErr {
        PyRecursionError::new_err(format!(
            "maximum recursion depth exceeded while reading {attribute} ({MAX_NESTING} nested reads)"
        ))
    }

    /// The `RecursionError` of one nested level too many.
    #[cold]
    fn too_many(attribute: &str) -> PyErr {
        PyRecursionError::new_err(format!(
            "maximum recursion exceeded while reading {attribute} ({MAX_NESTED_ENTRIES} levels entered while \
             {COUNTED_FROM} or more were under way on this thread: code that cai runs calls cai again, several times \
             from each level)"
        ))
    }

    /// How many reads are under way on this thread.
    fn depth() -> u32 {
        NESTING.with(Cell::get).depth
    }

    /// One more level of reading `attribute` (an interface attribute or `__dlpack__`).
    pub(crate) fn enter(attribute: &'static str) -> PyResult<Nesting> {
        Self::enter_below(attribute, MAX_NESTING)
    }

    /// One more level for code that finishes a read's result (a message's `repr` of a
    /// value or name of a type, the class of a driver error, the `cai` package's view
    /// factory), allowed [`MESSAGE_HEADROOM`] levels past the reads' limit: the result of
    /// the innermost read (its error, say) can still be made.
    pub(crate) fn enter_message(what: &'static str) -> PyResult<Nesting> {
        Self::enter_below(what, MAX_NESTING + MESSAGE_HEADROOM)
    }

    fn enter_below(what: &'static str, limit: u32) -> PyResult<Nesting> {
        Self::try_enter(limit).map_err(|refused| match refused {
            Refused::TooDeep => Self::too_deep(what),
            Refused::TooMany => Self::too_many(what),
        })
    }

    /// One more level, [`Refused`] past a limit, with no Python object made.
    pub(crate) fn try_enter(limit: u32) -> Result<Nesting, Refused> {
        let Levels { depth, counted, window } = NESTING.with(Cell::get);
        if depth >= limit {
            return Err(Refused::TooDeep);
        }
        let (counted, window) = if depth == 0 {
            // From outside all levels: a new count starts.
            (0, window.wrapping_add(1))
        } else if depth < COUNTED_FROM {
            (counted, window)
        } else if counted >= MAX_NESTED_ENTRIES {
            return Err(Refused::TooMany);
        } else {
            (counted + 1, window)
        };
        NESTING.with(|n| n.set(Levels { depth: depth + 1, counted, window }));
        Ok(Nesting(()))
    }

    /// Which outermost level is under way on this thread (or was last): a number that
    /// changes with each entry from outside all levels.
    pub(crate) fn window() -> u64 {
        NESTING.with(Cell::get).window
    }
}

/// Why [`Nesting::try_enter`] refused a level.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Refused {
    /// [`MAX_NESTING`] levels are under way.
    TooDeep,
    /// [`MAX_NESTED_ENTRIES`] levels were entered while [`COUNTED_FROM`] or more were
    /// under way.
    TooMany,
}

impl Drop for Nesting {
    fn drop(&mut self) {
        NESTING.with(|n| {
            let levels = n.get();
            n.set(Levels { depth: levels.depth.saturating_sub(1), ..levels });
        });
    }
}

/// The `TypeError` for an object without the interface attribute.
pub(crate) fn no_interface(obj: &Bound<'_, PyAny>, iface: Interface) -> PyErr {
    let type_name = match crate::error::type_name(obj) {
        Ok(name) => name,
        Err(e) => return e,
    };
    // A DLPack producer (a JAX array, say) is read by `cai.from_dlpack`.
    let hint = match crate::dlpack::offers(obj) {
        Ok(true) => " (they offer __dlpack__: cai.from_dlpack reads them)",
        Ok(false) => "",
        Err(e) if must_propagate(obj.py(), &e) => return e,
        Err(_) => "",
    };
    Problem::type_error(format!("{}: objects of type '{type_name}' do not export it{hint}", iface.attribute())).into()
}

/// The interface attribute of `obj`, or `None` when it has none (an `AttributeError`);
/// any other exception of the attribute propagates.
#[inline]
pub(crate) fn attribute<'py>(obj: &Bound<'py, PyAny>, iface: Interface) -> PyResult<Option<Bound<'py, PyAny>>> {
    let _nesting = Nesting::enter(iface.attribute())?;
    obj.getattr_opt(iface.interned(obj.py()))
}

/// `obj`'s interface attribute. A missing attribute is a `TypeError`; an exception raised
/// by the attribute itself propagates.
#[inline]
pub(crate) fn read_attribute<'py>(obj: &Bound<'py, PyAny>, iface: Interface) -> PyResult<Bound<'py, PyAny>> {
    match attribute(obj, iface)? {
        Some(value) => Ok(value),
        None => Err(no_interface(obj, iface)),
    }
}

/// Parses an interface dict, raising the first problem.
#[inline]
pub(crate) fn parse(value: &Bound<'_, PyAny>, iface: Interface, source: Source) -> PyResult<Parsed> {
    match quick(value, iface) {
        Some(parsed) => Ok(parsed),
        None => full(value, iface, source),
    }
}

/// The full reader: any value, every rule, the first problem raised. Out of line and
/// cold: inlined, it made its callers' hot code (the quick read) four times larger.
#[cold]
#[inline(never)]
fn full(value: &Bound<'_, PyAny>, iface: Interface, source: Source) -> PyResult<Parsed> {
    let _nesting = Nesting::enter(iface.attribute())?;
    if source == Source::Attribute && !value.is_instance_of::<PyDict>() {
        return Err(not_a_dict(value, iface)?.into());
    }
    let dict = as_dict(value, iface, source)?;
    Ok(strict(&dict, iface)?)
}

/// The common dict read without running any Python code: an exact dict whose keys are
/// the interned key strings, holding exact ints, tuples and strs, a version from 0 to 3,
/// no mask, and (for a `descr`) only the plain `[('', typestr)]`. Anything else, and any
/// dict that breaks a rule, is `None`: the full reader then reads it again and says what
/// is wrong. The result is the one [`strict`] returns for the same dict.
///
/// Since no Python code runs from the first look at the dict to the last, nothing can
/// change the dict meanwhile, and its values are read as borrowed references.
// Inlined into its callers, the result is built in their return slot: called, it was
// copied from one to the other (168 bytes, about 15 ns an import).
#[inline(always)]
fn quick(value: &Bound<'_, PyAny>, iface: Interface) -> Option<Parsed> {
    if !value.is_exact_instance_of::<PyDict>() {
        return None;
    }
    let names = interned_keys(value.py());
    let mut values = [std::ptr::null_mut::<ffi::PyObject>(); 8];
    let (mut pos, mut key, mut item): (ffi::Py_ssize_t, *mut ffi::PyObject, *mut ffi::PyObject) =
        (0, std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: `value` is a live dict; PyDict_Next hands out borrowed, non-null references,
    // valid while the dict is unchanged, which it is until this function returns: every
    // call below reads an exact int, tuple, list or str, which runs no Python code.
    unsafe {
        // Producers write their keys in one order, mostly that of KEYS: the search starts
        // after the last key found (a dict in KEYS' order takes one comparison a key).
        let mut next = 0;
        while ffi::PyDict_Next(value.as_ptr(), &mut pos, &mut key, &mut item) != 0 {
            let found = (next..next + KEYS.len()).map(|i| i % KEYS.len()).find(|&i| names[i].as_ptr() == key)?;
            values[found] = item;
            next = found + 1;
        }
        let get = |i: usize| Some(values[i]).filter(|v| !v.is_null());
        let is_none = |v: *mut ffi::PyObject| v == ffi::Py_None();
        let declared = u64::try_from(quick_int(get(VERSION)?)?).ok().filter(|&v| v <= u64::from(CURRENT_VERSION))?;
        let shape = quick_ints(get(SHAPE)?, |n| usize::try_from(n).ok())?;
        let (text, typestr) = quick_typestr(get(TYPESTR)?)?;
        if iface == Interface::Cuda && typestr.kind() == Kind::Object {
            return None;
        }
        if let Some(d) = get(DESCR) {
            quick_plain_descr(d, text)?;
        }
        let data = get(DATA)?;
        if ffi::Py_TYPE(data) != std::ptr::addr_of_mut!(ffi::PyTuple_Type) || ffi::PyTuple_Size(data) != 2 {
            return None;
        }
        let pointer = usize::try_from(quick_int(ffi::PyTuple_GetItem(data, 0))?).ok()?;
        let readonly = match ffi::PyTuple_GetItem(data, 1) {
            f if f == ffi::Py_False() => false,
            t if t == ffi::Py_True() => true,
            _ => return None,
        };
        let strides = match get(STRIDES) {
            None => None,
            Some(s) if is_none(s) => None,
            Some(s) => Some(quick_ints(s, |n| isize::try_from(n).ok())?),
        };
        if get(MASK).is_some_and(|m| !is_none(m)) {
            return None;
        }
        let stream = match (iface, get(STREAM)) {
            (_, None) => Stream::None,
            (Interface::Cuda, Some(s)) if is_none(s) => Stream::None,
            (Interface::Cuda, Some(s)) => Stream::from_raw(Some(usize::try_from(quick_int(s)?).ok()?)).ok()?,
            (Interface::Host, Some(_)) => return None,
        };
        let version = rules_version(declared, iface);
        let descriptor =
            Descriptor { shape, strides, typestr, descr: None, data: pointer, readonly, version, mask: None, stream };
        let extent = descriptor.validate().ok()?;
        Some(Parsed { descriptor, declared_version: declared, mask: None, extent })
    }
}

/// The quick read's result and the full reader's for the same value, as debug text (the
/// full reader's error as its message), for the test that they agree.
pub(crate) fn both_reads(value: &Bound<'_, PyAny>, iface: Interface) -> PyResult<(Option<String>, String)> {
    let quick = quick(value, iface).map(|p| format!("{p:?}"));
    let full = match full(value, iface, Source::Argument) {
        Ok(p) => format!("{p:?}"),
        Err(e) => format!("error: {e}"),
    };
    Ok((quick, full))
}

/// An exact int that fits in 64 bits, read without running code or setting an exception.
///
/// # Safety
///
/// `value` is a live object.
#[inline]
pub(crate) unsafe fn quick_int(value: *mut ffi::PyObject) -> Option<i64> {
    // SAFETY: as the caller promises; an exact int runs no code and can only overflow,
    // which sets no exception.
    unsafe {
        if ffi::Py_TYPE(value) != std::ptr::addr_of_mut!(ffi::PyLong_Type) {
            return None;
        }
        let mut overflow = 0;
        let n = ffi::PyLong_AsLongLongAndOverflow(value, &mut overflow);
        (overflow == 0).then_some(n)
    }
}

/// An exact tuple of at most [`INLINE_DIMS`] exact ints, each converted by `convert`.
///
/// # Safety
///
/// `value` is a live object.
unsafe fn quick_ints<T: Copy + Default>(
    value: *mut ffi::PyObject,
    convert: impl Fn(i64) -> Option<T>,
) -> Option<DimVec<T>> {
    // SAFETY: as the caller promises; items below a tuple's size are live and borrowed.
    unsafe {
        if ffi::Py_TYPE(value) != std::ptr::addr_of_mut!(ffi::PyTuple_Type) {
            return None;
        }
        // More dimensions than a DimVec holds inline are left to the full reader.
        let n = usize::try_from(ffi::PyTuple_Size(value)).ok().filter(|&n| n <= INLINE_DIMS)?;
        let mut items = [T::default(); INLINE_DIMS];
        for (i, slot) in (0..).zip(&mut items[..n]) {
            *slot = convert(quick_int(ffi::PyTuple_GetItem(value, i))?)?;
        }
        Some(DimVec::from_prefix(items, n))
    }
}

/// The UTF-8 text of an exact str, borrowed from the str (which caches it); `None`, with
/// no exception left set, for text that has no UTF-8 form (a lone surrogate).
///
/// # Safety
///
/// `value` is a live object, and the text is used while it lives.
#[inline]
unsafe fn quick_text<'a>(value: *mut ffi::PyObject) -> Option<&'a [u8]> {
    // SAFETY: as the caller promises; a str's UTF-8 form lives as long as the str.
    unsafe {
        if ffi::Py_TYPE(value) != std::ptr::addr_of_mut!(ffi::PyUnicode_Type) {
            return None;
        }
        let mut len = 0;
        let text = ffi::PyUnicode_AsUTF8AndSize(value, &mut len);
        if text.is_null() {
            // An encoding error (or no memory), raised by CPython itself: the full reader
            // meets it again and reports it.
            ffi::PyErr_Clear();
            return None;
        }
        Some(std::slice::from_raw_parts(text.cast::<u8>(), usize::try_from(len).ok()?))
    }
}

/// A typestr given as an exact str: its text and its parse.
///
/// # Safety
///
/// As for [`quick_text`].
#[inline]
unsafe fn quick_typestr<'a>(value: *mut ffi::PyObject) -> Option<(&'a [u8], TypeStr)> {
    // SAFETY: as the caller promises; CPython's UTF-8 form of a str is valid UTF-8.
    let (text, typestr) = unsafe {
        let text = quick_text(value)?;
        (text, std::str::from_utf8_unchecked(text))
    };
    Some((text, TypeStr::parse(typestr).ok()?))
}

/// `Some` when `descr` is the plain `[('', typestr)]` of this very typestr text (which
/// the strict read drops as restating the typestr); `None` for anything else.
///
/// # Safety
///
/// `descr` is a live object.
unsafe fn quick_plain_descr(descr: *mut ffi::PyObject, typestr: &[u8]) -> Option<()> {
    // SAFETY: as the caller promises; items below a list's or tuple's size are live and
    // borrowed, and nothing here runs Python code that could change the list.
    unsafe {
        if ffi::Py_TYPE(descr) != std::ptr::addr_of_mut!(ffi::PyList_Type) || ffi::PyList_Size(descr) != 1 {
            return None;
        }
        let entry = ffi::PyList_GetItem(descr, 0);
        if ffi::Py_TYPE(entry) != std::ptr::addr_of_mut!(ffi::PyTuple_Type) || ffi::PyTuple_Size(entry) != 2 {
            return None;
        }
        let name = quick_text(ffi::PyTuple_GetItem(entry, 0))?;
        let ty = quick_text(ffi::PyTuple_GetItem(entry, 1))?;
        (name.is_empty() && ty == typestr).then_some(())
    }
}

/// Every problem of an interface value (or of the exception reading it raised), as
/// messages; only exceptions that [must propagate](must_propagate) are raised. Findings
/// about the host interface start with `__array_interface__: `, so that they say which
/// interface was read.
pub(crate) fn findings(
    py: Python<'_>,
    value: PyResult<Bound<'_, PyAny>>,
    iface: Interface,
    source: Source,
) -> PyResult<Vec<String>> {
    let mut out = Vec::new();
    // Begun outside any other read, this read's masks alone can reach cai's nesting limit.
    let alone = Nesting::depth() == 0;
    let _nesting = Nesting::enter(iface.attribute())?;
    match value {
        Ok(value) => {
            collect_value(&value, iface, source, &mut out, alone)?;
            if iface == Interface::Host {
                // Findings about the attribute itself (not a dict, an unknown key) name it.
                let label = |f: String| {
                    if f.starts_with(iface.attribute()) {
                        f
                    } else {
                        format!("{}: {f}", iface.attribute())
                    }
                };
                out = out.into_iter().map(label).collect();
            }
        }
        Err(e) => out.push(format!("{}: reading the attribute raised {}", iface.attribute(), exception_text(py, e)?)),
    }
    Ok(out)
}

/// `TypeName: message` of an exception raised by a producer, or the exception itself when
/// it [must propagate](must_propagate).
pub(crate) fn exception_text(py: Python<'_>, e: PyErr) -> PyResult<String> {
    if must_propagate(py, &e) {
        return Err(e);
    }
    // The producer's exception, quoted by its start as values are (its text may be 10 MB).
    let name = cai_core::shortened(crate::error::name_text(py, e.get_type(py).name(), "an exception")?);
    match e.value(py).str() {
        // An exception with no text is named alone.
        Ok(text) if text.is_empty().unwrap_or(false) => Ok(name),
        Ok(text) => Ok(format!("{name}: {}", cai_core::shortened(text.to_string_lossy().into_owned()))),
        Err(inner) if crate::shown::propagates(py, &inner) => Err(inner),
        Err(_) => Ok(name),
    }
}

/// The collections.abc.Mapping class, imported once; failures (under `RecursionError`,
/// say) are returned, never unwrapped.
fn mapping_class(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static MAPPING: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let class = crate::once::get_or_make(&MAPPING, py, || {
        Ok(py.import("collections.abc")?.getattr("Mapping")?.cast_into::<PyType>()?.unbind())
    })?;
    Ok(class.bind(py))
}

/// Whether `value` is a `collections.abc.Mapping`. An ordinary exception raised by the
/// check (which runs `value`'s `__class__`) means it is not; one that [must
/// propagate](must_propagate) does.
pub(crate) fn is_mapping(value: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = value.py();
    // The check runs the value's code, which may call cai again: a level of nesting.
    let _nesting = Nesting::enter("the class of a value checked for a mapping")?;
    match mapping_class(py).and_then(|m| value.is_instance(m)) {
        Ok(is) => Ok(is),
        Err(e) if must_propagate(py, &e) => Err(e),
        Err(_) => Ok(false),
    }
}

/// The `TypeError` of an interface attribute that is not a dict (a mapping of another type,
/// or any other value).
fn not_a_dict(value: &Bound<'_, PyAny>, iface: Interface) -> PyResult<Problem> {
    Ok(Problem::type_error(format!("{}: expected a dict, received {}", iface.attribute(), received(value)?)))
}

/// The value as a dict: itself, or a copy of another mapping. An argument that is neither
/// is named as `from_cuda_array_interface` names it.
fn as_dict<'py>(value: &Bound<'py, PyAny>, iface: Interface, source: Source) -> Result<Bound<'py, PyDict>, Failure> {
    if let Ok(d) = value.cast::<PyDict>() {
        return Ok(d.clone());
    }
    match copy_mapping(value, iface)? {
        Some(dict) => Ok(dict),
        None if source == Source::Argument => Err(Problem::type_error(format!(
            "desc: expected a {} dict (or another mapping), received {}",
            iface.attribute(),
            received(value)?
        ))
        .into()),
        None => Err(not_a_dict(value, iface)?.into()),
    }
}

/// A copy of `value` as a dict when it is a mapping (checked once), or `None` when it is
/// not one.
fn copy_mapping<'py>(value: &Bound<'py, PyAny>, iface: Interface) -> Result<Option<Bound<'py, PyDict>>, Failure> {
    let py = value.py();
    // Both steps run the producer's code (`__instancecheck__`, `__class__`, `keys`,
    // `__getitem__`): an ordinary exception there is a problem with the interface.
    let copy = || -> PyResult<Option<Bound<'py, PyDict>>> {
        if !value.is_instance(mapping_class(py)?)? {
            return Ok(None);
        }
        Ok(Some(PyDict::type_object(py).call1((value,))?.cast_into().map_err(PyErr::from)?))
    };
    match copy() {
        Ok(copied) => Ok(copied),
        Err(e) => Err(Problem::type_error(format!(
            "{}: reading {} as a mapping raised {}",
            iface.attribute(),
            received(value)?,
            exception_text(py, e)?
        ))
        .into()),
    }
}

/// The values of the keys the interface defines, as strong references taken in one pass
/// over the dict (no Python code runs during the pass, so the dict cannot change under
/// it; afterwards it may, and these references keep the values alive).
///
/// Keys are compared by identity with the interned key strings first (Python interns
/// identifier-like literals, so a producer's keys are those very objects), then by value.
struct Keys<'py> {
    values: [Option<Bound<'py, PyAny>>; 8],
    /// A key whose text two of the dict's keys have (the later value is kept).
    repeated: Option<&'static str>,
}

/// Indices into [`KEYS`] and [`Keys`].
const SHAPE: usize = 0;
const TYPESTR: usize = 1;
const DESCR: usize = 2;
const DATA: usize = 3;
const VERSION: usize = 4;
const STRIDES: usize = 5;
const MASK: usize = 6;
const STREAM: usize = 7;

/// [`KEYS`] as interned Python strings, made once.
fn interned_keys(py: Python<'_>) -> &[Py<PyString>; 8] {
    static NAMES: PyOnceLock<[Py<PyString>; 8]> = PyOnceLock::new();
    NAMES.get_or_init(py, || KEYS.map(|k| PyString::intern(py, k).unbind()))
}

impl<'py> Keys<'py> {
    fn gather(dict: &Bound<'py, PyDict>) -> Keys<'py> {
        let py = dict.py();
        let names = interned_keys(py);
        let mut keys = Keys { values: Default::default(), repeated: None };
        let (mut pos, mut key, mut value): (ffi::Py_ssize_t, *mut ffi::PyObject, *mut ffi::PyObject) =
            (0, std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: `dict` is a live dict the caller holds; PyDict_Next hands out borrowed,
        // non-null references, valid while the dict is unchanged, and nothing in this loop
        // runs Python code (the comparisons read string data; `from_borrowed_ptr` only
        // increments a reference count).
        while unsafe { ffi::PyDict_Next(dict.as_ptr(), &mut pos, &mut key, &mut value) } != 0 {
            let index = names.iter().position(|n| key == n.as_ptr()).or_else(|| {
                // SAFETY: as above.
                let k = unsafe { Borrowed::from_ptr(py, key) };
                let s = k.cast::<PyString>().ok()?;
                let text = s.to_str().ok()?;
                KEYS.iter().position(|t| *t == text)
            });
            if let Some(i) = index {
                // Two keys of one text: a str subclass with its own hash or equality.
                if keys.values[i].is_some() {
                    keys.repeated.get_or_insert(KEYS[i]);
                }
                // SAFETY: as above; the new strong reference outlives any later change.
                keys.values[i] = Some(unsafe { Bound::from_borrowed_ptr(py, value) });
            }
        }
        keys
    }

    /// The problem of a key given twice (see [`Keys::repeated`]).
    fn repeated_problem(&self) -> Option<Problem> {
        self.repeated.map(|key| {
            Problem::value_error(format!(
                "{key}: the dict has two keys that read '{key}' (a str subclass with its own hash or equality \
                 among them); which value is meant is unclear"
            ))
        })
    }

    fn get(&self, index: usize) -> Option<&Bound<'py, PyAny>> {
        self.values[index].as_ref()
    }

    /// For a dict subclass, the problem of a key that the subclass's own lookups (`d[key]`
    /// for a key it holds, `d.get(key)` for every key, as CuPy and Numba read) give
    /// otherwise than the dict's items, which this reader and NumPy read: those consumers
    /// would read another array. A value looked up must be the item itself or an equal
    /// value of the same builtin type (no `__eq__` of the producer's decides). Runs the
    /// subclass's code; the items read are held already. `None` for a plain dict.
    fn lookup_problem(&self, dict: &Bound<'py, PyDict>) -> Result<Option<Problem>, Failure> {
        if dict.is_exact_instance_of::<PyDict>() {
            return Ok(None);
        }
        let py = dict.py();
        let names = interned_keys(py);
        let none = py.None().into_bound(py);
        for (stored, (name, key)) in self.values.iter().zip(names.iter().zip(KEYS)) {
            let name = name.bind(py);
            let differs = |lookup: String, outcome: String| -> Result<Option<Problem>, Failure> {
                let holds = match stored {
                    Some(value) => received(value)?,
                    None => format!("no '{key}'"),
                };
                Ok(Some(Problem::value_error(format!(
                    "{key}: the interface dict, a {}, holds {holds} but {lookup} {outcome}; consumers that look \
                     keys up and those that read the dict's items would read different arrays",
                    crate::error::type_name(dict.as_any())?,
                ))))
            };
            let lookups = [
                (format!("d['{key}']"), stored.as_ref().map(|_| dict.as_any().get_item(name))),
                (format!("d.get('{key}')"), Some(dict.call_method1(intern!(py, "get"), (name,)))),
            ];
            for (lookup, result) in lookups {
                let Some(result) = result else { continue };
                let given = match result {
                    Ok(given) => given,
                    Err(e) => return differs(lookup, format!("raised {}", exception_text(py, e)?)),
                };
                let mut parts = COMPARED_ITEMS;
                match same_plain_value(&given, stored.as_ref().unwrap_or(&none), 8, &mut parts) {
                    Some(true) => {}
                    Some(false) => return differs(lookup, format!("gives {}", received(&given)?)),
                    None => {
                        return differs(
                            lookup,
                            format!(
                                "gives a value that is not the item itself and has more than {COMPARED_ITEMS} parts"
                            ),
                        )
                    }
                }
            }
        }
        Ok(None)
    }
}

/// The most parts of two values [`same_plain_value`] compares, a pair of values that are
/// not the same object, a pair of items of two tuples or lists, and 64 bytes of an int or
/// str each counting one (a copy of a descr of 65,536 fields takes about 400,000): tuples
/// that share their items are small in memory and vast when walked (seven levels of 100
/// references to the level below are 100**7 leaves), and so are long strs that many items
/// share.
const COMPARED_ITEMS: usize = 1 << 20;

/// Whether `a` is `b`, or a value of the same builtin type (int, float, str, or a tuple or
/// list of such, `depth` levels deep) equal to it: compared without running any code of
/// the producer's (an `__eq__` of its own could call any two values equal). `None` when
/// the comparison would take more than `parts` values.
fn same_plain_value<'py>(a: &Bound<'py, PyAny>, b: &Bound<'py, PyAny>, depth: u32, parts: &mut usize) -> Option<bool> {
    if a.is(b) {
        return Some(true);
    }
    *parts = parts.checked_sub(1)?;
    if depth == 0 || !a.get_type().is(b.get_type()) {
        return Some(false);
    }
    // The length and the items of an exact tuple or list (the items collected once the
    // lengths agree and the budget allows them).
    let length = |x: &Bound<'py, PyAny>| -> Option<usize> {
        match x.cast_exact::<PyTuple>() {
            Ok(t) => Some(t.len()),
            Err(_) => x.cast_exact::<PyList>().ok().map(|l| l.len()),
        }
    };
    let items = |x: &Bound<'py, PyAny>| -> Vec<Bound<'py, PyAny>> {
        match x.cast_exact::<PyTuple>() {
            Ok(t) => t.iter().collect(),
            Err(_) => x.cast_exact::<PyList>().map(|l| l.iter().collect()).unwrap_or_default(),
        }
    };
    if a.is_exact_instance_of::<PyInt>()
        || a.is_exact_instance_of::<PyString>()
        || a.is_exact_instance_of::<pyo3::types::PyFloat>()
    {
        // Builtin comparisons of exact builtin types: no code of the producer's runs,
        // `__sizeof__` included. Their cost grows with their size.
        let size =
            a.call_method0(intern!(a.py(), "__sizeof__")).and_then(|n| n.extract::<usize>()).unwrap_or(usize::MAX);
        *parts = parts.checked_sub(size / 64)?;
        return Some(a.eq(b).unwrap_or(false));
    }
    match (length(a), length(b)) {
        (Some(n), Some(m)) if n == m => {
            *parts = parts.checked_sub(n)?;
            let (x, y) = (items(a), items(b));
            for (p, q) in x.iter().zip(&y) {
                if !same_plain_value(p, q, depth - 1, parts)? {
                    return Some(false);
                }
            }
            Some(true)
        }
        _ => Some(false),
    }
}

/// The version whose rules apply: the declared one, or 3 for a newer dict; always 3 for
/// NumPy's interface (whose version numbers are its own).
pub(crate) fn rules_version(declared: u64, iface: Interface) -> u32 {
    match iface {
        Interface::Host => CURRENT_VERSION,
        Interface::Cuda => Descriptor::rules_version(declared),
    }
}

/// How many of a dict's unknown keys messages name; the others are counted.
const UNKNOWN_SHOWN: usize = 16;

/// The keys of a dict that no version of the interface defines: the first
/// [`UNKNOWN_SHOWN`] as they print, and how many more there are.
#[derive(Default)]
struct UnknownKeys {
    shown: Vec<String>,
    more: usize,
    /// NumPy's `offset` in a host dict: a key NumPy defines for buffer data only.
    offset: bool,
}

impl UnknownKeys {
    fn is_empty(&self) -> bool {
        self.shown.is_empty()
    }

    /// `'a', 'b'`, or `'a', 'b' and 3 more`.
    fn listed(&self) -> String {
        let names = self.shown.join(", ");
        if self.more == 0 {
            names
        } else {
            format!("{names} and {} more", self.more)
        }
    }
}

/// The unknown keys of `dict` (a snapshot of its keys).
fn unknown_keys(dict: &Bound<'_, PyDict>, iface: Interface) -> Result<UnknownKeys, Failure> {
    let known = iface.keys();
    let mut unknown = UnknownKeys::default();
    for key in dict.keys() {
        let is_known = key.cast::<PyString>().ok().and_then(|k| k.to_str().ok().map(str::to_owned));
        if is_known.as_deref().is_some_and(|k| known.contains(&k)) {
            continue;
        }
        if iface == Interface::Host && is_known.as_deref() == Some("offset") {
            unknown.offset = true;
            continue;
        }
        // NumPy's own key: a NumPy scalar's interface keeps the 0-d array made for the
        // read alive through it.
        if iface == Interface::Host && is_known.as_deref() == Some("__ref") {
            continue;
        }
        if unknown.shown.len() < UNKNOWN_SHOWN {
            unknown.shown.push(crate::shown::shown(&key)?);
        } else {
            unknown.more += 1;
        }
    }
    Ok(unknown)
}

/// The finding of NumPy's `offset` key, which NumPy applies to buffer data only.
const OFFSET_IGNORED: &str = "__array_interface__: key 'offset' applies to buffer data only, which cai does not read; \
                              with a (pointer, read-only) data tuple NumPy ignores it, and so does cai";

fn newer_version_problem(v: u64, unknown: &UnknownKeys) -> Problem {
    Problem::value_error(format!(
        "version: {v} is newer than the versions this reader knows (0 to 3) and the dict carries keys that version \
         3 does not define: {}",
        unknown.listed()
    ))
}

fn newer_version_notice(v: u64) -> String {
    format!(
        "version: {v} is newer than the versions this reader knows (0 to 3); every key is one that version 3 \
         defines, so the dict is read by version 3's rules"
    )
}

/// The strict read: the first problem is the result.
fn strict(dict: &Bound<'_, PyDict>, iface: Interface) -> Result<Parsed, Failure> {
    let py = dict.py();
    let keys = Keys::gather(dict);
    if let Some(problem) = keys.repeated_problem() {
        return Err(problem.into());
    }
    if let Some(problem) = keys.lookup_problem(dict)? {
        return Err(problem.into());
    }
    let declared = version(keys.get(VERSION))?;
    let rules = rules_version(declared, iface);
    if declared > u64::from(CURRENT_VERSION) && iface == Interface::Cuda {
        let unknown = unknown_keys(dict, iface)?;
        if !unknown.is_empty() {
            return Err(newer_version_problem(declared, &unknown).into());
        }
        // A warnings hook may run any code; the values are already held.
        let message = std::ffi::CString::new(newer_version_notice(declared)).unwrap_or_default();
        let category = PyRuntimeWarning::type_object(py);
        PyErr::warn(py, &category, &message, 1)?;
    }
    let shape = shape(keys.get(SHAPE))?;
    let typestr = typestr(keys.get(TYPESTR), iface)?;
    // Looked at just before the descr is read, with no Python code run in between.
    let default_spelling = match (keys.get(DESCR), keys.get(TYPESTR)) {
        (Some(d), Some(t)) => spelled_as_default(d, t),
        _ => false,
    };
    let descr = keys.get(DESCR).map(descr).transpose()?;
    if let (Interface::Cuda, Some(d)) = (iface, &descr) {
        no_object_fields(d)?;
    }
    let (data, readonly) = data(keys.get(DATA), iface)?;
    let strides = strides(keys.get(STRIDES))?;
    let (mask, mask_object) = match keys.get(MASK).filter(|m| !m.is_none()) {
        Some(m) => {
            let parsed = strict_mask(m, iface)?;
            (Some(Box::new(parsed.descriptor)), Some(m.clone().unbind()))
        }
        None => (None, None),
    };
    let stream = match (iface, keys.get(STREAM)) {
        (Interface::Cuda, Some(s)) => stream(s)?,
        _ => Stream::None,
    };
    let mut descriptor = Descriptor { shape, strides, typestr, descr, data, readonly, version: rules, mask, stream };
    let extent = descriptor.validate()?;
    simplify_descr(&mut descriptor, default_spelling);
    Ok(Parsed { descriptor, declared_version: declared, mask: mask_object, extent })
}

/// Whether `descr` is `[('', typestr)]` written with the typestr's own spelling: NumPy's
/// test of a descr that adds nothing to a raw-bytes typestr (it compares the strs). Runs
/// no Python code.
fn spelled_as_default(descr: &Bound<'_, PyAny>, typestr: &Bound<'_, PyAny>) -> bool {
    let text = |o: &Bound<'_, PyAny>| o.cast::<PyString>().ok().and_then(|s| s.to_str().ok().map(str::to_owned));
    let Some(entry) = descr.cast::<PyList>().ok().filter(|l| l.len() == 1).and_then(|l| l.get_item(0).ok()) else {
        return false;
    };
    let Some(pair) = entry.cast::<PyTuple>().ok().filter(|t| t.len() == 2) else { return false };
    let (Ok(name), Ok(ty)) = (pair.get_item(0), pair.get_item(1)) else { return false };
    text(&name).is_some_and(|n| n.is_empty()) && text(&ty).is_some_and(|t| Some(t) == text(typestr))
}

/// A `descr` that only restates the typestr is dropped; any other is a record's. For a
/// raw-bytes typestr that takes the same spelling (`default_spelling`); a one-field descr
/// of the same type spelled otherwise (`[('', '=V2')]` for `'|V2'`) is a record for
/// NumPy, and kept as one with an explicit shape `()`, which says so in Rust and in
/// exports.
fn simplify_descr(descriptor: &mut Descriptor, default_spelling: bool) {
    let typestr = descriptor.typestr;
    let Some(descr) = &mut descriptor.descr else { return };
    if typestr.kind() != Kind::Void || default_spelling {
        if descr.restates(&typestr) {
            descriptor.descr = None;
        }
        return;
    }
    if descr.restates(&typestr) {
        let field = &mut descr.fields[0];
        let base = std::mem::replace(&mut field.ty, FieldType::Scalar(typestr));
        field.ty = FieldType::SubArray { base: Box::new(base), shape: Vec::new() };
    }
}

fn strict_mask(mask: &Bound<'_, PyAny>, iface: Interface) -> Result<Parsed, Failure> {
    let py = mask.py();
    let Some(value) = attribute(mask, iface)? else {
        return Err(Problem::type_error(format!(
            "mask: expected None or an object exporting {}, received {}",
            iface.attribute(),
            received(mask)?
        ))
        .into());
    };
    let e = match parse(&value, iface, Source::Attribute) {
        Ok(parsed) => return Ok(parsed),
        Err(e) if must_propagate(py, &e) => return Err(Failure::raised(e)),
        Err(e) => e,
    };
    let is_type_error = e.is_instance_of::<pyo3::exceptions::PyTypeError>(py);
    let text = match e.value(py).str() {
        Ok(text) => text.to_string_lossy().into_owned(),
        Err(inner) if crate::shown::propagates(py, &inner) => return Err(Failure::raised(inner)),
        Err(_) => crate::error::name_text(py, e.get_type(py).name(), "an exception")?,
    };
    let message = format!("mask: {text}");
    Err(if is_type_error { Problem::type_error(message) } else { Problem::value_error(message) }.into())
}

/// Notes a key's problem and goes on; an exception that must propagate stops the read.
fn note<T>(out: &mut Vec<String>, result: Result<T, Failure>) -> PyResult<Option<T>> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(Failure(why)) => match *why {
            Why::Problem(p) => {
                out.push(p.message);
                Ok(None)
            }
            Why::Raised(e) => Err(e),
        },
    }
}

/// The findings of an interface value. An attribute that is not a dict is noted as such,
/// and when it is another mapping, its items are read as those of a dict given to cai.
fn collect_value(
    value: &Bound<'_, PyAny>,
    iface: Interface,
    source: Source,
    out: &mut Vec<String>,
    alone: bool,
) -> PyResult<()> {
    let dict = match source {
        Source::Attribute if !value.is_instance_of::<PyDict>() => {
            out.push(not_a_dict(value, iface)?.message);
            note(out, copy_mapping(value, iface))?.flatten()
        }
        _ => note(out, as_dict(value, iface, source))?,
    };
    match dict {
        Some(dict) => collect(&dict, iface, out, alone),
        None => Ok(()),
    }
}

/// The collecting read: every problem is noted. `alone`: the read began outside any other
/// (see [`collect_mask`]).
fn collect(dict: &Bound<'_, PyDict>, iface: Interface, out: &mut Vec<String>, alone: bool) -> PyResult<()> {
    let keys = Keys::gather(dict);
    out.extend(keys.repeated_problem().map(|p| p.message));
    if let Some(problem) = note(out, keys.lookup_problem(dict))?.flatten() {
        out.push(problem.message);
    }
    let declared = note(out, version(keys.get(VERSION)))?;
    let rules = rules_version(declared.unwrap_or(u64::from(CURRENT_VERSION)), iface);
    let unknown = note(out, unknown_keys(dict, iface))?.unwrap_or_default();
    match declared {
        Some(v) if v > u64::from(CURRENT_VERSION) && iface == Interface::Cuda => {
            if unknown.is_empty() {
                out.push(newer_version_notice(v));
            } else {
                out.push(newer_version_problem(v, &unknown).message);
            }
        }
        _ => {
            // Keys of a later version (a stream in version 2) are judged by their own rules.
            for key in &unknown.shown {
                out.push(format!("{}: key {key} is not defined by any version of the interface", iface.attribute()));
            }
            if unknown.offset {
                out.push(OFFSET_IGNORED.to_owned());
            }
            if unknown.more > 0 {
                let keys = if unknown.more == 1 { "key" } else { "keys" };
                out.push(format!(
                    "{}: and {} more {keys} that no version of the interface defines",
                    iface.attribute(),
                    unknown.more
                ));
            }
        }
    }
    let shape = note(out, shape(keys.get(SHAPE)))?;
    let typestr = note(out, typestr(keys.get(TYPESTR), iface))?;
    let descr = note(out, keys.get(DESCR).map(descr).transpose())?;
    if let (Interface::Cuda, Some(Some(d))) = (iface, &descr) {
        note(out, no_object_fields(d))?;
    }
    let data = note(out, data(keys.get(DATA), iface))?;
    let strides = note(out, strides(keys.get(STRIDES)))?;
    let mask = match keys.get(MASK).filter(|m| !m.is_none()) {
        Some(m) => collect_mask(m, iface, out, alone)?.map(|d| Some(Box::new(d))),
        None => Some(None),
    };
    let stream = match (iface, keys.get(STREAM)) {
        (Interface::Cuda, Some(s)) => note(out, stream(s))?,
        _ => Some(Stream::None),
    };
    // A mask with problems of its own (noted) leaves the array's other rules to check.
    let mask_failed = mask.is_none();
    let (Some(shape), Some(typestr), Some(descr), Some((data, readonly)), Some(strides), Some(stream)) =
        (shape, typestr, descr, data, strides, stream)
    else {
        // No descriptor to check: the rules that need only the version and a key's
        // presence still are.
        if declared.is_some() {
            // In the rules' order: the mask's, then the stream's.
            if keys.get(MASK).is_some_and(|m| !m.is_none()) {
                out.extend(Descriptor::check_mask_version(rules).err().map(|e| e.to_string()));
            }
            if let Some(stream) = stream {
                out.extend(Descriptor::check_stream_version(rules, stream).err().map(|e| e.to_string()));
            }
        }
        return Ok(());
    };
    // Without a version, the rules of every version are checked; those of some versions
    // only (a mask or a stream allowed, pointer 0 for an empty array) are not.
    let mask = mask.flatten();
    let descriptor = Descriptor { shape, strides, typestr, descr, data, readonly, version: rules, mask, stream };
    let producer = iface == Interface::Cuda && declared.is_some();
    let mut problems = descriptor.problems(producer);
    if let (true, Some(_), Err(e)) = (mask_failed, declared, Descriptor::check_mask_version(rules)) {
        // Where the rules would have said it of a mask read: before the stream's rule.
        let at = problems.iter().position(|e| matches!(e, Error::StreamVersion { .. })).unwrap_or(problems.len());
        problems.insert(at, e);
    }
    out.extend(problems.iter().map(ToString::to_string));
    Ok(())
}

/// The finding for a chain of masks longer than cai reads (a mask that is its own array,
/// or one whose masks never end). Noted once, by the outermost mask, whose `mask: ` prefix
/// it already has.
const MASKS_TOO_DEEP: &str = "mask: masks nest deeper than cai reads (64 nested interfaces): a mask that is its own \
                              array, or a chain of masks that does not end";
// The message states the limit, which a `const` str cannot format: kept equal here.
const _: () = assert!(MAX_NESTING == 64, "MASKS_TOO_DEEP states MAX_NESTING");

/// The mask's descriptor when it has no problem; its problems noted with a `mask: ` prefix.
///
/// cai's limit on nested reads, reached by a read that began outside any other (`alone`),
/// was reached by the masks themselves: a problem of the object, noted. Reached inside
/// other reads (the producer's code called cai), it is the `RecursionError` of a recursion.
fn collect_mask(
    mask: &Bound<'_, PyAny>,
    iface: Interface,
    out: &mut Vec<String>,
    alone: bool,
) -> PyResult<Option<Descriptor>> {
    if Nesting::depth() >= MAX_NESTING {
        if !alone {
            return Err(Nesting::too_deep(iface.attribute()));
        }
        out.push(MASKS_TOO_DEEP.to_owned());
        return Ok(None);
    }
    let value = match attribute(mask, iface) {
        Ok(Some(v)) => v,
        Ok(None) => {
            out.push(format!(
                "mask: expected None or an object exporting {}, received {}",
                iface.attribute(),
                received(mask)?
            ));
            return Ok(None);
        }
        Err(e) => {
            out.push(format!("mask: reading {} raised {}", iface.attribute(), exception_text(mask.py(), e)?));
            return Ok(None);
        }
    };
    let mut inner = Vec::new();
    {
        let _nesting = Nesting::enter(iface.attribute())?;
        collect_value(&value, iface, Source::Attribute, &mut inner, alone)?;
    }
    if !inner.is_empty() {
        out.extend(inner.into_iter().map(|m| if m == MASKS_TOO_DEEP { m } else { format!("mask: {m}") }));
        return Ok(None);
    }
    // No problem was found, so the strict read succeeds (and says why if it does not).
    match parse(&value, iface, Source::Attribute) {
        Ok(parsed) => Ok(Some(parsed.descriptor)),
        Err(e) => {
            out.push(format!("mask: {}", exception_text(mask.py(), e)?));
            Ok(None)
        }
    }
}

fn missing(key: &'static str) -> Failure {
    Error::MissingKey { key }.into()
}

fn wrong_type(key: &'static str, expected: &'static str, value: &Bound<'_, PyAny>) -> Failure {
    match received(value) {
        Ok(received) => Error::WrongType { key, expected, received }.into(),
        Err(e) => Failure::raised(e),
    }
}

/// A Python integer (or an object with `__index__`, such as NumPy's integers), not a bool.
/// Exact ints are read without running any Python code.
fn integer(value: &Bound<'_, PyAny>, key: &'static str, expected: &'static str) -> Result<i128, Failure> {
    let too_big = |index: Option<&Bound<'_, PyInt>>| -> Result<i128, Failure> {
        let shown = received_int(value, index)?;
        Err(Problem::value_error(format!("{key}: {shown} does not fit in 64 bits")).into())
    };
    if let Ok(int) = value.cast_exact::<PyInt>() {
        if let Ok(v) = int.extract::<i64>() {
            return Ok(i128::from(v));
        }
        return match int.extract::<u64>() {
            Ok(v) => Ok(i128::from(v)),
            Err(_) => too_big(None),
        };
    }
    // `__index__` runs the producer's code, once; `value` is held, whatever it does.
    match int_like::<i64>(value).map_err(Failure::raised)? {
        IntLike::Value(v) => Ok(i128::from(v)),
        IntLike::OutOfRange(Some(index)) => match index.extract::<u64>() {
            Ok(v) => Ok(i128::from(v)),
            Err(_) => too_big(Some(&index)),
        },
        IntLike::OutOfRange(None) => too_big(None),
        // What the producer's `__index__` raised, if it has one, says more than the type.
        IntLike::NotInt(failure) => {
            Err(Error::WrongType { key, expected, received: received_not_int(value, failure)? }.into())
        }
    }
}

fn version(value: Option<&Bound<'_, PyAny>>) -> Result<u64, Failure> {
    let value = value.ok_or_else(|| missing("version"))?;
    let v = integer(value, "version", "an int")?;
    u64::try_from(v).map_err(|_| Problem::value_error(format!("version: {v} is negative")).into())
}

/// The ints of a tuple, each converted by `convert` (which names the problem with a value).
/// The tuple is held and its items cannot change, whatever `__index__` does.
fn int_tuple<T: Copy + Default>(
    value: &Bound<'_, PyAny>,
    key: &'static str,
    expected: &'static str,
    convert: impl Fn(i128) -> Option<T>,
    out_of_range: impl Fn(i128) -> Result<Failure, PyErr>,
) -> Result<DimVec<T>, Failure> {
    let Ok(t) = value.cast::<PyTuple>() else { return Err(wrong_type(key, expected, value)) };
    let mut out = DimVec::new();
    for item in t.iter_borrowed() {
        let n = integer(&item, key, expected)?;
        match convert(n) {
            Some(v) => out.push(v),
            None => return Err(out_of_range(n)?),
        }
    }
    Ok(out)
}

fn shape(value: Option<&Bound<'_, PyAny>>) -> Result<DimVec<usize>, Failure> {
    const EXPECTED: &str = "a tuple of non-negative ints";
    let value = value.ok_or_else(|| missing("shape"))?;
    int_tuple(
        value,
        "shape",
        EXPECTED,
        |n| usize::try_from(n).ok(),
        |n| {
            let what = if n < 0 { "is negative" } else { "exceeds the address space" };
            Ok(Problem::value_error(format!("shape: {} has a dimension that {what}: {n}", received(value)?)).into())
        },
    )
}

fn strides(value: Option<&Bound<'_, PyAny>>) -> Result<Option<DimVec<isize>>, Failure> {
    match value {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => int_tuple(
            v,
            "strides",
            "None or a tuple of ints",
            |n| isize::try_from(n).ok(),
            |n| {
                let message = format!("strides: {} has a stride outside the address space: {n}", received(v)?);
                Ok(Problem::value_error(message).into())
            },
        )
        .map(Some),
    }
}

/// Why the CUDA interface refuses Python object references (`'|O'`).
const OBJECTS_ON_DEVICE: &str = "Python object references, which mean nothing in device memory";

/// A `descr` of the CUDA interface holds no field of Python object references (nested
/// records included).
fn no_object_fields(descr: &Descr) -> Result<(), Failure> {
    fn has_objects(d: &Descr) -> bool {
        d.fields.iter().any(|f| match f.flattened().0 {
            FieldType::Scalar(t) => t.kind() == Kind::Object,
            FieldType::Record(r) => has_objects(r),
            // `flattened` unwraps sub-array types.
            FieldType::SubArray { .. } => false,
        })
    }
    if !has_objects(descr) {
        return Ok(());
    }
    let shown = cai_core::shortened(descr.to_string());
    Err(Problem::value_error(format!("descr: {shown} has a field of {OBJECTS_ON_DEVICE} ('|O')")).into())
}

/// The typestr; on the CUDA interface, not one of Python object references.
fn typestr(value: Option<&Bound<'_, PyAny>>, iface: Interface) -> Result<TypeStr, Failure> {
    const EXPECTED: &str = "a str such as '<f4'";
    let value = value.ok_or_else(|| missing("typestr"))?;
    let Ok(s) = value.cast::<PyString>() else { return Err(wrong_type("typestr", EXPECTED, value)) };
    match s.to_str() {
        Ok(text) => {
            let typestr = TypeStr::parse(text)?;
            if iface == Interface::Cuda && typestr.kind() == Kind::Object {
                let text = cai_core::quoted(text);
                return Err(Problem::value_error(format!("typestr: {text} holds {OBJECTS_ON_DEVICE}")).into());
            }
            Ok(typestr)
        }
        // Shown as Python shows it (`'\udc80'`), not with the surrogate replaced.
        Err(_) => Err(Problem::value_error(format!(
            "typestr: {} is malformed: it is not valid Unicode text (a lone surrogate)",
            crate::shown::shown(value)?
        ))
        .into()),
    }
}

fn data(value: Option<&Bound<'_, PyAny>>, iface: Interface) -> Result<(usize, bool), Failure> {
    const EXPECTED: &str = "a (pointer: int, readonly: bool) tuple";
    let value = value.ok_or_else(|| missing("data"))?;
    let pair = value.cast::<PyTuple>().ok().filter(|t| t.len() == 2);
    let Some(t) = pair else {
        let holds_bytes = value.is_instance_of::<pyo3::types::PyBytes>()
            || value.is_instance_of::<pyo3::types::PyByteArray>()
            || value.is_instance_of::<pyo3::types::PyMemoryView>();
        if iface == Interface::Host && holds_bytes {
            // NumPy's older form of its own interface (Pillow's images export it): an
            // object holding the bytes, which cai does not read.
            let received = received(value).map_err(Failure::raised)?;
            return Err(Problem::type_error(format!(
                "data: expected {EXPECTED}, received {received}; an object holding the bytes (an older form of \
                 NumPy's interface) is not read: pass numpy.asarray(obj) instead"
            ))
            .into());
        }
        return Err(wrong_type("data", EXPECTED, value));
    };
    let (Ok(ptr), Ok(readonly)) = (t.get_borrowed_item(0), t.get_borrowed_item(1)) else {
        return Err(wrong_type("data", EXPECTED, value));
    };
    let readonly = read_only_flag(&readonly)?;
    let ptr = integer(&ptr, "data", EXPECTED)?;
    let ptr = usize::try_from(ptr).map_err(|_| {
        let what = if ptr < 0 { "is negative" } else { "exceeds the address space" };
        Problem::value_error(format!("data: the pointer {what}: {ptr}"))
    })?;
    Ok((ptr, readonly))
}

/// The read-only flag of `data`: a bool, or NumPy's bool (read by its truth value, as the
/// keyword flags are).
fn read_only_flag(flag: &Bound<'_, PyAny>) -> Result<bool, Failure> {
    const EXPECTED: &str = "a bool as the read-only flag (item 1 of the (pointer: int, readonly: bool) tuple)";
    match flag_value(flag).map_err(Failure::raised)? {
        Some(b) => Ok(b),
        None => Err(wrong_type("data", EXPECTED, flag)),
    }
}

/// The value of a flag given as a bool or as NumPy's bool (recognized by its static type's
/// name, read by its truth value, which runs no Python code); `None` for anything else.
/// Only exceptions that [must propagate](must_propagate) are raised.
pub(crate) fn flag_value(v: &Bound<'_, PyAny>) -> PyResult<Option<bool>> {
    if let Ok(b) = v.cast_exact::<PyBool>() {
        return Ok(Some(b.is_true()));
    }
    let name = crate::error::static_type_name(v)?;
    if !matches!(name.as_deref(), Some("numpy.bool" | "numpy.bool_")) {
        return Ok(None);
    }
    match v.is_truthy() {
        Ok(b) => Ok(Some(b)),
        Err(e) if must_propagate(v.py(), &e) => Err(e),
        Err(_) => Ok(None),
    }
}

fn stream(value: &Bound<'_, PyAny>) -> Result<Stream, Failure> {
    if value.is_none() {
        return Ok(Stream::None);
    }
    let n = integer(value, "stream", "None or an int")?;
    let raw = usize::try_from(n).map_err(|_| {
        Problem::value_error(format!("stream: {n} is not a stream (streams are 1, 2 or a non-negative handle)"))
    })?;
    Ok(Stream::from_raw(Some(raw))?)
}

fn descr(value: &Bound<'_, PyAny>) -> Result<Descr, Failure> {
    let Ok(list) = value.cast::<PyList>() else {
        return Err(wrong_type("descr", "a list of (name, type[, shape]) tuples", value));
    };
    let mut budget = DescrBudget { entries: DESCR_ENTRIES, text: DESCR_TEXT };
    match descr_list(list, 0, &mut budget)? {
        Ok(descr) => Ok(descr),
        Err(reason) => Err(Error::Descr { value: crate::shown::shown(value)?, reason }.into()),
    }
}

/// How a message says that a str has no UTF-8 form.
const SURROGATE: &str = "is not valid Unicode text (a lone surrogate)";

/// The most entries and sub-array dimensions a descr may have, those of nested records
/// included, counted each time they are met: lists that share their sub-lists describe
/// records whose fields grow as the power of their depth (64 lists of 64 entries, six
/// deep, are 64**6 fields).
const DESCR_ENTRIES: usize = 1 << 16;

/// The most bytes of names and titles a descr may have, counted as [`DESCR_ENTRIES`]: a
/// long name shared by many entries is one object in memory and a copy in each field.
const DESCR_TEXT: usize = 1 << 24;

/// What is left of [`DESCR_ENTRIES`] and [`DESCR_TEXT`] in one read.
struct DescrBudget {
    entries: usize,
    text: usize,
}

impl DescrBudget {
    /// Takes `n` entries or dimensions, or says why the descr is refused.
    fn entries(&mut self, n: usize) -> Result<(), String> {
        self.entries = self.entries.checked_sub(n).ok_or_else(|| {
            format!(
                "it has more than {DESCR_ENTRIES} entries and sub-array dimensions (those of nested records counted \
                 each time they appear)"
            )
        })?;
        Ok(())
    }

    /// The text of a name or title, its bytes taken from the budget; `None` for an object
    /// that is not a str with a UTF-8 form.
    fn text(&mut self, o: &Bound<'_, PyAny>) -> Option<Result<String, String>> {
        let text = o.cast::<PyString>().ok()?.to_str().ok()?;
        Some(match self.text.checked_sub(text.len()) {
            Some(left) => {
                self.text = left;
                Ok(text.to_owned())
            }
            None => Err(format!("its names and titles take more than {DESCR_TEXT} bytes")),
        })
    }
}

/// The record a descr list describes, or why it is invalid; exceptions that must
/// propagate are the outer error. Lists are read item by item with strong references
/// (a `__repr__` called for a message may change the list).
fn descr_list(list: &Bound<'_, PyList>, depth: u32, budget: &mut DescrBudget) -> PyResult<Result<Descr, String>> {
    // A str that has no UTF-8 form: said so, rather than "not a str".
    let surrogate = |o: &Bound<'_, PyAny>| o.cast::<PyString>().is_ok_and(|s| s.to_str().is_err());
    let mut fields = Vec::with_capacity(list.len().min(budget.entries));
    for (i, entry) in list.iter().enumerate() {
        if let Err(reason) = budget.entries(1) {
            return Ok(Err(reason));
        }
        let Some(t) = entry.cast::<PyTuple>().ok() else {
            return Ok(Err(format!("entry {i} is {}, not a (name, type[, shape]) tuple", received(&entry)?)));
        };
        if !(2..=3).contains(&t.len()) {
            return Ok(Err(format!("entry {i} has {} items, not 2 or 3", t.len())));
        }
        let items: Vec<Bound<'_, PyAny>> = t.iter().collect();
        let name_obj = &items[0];
        let (title, name) = if let Some(name) = budget.text(name_obj) {
            match name {
                Ok(name) => (None, name),
                Err(reason) => return Ok(Err(reason)),
            }
        } else {
            let pair = name_obj.cast::<PyTuple>().ok().filter(|p| p.len() == 2);
            let parts = pair.and_then(|p| {
                let title = budget.text(&p.get_item(0).ok()?)?;
                Some((title, budget.text(&p.get_item(1).ok()?)?))
            });
            if let Some((Err(reason), _) | (_, Err(reason))) = parts {
                return Ok(Err(reason));
            }
            let parts = parts.and_then(|(title, name)| Some((title.ok()?, name.ok()?)));
            let Some((title, name)) = parts else {
                let in_pair = pair.is_some_and(|p| p.iter().any(|part| surrogate(&part)));
                if surrogate(name_obj) || in_pair {
                    return Ok(Err(format!("entry {i}: the name {} {SURROGATE}", received(name_obj)?)));
                }
                return Ok(Err(format!(
                    "entry {i}: the name {} is neither a str nor a (title, name) pair",
                    received(name_obj)?
                )));
            };
            (Some(title), name)
        };
        let field = cai_core::quoted(&name);
        let ty = match field_type(&items[1], &field, depth, budget)? {
            Ok(ty) => ty,
            Err(reason) => return Ok(Err(reason)),
        };
        let (ty, shape) = match items.get(2) {
            Some(s) => match sub_array_shape(s, &field, budget)? {
                // An explicit `()`: the same layout as none, but NumPy reads a one-entry
                // `[('', t, ())]` as a record, never as a restatement of typestr `t`.
                Ok(shape) if shape.is_empty() => (FieldType::SubArray { base: Box::new(ty), shape }, Vec::new()),
                Ok(shape) => (ty, shape),
                Err(reason) => return Ok(Err(reason)),
            },
            None => (ty, Vec::new()),
        };
        fields.push(Field { name, title, ty, shape });
    }
    Ok(Ok(Descr::new(fields)))
}

/// The type of a field (`field` names it in messages, quoted): a typestr, a nested descr
/// list, or a sub-array type `(type, shape)` (NumPy's form for a field whose type is
/// itself a sub-array).
fn field_type(
    ty: &Bound<'_, PyAny>,
    field: &str,
    depth: u32,
    budget: &mut DescrBudget,
) -> PyResult<Result<FieldType, String>> {
    if let Ok(text) = ty.cast::<PyString>() {
        return Ok(match text.to_str() {
            Ok(text) => TypeStr::parse(text).map(FieldType::Scalar).map_err(|e| format!("field {field}: {e}")),
            Err(_) => Err(format!("field {field}: the type {} {SURROGATE}", received(ty)?)),
        });
    }
    let (nested, pair) = (ty.cast::<PyList>().ok(), ty.cast::<PyTuple>().ok().filter(|t| t.len() == 2));
    if (nested.is_some() || pair.is_some()) && depth >= 32 {
        return Ok(Err("records nest deeper than 32 levels".to_owned()));
    }
    if let Some(nested) = nested {
        return Ok(descr_list(nested, depth + 1, budget)?.map(FieldType::Record));
    }
    if let Some(pair) = pair {
        // Held: reading the shape may run the producer's code (`__index__`).
        let (base, shape) = (pair.get_item(0)?, pair.get_item(1)?);
        let base = match field_type(&base, field, depth + 1, budget)? {
            Ok(base) => base,
            Err(reason) => return Ok(Err(reason)),
        };
        let shape = sub_array_shape(&shape, field, budget)?;
        return Ok(shape.map(|shape| FieldType::SubArray { base: Box::new(base), shape }));
    }
    Ok(Err(format!("field {field}: the type {} is neither a typestr, a list nor a (type, shape) pair", received(ty)?)))
}

/// The sub-array shape of a field (`field` names it in messages, quoted): a tuple of at
/// most 64 ints from 0 to `2**31 - 1` (NumPy's limits), its dimensions taken from the
/// budget.
fn sub_array_shape(
    s: &Bound<'_, PyAny>,
    field: &str,
    budget: &mut DescrBudget,
) -> PyResult<Result<Vec<usize>, String>> {
    let bad = || -> PyResult<String> {
        Ok(format!(
            "field {field}: the shape {} is not a tuple of ints from 0 to 2147483647 (NumPy's limits)",
            received(s)?
        ))
    };
    let Ok(st) = s.cast::<PyTuple>() else { return Ok(Err(bad()?)) };
    if st.len() > cai_core::MAX_DIMS {
        return Ok(Err(format!(
            "field {field}: the shape has {} dimensions, more than {} (NumPy's limit)",
            st.len(),
            cai_core::MAX_DIMS
        )));
    }
    if let Err(reason) = budget.entries(st.len()) {
        return Ok(Err(reason));
    }
    let mut shape = Vec::with_capacity(st.len());
    for d in st.iter() {
        // Ints and int-likes (NumPy's integers), as for the array's own shape; not bools.
        // `__index__` runs the producer's code: `d` and the tuple are held.
        let index = match int_like::<i64>(&d)? {
            IntLike::Value(n) => match usize::try_from(n).ok().filter(|&n| n <= cai_core::MAX_ITEMSIZE) {
                Some(n) => {
                    shape.push(n);
                    continue;
                }
                None => Some(n.into_pyobject(d.py())?),
            },
            IntLike::OutOfRange(index) => index,
            IntLike::NotInt(None) => return Ok(Err(bad()?)),
            IntLike::NotInt(failure) => return Ok(Err(format!("{}: {}", bad()?, received_not_int(&d, failure)?))),
        };
        // An int-like's text may not show the int its `__index__` gave.
        let shown = crate::shown::shown(&d)?;
        let gave = match crate::error::index_not_shown(&d, &shown, index.as_ref())? {
            Some(n) if n.by_index => format!(" (the dimension {shown} gave {} through its __index__)", n.int),
            Some(n) => format!(" (the dimension {shown} is {})", n.int),
            None => String::new(),
        };
        return Ok(Err(format!("{}{gave}", bad()?)));
    }
    Ok(Ok(shape))
}
