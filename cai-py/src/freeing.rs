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
//!
//! Setting aside delays frees: code that a deep release runs (a producer's `__del__`, a
//! weakref callback) would have every release it makes wait until it returns, holding
//! the memory of the arrays it drops meanwhile. So where the thread's stack is known
//! (Linux with glibc), a release nests past [`LIMIT`] all the same while the releases
//! under way take less than [`NESTED`] of it and more than [`ROOM`] is left; past that,
//! or on a thread whose stack is not known, references are set aside. The code a deep
//! release runs thus finds at most [`NESTED`] more of the stack taken than the outermost
//! release did, as it did with [`LIMIT`] releases (Python code there may recurse as deep
//! as the recursion limit lets it, which CPython checks against no stack size).

use std::cell::{Cell, RefCell};
use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use pyo3::{ffi, Py, PyAny};

/// How many releases may nest on a thread before the next is set aside. Python's trashcan
/// allows 50 nested deallocations of its containers; a link here (a view's deallocation,
/// and a DLPack deleter or NumPy's between two views) takes some kilobytes of C stack in a
/// debug build, and a thread's stack may be as small as 32 KiB, so fewer nest here.
const LIMIT: u32 = 4;

/// How much of the thread's stack must be left for a release past [`LIMIT`] to nest: far
/// more than a link takes, and more than the kernel's guard gap below the main thread's
/// stack (1 MiB), by which the size glibc reports for that stack can overstate it.
const ROOM: usize = 2 << 20;

/// How much stack the releases under way may take, from the outermost one's frame, for
/// one more to nest past [`LIMIT`]: some hundred links of a chain.
const NESTED: usize = 256 << 10;

/// A thread's nested releases and the references set aside, in one thread-local (one
/// lookup per release).
struct Releases {
    depth: Cell<u32>,
    /// Where on the stack the outermost release under way runs.
    base: Cell<usize>,
    aside: RefCell<Vec<NonNull<ffi::PyObject>>>,
    /// The thread's stack (its lowest and highest addresses), read at its first release
    /// past [`LIMIT`]: `None` until then, `Some(None)` where it cannot be known.
    stack: Cell<Option<Option<(usize, usize)>>>,
}

thread_local! {
    static RELEASES: Releases =
        const {
            Releases { depth: Cell::new(0), base: Cell::new(0), aside: RefCell::new(Vec::new()), stack: Cell::new(None) }
        };
}

/// Whether the releases under way take less than [`NESTED`] of the stack and more than
/// [`ROOM`] of it is left below this call.
#[cold]
#[inline(never)]
fn room_to_nest(r: &Releases) -> bool {
    let stack = match r.stack.get() {
        Some(known) => known,
        None => {
            let known = thread_stack();
            r.stack.set(Some(known));
            known
        }
    };
    let Some((low, high)) = stack else { return false };
    // A local's address stands for the stack pointer. Off the thread's stack (code running
    // on a stack of its own, a signal's), nothing is known of the room.
    let here = std::ptr::addr_of!(stack) as usize;
    (low..high).contains(&here) && here - low > ROOM && r.base.get().saturating_sub(here) < NESTED
}

/// The calling thread's stack, as the C library describes it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn thread_stack() -> Option<(usize, usize)> {
    // SAFETY: the attributes are initialized by `pthread_getattr_np` before they are read,
    // and destroyed once; the out-pointers are valid locals.
    unsafe {
        let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
        if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
            return None;
        }
        let (mut addr, mut size) = (std::ptr::null_mut(), 0);
        let got = libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size);
        libc::pthread_attr_destroy(attr.as_mut_ptr());
        if got != 0 {
            return None;
        }
        let low = addr as usize;
        Some((low, low.checked_add(size)?))
    }
}

/// Elsewhere the stack is not looked up: releases past [`LIMIT`] are set aside.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn thread_stack() -> Option<(usize, usize)> {
    None
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
        if depth >= LIMIT && !room_to_nest(r) {
            // Set aside: the borrow ends before any Python code runs.
            r.aside.borrow_mut().extend(objects.iter().flatten());
            return;
        }
        if depth == 0 {
            // The stack grows down from here while releases nest.
            r.base.set(std::ptr::addr_of!(depth) as usize);
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
