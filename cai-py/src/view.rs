//! `cai.CudaArray` and `cai.HostArray`: validated, zero-copy views of a producer's array.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};

use cai_core::{Descr, Descriptor, Extent, Stream};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::{ffi, intern, Borrowed};
use pyo3::{PyTraverseError, PyVisit};

use crate::entry::{GetterDef, MethodDef};
use crate::error::{py_tuple, to_py_err, Problem};
use crate::export::{descr_list, interface_dict_with};
use crate::once::Package;
use crate::parse::{Interface, Parsed};

/// What both view classes hold.
#[derive(Debug)]
pub(crate) struct Core {
    descriptor: Descriptor,
    declared_version: u64,
    extent: Extent,
    /// The owner; the value of the owner's interface attribute the view was read from
    /// (`None` for a DLPack tensor or a descriptor), kept alive with the view because a
    /// producer may tie the memory to it rather than to itself (a NumPy scalar's
    /// `__array_interface__` describes a 0-d array made for the read, which only the
    /// dict's `'__ref'` keeps); and the mask. Released through [`crate::freeing`]: each
    /// may be the next link of a chain of views.
    links: crate::freeing::Links,
}

impl Core {
    #[inline(always)]
    pub(crate) fn from_parsed(owner: Py<PyAny>, interface: Option<Py<PyAny>>, parsed: Parsed) -> Core {
        // Strides (and their overflow) were checked by validation; they are computed when read.
        Core {
            descriptor: parsed.descriptor,
            declared_version: parsed.declared_version,
            extent: parsed.extent,
            links: crate::freeing::Links::new(owner, interface, parsed.mask),
        }
    }

    fn from_descriptor(owner: Py<PyAny>, descriptor: Descriptor) -> PyResult<Core> {
        let extent = descriptor.validate().map_err(to_py_err)?;
        let declared_version = u64::from(descriptor.version);
        Ok(Core::from_parsed(owner, None, Parsed { descriptor, declared_version, mask: None, extent }))
    }

    /// The descriptor this view re-exports: version 3, pointer 0 when empty.
    fn export_descriptor(&self, iface: Interface) -> Descriptor {
        let mut d = self.descriptor.clone();
        if iface == Interface::Cuda {
            d.version = 3;
            d.data = d.exported_pointer(self.extent);
        }
        d
    }

    /// The interface dict this view exports, with the mask object it was read with (which
    /// a consumer reads again).
    fn interface<'py>(&self, slf: &Bound<'py, PyAny>, iface: Interface) -> PyResult<Bound<'py, PyDict>> {
        let mask = self.links.mask().map(|m| m.bind(slf.py()));
        interface_dict_with(slf, &self.export_descriptor(iface), iface, mask, false)
    }

    fn repr(&self, class: &str) -> String {
        let d = &self.descriptor;
        let stream = match d.stream {
            Stream::None => String::new(),
            s => format!(", stream={s}"),
        };
        format!(
            "cai.{class}(shape={}, typestr='{}', ptr=0x{:x}, strides={}, readonly={}{stream})",
            py_tuple(&d.shape),
            d.typestr,
            d.data,
            self.descriptor.strides().map_or_else(|_| "?".to_owned(), |s| py_tuple(&s)),
            if d.readonly { "True" } else { "False" },
        )
    }
}

/// Whether this module is the `cai` package's own (set by [`register`](crate::register)).
static PACKAGE: AtomicBool = AtomicBool::new(false);

/// Marks this module as the `cai` package: its views are its own classes.
pub(crate) fn mark_package() {
    PACKAGE.store(true, Ordering::Relaxed);
}

/// The `cai` package's view factory, for a module that is not the package (see
/// [`Core::into_view`]), and whether it takes the declared version
/// (`cai._cai._make_view_v3`) or reads it from the dict (`_make_view_v2`, from packages
/// before v3): `None` when the package cannot be imported, or is one from before the
/// factory took a lifeline (this module's own classes are used). Looked up once; an
/// exception that must propagate does, uncached.
fn factory(py: Python<'_>) -> PyResult<Option<(Bound<'_, PyAny>, bool)>> {
    static FACTORY: PyOnceLock<Option<(Py<PyAny>, bool)>> = PyOnceLock::new();
    if FACTORY.get(py).is_none() {
        // Importing runs Python code, which may make views itself: the lock is not held
        // meanwhile, and the first value stored wins.
        let (found, takes_version) = match crate::once::package_attr(py, "_make_view_v3")? {
            Package::Missing => (crate::once::package_attr(py, "_make_view_v2")?, false),
            other => (other, true),
        };
        let found = match found {
            // A factory that cannot be called is one of no package cai knows.
            Package::Found(f) if f.is_callable() => Some((f.unbind(), takes_version)),
            Package::Found(_) | Package::Missing => None,
            // The package's module is still being executed, or its import failed for now:
            // this module's classes, this time (complete, but not renamed, since the next
            // call looks again).
            Package::NotNow => {
                install_methods(py)?;
                return Ok(None);
            }
        };
        if found.is_none() {
            own_classes_module(py);
            install_methods(py)?;
        }
        let _ = FACTORY.set(py, found);
    }
    Ok(FACTORY.get(py).and_then(|f| f.as_ref()).map(|(f, takes_version)| (f.bind(py).clone(), *takes_version)))
}

/// Without the `cai` package, this module's classes say that a module built on cai-py
/// made them, not the package.
fn own_classes_module(py: Python<'_>) {
    for class in [py.get_type::<CudaArray>(), py.get_type::<HostArray>()] {
        // Best effort: the name only shows in reprs and `__module__`.
        let _ = class.setattr(intern!(py, "__module__"), intern!(py, "cai_py"));
    }
}

/// The `cai` package's factory: a view of the interface dict `interface`, kept alive by
/// `owner` and by `lifeline` (the value of the producer's interface attribute, or None),
/// as an instance of the package's class, declaring `version` (the producer's, whose
/// rules were applied; the dict holds the version of those rules, so that reading it
/// again warns of nothing). Other modules built on cai-py call it so that their views
/// are `cai.CudaArray` / `cai.HostArray` instances.
#[pyfunction]
pub(crate) fn _make_view_v3<'py>(
    host: &Bound<'py, PyAny>,
    interface: &Bound<'py, PyAny>,
    owner: &Bound<'py, PyAny>,
    lifeline: &Bound<'py, PyAny>,
    version: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    // An int (of a subclass too, read without its code), not a bool: this private factory
    // is called by cai-py's own code, with the version it read.
    let text = || crate::error::received(version);
    let int = version.cast::<pyo3::types::PyInt>().ok().filter(|_| !version.is_instance_of::<pyo3::types::PyBool>());
    let Some(int) = int else {
        return Err(Problem::type_error(format!("version: expected an int, received {}", text()?)).into());
    };
    let Ok(version) = int.extract::<u64>() else {
        return Err(Problem::value_error(format!("version: {} is not from 0 to 2**64 - 1", text()?)).into());
    };
    make_view(host_argument(host)?, interface, owner, lifeline, Some(version))
}

/// The `host` argument of the factories: True or False.
fn host_argument(host: &Bound<'_, PyAny>) -> PyResult<bool> {
    match host.cast_exact::<pyo3::types::PyBool>() {
        Ok(b) => Ok(b.is_true()),
        Err(_) => Err(Problem::type_error(format!(
            "host: expected True or False, received {}",
            crate::error::received(host)?
        ))
        .into()),
    }
}

/// The factory of modules built on cai-py from before `_make_view_v3`: the declared
/// version is the dict's.
#[pyfunction]
pub(crate) fn _make_view_v2<'py>(
    host: &Bound<'py, PyAny>,
    interface: &Bound<'py, PyAny>,
    owner: &Bound<'py, PyAny>,
    lifeline: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    make_view(host_argument(host)?, interface, owner, lifeline, None)
}

/// The factories' view: `version`, when given, is the declared version, whose rules must
/// be those the dict was read by.
fn make_view<'py>(
    host: bool,
    interface: &Bound<'py, PyAny>,
    owner: &Bound<'py, PyAny>,
    lifeline: &Bound<'py, PyAny>,
    version: Option<u64>,
) -> PyResult<Bound<'py, PyAny>> {
    let iface = if host { Interface::Host } else { Interface::Cuda };
    let mut parsed = crate::parse::parse(interface, iface, crate::parse::Source::Argument)?;
    if let Some(version) = version {
        if crate::parse::rules_version(version, iface) != parsed.descriptor.version {
            return Err(Problem::value_error(format!(
                "version: {version} is not declared by a dict read by version {}'s rules",
                parsed.descriptor.version
            ))
            .into());
        }
        parsed.declared_version = version;
    }
    let lifeline = Some(lifeline).filter(|l| !l.is_none()).map(|l| l.clone().unbind());
    let core = Core::from_parsed(owner.clone().unbind(), lifeline, parsed);
    own_view(owner.py(), core, iface)
}

/// The factory of modules built on cai-py from before `_make_view_v2`: a view of
/// `interface`, kept alive by `owner` and by `interface` itself.
#[pyfunction]
pub(crate) fn _make_view_v1<'py>(
    host: &Bound<'py, PyAny>,
    interface: &Bound<'py, PyAny>,
    owner: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    _make_view_v2(host, interface, owner, interface)
}

#[inline(always)]
fn own_view<'py>(py: Python<'py>, core: Core, iface: Interface) -> PyResult<Bound<'py, PyAny>> {
    let dict = PyOnceLock::new();
    Ok(match iface {
        Interface::Cuda => Bound::new(py, CudaArray { core, dict, layout: Default::default() })?.into_any(),
        Interface::Host => Bound::new(py, HostArray { core, dict, layout: Default::default() })?.into_any(),
    })
}

impl Core {
    /// The view of this array: an instance of the `cai` package's class for `iface` when
    /// the package can be imported, of this module's own otherwise.
    // Inlined (as are `own_view` and `from_parsed`), the common import builds its view in
    // place: each layer called cost a copy of the array and, timed, 10 to 20 ns.
    #[inline(always)]
    pub(crate) fn into_view(self, py: Python<'_>, iface: Interface) -> PyResult<Bound<'_, PyAny>> {
        if PACKAGE.load(Ordering::Relaxed) {
            return own_view(py, self, iface);
        }
        self.into_package_view(py, iface)
    }

    /// [`into_view`](Core::into_view) in a module that is not the `cai` package.
    #[inline(never)]
    fn into_package_view(self, py: Python<'_>, iface: Interface) -> PyResult<Bound<'_, PyAny>> {
        match factory(py)? {
            None => own_view(py, self, iface),
            Some((make, takes_version)) => {
                let owner = self.links.owner().bind(py);
                // The mask object itself, which the factory reads again: its view's `mask`
                // is that object, as for a view the package makes itself.
                let mask = self.links.mask().map(|m| m.bind(py));
                let lifeline = self.links.interface().map(|v| v.bind(py).clone());
                let host = iface == Interface::Host;
                // The factory is whatever `cai._cai` holds, which Python code may replace
                // with one that makes views again.
                let _nesting = crate::parse::Nesting::enter_message("the view factory of the cai package")?;
                // The dict is the factory's to read alone: it and the arguments' tuple are
                // kept off the collector's lists, or a finalizer that a collection runs
                // before the factory has read the dict could find it and change the array
                // it describes (the factory would make a view of memory that is not there).
                let args = if takes_version {
                    // The dict holds the version of the rules applied (the descriptor's).
                    let dict = interface_dict_with(owner, &self.descriptor, iface, mask, true)?;
                    (host, dict, owner, lifeline, self.declared_version).into_pyobject(py)?
                } else {
                    let mut d = self.descriptor.clone();
                    if iface == Interface::Cuda {
                        // The version the producer declared, whose rules were applied.
                        d.version = u32::try_from(self.declared_version).unwrap_or(cai_core::CURRENT_VERSION);
                    }
                    let dict = interface_dict_with(owner, &d, iface, mask, true)?;
                    (host, dict, owner, lifeline).into_pyobject(py)?
                };
                // Nothing allocated since the tuple was made: no collection has run to find it.
                crate::export::hide(args.as_any());
                make.call1(args)
            }
        }
    }
}

/// The docstring of the views' `__dlpack__`, whose first lines give `inspect` its signature.
const DLPACK_DOC: &CStr = c"__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)
--

The array through DLPack: a capsule that keeps this view alive (see cai.from_dlpack and
the array API standard's __dlpack__).";

/// Puts on the views' classes:
/// - `__dlpack__`, a METH_FASTCALL method that reads its keywords itself. Consumers call it
///   with three or four keywords on every import (`numpy.from_dlpack` passes `dl_device`,
///   `copy` and `max_version`), and matching them by identity first takes about half of
///   what pyo3's generic keyword handling takes.
/// - the interface attribute, a C getter that copies the view's dict without pyo3's
///   wrapper (its `Python` token, panic guard and indirect call: 69 of the 368
///   instructions of a read), in place of pyo3's property of the same name.
pub(crate) fn install_methods(py: Python<'_>) -> PyResult<()> {
    let classes = [
        (py.get_type::<CudaArray>(), CudaArray::dlpack_def(), CudaArray::interface_def(), Interface::Cuda.interned(py)),
        (py.get_type::<HostArray>(), HostArray::dlpack_def(), HostArray::interface_def(), Interface::Host.interned(py)),
    ];
    for (class, dlpack, interface, attribute) in classes {
        // SAFETY: the definitions live for the process and the class is a live type
        // object; PyDescr_NewMethod and PyDescr_NewGetSet return a new reference, or null
        // with an exception set.
        let method =
            unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyDescr_NewMethod(class.as_type_ptr(), dlpack.as_ptr())) }?;
        class.setattr(intern!(py, "__dlpack__"), method)?;
        // SAFETY: as for the method.
        let getter = unsafe {
            Bound::from_owned_ptr_or_err(py, ffi::PyDescr_NewGetSet(class.as_type_ptr(), interface.as_ptr()))
        }?;
        class.setattr(attribute, getter)?;
    }
    Ok(())
}

/// The docstring of the views' interface attributes.
const INTERFACE_DOC: &CStr = c"The view's own interface dict, so that it can be handed to any consumer.";

/// Runs `f`, a panic (which no path should reach) turned into the exception the failing
/// call left set, if any, else a `SystemError`: never an unwind across the C boundary, nor
/// a `PanicException`. (pyo3's panic on a null object, after a failed allocation, reports
/// the `MemoryError` as unraisable first: it becomes the `SystemError`.)
fn unwind_guard<R>(py: Python<'_>, f: impl FnOnce() -> PyResult<R>) -> PyResult<R> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(_) => Err(PyErr::take(py).unwrap_or_else(|| {
            pyo3::exceptions::PySystemError::new_err("cai: internal error (a panic) in an interface getter")
        })),
    }
}

/// The memory an interface's arrays are in.
fn memory(iface: Interface) -> crate::dlpack::Memory {
    match iface {
        Interface::Cuda => crate::dlpack::Memory::Device,
        Interface::Host => crate::dlpack::Memory::Host,
    }
}

macro_rules! view_class {
    ($(#[$doc:meta])* $ty:ident, $name:literal, $iface:expr, $attr:ident, $c_attr:literal) => {
        $(#[$doc])*
        #[pyclass(frozen, weakref, module = "cai", name = $name)]
        pub struct $ty {
            core: Core,
            /// The interface dict, taken at the first export and copied on each (a view
            /// never changes): the thread's dict of the descriptor, shared and never
            /// changed. Not kept for records or masked arrays, whose dicts hold mutable
            /// lists or other objects.
            dict: PyOnceLock<Py<PyDict>>,
            /// The DLPack layout, computed at the first `__dlpack__`.
            layout: std::sync::OnceLock<crate::dlpack::Layout>,
        }

        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct($name).field("core", &self.core).finish_non_exhaustive()
            }
        }

        impl $ty {
            /// A view of `descriptor`, validated, that keeps `owner` alive: an instance of
            /// the `cai` package's class when the package can be imported (so that
            /// `isinstance` works across every module built on cai-py), of this module's
            /// own class otherwise.
            pub fn from_descriptor<'py>(owner: &Bound<'py, PyAny>, descriptor: Descriptor) -> PyResult<Bound<'py, PyAny>> {
                let core = Core::from_descriptor(owner.clone().unbind(), descriptor)?;
                core.into_view(owner.py(), $iface)
            }

            /// The validated descriptor (its version is the one whose rules were applied).
            pub fn descriptor(&self) -> &Descriptor {
                &self.core.descriptor
            }

            /// The object the view keeps alive.
            pub fn owner_object(&self) -> &Py<PyAny> {
                self.core.links.owner()
            }

            /// The bytes the array reaches, as offsets from its pointer.
            pub fn extent(&self) -> Extent {
                self.core.extent
            }

            /// `__dlpack__`, called the METH_FASTCALL way (see [`install_methods`]).
            ///
            /// # Safety
            ///
            /// The arguments are those CPython passes to a METH_FASTCALL | METH_KEYWORDS
            /// method of this class.
            unsafe fn dlpack_fastcall(
                py: Python<'_>,
                slf: *mut ffi::PyObject,
                args: *const *mut ffi::PyObject,
                nargs: ffi::Py_ssize_t,
                kwnames: *mut ffi::PyObject,
            ) -> PyResult<*mut ffi::PyObject> {
                // SAFETY: `self` of a method call, borrowed for the call, an instance of
                // this class: CPython's method descriptor checks that before it calls.
                let slf = unsafe { Borrowed::from_ptr(py, slf).cast_unchecked::<$ty>() };
                let mut arguments = [None; 4];
                let method = concat!($name, ".__dlpack__");
                // SAFETY: as the caller promises.
                unsafe { crate::dlpack::fastcall_arguments(py, method, args, nargs, kwnames, &mut arguments) }?;
                let [stream, max_version, dl_device, copy] = arguments;
                let core = &slf.get().core;
                let wanted = crate::dlpack::Request {
                    stream: stream.as_deref(),
                    max_version: max_version.as_deref(),
                    dl_device: dl_device.as_deref(),
                    copy: copy.as_deref(),
                }
                .read(memory($iface))?;
                let layout = Some(&slf.get().layout);
                crate::dlpack::export(slf.as_any(), &core.descriptor, core.extent, memory($iface), wanted, layout)
                    .map(Bound::into_ptr)
            }

            /// The interface attribute's C getter (see [`install_methods`]): a copy of the
            /// view's dict once it is built; anything else (the first read, and views whose
            /// dict is built on each read) through [`interface`](Self::interface).
            ///
            /// # Safety
            ///
            /// Called by CPython as the getter of this class's descriptor: with the thread
            /// attached, and `slf` a live instance of this class (the descriptor checks
            /// the type before it calls).
            unsafe extern "C" fn interface_getter(slf: *mut ffi::PyObject, _closure: *mut std::ffi::c_void) -> *mut ffi::PyObject {
                // SAFETY: as CPython promises (above); nothing here outlives the call.
                let py = unsafe { Python::assume_attached() };
                // SAFETY: as CPython promises, `slf` is a live instance of this class.
                let view = unsafe { Borrowed::from_ptr(py, slf).cast_unchecked::<$ty>() };
                if let Some(dict) = view.get().dict.get(py) {
                    // SAFETY: a live dict, kept by the view for its life; PyDict_Copy
                    // returns a new reference, or null with an exception set. Nothing is
                    // used after it, which may run Python code (a collection).
                    return unsafe { ffi::PyDict_Copy(dict.as_ptr()) };
                }
                // Anything else through pyo3's wrapper, which (unlike `Python::attach`)
                // checks nothing that fails while the interpreter shuts down, when a
                // `__del__` may still read a view.
                let full = pyo3::impl_::trampoline::get_trampoline_function!(unaryfunc, $ty::interface_full);
                // SAFETY: as CPython promises (above): attached, `slf` live.
                unsafe { full(slf) }
            }

            /// [`interface`](Self::interface) for [`interface_getter`](Self::interface_getter).
            ///
            /// # Safety
            ///
            /// As for `interface_getter`.
            unsafe fn interface_full(py: Python<'_>, slf: *mut ffi::PyObject) -> PyResult<*mut ffi::PyObject> {
                // SAFETY: as the caller promises, `slf` is a live instance of this class.
                let view = unsafe { Borrowed::from_ptr(py, slf).cast_unchecked::<$ty>() };
                unwind_guard(py, || $ty::interface(&view).map(Bound::into_ptr))
            }

            /// The getter definition of [`interface_getter`](Self::interface_getter).
            fn interface_def() -> &'static GetterDef {
                static DEF: GetterDef =
                    GetterDef::getter($c_attr, INTERFACE_DOC, $ty::interface_getter);
                &DEF
            }

            /// The method definition of [`dlpack_fastcall`](Self::dlpack_fastcall).
            fn dlpack_def() -> &'static MethodDef {
                static DEF: MethodDef = MethodDef::fastcall(c"__dlpack__", DLPACK_DOC, pyo3::impl_::trampoline::get_trampoline_function!(
                    fastcall_cfunction_with_keywords,
                    $ty::dlpack_fastcall
                ));
                &DEF
            }
        }

        #[pymethods]
        impl $ty {
            /// The size of each dimension.
            #[getter]
            fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                PyTuple::new(py, &self.core.descriptor.shape)
            }

            /// Strides in bytes, one per dimension: the producer's, or those of C order
            /// when it gave `None`.
            #[getter]
            fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                PyTuple::new(py, self.core.descriptor.strides().map_err(to_py_err)?.iter())
            }

            /// The number of dimensions.
            #[getter]
            fn ndim(&self) -> usize {
                self.core.descriptor.ndim()
            }

            /// The number of elements.
            #[getter]
            fn size(&self) -> PyResult<usize> {
                self.core.descriptor.size().map_err(to_py_err)
            }

            /// The element type string (`=` resolved to this machine's byte order).
            #[getter]
            fn typestr(&self) -> String {
                self.core.descriptor.typestr.to_string()
            }

            /// The field list, `[('', typestr)]` for a plain type.
            #[getter]
            fn descr<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
                let d = &self.core.descriptor;
                let simple;
                let descr = match &d.descr {
                    Some(descr) => descr,
                    None => {
                        simple = Descr::simple(d.typestr);
                        &simple
                    }
                };
                descr_list(py, descr)
            }

            /// The kind letter of the element type (`'f'`, `'i'`, `'V'`, ...).
            #[getter]
            fn kind(&self) -> char {
                self.core.descriptor.typestr.kind().code()
            }

            /// The size of one element in bytes.
            #[getter]
            fn itemsize(&self) -> usize {
                self.core.descriptor.itemsize()
            }

            /// `'<'`, `'>'` or `'|'` (not applicable).
            #[getter]
            fn byteorder(&self) -> char {
                self.core.descriptor.typestr.byte_order().as_char()
            }

            /// The address of the element at index zero, as the producer gave it. For an
            /// empty array, the `__cuda_array_interface__` a view exports gives 0 instead
            /// (and no strides), as the interface requires from version 2.
            #[getter]
            fn ptr(&self) -> usize {
                self.core.descriptor.data
            }

            /// `size * itemsize`, as NumPy counts it.
            #[getter]
            fn nbytes(&self) -> PyResult<usize> {
                self.core.descriptor.nbytes().map_err(to_py_err)
            }

            /// The lowest address the array reaches and one past the highest, as
            /// `numpy.lib.array_utils.byte_bounds` gives them; `(ptr, ptr)` for an array
            /// that reaches no byte (empty, or of zero-byte items, where NumPy's function
            /// adds up the strides all the same).
            #[getter]
            fn byte_bounds(&self) -> PyResult<(usize, usize)> {
                // Validation checked that the bytes lie inside the address space.
                let bytes = self.core.descriptor.byte_range_of(self.core.extent).map_err(to_py_err)?;
                Ok((bytes.start, bytes.end))
            }

            /// Whether the consumer must not write.
            #[getter]
            fn readonly(&self) -> bool {
                self.core.descriptor.readonly
            }

            /// The version the producer declared.
            #[getter]
            fn version(&self) -> u64 {
                self.core.declared_version
            }

            /// The stream the array's work is ordered on, which its interface re-exports:
            /// the producer's (for a view of a DLPack tensor, the stream cai asked the
            /// producer to order its work before); `None`, or an int (1 legacy default,
            /// 2 per-thread default, otherwise a handle).
            #[getter]
            fn stream(&self) -> Option<usize> {
                self.core.descriptor.stream.to_raw()
            }

            /// The mask object, or `None`.
            #[getter]
            fn mask(&self, py: Python<'_>) -> Option<Py<PyAny>> {
                self.core.links.mask().map(|m| m.clone_ref(py))
            }

            /// The producer this view keeps alive.
            #[getter]
            fn owner(&self, py: Python<'_>) -> Py<PyAny> {
                self.core.links.owner().clone_ref(py)
            }

            /// Whether the elements lie in C (row-major) order without gaps.
            #[getter]
            fn is_c_contiguous(&self) -> bool {
                self.core.descriptor.is_c_contiguous()
            }

            /// Whether the elements lie in Fortran (column-major) order without gaps.
            #[getter]
            fn is_f_contiguous(&self) -> bool {
                self.core.descriptor.is_f_contiguous()
            }

            /// The view's own interface dict, so that it can be handed to any consumer.
            /// (Replaced on the class by [`interface_getter`](Self::interface_getter),
            /// which calls this for what it does not do itself.)
            #[getter($attr)]
            fn interface<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
                let this = slf.get();
                let d = &this.core.descriptor;
                if this.core.links.mask().is_some() || d.mask.is_some() || d.descr.is_some() {
                    return this.core.interface(slf.as_any(), $iface);
                }
                let py = slf.py();
                // Made with the cell free: building allocates, and a collection it starts
                // may run a finalizer that reads this very view. The thread's dict of the
                // descriptor is kept as it is: no one changes it.
                let dict = crate::once::get_or_make(&this.dict, py, || {
                    let descriptor = this.core.export_descriptor($iface);
                    Ok(crate::export::template(slf.as_any(), &descriptor, $iface)?.unbind())
                })?;
                dict.bind(py).copy()
            }

            /// `(device_type, device_id)` as DLPack names them: `(1, 0)` for host memory,
            /// `(2, ordinal)` for CUDA device memory, `(13, ordinal)` for managed memory and
            /// `(3, 0)` for pinned host memory. Of a device array, the driver tells which:
            /// without one, this raises `cai.CudaDriverError`, unless pointers are not
            /// checked (`cai.configure(check_pointers=False)`), which makes it `(2, 0)`.
            fn __dlpack_device__(slf: &Bound<'_, Self>) -> PyResult<(i32, i32)> {
                let core = &slf.get().core;
                let d = crate::dlpack::device(slf.py(), &core.descriptor, core.extent, memory($iface))?;
                Ok((d.device_type, d.device_id))
            }

            fn __len__(&self) -> PyResult<usize> {
                self.core.descriptor.shape.first().copied().ok_or_else(|| PyTypeError::new_err("len() of a 0-d array"))
            }

            /// Whether the first dimension is not empty, as `len()` says; a 0-d array's truth
            /// would be its element's, which a view does not read.
            fn __bool__(&self) -> PyResult<bool> {
                match self.core.descriptor.shape.first() {
                    Some(&n) => Ok(n != 0),
                    None => Err(PyTypeError::new_err(
                        "bool() of a view of a 0-d array: its truth would be the element's, which a view does not \
                         read; test .size or .shape",
                    )),
                }
            }

            fn __repr__(&self) -> String {
                self.core.repr($name)
            }

            /// Views cannot be pickled or copied, whatever the protocol: the memory they
            /// point at belongs to this process and to their owner.
            fn __reduce_ex__(&self, _protocol: &Bound<'_, PyAny>) -> PyResult<()> {
                Err(crate::error::not_picklable(concat!("cai.", $name)))
            }

            fn __reduce__(&self) -> PyResult<()> {
                Err(crate::error::not_picklable(concat!("cai.", $name)))
            }

            fn __copy__(&self) -> PyResult<()> {
                Err(crate::error::not_copyable(concat!("cai.", $name)))
            }

            fn __deepcopy__(&self, _memo: &Bound<'_, PyAny>) -> PyResult<()> {
                Err(crate::error::not_copyable(concat!("cai.", $name)))
            }

            fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
                visit.call(self.core.links.owner())?;
                if let Some(v) = self.core.links.interface() {
                    visit.call(v)?;
                }
                if let Some(m) = self.core.links.mask() {
                    visit.call(m)?;
                }
                Ok(())
            }
        }
    };
}

view_class!(
    /// A validated view of a device array exported through `__cuda_array_interface__`.
    ///
    /// It holds a strong reference to the producer (`owner`) and re-exports the array
    /// through its own `__cuda_array_interface__` (always version 3, with the stream it
    /// was read with; `version` keeps the version the producer declared).
    CudaArray,
    "CudaArray",
    Interface::Cuda,
    __cuda_array_interface__,
    c"__cuda_array_interface__"
);

view_class!(
    /// A validated view of a host array exported through NumPy's `__array_interface__`.
    ///
    /// It holds a strong reference to the producer (`owner`) and re-exports the array
    /// through its own `__array_interface__`, so `numpy.asarray(view)` shares the memory.
    HostArray,
    "HostArray",
    Interface::Host,
    __array_interface__,
    c"__array_interface__"
);
