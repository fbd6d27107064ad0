//! How a value received shows in a message: Python's `repr`, cut at [`LIMIT`] characters.
//!
//! Lists, tuples and dicts (exact ones) are written here, item by item, and the writing
//! stops once the limit is reached, so that neither their depth nor their size matters: a
//! list nested 100,000 deep shows as `[[[[...` where Python's `repr` raises
//! `RecursionError`, and a list of a million items costs as little as one of three. A
//! container that holds itself shows as Python shows it (`[1, [...]]`).
//!
//! Everything else is shown by its own `repr`, which is the producer's code: it may raise
//! (the value shows as a placeholder naming the exception) and may change the container
//! being written, whose items are therefore held by strong references and re-read by
//! index or position after every call. Only the start of a long `repr` is copied.

use pyo3::exceptions::PyRecursionError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::parse::must_propagate;

/// The most characters of a value a message shows; `...` marks a value cut there.
pub(crate) const LIMIT: usize = 80;

/// `value` as a message shows it: its `repr`, with runs of whitespace as one space (but
/// in strs, whose `repr` escapes every whitespace but the space), cut at [`LIMIT`]
/// characters. A container cut there ends in `...`; any other value, whose length is
/// known, in `... (N characters)`, as cai-core cuts a value.
///
/// A `repr` that raises an ordinary exception (or `RecursionError`) shows as
/// `<repr() raised NAME>`; an exception that must propagate (`KeyboardInterrupt`,
/// `MemoryError`, ...) is the error.
pub(crate) fn shown(value: &Bound<'_, PyAny>) -> PyResult<String> {
    let mut w = Writer { out: String::new(), chars: 0, space: true, cut: false, path: Vec::new() };
    if is_container(value) {
        w.value(value)?;
        let mut out = w.out.trim_end().to_owned();
        if w.cut {
            out.push_str("...");
        }
        return Ok(out);
    }
    match own_repr(value)? {
        Repr::Text(r) => {
            let (start, total) = start_of(&r, LIMIT + 1)?;
            w.push(&start, !value.is_exact_instance_of::<PyString>());
            let out = w.out.trim_end().to_owned();
            Ok(if w.cut { format!("{out}... ({total} characters)") } else { out })
        }
        Repr::Placeholder(p) => Ok(p),
    }
}

/// Whether `value` is a list, tuple or dict that [`shown`] writes itself.
fn is_container(value: &Bound<'_, PyAny>) -> bool {
    value.is_exact_instance_of::<PyList>()
        || value.is_exact_instance_of::<PyTuple>()
        || value.is_exact_instance_of::<PyDict>()
}

struct Writer {
    out: String,
    chars: usize,
    /// Whether the last character written was a space (or nothing was written yet).
    space: bool,
    cut: bool,
    /// The lists and dicts being written, outermost first, each held by the caller of
    /// the writing (a strong reference), so that their addresses stay theirs.
    path: Vec<*mut ffi::PyObject>,
}

impl Writer {
    /// Appends `text` up to the limit, with runs of whitespace as one space if `collapse`.
    fn push(&mut self, text: &str, collapse: bool) {
        for c in text.chars() {
            if self.cut {
                return;
            }
            let c = if collapse && c.is_whitespace() {
                if self.space {
                    continue;
                }
                ' '
            } else {
                c
            };
            if self.chars == LIMIT {
                self.cut = true;
                return;
            }
            self.space = c == ' ';
            self.out.push(c);
            self.chars += 1;
        }
    }

    fn value(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        if self.cut {
            return Ok(());
        }
        let is_list = value.is_exact_instance_of::<PyList>();
        let is_dict = value.is_exact_instance_of::<PyDict>();
        if (is_list || is_dict) && self.path.contains(&value.as_ptr()) {
            self.push(if is_list { "[...]" } else { "{...}" }, false);
            return Ok(());
        }
        if let Ok(list) = value.cast_exact::<PyList>() {
            self.path.push(list.as_ptr());
            self.push("[", false);
            // The length is read again after every item: an item's repr may shrink the list.
            let mut i = 0;
            while !self.cut && i < list.len() {
                let Ok(item) = list.get_item(i) else { break };
                if i > 0 {
                    self.push(", ", false);
                }
                self.value(&item)?;
                i += 1;
            }
            self.push("]", false);
            self.path.pop();
        } else if let Ok(tuple) = value.cast_exact::<PyTuple>() {
            self.push("(", false);
            for (i, item) in tuple.iter().enumerate() {
                if self.cut {
                    break;
                }
                if i > 0 {
                    self.push(", ", false);
                }
                self.value(&item)?;
            }
            self.push(if tuple.len() == 1 { ",)" } else { ")" }, false);
        } else if let Ok(dict) = value.cast_exact::<PyDict>() {
            self.path.push(dict.as_ptr());
            self.push("{", false);
            let mut pos: ffi::Py_ssize_t = 0;
            let mut first = true;
            while !self.cut {
                let Some((key, item)) = next_item(dict, &mut pos) else { break };
                if !first {
                    self.push(", ", false);
                }
                first = false;
                self.value(&key)?;
                self.push(": ", false);
                self.value(&item)?;
            }
            self.push("}", false);
            self.path.pop();
        } else {
            match own_repr(value)? {
                Repr::Text(r) => {
                    let (start, _) = start_of(&r, LIMIT - self.chars + 1)?;
                    self.push(&start, !value.is_exact_instance_of::<PyString>());
                }
                Repr::Placeholder(p) => self.push(&p, false),
            }
        }
        Ok(())
    }
}

/// The dict's next item from `pos`, as strong references, or `None` at its end. The dict
/// may have changed since the last call (a repr ran meanwhile): CPython checks `pos`
/// against the dict's current table, so the walk stays in bounds and ends.
fn next_item<'py>(
    dict: &Bound<'py, PyDict>,
    pos: &mut ffi::Py_ssize_t,
) -> Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let (mut key, mut value) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: `dict` is a live dict; PyDict_Next hands out borrowed references, which
    // become strong ones before any other call (none of which runs Python code here).
    unsafe {
        if ffi::PyDict_Next(dict.as_ptr(), pos, &mut key, &mut value) == 0 {
            return None;
        }
        let py = dict.py();
        Some((Bound::from_borrowed_ptr(py, key), Bound::from_borrowed_ptr(py, value)))
    }
}

/// A value's `repr`, or the placeholder that stands for it.
enum Repr<'py> {
    Text(Bound<'py, PyString>),
    Placeholder(String),
}

/// Whether an exception raised while formatting a message propagates: as
/// [`must_propagate`], but for `RecursionError`, which only says that the value was too
/// deep to print (the reading itself goes on, and its own recursion is checked apart).
pub(crate) fn propagates(py: Python<'_>, e: &PyErr) -> bool {
    must_propagate(py, e) && !e.is_instance_of::<PyRecursionError>(py)
}

/// The value's own `repr`, or the placeholder of the exception it raised.
fn own_repr<'py>(value: &Bound<'py, PyAny>) -> PyResult<Repr<'py>> {
    let py = value.py();
    // The `repr` of the producer's objects may call cai again (and again): past the limit,
    // it shows as one that raised `RecursionError`. Those of ints, floats, strs, None and
    // bools run no Python code.
    let builtin = value.is_exact_instance_of::<pyo3::types::PyInt>()
        || value.is_exact_instance_of::<pyo3::types::PyFloat>()
        || value.is_exact_instance_of::<PyString>()
        || value.is_exact_instance_of::<pyo3::types::PyBool>()
        || value.is_none();
    let nesting = if builtin { None } else { Some(crate::parse::Nesting::enter_message("a value's repr")) };
    let e = match nesting {
        Some(Err(_)) => return Ok(Repr::Placeholder("<repr() raised RecursionError>".to_owned())),
        _ => match value.repr() {
            Ok(r) => return Ok(Repr::Text(r)),
            Err(e) => e,
        },
    };
    drop(nesting);
    if propagates(py, &e) {
        return Err(e);
    }
    // An int too long for its decimal form (CPython refuses more than 4,300 digits).
    if value.is_exact_instance_of::<pyo3::types::PyInt>() {
        if let Ok(bits) = value.call_method0(pyo3::intern!(py, "bit_length")).and_then(|b| b.extract::<u64>()) {
            return Ok(Repr::Placeholder(format!("<an int of {bits} bits>")));
        }
    }
    let name = crate::error::name_text(py, e.get_type(py).name(), "an exception")?;
    Ok(Repr::Placeholder(format!("<repr() raised {name}>")))
}

/// The first `n` characters of `s` as text (only those are copied) and the length of `s`
/// in characters.
fn start_of(s: &Bound<'_, PyString>, n: usize) -> PyResult<(String, usize)> {
    let py = s.py();
    // SAFETY: `s` is a live str (a subclass at most): its length cannot fail.
    let total = usize::try_from(unsafe { ffi::PyUnicode_GetLength(s.as_ptr()) }).unwrap_or(0);
    if total <= n {
        return Ok((s.to_string_lossy().into_owned(), total));
    }
    let end = ffi::Py_ssize_t::try_from(n).unwrap_or(ffi::Py_ssize_t::MAX);
    // SAFETY: as above; PyUnicode_Substring returns a new str, or null with an exception.
    let start = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_Substring(s.as_ptr(), 0, end)) }?;
    let start = start.cast_into::<PyString>()?;
    Ok((start.to_string_lossy().into_owned(), total))
}
