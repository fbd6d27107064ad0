//! Values made once (per process, or per object) by code that can run Python.
//!
//! pyo3's `PyOnceLock::get_or_init` (and `PyOnceLock::import`, built on it) holds the
//! cell while the value is made. Making it can run any Python code: an import runs
//! import hooks, and any allocation can start a collection whose finalizers run. Code
//! that asks the same cell on the same thread meanwhile waits for itself forever, and an
//! error raised meanwhile had to be swallowed or cached. Here the value is made with no
//! cell held, and the first value stored wins; an error is returned and nothing is kept,
//! so the next call tries again.

use pyo3::exceptions::{PyModuleNotFoundError, PySystemError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;

/// The value of `cell`, made by `make` when there is none yet (see the module's text).
#[inline]
pub(crate) fn get_or_make<'a, T>(
    cell: &'a PyOnceLock<T>,
    py: Python<'_>,
    make: impl FnOnce() -> PyResult<T>,
) -> PyResult<&'a T> {
    match cell.get(py) {
        Some(value) => Ok(value),
        None => {
            // Making it may run Python code (an import hook) that calls cai again, which
            // looks for the value again.
            let made = {
                let _nesting = crate::parse::Nesting::enter("a value cai looks up once")?;
                make()?
            };
            keep(cell, py, made)
        }
    }
}

/// Stores `value` in `cell` unless a value is there already (a call that ran while this
/// one made its value), and returns the stored one. A value not stored is dropped here,
/// with no cell held.
#[cold]
pub(crate) fn keep<'a, T>(cell: &'a PyOnceLock<T>, py: Python<'_>, value: T) -> PyResult<&'a T> {
    // `set` returns once the cell is full, with this value or the one stored first.
    let _ = cell.set(py, value);
    cell.get(py).ok_or_else(|| PySystemError::new_err("cai: a value made once was not kept"))
}

/// What the installed `cai` package offers a module built on cai-py.
pub(crate) enum Package<'py> {
    /// `cai._cai.<name>`.
    Found(Bound<'py, PyAny>),
    /// The package is not installed (a `ModuleNotFoundError` for `cai`), or lacks the
    /// attribute (an older package): lasting, so the caller keeps its own fallback for
    /// good.
    Missing,
    /// Not now: the package's module is being executed (an import hook or a finalizer
    /// called in mid-import) and has no such attribute yet; importing or reading it raised
    /// another exception (an import hook's, a module `__getattr__`'s), or did so lately
    /// (see [`Backoff`]); or this thread is already looking a value up (code the lookup
    /// ran called cai again). The fallback serves this call only, and a later call looks
    /// again.
    NotNow,
}

/// The longest wait, in asks, between two lookups of a value after failures (a package
/// whose import always fails then costs one import per 65,536 asks: 65,535 are skipped).
const MAX_SKIPPED: u32 = 1 << 16;

/// The failures of one value's lookups: after the n-th failure in a row, the next
/// 2^(n-1) - 1 asks are [`Package::NotNow`] without a lookup (so one failure is retried at
/// the next ask, and a package whose import always fails is imported a logarithmic number
/// of times). A lookup that finds the package, or finds it missing, ends the run.
struct Backoff {
    name: &'static str,
    failures: u32,
    skip: u32,
    /// How many lookups of the value have ended: a failed lookup during which another
    /// ended (threads that ran into one refusal together) does not count again.
    ended: u64,
}

/// The backoff of every value looked up (a handful of names), under the GIL.
static BACKOFF: std::sync::Mutex<Vec<Backoff>> = std::sync::Mutex::new(Vec::new());

/// Runs `f` on `name`'s backoff. No Python code runs under the lock.
fn with_backoff<R>(name: &'static str, f: impl FnOnce(&mut Backoff) -> R) -> R {
    let mut all = BACKOFF.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let i = match all.iter().position(|b| b.name == name) {
        Some(i) => i,
        None => {
            all.push(Backoff { name, failures: 0, skip: 0, ended: 0 });
            all.len() - 1
        }
    };
    f(&mut all[i])
}

thread_local! {
    /// Whether this thread is in [`package_attr`].
    static LOOKING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// This thread's lookup, ended on drop.
struct Looking(());

impl Drop for Looking {
    fn drop(&mut self) {
        LOOKING.with(|l| l.set(false));
    }
}

/// Whether `e`, raised by `import cai`, says that the package is not installed: a
/// `ModuleNotFoundError` for `cai` itself (not for a module that an import hook or the
/// package's own code imports).
fn not_installed(py: Python<'_>, e: &PyErr) -> PyResult<bool> {
    if !e.is_instance_of::<PyModuleNotFoundError>(py) {
        return Ok(false);
    }
    match e.value(py).getattr_opt(pyo3::intern!(py, "name")) {
        // A name with no UTF-8 form (a lone surrogate) is not "cai".
        Ok(Some(name)) => Ok(name.cast_exact::<PyString>().is_ok_and(|n| n.to_str().is_ok_and(|n| n == "cai"))),
        Ok(None) => Ok(false),
        Err(e) if crate::parse::must_propagate(py, &e) => Err(e),
        Err(_) => Ok(false),
    }
}

/// Looks `cai._cai.<name>` up. Importing runs Python code; an exception that must
/// propagate does, and any other is [`Package::NotNow`] unless it says that the package
/// is not installed. A lookup made while this thread is making one (from the code that
/// one runs) is [`Package::NotNow`] at once: each level of such a recursion would make
/// every lookup of its call again, and the work would double with each level.
///
/// The package is imported, and its extension module read as its attribute: importing
/// `cai._cai` by name takes the submodule's import lock before the package's, the
/// reverse of an `import cai` running on another thread, and importlib breaks such a
/// cycle by failing one of the two imports (`_DeadlockError`). Importing the package
/// alone waits for that other import to finish.
pub(crate) fn package_attr<'py>(py: Python<'py>, name: &'static str) -> PyResult<Package<'py>> {
    // The import, and the lookups on what it finds, run Python code (an import hook, a
    // module's `__getattr__`) that may call cai again, which looks the value up again.
    if LOOKING.with(|l| l.replace(true)) {
        return Ok(Package::NotNow);
    }
    let _looking = Looking(());
    let started = with_backoff(name, |b| match b.skip {
        0 => Some(b.ended),
        _ => {
            b.skip -= 1;
            None
        }
    });
    let Some(started) = started else { return Ok(Package::NotNow) };
    let found = look_up(py, name)?;
    with_backoff(name, |b| {
        let overlapped = b.ended != started;
        b.ended = b.ended.wrapping_add(1);
        match found {
            // Another lookup ended meanwhile: that one counted (or ended) the run.
            Failed if overlapped => {}
            Failed => {
                b.failures = b.failures.saturating_add(1);
                b.skip = 1u32.checked_shl(b.failures - 1).unwrap_or(MAX_SKIPPED).min(MAX_SKIPPED) - 1;
            }
            Looked(_) => {
                b.failures = 0;
                b.skip = 0;
            }
        }
    });
    Ok(match found {
        Failed => Package::NotNow,
        Looked(package) => package,
    })
}

/// What one lookup found: an answer, or a failure for now (an exception, which counts
/// toward the value's [`Backoff`]).
enum Lookup<'py> {
    Looked(Package<'py>),
    Failed,
}
use Lookup::{Failed, Looked};

/// [`package_attr`]'s lookup itself.
fn look_up<'py>(py: Python<'py>, name: &'static str) -> PyResult<Lookup<'py>> {
    let _nesting = crate::parse::Nesting::enter("a value cai looks up once")?;
    let package = match py.import("cai") {
        Ok(package) => package,
        Err(e) if crate::parse::must_propagate(py, &e) => return Err(e),
        Err(e) if not_installed(py, &e)? => return Ok(Looked(Package::Missing)),
        Err(_) => return Ok(Failed),
    };
    let found = package.getattr_opt("_cai").and_then(|module| match module {
        Some(module) => module.getattr_opt(name),
        None => Ok(None),
    });
    match found {
        Ok(Some(value)) => return Ok(Looked(Package::Found(value))),
        Err(e) if crate::parse::must_propagate(py, &e) => return Err(e),
        Err(_) => return Ok(Failed),
        Ok(None) => {}
    }
    // importlib sets `__spec__._initializing` while it executes a module: while the
    // package's `__init__` runs (and the extension module it imports), what it will
    // hold may not be there yet.
    let initializing = package
        .getattr_opt("__spec__")
        .and_then(|spec| match spec {
            Some(spec) if !spec.is_none() => spec.getattr_opt("_initializing"),
            _ => Ok(None),
        })
        .and_then(|flag| flag.map_or(Ok(false), |f| f.is_truthy()));
    match initializing {
        // Being executed is no failure: the package will be there.
        Ok(true) => Ok(Looked(Package::NotNow)),
        Err(e) if crate::parse::must_propagate(py, &e) => Err(e),
        Err(_) => Ok(Failed),
        Ok(false) => Ok(Looked(Package::Missing)),
    }
}
