//! Typed host-array arguments for `#[pyfunction]`s, with safe slices (and `ndarray` views).

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

use cai_core::{Descriptor, Element, Extent};
use pyo3::prelude::*;
use pyo3::Borrowed;

use crate::dlpack::Memory;
use crate::error::{py_tuple, Problem};
use crate::extract::{read, shared_accessors, Access, Argument, Dimension, IxDyn, ReadOnly, ReadWrite};
use crate::holds::Lattice;

/// A host array argument of element type `T` and dimensionality `D`, taken from a NumPy
/// array, any object that exports NumPy's `__array_interface__`, a `cai.HostArray`, a
/// derived `#[cai_py::export(host)]` class, or a DLPack producer whose memory is on the
/// host (a JAX CPU array, a CPU torch tensor).
///
/// Extraction makes the same checks, with the same messages, as [`PyCudaArray`]'s: the
/// element type (the typestr must be `T`'s, in native byte order), the number of
/// dimensions, the strides stepped in whole elements, writability for [`ReadWrite`], and
/// no overlap between the arrays of one call where either is read-write. The argument
/// holds the Python object, so the memory stays valid for the call.
///
/// Read the elements with [`as_slice`](Self::as_slice) /
/// [`as_slice_mut`](Self::as_slice_mut) (C-contiguous arrays) or, with the `ndarray`
/// feature, `as_array` / `as_array_mut` (any strides). No unsafe code is needed.
///
/// ```no_run
/// use cai_py::{Ix2, PyHostArrayRo, PyHostArrayRw};
/// use pyo3::prelude::*;
///
/// /// out[i] = sum of row i of x.
/// #[pyfunction]
/// fn row_sums(x: PyHostArrayRo<'_, f32, Ix2>, mut out: PyHostArrayRw<'_, f32>) -> PyResult<()> {
///     let [_, cols] = x.dims();
///     let x = x.as_slice()?;
///     for (row, total) in x.chunks(cols.max(1)).zip(out.as_slice_mut()?) {
///         *total = row.iter().sum();
///     }
///     Ok(())
/// }
/// ```
///
/// Slices and views are tracked process-wide (across every module built on cai-py), as
/// rust-numpy tracks its borrows: while one call holds a slice of some bytes, a slice of
/// the same bytes for another call (made from a callback the first calls, from another
/// module, or on another thread once it releases the GIL) is a `BufferError` when either
/// may write; the argument gives its slice back when it is dropped. As with rust-numpy,
/// the guarantee is among Rust code: Python code that runs while the function holds a
/// slice may still write the same array, or free its memory where NumPy lets it
/// (`ndarray.__setstate__`, `ndarray.resize(..., refcheck=False)`), and a `#[pyclass]`'s
/// own fields are not seen (a method taking `&mut self` and an array of the object's own
/// memory holds both). An
/// argument leaked with `std::mem::forget` keeps its slices' bytes held for the rest of
/// the process.
///
/// [`PyCudaArray`]: crate::PyCudaArray
pub struct PyHostArray<'py, T: Element, D: Dimension = IxDyn, A: Access = ReadOnly> {
    argument: Argument<'py>,
    /// The entry of this argument's slices in [`slices`]: its id, and whether it is for
    /// writing.
    slice: Cell<Option<(u64, bool)>>,
    _marker: PhantomData<(T, D, A)>,
}

impl<T: Element, D: Dimension, A: Access> Drop for PyHostArray<'_, T, D, A> {
    fn drop(&mut self) {
        if let Some((id, _)) = self.slice.get() {
            slices::give_back(id);
        }
    }
}

/// The host memory that Rust code holds as slices or views, across calls, threads and
/// modules (one scope: any two conflict).
///
/// Every extension module built on cai-py links its own copy of this code, and a slice
/// taken by one module must be seen by the others: the registry's two operations are a
/// `#[repr(C)]` table, which every module exports as the symbol `cai_py_slices_v2`. On
/// Linux (glibc) every module uses the table of the first object the process loaded that
/// exports one, which it finds by walking the loader's list of objects
/// (`dl_iterate_phdr`), in the order they were loaded. That order only grows at its end,
/// and Python code cannot change it: re-opening a module under other flags
/// (`sys.setdlopenflags`) or another name moves nothing.
///
/// Any place Python code can reach could be split: a table published in `sys` was (`del
/// sys.<name>` before another module's first slice gave two `&mut` slices of the same
/// bytes), and so was one in the interpreter's state dict, which the collector hands to
/// Python code as soon as C code puts a container in it (CPython 3.13's `datetime` puts
/// its module there). Elsewhere (macOS, Windows, musl) the table is still published in
/// that dict, and Python code can split it there once the dict is reachable.
mod slices {
    use std::ffi::CStr;
    use std::ops::Range;
    use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

    use pyo3::exceptions::PyBufferError;
    use pyo3::{PyResult, Python};

    use crate::holds::{Holds, Lattice};

    /// Takes `start..end` (`exclusive`: for writing) in place of entry `previous` (0:
    /// none). Returns the entry's id (never 0), or 0 and the conflicting bytes in `other`.
    type Take =
        unsafe extern "C" fn(start: usize, end: usize, exclusive: bool, previous: u64, other: *mut [usize; 2]) -> u64;
    /// [`Take`] for the elements of a strided array, which lie on `lattice` (origin, step,
    /// item size: see [`Lattice`]) within `start..end`.
    type TakeStrided = unsafe extern "C" fn(usize, usize, *const [usize; 3], bool, u64, *mut [usize; 2]) -> u64;

    /// The registry's operations, as every module sees them. `layout` comes first and says
    /// what follows: a later layout only adds fields after these.
    #[repr(C)]
    struct Table {
        layout: u32,
        take: Take,
        give_back: extern "C" fn(id: u64),
        /// From layout 2.
        take_strided: TakeStrided,
    }

    const LAYOUT: u32 = 2;
    /// The oldest layout this module uses: with a layout 1 table (a module of an older
    /// cai-py loaded first), every slice holds all the bytes of its range.
    const OLDEST_LAYOUT: u32 = 1;
    /// The symbol every module exports its table under (and, where the table is published
    /// in the interpreter's state dict, the capsule's name and its key there).
    const NAME: &CStr = c"cai_py_slices_v2";

    static HELD: Mutex<Holds<()>> = Mutex::new(Holds::new());
    /// This module's table, exported so that other modules can find it.
    #[export_name = "cai_py_slices_v2"]
    static OWN: Table =
        Table { layout: LAYOUT, take: own_take, give_back: own_give_back, take_strided: own_take_strided };
    /// The operations of the table this module uses, chosen once.
    static CHOSEN: OnceLock<Chosen> = OnceLock::new();

    /// The functions of the chosen table that its layout has (copied out of it, so that no
    /// reference claims fields that an older layout lacks).
    #[derive(Clone, Copy)]
    struct Chosen {
        take: Take,
        give_back: extern "C" fn(u64),
        take_strided: Option<TakeStrided>,
    }

    fn held() -> MutexGuard<'static, Holds<()>> {
        // Nothing panics while it is locked: a poisoned lock holds a consistent list.
        HELD.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// # Safety
    ///
    /// `other` is valid for a write.
    unsafe extern "C" fn own_take(
        start: usize,
        end: usize,
        exclusive: bool,
        previous: u64,
        other: *mut [usize; 2],
    ) -> u64 {
        // SAFETY: as the caller promises.
        unsafe { take_held(start..end, None, exclusive, previous, other) }
    }

    /// # Safety
    ///
    /// `lattice` is valid for a read and `other` for a write.
    unsafe extern "C" fn own_take_strided(
        start: usize,
        end: usize,
        lattice: *const [usize; 3],
        exclusive: bool,
        previous: u64,
        other: *mut [usize; 2],
    ) -> u64 {
        // SAFETY: as the caller promises.
        unsafe {
            let [origin, step, item] = lattice.read();
            take_held(start..end, Some(Lattice { origin, step, item }), exclusive, previous, other)
        }
    }

    /// # Safety
    ///
    /// `other` is valid for a write.
    unsafe fn take_held(
        bytes: Range<usize>,
        lattice: Option<Lattice>,
        exclusive: bool,
        previous: u64,
        other: *mut [usize; 2],
    ) -> u64 {
        match held().take((), bytes, lattice, exclusive, (previous != 0).then_some(previous)) {
            Ok(id) => id,
            Err(clash) => {
                // SAFETY: as the caller promises.
                unsafe { other.write([clash.bytes.start, clash.bytes.end]) };
                0
            }
        }
    }

    extern "C" fn own_give_back(id: u64) {
        held().give_back(id);
    }

    /// The table every module uses; see the module's text. No Python code runs here, so
    /// the choice is made once, for good.
    fn table(py: Python<'_>) -> PyResult<Chosen> {
        match CHOSEN.get() {
            Some(&table) => Ok(table),
            None => choose(py),
        }
    }

    #[cold]
    fn choose(py: Python<'_>) -> PyResult<Chosen> {
        let found = find(py)?;
        // SAFETY: `found` points at a `Table` of some module built on cai-py, a static of a
        // module that stays loaded for the life of the process; its first field says which
        // fields follow, and is read before anything else; only the fields it has are read.
        let chosen = unsafe {
            let layout = std::ptr::addr_of!((*found).layout).read();
            if layout < OLDEST_LAYOUT {
                return Err(PyBufferError::new_err(format!(
                    "the process's slice table '{}' has layout {layout}, older than this module's oldest \
                     {OLDEST_LAYOUT}; slices cannot be checked against other modules'",
                    NAME.to_string_lossy()
                )));
            }
            Chosen {
                take: std::ptr::addr_of!((*found).take).read(),
                give_back: std::ptr::addr_of!((*found).give_back).read(),
                take_strided: (layout >= 2).then(|| std::ptr::addr_of!((*found).take_strided).read()),
            }
        };
        // The first choice stored wins (another thread may have chosen meanwhile; both
        // found the same table).
        Ok(*CHOSEN.get_or_init(|| chosen))
    }

    /// The table of the first object the process loaded (in the loader's own order) that
    /// exports one; see the module's text.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn find(_py: Python<'_>) -> PyResult<*const Table> {
        use std::ffi::{c_int, c_void, CString};

        /// A loaded object: its name (empty for the program) and the addresses of its
        /// segments.
        struct Object {
            name: CString,
            segments: Vec<Range<usize>>,
        }

        /// Called by `dl_iterate_phdr` for each loaded object, in load order.
        ///
        /// # Safety
        ///
        /// `info` is the loader's description of an object, valid for the call, and `data`
        /// the `Vec<Object>` below.
        unsafe extern "C" fn gather(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> c_int {
            // SAFETY: as the caller promises; the name is a C string and the program headers
            // an array of `dlpi_phnum`, both valid for the call and copied here.
            unsafe {
                let (info, objects) = (&*info, &mut *data.cast::<Vec<Object>>());
                let name =
                    if info.dlpi_name.is_null() { CString::default() } else { CStr::from_ptr(info.dlpi_name).into() };
                let headers = match info.dlpi_phdr.is_null() {
                    true => &[][..],
                    false => std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)),
                };
                let segments = headers
                    .iter()
                    .filter(|h| h.p_type == libc::PT_LOAD)
                    .filter_map(|h| {
                        let start = usize::try_from(info.dlpi_addr.wrapping_add(h.p_vaddr)).ok()?;
                        Some(start..start.checked_add(usize::try_from(h.p_memsz).ok()?)?)
                    })
                    .collect();
                objects.push(Object { name, segments });
            }
            0
        }

        let mut objects: Vec<Object> = Vec::new();
        // SAFETY: `gather` is called with the loader's descriptions and `objects`, which
        // outlives the call.
        unsafe { libc::dl_iterate_phdr(Some(gather), std::ptr::addr_of_mut!(objects).cast()) };
        // Objects are never unloaded here (Python keeps its extension modules, and a loaded
        // object exporting a table is one), and new ones come after these: the first object
        // with a table stays the first, whichever module looks and whenever.
        let found = objects.iter().find_map(|object| {
            // SAFETY: the loader's functions, given null or a C string and a handle they
            // returned. Opening a loaded object by the name the loader gave it (glibc matches
            // names, without reading the file) counts one more open, which `dlclose` undoes;
            // the vDSO and any object that cannot be opened again give null and are passed.
            let symbol = unsafe {
                let handle = match object.name.is_empty() {
                    true => libc::dlopen(std::ptr::null(), libc::RTLD_LAZY),
                    false => libc::dlopen(object.name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD),
                };
                if handle.is_null() {
                    return None;
                }
                let symbol = libc::dlsym(handle, NAME.as_ptr());
                libc::dlclose(handle);
                symbol
            };
            // A handle's search reaches other objects too (the program's, the global scope):
            // the symbol counts where it lies in this object.
            let address = symbol as usize;
            (!symbol.is_null() && object.segments.iter().any(|s| s.contains(&address)))
                .then_some(symbol.cast::<Table>().cast_const())
        });
        // SAFETY: clears the loader's message of a failed open above, which is no error.
        unsafe { libc::dlerror() };
        found.ok_or_else(|| {
            // This module's own table is exported unless cai-py is linked into a program
            // (one that embeds Python), whose symbols are not exported by default.
            PyBufferError::new_err(format!(
                "no loaded object exports the slice table '{0}', so slices cannot be checked against other \
                 modules': cai-py is linked into a program that does not export it (link the program with \
                 -Wl,--export-dynamic-symbol={0}, or -rdynamic)",
                NAME.to_string_lossy()
            ))
        })
    }

    /// The table published in the interpreter's state dict, or this module's, which it
    /// then publishes. No Python code runs here (the dict holds str keys; a capsule runs
    /// none).
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    fn find(py: Python<'_>) -> PyResult<*const Table> {
        use pyo3::exceptions::PyMemoryError;
        use pyo3::types::{PyAnyMethods, PyTypeMethods};
        use pyo3::{ffi, Bound, PyErr};

        let no_memory = || PyErr::take(py).unwrap_or_else(|| PyMemoryError::new_err("no memory for the slice table"));
        // SAFETY: the GIL is held (the callers hold an argument). The state dict is
        // borrowed from the interpreter, which outlives this call; the key is a new
        // reference, released below; `PyDict_GetItemWithError` returns a borrowed reference
        // or null (with an exception on failure).
        unsafe {
            let dict = ffi::PyInterpreterState_GetDict(ffi::PyInterpreterState_Get());
            if dict.is_null() {
                return Err(no_memory());
            }
            let key =
                Bound::from_owned_ptr_or_opt(py, ffi::PyUnicode_FromString(NAME.as_ptr())).ok_or_else(no_memory)?;
            let found = ffi::PyDict_GetItemWithError(dict, key.as_ptr());
            if !found.is_null() {
                if ffi::PyCapsule_IsValid(found, NAME.as_ptr()) != 1 {
                    // Held: naming its type may run code (a metaclass's `__name__`).
                    let found = Bound::<pyo3::PyAny>::from_borrowed_ptr(py, found);
                    return Err(PyBufferError::new_err(format!(
                        "the interpreter's slice table '{}' is a {}, not cai-py's capsule (put there by other C code); \
                         slices cannot be checked against other modules'",
                        NAME.to_string_lossy(),
                        found.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                    )));
                }
                Ok(ffi::PyCapsule_GetPointer(found, NAME.as_ptr()).cast::<Table>().cast_const())
            } else if ffi::PyErr_Occurred().is_null() {
                let own = std::ptr::addr_of!(OWN).cast_mut().cast::<std::ffi::c_void>();
                let capsule = Bound::from_owned_ptr_or_opt(py, ffi::PyCapsule_New(own, NAME.as_ptr(), None))
                    .ok_or_else(no_memory)?;
                if ffi::PyDict_SetItem(dict, key.as_ptr(), capsule.as_ptr()) != 0 {
                    return Err(no_memory());
                }
                Ok(std::ptr::addr_of!(OWN))
            } else {
                Err(PyErr::fetch(py))
            }
        }
    }

    /// Takes `bytes` for a slice or view (`exclusive`: for writing) whose elements lie on
    /// `lattice`, in place of `previous`, the same argument's own entry; the bytes of the
    /// slice it conflicts with otherwise.
    pub(super) fn take(
        py: Python<'_>,
        bytes: Range<usize>,
        lattice: Lattice,
        exclusive: bool,
        previous: Option<u64>,
    ) -> PyResult<Result<u64, Range<usize>>> {
        let table = table(py)?;
        let mut other = [0usize; 2];
        let (start, end, previous) = (bytes.start, bytes.end, previous.unwrap_or(0));
        // SAFETY: `other` is a valid place for the conflicting bytes, and the lattice for a
        // read.
        let id = unsafe {
            match table.take_strided {
                Some(take_strided) => {
                    let lattice = [lattice.origin, lattice.step, lattice.item];
                    take_strided(start, end, &lattice, exclusive, previous, &mut other)
                }
                // A layout 1 table: every byte of the range is held.
                None => (table.take)(start, end, exclusive, previous, &mut other),
            }
        };
        Ok(if id == 0 { Err(other[0]..other[1]) } else { Ok(id) })
    }

    /// Gives entry `id` back.
    pub(super) fn give_back(id: u64) {
        // An entry was taken, so the table was chosen.
        if let Some(table) = CHOSEN.get() {
            (table.give_back)(id);
        }
    }
}

/// A read-only host array argument.
pub type PyHostArrayRo<'py, T, D = IxDyn> = PyHostArray<'py, T, D, ReadOnly>;

/// A read-write host array argument.
pub type PyHostArrayRw<'py, T, D = IxDyn> = PyHostArray<'py, T, D, ReadWrite>;

impl<T: Element, D: Dimension, A: Access> fmt::Debug for PyHostArray<'_, T, D, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.argument.debug::<T, A>(f, "PyHostArray")
    }
}

impl<'a, 'py, T: Element, D: Dimension, A: Access> FromPyObject<'a, 'py> for PyHostArray<'py, T, D, A> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let object = obj.to_owned();
        // The interface first (NumPy's arrays give it), DLPack otherwise.
        let mut lifeline = None;
        let parsed = read::<T, D, A>(&object, Memory::Host, &mut lifeline)?;
        let argument = Argument::register(object, parsed, lifeline, A::WRITABLE)?;
        Ok(PyHostArray { argument, slice: Cell::new(None), _marker: PhantomData })
    }
}

impl<'py, T: Element, D: Dimension, A: Access> PyHostArray<'py, T, D, A> {
    shared_accessors!();

    /// The address of the element at index zero.
    pub fn address(&self) -> usize {
        self.argument.descriptor.data
    }

    /// The elements in C order, for a C-contiguous array; `ValueError` naming the array's
    /// shape and strides otherwise (`numpy.ascontiguousarray` makes one), or when the
    /// memory is not aligned for `T`.
    pub fn as_slice(&self) -> PyResult<&[T]> {
        let (data, len) = self.contiguous("as_slice", false)?;
        // SAFETY: validation checked that the `len` elements from `data` lie in the array's
        // memory, which the held object keeps alive for `&self`; `contiguous` checked that
        // they are consecutive, aligned and valid values of `T`; no `&mut` to them exists
        // in Rust (`hold` refuses a slice for writing of the same bytes, in any call).
        Ok(unsafe { std::slice::from_raw_parts(data.cast_const(), len) })
    }

    /// Checks what a slice needs: C order, alignment, the bytes not held by another call
    /// (see [`hold`](Self::hold); `exclusive`: for writing) and valid values. Returns the
    /// first element (dangling for an empty array) and the number of elements.
    fn contiguous(&self, method: &str, exclusive: bool) -> PyResult<(*mut T, usize)> {
        let d = &self.argument.descriptor;
        let len = self.len();
        if len == 0 || std::mem::size_of::<T>() == 0 {
            // No byte is read: any aligned pointer will do (the data pointer may be null).
            return Ok((std::ptr::NonNull::<T>::dangling().as_ptr(), len));
        }
        if !d.is_c_contiguous() {
            return Err(Problem::value_error(format!(
                "{method}: the {} array of shape {} with strides {} (a {}) is not C-contiguous; pass \
                 numpy.ascontiguousarray(...) or read it with as_array (feature `ndarray`)",
                d.typestr,
                py_tuple(self.shape()),
                py_tuple(self.strides()),
                crate::error::qualified_type_name(self.argument.object())?
            ))
            .into());
        }
        self.aligned(method)?;
        // Held before the values are read: another call may be writing them.
        self.hold(method, exclusive)?;
        let data = d.data as *mut T;
        let size = isize::try_from(std::mem::size_of::<T>()).unwrap_or(isize::MAX);
        valid_values::<T>(data.cast::<u8>(), &[(len, size)], method)?;
        Ok((data, len))
    }

    /// Registers this argument's slices of its bytes (`exclusive`: for writing), unless it
    /// holds them already; a `BufferError` when another call holds a slice of the same
    /// bytes and either may write.
    fn hold(&self, method: &str, exclusive: bool) -> PyResult<()> {
        let previous = self.slice.get();
        if self.argument.extent.is_empty() || previous.is_some_and(|(_, held)| held || !exclusive) {
            return Ok(());
        }
        let d = &self.argument.descriptor;
        let bytes = d.byte_range_of(self.argument.extent).map_err(crate::error::to_py_err)?;
        let lattice = Lattice::of_descriptor(d);
        let (start, end) = (bytes.start, bytes.end);
        match slices::take(self.argument.object().py(), bytes, lattice, exclusive, previous.map(|(id, _)| id))? {
            Ok(id) => {
                self.slice.set(Some((id, exclusive)));
                Ok(())
            }
            Err(other) => Err(Problem::buffer_error(format!(
                "{method}: bytes 0x{start:x}..0x{end:x} overlap bytes 0x{:x}..0x{:x} that another call in progress \
                 (on this thread or another) holds as a slice or view; {} may not share memory",
                other.start,
                other.end,
                if exclusive { "a slice for writing" } else { "a slice and a slice for writing" }
            ))
            .into()),
        }
    }

    fn aligned(&self, method: &str) -> PyResult<()> {
        let data = self.argument.descriptor.data;
        if data % std::mem::align_of::<T>() != 0 {
            return Err(Problem::value_error(format!(
                "{method}: data: 0x{data:x} is not aligned to {} bytes, as '{}' elements in Rust must be \
                 (numpy.require(x, requirements='A') gives an aligned copy)",
                std::mem::align_of::<T>(),
                T::TYPESTR
            ))
            .into());
        }
        Ok(())
    }
}

impl<T: Element, D: Dimension> PyHostArray<'_, T, D, ReadWrite> {
    /// The elements in C order, for writing; the same conditions as
    /// [`as_slice`](Self::as_slice).
    pub fn as_slice_mut(&mut self) -> PyResult<&mut [T]> {
        let (data, len) = self.contiguous("as_slice_mut", true)?;
        // SAFETY: as in `as_slice`; the array is writable (checked at extraction), `&mut
        // self` is the only access to it through this argument, and `hold` refused any
        // other slice of its bytes, in this call or another.
        Ok(unsafe { std::slice::from_raw_parts_mut(data, len) })
    }
}

/// Refuses elements that are not valid values of `T` (a `bool` byte other than 0 or 1):
/// Rust may not even read them as `T`. `dims` are `(count, byte stride)` pairs from the
/// element at `first`, whose bytes were validated to lie in the array's memory. Each
/// address is read about once, however many indices reach it: axes of stride 0 are left
/// out (a broadcast of one `True` to `2**60` elements is one byte to check), and an array
/// with more than four times as many elements as it spans bytes (an `as_strided` one
/// whose elements overlap) is read through the set of the offsets its elements start at;
/// past [`MAX_OFFSET_SPAN`] such an array is refused.
pub(crate) fn valid_values<T: Element>(first: *const u8, dims: &[(usize, isize)], method: &str) -> PyResult<()> {
    let bools = cai_core::bool_bytes::<T>();
    if bools.is_empty() {
        return Ok(());
    }
    let dims: Vec<(usize, isize)> = dims.iter().copied().filter(|&(n, s)| n == 0 || (n > 1 && s != 0)).collect();
    let mut bad = None;
    let mut check = |element: *const u8| {
        for &b in &bools {
            // SAFETY: `element` is an element of the array (see above) and `b` a byte of it.
            let byte = unsafe { element.add(b).read() };
            if byte > 1 {
                bad = Some(byte);
                return false;
            }
        }
        true
    };
    let count = dims.iter().try_fold(1usize, |c, &(n, _)| c.checked_mul(n));
    // Validation bounded the span (the distance from the lowest element to the highest).
    let span =
        dims.iter().fold(0usize, |a, &(n, s)| a.saturating_add(n.saturating_sub(1).saturating_mul(s.unsigned_abs())));
    if count.is_none_or(|c| c / 4 > span) && !dims.iter().any(|&(n, _)| n == 0) {
        if span >= MAX_OFFSET_SPAN {
            return Err(Problem::value_error(format!(
                "{method}: the array's {} elements overlap across {span} bytes, too many to check that its bool \
                 values are 0 or 1 (read the array as u8)",
                count.map_or_else(|| "more than 2**64".to_owned(), |c| c.to_string())
            ))
            .into());
        }
        let Some(offsets) = element_offsets(&dims, span) else {
            return Err(pyo3::exceptions::PyMemoryError::new_err(format!(
                "{method}: no memory for the set of the offsets of the array's overlapping elements ({} bytes)",
                2 * (span / 64 + 1) * 8
            )));
        };
        let low = lowest(first, &dims);
        'words: for (word, &bits) in offsets.iter().enumerate() {
            let mut bits = bits;
            while bits != 0 {
                let offset = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if !check(low.wrapping_add(offset)) {
                    break 'words;
                }
            }
        }
    } else {
        visit(first, &dims, &mut check);
    }
    match bad {
        None => Ok(()),
        Some(byte) => Err(Problem::value_error(format!(
            "{method}: a bool element holds the byte {byte}; Rust's bool must be 0 or 1 (read the array as u8)"
        ))
        .into()),
    }
}

/// The lowest-addressed element of `dims` (`(count, byte stride)` pairs from the element
/// at `first`): `first` moved back along each negative stride. Validation checked that
/// these offsets lie in the address space.
fn lowest(first: *const u8, dims: &[(usize, isize)]) -> *const u8 {
    dims.iter()
        .filter(|&&(_, s)| s < 0)
        .fold(first, |p, &(n, s)| p.wrapping_offset(s.wrapping_mul(isize::try_from(n.saturating_sub(1)).unwrap_or(0))))
}

/// The most bytes [`element_offsets`] spans (its set and a copy take a bit a byte each:
/// 256 MiB).
const MAX_OFFSET_SPAN: usize = 1 << 30;

/// The set of offsets, from the lowest-addressed element, at which the elements of `dims`
/// (`(count, byte stride)` pairs, none empty, no stride 0) start, as a bit set over
/// `0..=span`; `None` when the memory for it cannot be had. Each axis adds its steps to
/// the set by doubling: `log2(count)` shifted copies, not `count`.
fn element_offsets(dims: &[(usize, isize)], span: usize) -> Option<Vec<u64>> {
    let words = span / 64 + 1;
    let zeroed = || -> Option<Vec<u64>> {
        let mut v = Vec::new();
        v.try_reserve_exact(words).ok()?;
        v.resize(words, 0u64);
        Some(v)
    };
    let (mut set, mut base) = (zeroed()?, zeroed()?);
    set[0] = 1;
    for &(n, s) in dims {
        let step = s.unsigned_abs();
        base.copy_from_slice(&set);
        // `set` holds the offsets of indices `0..m` along this axis; `m` grows to `n` by
        // the bits of `n`, from the highest.
        let mut m = 1usize;
        for bit in (0..usize::BITS - 1 - n.leading_zeros()).rev() {
            or_shifted(&mut set, None, m * step);
            m *= 2;
            if (n >> bit) & 1 == 1 {
                or_shifted(&mut set, Some(&base), m * step);
                m += 1;
            }
        }
    }
    Some(set)
}

/// `dst |= src << shift` over bit sets of one length, `src` being `dst` itself when `None`
/// (no bit is shifted past the end: every offset stays within the span). From the
/// highest word down, each word reads only itself and lower words, which are not written
/// yet: shifting a set in place needs a `shift` of at least 1.
fn or_shifted(dst: &mut [u64], src: Option<&[u64]>, shift: usize) {
    let (w, b) = (shift / 64, shift % 64);
    for i in (w..dst.len()).rev() {
        let word = |j: usize| src.map_or(dst[j], |src| src[j]);
        let mut v = word(i - w) << b;
        if b > 0 && i > w {
            v |= word(i - w - 1) >> (64 - b);
        }
        dst[i] |= v;
    }
}

/// Calls `f` with the address of each index of `dims` (each element's, when `dims` are the
/// array's), in C order, until it returns false.
pub(crate) fn visit(first: *const u8, dims: &[(usize, isize)], f: &mut dyn FnMut(*const u8) -> bool) -> bool {
    match dims.split_first() {
        None => f(first),
        Some((&(count, stride), rest)) => {
            let mut p = first;
            for i in 0..count {
                if !visit(p, rest, f) {
                    return false;
                }
                if i + 1 < count {
                    p = p.wrapping_offset(stride);
                }
            }
            true
        }
    }
}

#[cfg(feature = "ndarray")]
mod nd {
    use ndarray::{ArrayView, ArrayViewMut, Axis, ShapeBuilder, StrideShape};

    use super::*;
    use crate::extract::{Ix, IxDyn};

    /// The `ndarray` dimension type of a [`Dimension`] (feature `ndarray`).
    pub trait NdDimension: Dimension {
        /// `ndarray::Ix1` for `Ix1`, ..., `ndarray::IxDyn` for `IxDyn`.
        type Nd: ndarray::Dimension;
    }

    macro_rules! nd_dimension {
        ($($n:literal => $nd:ty),*) => {$(
            impl NdDimension for Ix<$n> {
                type Nd = $nd;
            }
        )*};
    }
    nd_dimension!(0 => ndarray::Ix0, 1 => ndarray::Ix1, 2 => ndarray::Ix2, 3 => ndarray::Ix3, 4 => ndarray::Ix4,
        5 => ndarray::Ix5, 6 => ndarray::Ix6);
    impl NdDimension for IxDyn {
        type Nd = ndarray::IxDyn;
    }

    /// A view's parts: the lowest-addressed element, the shape, the strides in elements
    /// made non-negative, and the axes whose strides were negative.
    struct Layout {
        low: *mut u8,
        shape: Vec<usize>,
        /// `None`: C order (for arrays that reach no byte).
        strides: Option<Vec<usize>>,
        flipped: Vec<usize>,
    }

    impl<T: Element, D: NdDimension, A: Access> PyHostArray<'_, T, D, A> {
        fn layout(&self, method: &str, exclusive: bool) -> PyResult<Layout> {
            let d = &self.argument.descriptor;
            let shape = d.shape.to_vec();
            let elements = self.element_strides();
            if shape.contains(&0) || std::mem::size_of::<T>() == 0 {
                // No byte is read: C-order strides from an aligned dangling pointer (the
                // data pointer may be null), which ndarray accepts for any shape.
                let low = std::ptr::NonNull::<T>::dangling().as_ptr().cast();
                return Ok(Layout { low, shape, strides: None, flipped: Vec::new() });
            }
            self.aligned(method)?;
            if exclusive && overlaps(&shape, &elements) {
                return Err(Problem::value_error(format!(
                    "{method}: the array of shape {} with strides {} reaches some elements by two indices (a \
                     broadcast or as_strided array); a mutable view needs distinct elements",
                    py_tuple(&shape),
                    py_tuple(self.strides())
                ))
                .into());
            }
            // An axis of one element is never stepped: stride 0, whatever the producer gave
            // (a stride of any size, rounded to elements, as ndarray's own slicing does).
            let mut flipped = Vec::new();
            let mut strides = Vec::with_capacity(shape.len());
            for (axis, (&n, &s)) in shape.iter().zip(&elements).enumerate() {
                let s = if n == 1 { 0 } else { s };
                if s == isize::MIN {
                    // Its magnitude is no `isize`, which ndarray's strides must be. A guard:
                    // validation refuses the extent of such an axis of several elements.
                    return Err(Problem::value_error(format!(
                        "{method}: stride {} of axis {axis} has no ndarray form (its magnitude exceeds isize)",
                        self.strides()[axis]
                    ))
                    .into());
                }
                if s < 0 {
                    flipped.push(axis);
                }
                strides.push(s.unsigned_abs());
            }
            let dims: Vec<(usize, isize)> = shape.iter().copied().zip(self.strides().iter().copied()).collect();
            let low = lowest(d.data as *const u8, &dims).cast_mut();
            // Held before the values are read: another call may be writing them.
            self.hold(method, exclusive)?;
            valid_values::<T>(d.data as *const u8, &dims, method)?;
            Ok(Layout { low, shape, strides: Some(strides), flipped })
        }

        /// The shape and strides as `ndarray` takes them.
        fn nd_shape(layout: &Layout) -> StrideShape<D::Nd> {
            // Extraction checked the number of dimensions against `D`, which is `D::Nd`'s.
            let dim = |values: &[usize]| {
                use ndarray::Dimension as _;
                let mut dim = D::Nd::zeros(values.len());
                dim.slice_mut().copy_from_slice(values);
                dim
            };
            match &layout.strides {
                Some(strides) => dim(&layout.shape).strides(dim(strides)),
                None => dim(&layout.shape).into(),
            }
        }

        /// The array as an `ndarray` view with its own strides (negative and zero strides
        /// included); `ValueError` for memory not aligned for `T`. Feature `ndarray`.
        pub fn as_array(&self) -> PyResult<ArrayView<'_, T, D::Nd>> {
            let layout = self.layout("as_array", false)?;
            let shape = Self::nd_shape(&layout);
            // SAFETY: validation checked that every element lies in the array's memory,
            // kept alive by the held object for `&self`; `low` is the lowest-addressed
            // element (aligned, non-null) and the strides are non-negative, as
            // `from_shape_ptr` requires; values were checked to be valid `T`s.
            let mut view = unsafe { ArrayView::from_shape_ptr(shape, layout.low.cast::<T>()) };
            for axis in layout.flipped {
                view.invert_axis(Axis(axis));
            }
            Ok(view)
        }
    }

    impl<T: Element, D: NdDimension> PyHostArray<'_, T, D, ReadWrite> {
        /// The array as a mutable `ndarray` view; the array must not reach an element by
        /// two indices (`ValueError`). Feature `ndarray`.
        pub fn as_array_mut(&mut self) -> PyResult<ArrayViewMut<'_, T, D::Nd>> {
            let layout = self.layout("as_array_mut", true)?;
            let shape = Self::nd_shape(&layout);
            // SAFETY: as in `as_array`; besides, the array is writable, `&mut self` is the
            // only access through this argument, no element is reached twice, and `hold`
            // refused any other slice or view of the bytes, in this call or another.
            let mut view = unsafe { ArrayViewMut::from_shape_ptr(shape, layout.low.cast::<T>()) };
            for axis in layout.flipped {
                view.invert_axis(Axis(axis));
            }
            Ok(view)
        }
    }

    /// Whether some element is reached by two indices: sorted by stride, each axis must
    /// step past everything the faster axes reach (a sufficient test, which every
    /// C-, Fortran- or sliced layout passes).
    fn overlaps(shape: &[usize], strides: &[isize]) -> bool {
        let mut axes: Vec<(usize, usize)> =
            shape.iter().zip(strides).filter(|(&n, _)| n > 1).map(|(&n, &s)| (n, s.unsigned_abs())).collect();
        axes.sort_by_key(|&(_, s)| s);
        let mut reach = 0usize; // the largest offset the faster axes reach
        for (n, s) in axes {
            if s <= reach {
                return true;
            }
            reach = match (n - 1).checked_mul(s).and_then(|r| r.checked_add(reach)) {
                Some(r) => r,
                None => return true,
            };
        }
        false
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn overlap_test() {
            assert!(!super::overlaps(&[3, 4], &[4, 1]));
            assert!(!super::overlaps(&[3, 4], &[1, 3]));
            assert!(!super::overlaps(&[3, 4], &[-4, 1]));
            assert!(!super::overlaps(&[3, 1], &[1, 0]));
            assert!(super::overlaps(&[3, 4], &[0, 1]));
            assert!(super::overlaps(&[3, 4], &[2, 1]));
            assert!(!super::overlaps(&[2, 2], &[1, 2]));
        }
    }
}

#[cfg(feature = "ndarray")]
pub use nd::NdDimension;

#[cfg(test)]
mod tests {
    /// The offsets of every index, one by one.
    fn brute(dims: &[(usize, isize)]) -> std::collections::BTreeSet<usize> {
        let low: isize = dims.iter().filter(|d| d.1 < 0).map(|&(n, s)| s * isize::try_from(n - 1).unwrap()).sum();
        let mut out = std::collections::BTreeSet::new();
        super::visit(std::ptr::null::<u8>().wrapping_offset(-low), dims, &mut |p| {
            out.insert(p as usize);
            true
        });
        out
    }

    #[test]
    fn element_offsets_are_the_offsets_of_every_index() {
        let cases: &[&[(usize, isize)]] = &[
            &[(5, 3)],
            &[(7, 1), (5, 2)],
            &[(3, 64), (70, 1)],
            &[(13, -5), (4, 7), (2, 100)],
            &[(64, 1), (65, 1), (3, 129)],
            &[(1000, 3), (9, -17)],
        ];
        for dims in cases {
            let span: usize = dims.iter().map(|&(n, s)| (n - 1) * s.unsigned_abs()).sum();
            let set = super::element_offsets(dims, span).unwrap();
            let got: std::collections::BTreeSet<usize> =
                (0..=span).filter(|&o| set[o / 64] >> (o % 64) & 1 == 1).collect();
            assert_eq!(got, brute(dims), "{dims:?}");
            assert!(set.len() * 64 > span);
        }
        // The reference itself: an address two indices reach counts once.
        assert_eq!(brute(&[(3, 1), (2, 1)]).len(), 4);
    }
}
