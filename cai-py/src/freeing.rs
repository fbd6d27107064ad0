//! Releasing the references that chains of objects hang by, without one C frame per link.
//!
//! A view holds its producer, which may be a view that holds its own producer, and so on:
//! `v = cai.from_dlpack(v)` in a loop (each view holds a tensor whose deleter holds the
//! view before), `v = cai.as_array(v)`, or NumPy arrays and cai views taking turns. Freeing
//! the last link frees the one before it from inside its own deallocation, so each link
//! costs a few C frames, and a chain of some thousand links overflowed the C stack (a
//! crash; fewer on a thread with a small stack). Python's containers bound that recursion
//! with the "trashcan", which the stable ABI does not offer; the releases here do the
//! same: past [`LIMIT`] nested releases on a thread, a reference is set aside, and the
//! outermost release frees what was set aside, one after the other.

use std::cell::{Cell, RefCell};
use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use pyo3::{ffi, Py, PyAny};

/// How many releases may nest on a thread before the next is set aside. Python's trashcan
/// allows 50 nested deallocations of its containers; a link here (a view's deallocation,
/// and a DLPack deleter or NumPy's between two views) takes some kilobytes of C stack in a
/// debug build, and a thread's stack may be as small as 32 KiB, so fewer nest here.
const LIMIT: u32 = 4;

/// A thread's nested releases and the references set aside, in one thread-local (one
/// lookup per release).
struct Releases {
    depth: Cell<u32>,
    aside: RefCell<Vec<NonNull<ffi::PyObject>>>,
}

thread_local! {
    static RELEASES: Releases = const { Releases { depth: Cell::new(0), aside: RefCell::new(Vec::new()) } };
}

/// Releases the strong reference `object`; see the module's text.
///
/// # Safety
///
/// `object` is a strong reference the caller gives up, and the GIL is held.
#[inline]
pub(crate) unsafe fn release(object: NonNull<ffi::PyObject>) {
    // SAFETY: as the caller promises.
    unsafe { release_all([Some(object)]) }
}

/// Releases the strong references `objects`, in order, as one release (one look at the
/// thread's state); see the module's text.
///
/// # Safety
///
/// Each object is a strong reference the caller gives up, and the GIL is held.
#[inline]
unsafe fn release_all<const N: usize>(objects: [Option<NonNull<ffi::PyObject>>; N]) {
    let released = RELEASES.try_with(|r| {
        let depth = r.depth.get();
        if depth >= LIMIT {
            // Set aside: the borrow ends before any Python code runs.
            r.aside.borrow_mut().extend(objects.iter().flatten());
            return;
        }
        r.depth.set(depth + 1);
        for object in objects.iter().flatten() {
            // SAFETY: as the caller promises.
            unsafe { ffi::Py_DecRef(object.as_ptr()) };
        }
        if depth == 0 {
            drain(&r.aside);
        }
        r.depth.set(depth);
    });
    if released.is_err() {
        // The thread is ending and its thread-locals are gone: released at once.
        for object in objects.iter().flatten() {
            // SAFETY: as the caller promises.
            unsafe { ffi::Py_DecRef(object.as_ptr()) };
        }
    }
}

/// Frees, from the outermost release, what nested ones set aside.
#[inline]
fn drain(aside: &RefCell<Vec<NonNull<ffi::PyObject>>>) {
    loop {
        let next = aside.borrow_mut().pop();
        let Some(p) = next else { break };
        // SAFETY: a strong reference set aside by a nested release, released once, the
        // GIL held.
        unsafe { ffi::Py_DecRef(p.as_ptr()) };
    }
}

/// What a view keeps alive, released together through [`release_all`] when dropped: its
/// owner, the value of the interface attribute it was read from, and its mask. Each may be
/// the previous link of a chain (a mask array whose base is a view with a mask, ...).
#[derive(Debug)]
pub(crate) struct Links {
    owner: ManuallyDrop<Py<PyAny>>,
    interface: ManuallyDrop<Option<Py<PyAny>>>,
    mask: ManuallyDrop<Option<Py<PyAny>>>,
}

impl Links {
    pub(crate) fn new(owner: Py<PyAny>, interface: Option<Py<PyAny>>, mask: Option<Py<PyAny>>) -> Links {
        Links {
            owner: ManuallyDrop::new(owner),
            interface: ManuallyDrop::new(interface),
            mask: ManuallyDrop::new(mask),
        }
    }

    pub(crate) fn owner(&self) -> &Py<PyAny> {
        &self.owner
    }

    pub(crate) fn interface(&self) -> Option<&Py<PyAny>> {
        self.interface.as_ref()
    }

    pub(crate) fn mask(&self) -> Option<&Py<PyAny>> {
        self.mask.as_ref()
    }
}

impl Drop for Links {
    fn drop(&mut self) {
        // SAFETY: each field is taken once, here, and not used again; a `Py` is dropped
        // with the GIL held (a view's core, by its deallocation).
        unsafe {
            let owner = NonNull::new_unchecked(ManuallyDrop::take(&mut self.owner).into_ptr());
            let raw = |o: Option<Py<PyAny>>| o.map(|o| NonNull::new_unchecked(o.into_ptr()));
            let interface = raw(ManuallyDrop::take(&mut self.interface));
            let mask = raw(ManuallyDrop::take(&mut self.mask));
            release_all([Some(owner), interface, mask]);
        }
    }
}
