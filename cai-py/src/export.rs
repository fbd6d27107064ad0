//! Building interface dicts from descriptors.

use std::cell::RefCell;

use cai_core::{Descr, Descriptor, FieldType, TypeStr};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::parse::Interface;
use crate::view::{CudaArray, HostArray};

/// The interface dict of `descriptor`, as the producer `owner` exports it.
///
/// The dict carries `shape`, `typestr`, `data`, `version` and `strides` (`None` when the
/// array is C-contiguous, as Numba and cuDF expect), `descr` for records, `mask` when there
/// is one (a view of the descriptor's mask that keeps `owner` alive) and, for the CUDA
/// interface from version 3, `stream`. The host interface is NumPy's version 3.
pub fn interface_dict<'py>(
    owner: &Bound<'py, PyAny>,
    descriptor: &Descriptor,
    iface: Interface,
) -> PyResult<Bound<'py, PyDict>> {
    interface_dict_with(owner, descriptor, iface, None, false)
}

/// [`interface_dict`], whose `mask`, where the descriptor has one, is `mask_object` when
/// given: the object the descriptor's mask was read from, which a consumer reads again. (A
/// view of the mask as read would have to keep alive what that read kept alive, the
/// mask's interface value included, which the mask object alone does not.) When `hidden`,
/// the dict is off the collector's lists from its making on, so that no Python code can
/// find it: for a dict that cai hands to its own code.
pub(crate) fn interface_dict_with<'py>(
    owner: &Bound<'py, PyAny>,
    descriptor: &Descriptor,
    iface: Interface,
    mask_object: Option<&Bound<'py, PyAny>>,
    hidden: bool,
) -> PyResult<Bound<'py, PyDict>> {
    // A dict of immutable values (no mask object, no descr list) is built once per
    // descriptor and copied on later exports of the same array: the copy is the caller's
    // to change.
    if descriptor.mask.is_some() || descriptor.descr.is_some() {
        return build(owner, descriptor, iface, mask_object, hidden);
    }
    // Hidden with nothing allocated since the copy was made: no collection has run to find it.
    Ok(hidden_if(hidden, template(owner, descriptor, iface)?.copy()?))
}

/// The dict of `descriptor`, which has no mask and no `descr`, as this thread's cache
/// holds it: shared, taken off the collector's lists, and never changed, so that callers
/// only copy it (a view keeps it as its own dict). The descriptor, with its pointer and
/// stream, is compared in full.
pub(crate) fn template<'py>(
    owner: &Bound<'py, PyAny>,
    descriptor: &Descriptor,
    iface: Interface,
) -> PyResult<Bound<'py, PyDict>> {
    let py = owner.py();
    // The per-thread caches are gone while the thread's locals are torn down (a
    // destructor exporting then): the dict is built, and not kept.
    let hit = TEMPLATES
        .try_with(|t| {
            t.borrow()
                .iter()
                // The pointer first: it tells most arrays apart at the cost of one
                // comparison, where the whole descriptor's takes some hundred instructions.
                .find(|(i, d, _)| *i == iface && d.data == descriptor.data && d == descriptor)
                .map(|(_, _, dict)| dict.clone_ref(py))
        })
        .ok()
        .flatten();
    if let Some(template) = hit {
        return Ok(template.into_bound(py));
    }
    let template = build(owner, descriptor, iface, None, true)?;
    let evicted = TEMPLATES
        .try_with(|t| {
            let mut t = t.borrow_mut();
            let evicted = (t.len() == TEMPLATE_CACHE).then(|| t.remove(0));
            t.push((iface, descriptor.clone(), template.clone().unbind()));
            evicted
        })
        .ok()
        .flatten();
    // Released with the cache not borrowed: nothing a release runs can find it busy.
    drop(evicted);
    Ok(template)
}

/// Takes `object`, a dict, list or tuple (of a type the collector tracks) that is part of no
/// cycle, off the collector's lists: out of reach of `gc.get_objects()` and
/// `gc.get_referrers()`, which would hand it to code that could change what cai (and every
/// consumer) trusts. A dict that every later export copies, and what cai hands to its own
/// code, is taken off so.
pub(crate) fn hide(object: &Bound<'_, PyAny>) {
    debug_assert!(
        object.is_instance_of::<PyDict>() || object.is_instance_of::<PyTuple>() || object.is_instance_of::<PyList>()
    );
    // SAFETY: a live object of a type the collector tracks (its header is there);
    // untracking one that is not tracked does nothing.
    unsafe { pyo3::ffi::PyObject_GC_UnTrack(object.as_ptr().cast()) };
}

/// How many descriptors' dicts each thread keeps.
const TEMPLATE_CACHE: usize = 8;

thread_local! {
    static TEMPLATES: RefCell<Vec<(Interface, Descriptor, Py<PyDict>)>> = const { RefCell::new(Vec::new()) };
    static TYPESTR_STRINGS: RefCell<Vec<(TypeStr, Py<PyString>)>> = const { RefCell::new(Vec::new()) };
}

/// Holds off the collector's automatic runs while cai fills a dict (or a list in it) that
/// it hands out or keeps. A dict is tracked by the collector from its first tuple on, and
/// a run that the next allocation starts calls finalizers, which could find the dict
/// through `gc.get_objects()` and change it before it is complete: a `shape` of their
/// own, exported (and read by NumPy) as the array's. Filling runs no Python code, and
/// nothing else runs while the GIL is held, so no run happens meanwhile. Restored when
/// dropped, unless the collector was already off.
struct NoCollections {
    was_on: bool,
}

impl NoCollections {
    fn hold(_py: Python<'_>) -> NoCollections {
        // SAFETY: the GIL is held (`_py`); PyGC_Disable returns the previous state.
        NoCollections { was_on: unsafe { pyo3::ffi::PyGC_Disable() } == 1 }
    }
}

impl Drop for NoCollections {
    fn drop(&mut self) {
        if self.was_on {
            // SAFETY: the GIL is held, as it was when the value was made.
            unsafe { pyo3::ffi::PyGC_Enable() };
        }
    }
}

/// The interface dict of `descriptor`, made with the collector held off (see
/// [`NoCollections`]) and, when `hidden`, taken off the collector's lists before it runs
/// again, with its `descr` lists.
fn build<'py>(
    owner: &Bound<'py, PyAny>,
    descriptor: &Descriptor,
    iface: Interface,
    mask_object: Option<&Bound<'py, PyAny>>,
    hidden: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let py = owner.py();
    // The mask's view first: making it may run Python code (the `cai` package's view
    // factory, for another module built on cai-py), which must not meet a collector held
    // off.
    let mask = match (&descriptor.mask, mask_object) {
        (Some(_), Some(object)) => Some(object.clone()),
        (Some(m), None) => Some(match iface {
            Interface::Cuda => CudaArray::from_descriptor(owner, (**m).clone())?,
            Interface::Host => HostArray::from_descriptor(owner, (**m).clone())?,
        }),
        (None, _) => None,
    };
    let _held = NoCollections::hold(py);
    let dict = PyDict::new(py);
    dict.set_item(intern!(py, "shape"), PyTuple::new(py, &descriptor.shape)?)?;
    dict.set_item(intern!(py, "typestr"), typestr_str(py, &descriptor.typestr))?;
    if let Some(descr) = descriptor.descr.as_ref().filter(|d| !d.restates(&descriptor.typestr)) {
        dict.set_item(intern!(py, "descr"), fields_list(py, descr, hidden)?)?;
    }
    dict.set_item(intern!(py, "data"), (descriptor.data, descriptor.readonly))?;
    let version = match iface {
        Interface::Cuda => descriptor.version,
        Interface::Host => 3,
    };
    dict.set_item(intern!(py, "version"), version)?;
    match &descriptor.strides {
        Some(s) if !descriptor.is_c_contiguous() => dict.set_item(intern!(py, "strides"), PyTuple::new(py, s)?)?,
        _ => dict.set_item(intern!(py, "strides"), py.None())?,
    }
    if let Some(mask) = mask {
        dict.set_item(intern!(py, "mask"), mask)?;
    }
    if iface == Interface::Cuda && Descriptor::has_stream_key(version) {
        dict.set_item(intern!(py, "stream"), descriptor.stream.to_raw())?;
    }
    Ok(hidden_if(hidden, dict))
}

/// The typestr as a Python string, made once per typestr and thread for the first 64
/// typestrs (interned), anew for any other (not interned: interned strings are immortal
/// from Python 3.12, so interning every typestr seen would grow without bound).
fn typestr_str<'py>(py: Python<'py>, typestr: &TypeStr) -> Bound<'py, PyString> {
    // Without the cache (the thread's locals torn down), as when it is full.
    let (cached, full) = TYPESTR_STRINGS
        .try_with(|c| {
            let c = c.borrow();
            (c.iter().find(|(t, _)| t == typestr).map(|(_, s)| s.clone_ref(py)), c.len() >= 64)
        })
        .unwrap_or((None, true));
    if let Some(s) = cached {
        return s.into_bound(py);
    }
    let text = typestr.to_string();
    if full {
        return PyString::new(py, &text);
    }
    let s = PyString::intern(py, &text);
    let _ = TYPESTR_STRINGS.try_with(|c| {
        let mut c = c.borrow_mut();
        if c.len() < 64 {
            c.push((*typestr, s.clone().unbind()));
        }
    });
    s
}

/// A field's type as NumPy writes it: a typestr, a nested list, or `(type, shape)`.
fn field_type<'py>(py: Python<'py>, ty: &FieldType, hidden: bool) -> PyResult<Bound<'py, PyAny>> {
    Ok(match ty {
        FieldType::Scalar(t) => typestr_str(py, t).into_any(),
        FieldType::Record(nested) => fields_list(py, nested, hidden)?.into_any(),
        FieldType::SubArray { base, shape } => {
            hidden_if(hidden, PyTuple::new(py, [field_type(py, base, hidden)?, PyTuple::new(py, shape)?.into_any()])?)
                .into_any()
        }
    })
}

/// `object` (a dict, list or tuple), taken off the collector's lists when `hidden` (see
/// [`hide`]). A tuple counts too: one that holds a nested record's list stays tracked, and
/// would lead a finalizer to the list.
fn hidden_if<'py, T>(hidden: bool, object: Bound<'py, T>) -> Bound<'py, T> {
    if hidden {
        hide(object.as_any());
    }
    object
}

/// A descr as NumPy writes it: a list of `(name, type[, shape])` tuples, with `(title,
/// name)` for titled fields and nested lists for nested records. Filled with the
/// collector held off (see [`NoCollections`]): a finalizer could otherwise add a field to
/// the unfinished list.
pub(crate) fn descr_list<'py>(py: Python<'py>, descr: &Descr) -> PyResult<Bound<'py, PyList>> {
    let _held = NoCollections::hold(py);
    fields_list(py, descr, false)
}

/// [`descr_list`] with the collector already held off; when `hidden`, each list and each
/// tuple that holds them (the nested ones too) is taken off the collector's lists, for a
/// dict that cai hands to its own code.
fn fields_list<'py>(py: Python<'py>, descr: &Descr, hidden: bool) -> PyResult<Bound<'py, PyList>> {
    let list = hidden_if(hidden, PyList::empty(py));
    for field in &descr.fields {
        let name = match &field.title {
            Some(title) => (title.as_str(), field.name.as_str()).into_pyobject(py)?.into_any(),
            None => PyString::new(py, &field.name).into_any(),
        };
        let entry = match (&field.ty, field.shape.is_empty()) {
            // An explicit `()`, written as it was read: `('', '<V2', ())`.
            (FieldType::SubArray { base, shape }, true) if shape.is_empty() => {
                PyTuple::new(py, [name, field_type(py, base, hidden)?, PyTuple::empty(py).into_any()])?
            }
            (ty, true) => PyTuple::new(py, [name, field_type(py, ty, hidden)?])?,
            (ty, false) => {
                PyTuple::new(py, [name, field_type(py, ty, hidden)?, PyTuple::new(py, &field.shape)?.into_any()])?
            }
        };
        list.append(hidden_if(hidden, entry))?;
    }
    Ok(list)
}
