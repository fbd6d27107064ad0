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

/// Releases the strong references `objects` (the GIL held); see the module's text.
pub(crate) fn release<const N: usize>(objects: [Option<Py<PyAny>>; N]) {
    let pointers = objects.map(|o| o.and_then(|o| NonNull::new(o.into_ptr())));
    let released = RELEASES.try_with(|r| {
        let depth = r.depth.get();
        if depth >= LIMIT {
            // Set aside: the borrow ends before any Python code runs.
            r.aside.borrow_mut().extend(pointers.iter().flatten());
            return;
        }
        r.depth.set(depth + 1);
        for p in pointers.iter().flatten() {
            // SAFETY: a strong reference of ours, the GIL held.
            unsafe { ffi::Py_DecRef(p.as_ptr()) };
        }
        if depth == 0 {
            // The outermost release: what nested ones set aside, each freed from here.
            loop {
                let next = r.aside.borrow_mut().pop();
                let Some(p) = next else { break };
                // SAFETY: as above; set aside by a nested release, released once.
                unsafe { ffi::Py_DecRef(p.as_ptr()) };
            }
        }
        r.depth.set(depth);
    });
    if released.is_err() {
        // The thread is ending and its thread-locals are gone: released at once.
        for p in pointers.iter().flatten() {
            // SAFETY: as above.
            unsafe { ffi::Py_DecRef(p.as_ptr()) };
        }
    }
}
