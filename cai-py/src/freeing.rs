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
use std::ops::Deref;
use std::ptr::NonNull;

use pyo3::{ffi, Py, PyAny};

/// How many releases may nest on a thread before the next is set aside (Python's
/// trashcan allows 50 nested deallocations).
const LIMIT: u32 = 50;

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
    let released = RELEASES.try_with(|r| {
        let depth = r.depth.get();
        if depth >= LIMIT {
            // Set aside: the borrow ends before any Python code runs.
            r.aside.borrow_mut().push(object);
            return;
        }
        r.depth.set(depth + 1);
        // SAFETY: as the caller promises.
        unsafe { ffi::Py_DecRef(object.as_ptr()) };
        if depth == 0 {
            drain(&r.aside);
        }
        r.depth.set(depth);
    });
    if released.is_err() {
        // The thread is ending and its thread-locals are gone: released at once.
        // SAFETY: as the caller promises.
        unsafe { ffi::Py_DecRef(object.as_ptr()) };
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

/// A strong reference released through [`release`] when dropped: what a view keeps
/// alive, which may be the previous link of a chain.
#[derive(Debug)]
pub(crate) struct Held(ManuallyDrop<Py<PyAny>>);

impl Held {
    pub(crate) fn new(object: Py<PyAny>) -> Held {
        Held(ManuallyDrop::new(object))
    }
}

impl Deref for Held {
    type Target = Py<PyAny>;

    fn deref(&self) -> &Py<PyAny> {
        &self.0
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: the reference is not used again; a `Py` is dropped with the GIL held (a
        // view's core, by its deallocation).
        unsafe {
            let object = ManuallyDrop::take(&mut self.0).into_ptr();
            release(NonNull::new_unchecked(object));
        }
    }
}
