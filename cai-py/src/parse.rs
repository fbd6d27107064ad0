//! Reading an interface dict into a [`Descriptor`], by the rules of the version it declares.
//!
//! One reader serves two callers: the importers, which stop at the first problem and raise
//! it, and `cai.validate`, which notes every problem and goes on.

use cai_core::{Descr, Descriptor, Error, Extent, Field, FieldType, Stream, TypeStr, CURRENT_VERSION};
use pyo3::exceptions::{PyOverflowError, PyRuntimeWarning};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyMapping, PyString, PyTuple};
use pyo3::{ffi, intern, Borrowed, PyTypeInfo};

use crate::error::{py_tuple, received, Problem};

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

/// Every key some version defines, `stream` (CUDA only) last; [`Entries::gather`] reads
/// them in this order.
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

/// Where problems go: raised at once, or noted for `cai.validate`.
pub(crate) struct Reader<'a> {
    findings: Option<&'a mut Vec<String>>,
    depth: u32,
}

/// How deeply masks (and masks of masks) and nested records are followed.
const MAX_DEPTH: u32 = 8;

impl<'a> Reader<'a> {
    /// A reader that raises the first problem.
    pub(crate) fn strict() -> Reader<'static> {
        Reader { findings: None, depth: 0 }
    }

    /// A reader that notes every problem in `findings`.
    pub(crate) fn collecting(findings: &'a mut Vec<String>) -> Reader<'a> {
        Reader { findings: Some(findings), depth: 0 }
    }

    fn report(&mut self, problem: Problem) -> PyResult<()> {
        match &mut self.findings {
            Some(f) => {
                f.push(problem.message);
                Ok(())
            }
            None => Err(problem.into()),
        }
    }

    /// `Some(value)`, or `None` after reporting the problem.
    fn take<T>(&mut self, result: Result<T, Problem>) -> PyResult<Option<T>> {
        match result {
            Ok(v) => Ok(Some(v)),
            Err(p) => self.report(p).map(|()| None),
        }
    }

    /// Reads `obj`'s interface attribute and parses it. A missing attribute is a
    /// `TypeError`; an exception raised by the attribute itself propagates.
    pub(crate) fn read_object(&mut self, obj: &Bound<'_, PyAny>, iface: Interface) -> PyResult<Option<Parsed>> {
        match obj.getattr_opt(iface.interned(obj.py()))? {
            Some(dict) => self.parse(&dict, iface),
            None => Err(no_interface(obj, iface).into()),
        }
    }

    /// Parses an interface dict.
    pub(crate) fn parse<'py>(&mut self, value: &Bound<'py, PyAny>, iface: Interface) -> PyResult<Option<Parsed>> {
        let py = value.py();
        let dict = match value.cast::<PyDict>() {
            Ok(d) => d.clone(),
            Err(_) if value.cast::<PyMapping>().is_ok() => PyDict::type_object(py).call1((value,))?.cast_into()?,
            Err(_) => {
                let message = format!("{}: expected a dict, received {}", iface.attribute(), received(value));
                return Err(Problem::type_error(message).into());
            }
        };
        let entries = Entries::gather(&dict);

        // version decides which rules apply to the rest.
        let version_obj = entries.version.as_deref();
        let declared = self.take(version(version_obj))?;
        let mut rules_version = match declared {
            Some(v) if v <= u64::from(CURRENT_VERSION) => v as u32,
            _ => CURRENT_VERSION,
        };
        if iface == Interface::Host {
            rules_version = CURRENT_VERSION;
        }
        if let Some(v) = declared.filter(|&v| v > u64::from(CURRENT_VERSION)) {
            self.newer_version(&dict, iface, v)?;
        }
        if self.findings.is_some() && declared.is_none_or(|v| v <= u64::from(CURRENT_VERSION)) {
            // Keys of a later version (a stream in version 2) are judged by their own rules.
            let known = iface.keys();
            for key in dict.keys() {
                let is_known =
                    key.cast::<PyString>().ok().and_then(|k| k.to_cow().ok()).is_some_and(|k| known.contains(&&*k));
                if !is_known {
                    let problem = Problem::value_error(format!(
                        "{}: key {} is not defined by any version of the interface",
                        iface.attribute(),
                        key.repr()?
                    ));
                    self.report(problem)?;
                }
            }
        }
        let shape = self.take(shape(entries.shape.as_deref()))?;
        let typestr = self.take(typestr(entries.typestr.as_deref()))?;
        let descr = match entries.descr {
            None => Some(None),
            Some(v) => self.take(descr(&v).map(Some))?,
        };
        let data = self.take(data(entries.data.as_deref()))?;
        let strides = self.take(strides(entries.strides.as_deref()))?;
        let (mask, mask_obj) = match entries.mask {
            Some(m) if !m.is_none() => match self.mask(&m, iface)? {
                Some(parsed) => (Some(Some(Box::new(parsed.descriptor))), Some(m.to_owned().unbind())),
                None => (None, None),
            },
            _ => (Some(None), None),
        };
        let stream = match (iface, entries.stream) {
            (Interface::Cuda, Some(s)) => self.take(stream(&s))?,
            _ => Some(Stream::None),
        };

        let (
            Some(shape),
            Some(typestr),
            Some(descr),
            Some((data, readonly)),
            Some(strides),
            Some(mask),
            Some(stream),
            Some(declared),
        ) = (shape, typestr, descr, data, strides, mask, stream, declared)
        else {
            return Ok(None);
        };
        let mut descriptor =
            Descriptor { shape, strides, typestr, descr, data, readonly, version: rules_version, mask, stream };
        let extent = match self.take(descriptor.validate().map_err(Problem::from))? {
            Some(e) => e,
            None => return Ok(None),
        };
        if descriptor.descr.as_ref().and_then(Descr::as_simple).is_some() {
            descriptor.descr = None;
        }
        if self.findings.is_some() && iface == Interface::Cuda && rules_version >= 2 && extent.is_empty() && data != 0 {
            self.report(Problem::value_error(format!(
                "data: an empty array exports pointer 0 from version 2 on, received 0x{data:x} for shape {}",
                py_tuple(&descriptor.shape)
            )))?;
        }
        Ok(Some(Parsed { descriptor, declared_version: declared, mask: mask_obj, extent }))
    }

    /// A dict newer than version 3: read by 3's rules (with a warning) when every key is one
    /// that 3 knows; refused otherwise.
    fn newer_version(&mut self, dict: &Bound<'_, PyDict>, iface: Interface, v: u64) -> PyResult<()> {
        let allowed = iface.keys();
        let mut unknown = Vec::new();
        for key in dict.keys() {
            let text = key.cast::<PyString>().ok().and_then(|k| k.to_cow().ok().map(|c| c.into_owned()));
            if !text.as_deref().is_some_and(|k| allowed.contains(&k)) {
                unknown.push(key.repr()?.to_string());
            }
        }
        if !unknown.is_empty() {
            return self.report(Problem::value_error(format!(
                "version: {v} is newer than the versions this reader knows (0 to 3) and the dict carries keys \
                 that version 3 does not define: {}",
                unknown.join(", ")
            )));
        }
        let message = format!(
            "version: {v} is newer than the versions this reader knows (0 to 3); every key is one that version \
             3 defines, so the dict is read by version 3's rules"
        );
        match &mut self.findings {
            Some(f) => f.push(message),
            None => {
                let py = dict.py();
                let cat = PyRuntimeWarning::type_object(py);
                PyErr::warn(py, &cat, &std::ffi::CString::new(message).expect("no NUL in message"), 1)?;
            }
        }
        Ok(())
    }

    fn mask(&mut self, mask: &Bound<'_, PyAny>, iface: Interface) -> PyResult<Option<Parsed>> {
        if self.depth >= MAX_DEPTH {
            let problem = Problem::value_error(format!("mask: masks nest deeper than {MAX_DEPTH} levels"));
            return self.report(problem).map(|()| None);
        }
        let py = mask.py();
        let Some(dict) = mask.getattr_opt(iface.interned(py))? else {
            let problem = Problem::type_error(format!(
                "mask: expected None or an object exporting {}, received {}",
                iface.attribute(),
                received(mask)
            ));
            return self.report(problem).map(|()| None);
        };
        let depth = self.depth + 1;
        match &mut self.findings {
            None => {
                let mut inner = Reader { findings: None, depth };
                inner.parse(&dict, iface).map_err(|e| {
                    let message = format!("mask: {}", e.value(py));
                    let problem = if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) {
                        Problem::type_error(message)
                    } else {
                        Problem::value_error(message)
                    };
                    problem.into()
                })
            }
            Some(findings) => {
                let mut inner_findings = Vec::new();
                let parsed = Reader { findings: Some(&mut inner_findings), depth }.parse(&dict, iface)?;
                findings.extend(inner_findings.into_iter().map(|m| format!("mask: {m}")));
                Ok(parsed)
            }
        }
    }
}

/// The values of the keys the interface defines, found in one pass over the dict.
///
/// Keys are compared by identity with the interned key strings first (Python interns
/// identifier-like literals, so a producer's keys are those very objects), then by value.
/// No Python code runs during the pass, so the dict cannot change under it; the values are
/// borrowed from the dict, which the caller holds.
struct Entries<'a, 'py> {
    shape: Option<Borrowed<'a, 'py, PyAny>>,
    typestr: Option<Borrowed<'a, 'py, PyAny>>,
    descr: Option<Borrowed<'a, 'py, PyAny>>,
    data: Option<Borrowed<'a, 'py, PyAny>>,
    version: Option<Borrowed<'a, 'py, PyAny>>,
    strides: Option<Borrowed<'a, 'py, PyAny>>,
    mask: Option<Borrowed<'a, 'py, PyAny>>,
    stream: Option<Borrowed<'a, 'py, PyAny>>,
}

impl<'a, 'py> Entries<'a, 'py> {
    fn gather(dict: &'a Bound<'py, PyDict>) -> Entries<'a, 'py> {
        let py = dict.py();
        let names = [
            intern!(py, "shape"),
            intern!(py, "typestr"),
            intern!(py, "descr"),
            intern!(py, "data"),
            intern!(py, "version"),
            intern!(py, "strides"),
            intern!(py, "mask"),
            intern!(py, "stream"),
        ];
        let mut found: [Option<Borrowed<'a, 'py, PyAny>>; 8] = [None; 8];
        let (mut pos, mut key, mut value): (ffi::Py_ssize_t, *mut ffi::PyObject, *mut ffi::PyObject) =
            (0, std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: `dict` is a live dict held by the caller for 'a; PyDict_Next hands out
        // borrowed, non-null references that stay valid while the dict is unchanged, and
        // nothing below runs Python code that could change it.
        while unsafe { ffi::PyDict_Next(dict.as_ptr(), &mut pos, &mut key, &mut value) } != 0 {
            // SAFETY: as above.
            let (k, v) = unsafe { (Borrowed::from_ptr(py, key), Borrowed::from_ptr(py, value)) };
            let index = names.iter().position(|n| k.as_ptr() == n.as_ptr()).or_else(|| {
                let key = k.cast::<PyString>().ok()?;
                let text = key.to_cow().ok()?;
                KEYS.iter().position(|t| *t == text)
            });
            if let Some(i) = index {
                found[i] = Some(v);
            }
        }
        let [shape, typestr, descr, data, version, strides, mask, stream] = found;
        Entries { shape, typestr, descr, data, version, strides, mask, stream }
    }
}

/// The `TypeError` for an object without the interface attribute.
pub(crate) fn no_interface(obj: &Bound<'_, PyAny>, iface: Interface) -> Problem {
    let type_name = obj.get_type().name().map_or_else(|_| "?".to_owned(), |n| n.to_string());
    Problem::type_error(format!("{}: objects of type '{type_name}' do not export it", iface.attribute()))
}

fn missing(key: &'static str) -> Problem {
    Error::MissingKey { key }.into()
}

fn wrong_type(key: &'static str, expected: &'static str, value: &Bound<'_, PyAny>) -> Problem {
    Error::WrongType { key, expected, received: received(value) }.into()
}

/// A Python integer (or an object with `__index__`, such as NumPy's integers), not a bool.
fn integer(value: &Bound<'_, PyAny>, key: &'static str, expected: &'static str) -> Result<i128, Problem> {
    if let Ok(int) = value.cast_exact::<PyInt>() {
        if let Ok(v) = int.extract::<i64>() {
            return Ok(i128::from(v));
        }
    }
    if value.is_instance_of::<PyBool>() {
        return Err(wrong_type(key, expected, value));
    }
    if let Ok(v) = value.extract::<i64>() {
        return Ok(i128::from(v));
    }
    match value.extract::<u64>() {
        Ok(v) => Ok(i128::from(v)),
        Err(e) if e.is_instance_of::<PyOverflowError>(value.py()) => {
            Err(Problem::value_error(format!("{key}: {} does not fit in 64 bits", received(value))))
        }
        Err(_) => Err(wrong_type(key, expected, value)),
    }
}

fn version(value: Option<&Bound<'_, PyAny>>) -> Result<u64, Problem> {
    let value = value.ok_or_else(|| missing("version"))?;
    let v = integer(value, "version", "an int")?;
    u64::try_from(v).map_err(|_| Problem::value_error(format!("version: {v} is negative")))
}

/// The ints of a tuple, each converted by `convert` (which names the problem with a value).
fn int_tuple<T>(
    value: &Bound<'_, PyAny>,
    key: &'static str,
    expected: &'static str,
    convert: impl Fn(i128) -> Option<T>,
    out_of_range: impl Fn(i128) -> Problem,
) -> Result<Vec<T>, Problem> {
    let t = value.cast::<PyTuple>().map_err(|_| wrong_type(key, expected, value))?;
    let mut out = Vec::with_capacity(t.len());
    for item in t.iter_borrowed() {
        let n = integer(&item, key, expected)?;
        out.push(convert(n).ok_or_else(|| out_of_range(n))?);
    }
    Ok(out)
}

fn shape(value: Option<&Bound<'_, PyAny>>) -> Result<Vec<usize>, Problem> {
    const EXPECTED: &str = "a tuple of non-negative ints";
    let value = value.ok_or_else(|| missing("shape"))?;
    int_tuple(
        value,
        "shape",
        EXPECTED,
        |n| usize::try_from(n).ok(),
        |n| {
            let what = if n < 0 { "is negative" } else { "exceeds the address space" };
            Problem::value_error(format!("shape: {} has a dimension that {what}: {n}", received(value)))
        },
    )
}

fn strides(value: Option<&Bound<'_, PyAny>>) -> Result<Option<Vec<isize>>, Problem> {
    match value {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => int_tuple(
            v,
            "strides",
            "None or a tuple of ints",
            |n| isize::try_from(n).ok(),
            |n| Problem::value_error(format!("strides: {} has a stride outside the address space: {n}", received(v))),
        )
        .map(Some),
    }
}

/// The last few typestr objects read and what they parse to, so that a producer that
/// exports the same string object every time (a literal, an interned string) is not
/// re-parsed. Holding the strings keeps their addresses from being reused.
const TYPESTR_CACHE: usize = 4;

thread_local! {
    static TYPESTRS: std::cell::RefCell<Vec<(Py<PyString>, TypeStr)>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn typestr(value: Option<&Bound<'_, PyAny>>) -> Result<TypeStr, Problem> {
    let value = value.ok_or_else(|| missing("typestr"))?;
    let cached = TYPESTRS.with(|c| c.borrow().iter().find(|(s, _)| value.is(s)).map(|(_, t)| *t));
    if let Some(t) = cached {
        return Ok(t);
    }
    let parsed = parse_typestr(value)?;
    if let Ok(s) = value.cast::<PyString>() {
        TYPESTRS.with(|c| {
            let mut c = c.borrow_mut();
            if c.len() == TYPESTR_CACHE {
                c.remove(0);
            }
            c.push((s.clone().unbind(), parsed));
        });
    }
    Ok(parsed)
}

fn parse_typestr(value: &Bound<'_, PyAny>) -> Result<TypeStr, Problem> {
    let s = value.cast::<PyString>().map_err(|_| wrong_type("typestr", "a str such as '<f4'", value))?;
    let text = s.to_cow().map_err(|_| wrong_type("typestr", "a str such as '<f4'", value))?;
    Ok(TypeStr::parse(&text)?)
}

fn data(value: Option<&Bound<'_, PyAny>>) -> Result<(usize, bool), Problem> {
    const EXPECTED: &str = "a (pointer: int, readonly: bool) tuple";
    let value = value.ok_or_else(|| missing("data"))?;
    let t = value.cast::<PyTuple>().map_err(|_| wrong_type("data", EXPECTED, value))?;
    if t.len() != 2 {
        return Err(wrong_type("data", EXPECTED, value));
    }
    let ptr = t.get_borrowed_item(0).map_err(|_| wrong_type("data", EXPECTED, value))?;
    let readonly = t.get_borrowed_item(1).map_err(|_| wrong_type("data", EXPECTED, value))?;
    let ptr = integer(&ptr, "data", EXPECTED)?;
    let ptr = usize::try_from(ptr).map_err(|_| {
        let what = if ptr < 0 { "is negative" } else { "exceeds the address space" };
        Problem::value_error(format!("data: the pointer {what}: {ptr}"))
    })?;
    let readonly = readonly.cast::<PyBool>().map_err(|_| wrong_type("data", EXPECTED, value))?.is_true();
    Ok((ptr, readonly))
}

fn stream(value: &Bound<'_, PyAny>) -> Result<Stream, Problem> {
    if value.is_none() {
        return Ok(Stream::None);
    }
    let n = integer(value, "stream", "None or an int")?;
    let raw = usize::try_from(n).map_err(|_| {
        Problem::value_error(format!("stream: {n} is not a stream (streams are 1, 2 or a non-negative handle)"))
    })?;
    Ok(Stream::from_raw(Some(raw))?)
}

fn descr(value: &Bound<'_, PyAny>) -> Result<Descr, Problem> {
    let list =
        value.cast::<PyList>().map_err(|_| wrong_type("descr", "a list of (name, type[, shape]) tuples", value))?;
    let invalid = |reason: String| -> Problem {
        let text = value.repr().map_or_else(|_| "<unprintable>".to_owned(), |r| r.to_string());
        Error::Descr { value: text, reason }.into()
    };
    descr_list(list, 0).map_err(invalid)
}

fn descr_list(list: &Bound<'_, PyList>, depth: u32) -> Result<Descr, String> {
    if depth > 32 {
        return Err("records nest deeper than 32 levels".to_owned());
    }
    let mut fields = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let t = entry
            .cast::<PyTuple>()
            .map_err(|_| format!("entry {i} is {}, not a (name, type[, shape]) tuple", received(&entry)))?;
        if !(2..=3).contains(&t.len()) {
            return Err(format!("entry {i} has {} items, not 2 or 3", t.len()));
        }
        let item = |j: usize| t.get_item(j).map_err(|e| e.to_string());
        let name_obj = item(0)?;
        let str_of = |o: &Bound<'_, PyAny>| -> Option<String> {
            o.cast::<PyString>().ok()?.to_cow().ok().map(|c| c.into_owned())
        };
        let (title, name) = if let Some(name) = str_of(&name_obj) {
            (None, name)
        } else {
            let pair = name_obj.cast::<PyTuple>().ok().filter(|p| p.len() == 2);
            let parts = pair.and_then(|p| Some((str_of(&p.get_item(0).ok()?)?, str_of(&p.get_item(1).ok()?)?)));
            let (title, name) = parts.ok_or_else(|| {
                format!("entry {i}: the name {} is neither a str nor a (title, name) pair", received(&name_obj))
            })?;
            (Some(title), name)
        };
        let ty_obj = item(1)?;
        let ty = if let Some(text) = str_of(&ty_obj) {
            FieldType::Scalar(TypeStr::parse(&text).map_err(|e| format!("field {name:?}: {e}"))?)
        } else if let Ok(nested) = ty_obj.cast::<PyList>() {
            FieldType::Record(descr_list(nested, depth + 1)?)
        } else {
            return Err(format!("field {name:?}: the type {} is neither a typestr nor a list", received(&ty_obj)));
        };
        let mut shape = Vec::new();
        if t.len() == 3 {
            let s = item(2)?;
            let bad = || format!("field {name:?}: the shape {} is not a tuple of non-negative ints", received(&s));
            let st = s.cast::<PyTuple>().map_err(|_| bad())?;
            for d in st.iter() {
                if d.is_instance_of::<PyBool>() || !d.is_instance_of::<PyInt>() {
                    return Err(bad());
                }
                shape.push(d.extract::<usize>().map_err(|_| bad())?);
            }
        }
        fields.push(Field { name, title, ty, shape });
    }
    Ok(Descr::new(fields))
}
