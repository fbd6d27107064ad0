//! NumPy's `descr`: the field list that describes records.
//!
//! A descr is a list of `(name, type[, shape])` entries laid out one after the other:
//! `type` is a type string or a nested descr, `shape` makes the field a sub-array, and an
//! entry with an empty name and a `|V{n}` type is `n` bytes of padding. A field's offset is
//! the sum of the sizes of the entries before it, which is how NumPy writes a record with
//! gaps: `[('a', '|u1'), ('', '|V3'), ('b', '<f4')]` puts `b` at offset 4. A name may also
//! be NumPy's `(title, name)` pair, and a type may itself be a sub-array, `(type, shape)`,
//! as NumPy writes a field whose type is a sub-array: `('f', ('<f2', (2,)), (3,))`.
//!
//! For a plain type the descr is `[('', typestr)]` ([`Descr::simple`]); for a record the
//! typestr is `|V{itemsize}` and the descr says what the bytes are. As NumPy reads a
//! descr, an unnamed entry that is not padding is a field named `f{i}`, `i` its position
//! (`[('', '<f2')]` with typestr `<V2` is a record of one field `f0`).

use std::collections::HashSet;
use std::fmt;

use crate::error::{tuple, Error, Result};
use crate::typestr::{Kind, TypeStr, MAX_ITEMSIZE};

/// NumPy's field list: `(name, type[, shape])` entries laid out one after another.
///
/// `type` is a type string or a nested descr, `shape` makes the field a sub-array, and an
/// entry with an empty name and a `|V{n}` type is `n` bytes of padding, so a field's
/// offset is the sum of the sizes before it. A name may carry NumPy's title
/// (`(title, name)`). For a plain type the descr is `[('', typestr)]`; for a record the
/// typestr is `|V{itemsize}`.
///
/// ```
/// use cai_core::{Descr, Field, TypeStr};
///
/// // numpy.dtype({'names': ['a', 'b'], 'formats': ['u1', '<f4'], 'offsets': [0, 4]})
/// let d = Descr::new(vec![
///     Field::new("a", TypeStr::parse("|u1")?),
///     Field::padding(3),
///     Field::new("b", TypeStr::parse("<f4")?),
/// ]);
/// assert_eq!(d.itemsize()?, 8);
/// assert_eq!(d.layout()?[1].offset, 4);
/// d.check_typestr(&TypeStr::void(8))?;
/// # Ok::<(), cai_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Descr {
    /// The entries, in memory order.
    pub fields: Vec<Field>,
}

/// One entry of a [`Descr`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Field {
    /// The field's name; empty for padding and for the single entry of a plain type.
    pub name: String,
    /// NumPy's optional title, written as `(title, name)`.
    pub title: Option<String>,
    /// The element type of the field.
    pub ty: FieldType,
    /// The sub-array shape; empty for a scalar field.
    pub shape: Vec<usize>,
}

/// The type of a [`Field`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// A type string.
    Scalar(TypeStr),
    /// A nested record.
    Record(Descr),
    /// A sub-array type, `(type, shape)`: NumPy writes one for a field whose own type is a
    /// sub-array (`('f', ('<f2', (2,)), (3,))`, a field of shape `(3,)` whose elements are
    /// pairs of halves). Its layout is that of `base` with the field's shape followed by
    /// `shape` (`(3, 2)`), which [`Descr::is_equivalent`] treats as the same.
    SubArray {
        /// The element type.
        base: Box<FieldType>,
        /// The sub-array's shape.
        shape: Vec<usize>,
    },
}

/// Where a named field lies in a record, as [`Descr::layout`] computes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldLayout<'a> {
    /// The field.
    pub field: &'a Field,
    /// Its byte offset from the start of the record.
    pub offset: usize,
    /// Its size in bytes, sub-array included.
    pub size: usize,
}

impl Field {
    /// A scalar field.
    pub fn new(name: impl Into<String>, ty: impl Into<FieldType>) -> Field {
        Field { name: name.into(), title: None, ty: ty.into(), shape: Vec::new() }
    }

    /// `n` bytes of padding: `('', '|V{n}')`.
    pub fn padding(n: usize) -> Field {
        Field::new("", TypeStr::void(n))
    }

    /// The same field as a sub-array of `shape`.
    pub fn with_shape(self, shape: impl Into<Vec<usize>>) -> Field {
        Field { shape: shape.into(), ..self }
    }

    /// The same field with a NumPy title.
    pub fn with_title(self, title: impl Into<String>) -> Field {
        Field { title: Some(title.into()), ..self }
    }

    /// Whether the entry is padding: no name and raw bytes.
    pub fn is_padding(&self) -> bool {
        self.name.is_empty()
            && self.title.is_none()
            && matches!(self.ty, FieldType::Scalar(t) if t.kind() == Kind::Void)
    }

    /// The size of the field in bytes, sub-array included.
    pub fn size(&self) -> Result<usize> {
        sub_array_size(self.ty.itemsize()?, &self.shape).ok_or_else(|| overflow(&self.to_string()))
    }

    /// The field's element type once nested sub-array types are unwrapped (a scalar or a
    /// record), and the whole shape: the field's own, then each nested type's.
    pub fn flattened(&self) -> (&FieldType, Vec<usize>) {
        let mut shape = self.shape.clone();
        let mut ty = &self.ty;
        while let FieldType::SubArray { base, shape: inner } = ty {
            shape.extend_from_slice(inner);
            ty = base;
        }
        (ty, shape)
    }

    /// The name NumPy gives the field at `index` of its record: its own, or `f{index}`
    /// when it has none.
    fn numpy_name(&self, index: usize) -> std::borrow::Cow<'_, str> {
        if self.name.is_empty() && self.title.is_none() {
            std::borrow::Cow::Owned(format!("f{index}"))
        } else {
            std::borrow::Cow::Borrowed(&self.name)
        }
    }
}

impl FieldType {
    /// The size of one value of the type in bytes.
    pub fn itemsize(&self) -> Result<usize> {
        match self {
            FieldType::Scalar(t) => Ok(t.itemsize()),
            FieldType::Record(d) => d.itemsize(),
            FieldType::SubArray { base, shape } => {
                sub_array_size(base.itemsize()?, shape).ok_or_else(|| overflow(&self.to_string()))
            }
        }
    }
}

/// `element` bytes times the number of elements of `shape`, unless it overflows.
fn sub_array_size(element: usize, shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(element, |acc, &n| acc.checked_mul(n))
}

impl From<TypeStr> for FieldType {
    fn from(t: TypeStr) -> FieldType {
        FieldType::Scalar(t)
    }
}

impl From<Descr> for FieldType {
    fn from(d: Descr) -> FieldType {
        FieldType::Record(d)
    }
}

impl Descr {
    /// A descr from its entries.
    pub fn new(fields: Vec<Field>) -> Descr {
        Descr { fields }
    }

    /// The descr of a plain type: `[('', typestr)]`.
    pub fn simple(typestr: TypeStr) -> Descr {
        Descr { fields: vec![Field::new("", typestr)] }
    }

    /// Whether `other` describes the same record layout: the same entries, names (an
    /// unnamed field's being NumPy's `f{i}`), titles,
    /// sub-array shapes (nested sub-array types flattened, see [`Field::flattened`]) and
    /// equivalent types ([`TypeStr::is_equivalent`]), except that a
    /// padding entry of `self` matches any raw-bytes entry of the same size in `other`,
    /// named or not: NumPy names the padding of a record it re-exports (`f1`, `f5`, ...).
    ///
    /// ```
    /// use cai_core::{Descr, Field, TypeStr};
    ///
    /// let ours = Descr::new(vec![Field::new("id", TypeStr::of::<u16>()), Field::padding(2), Field::new("x", TypeStr::of::<f32>())]);
    /// let numpys = Descr::new(vec![
    ///     Field::new("id", TypeStr::of::<u16>()),
    ///     Field::new("f1", TypeStr::parse("|V2").unwrap()),
    ///     Field::new("x", TypeStr::of::<f32>()),
    /// ]);
    /// assert!(ours.is_equivalent(&numpys));
    /// assert!(!numpys.is_equivalent(&Descr::new(vec![Field::new("id", TypeStr::of::<u16>())])));
    /// ```
    pub fn is_equivalent(&self, other: &Descr) -> bool {
        self.fields.len() == other.fields.len()
            && self.fields.iter().zip(&other.fields).enumerate().all(|(i, (a, b))| {
                let raw_bytes = |f: &Field| matches!(f.ty, FieldType::Scalar(t) if t.kind() == Kind::Void);
                if a.is_padding() && raw_bytes(b) {
                    return a.shape == b.shape && a.size().ok() == b.size().ok();
                }
                let ((x, x_shape), (y, y_shape)) = (a.flattened(), b.flattened());
                let same_type = match (x, y) {
                    (FieldType::Scalar(x), FieldType::Scalar(y)) => x.is_equivalent(y),
                    (FieldType::Record(x), FieldType::Record(y)) => x.is_equivalent(y),
                    _ => false,
                };
                same_type && a.numpy_name(i) == b.numpy_name(i) && a.title == b.title && x_shape == y_shape
            })
    }

    /// The type string of a plain-type descr (`[('', typestr)]`), `None` for a record.
    pub fn as_simple(&self) -> Option<TypeStr> {
        match self.fields.as_slice() {
            [Field { name, title: None, ty: FieldType::Scalar(t), shape }] if name.is_empty() && shape.is_empty() => {
                Some(*t)
            }
            _ => None,
        }
    }

    /// Whether the descr only restates `typestr`. For a raw-bytes typestr that takes
    /// `[('', typestr)]` with the same type string, as NumPy compares them: any other descr
    /// describes a record (with typestr `<V2`, `[('', '<f2')]` is a record of one half
    /// named `f0`, and so are `[('', '|V2')]` and `[('', '<V2', ())]`). For any other
    /// typestr, a one-field descr of an equivalent type, which NumPy ignores.
    pub fn restates(&self, typestr: &TypeStr) -> bool {
        if typestr.kind() == Kind::Void {
            self.as_simple() == Some(*typestr)
        } else {
            self.plain_type().is_some_and(|t| t.is_equivalent(typestr))
        }
    }

    /// The type of a descr of one unnamed, untitled field that is no sub-array (an
    /// explicit shape `()` included).
    fn plain_type(&self) -> Option<TypeStr> {
        match self.fields.as_slice() {
            [field] if field.name.is_empty() && field.title.is_none() => match field.flattened() {
                (FieldType::Scalar(t), shape) if shape.is_empty() => Some(*t),
                _ => None,
            },
            _ => None,
        }
    }

    /// The size of one record in bytes: the sum of every entry's size, padding included.
    pub fn itemsize(&self) -> Result<usize> {
        self.fields
            .iter()
            .try_fold(0usize, |acc, f| acc.checked_add(f.size()?).ok_or_else(|| overflow(&self.to_string())))
    }

    /// The named fields (padding left out) with their offsets and sizes.
    pub fn layout(&self) -> Result<Vec<FieldLayout<'_>>> {
        let mut offset = 0usize;
        let mut out = Vec::with_capacity(self.fields.len());
        for field in &self.fields {
            let size = field.size()?;
            if !field.is_padding() {
                out.push(FieldLayout { field, offset, size });
            }
            offset = offset.checked_add(size).ok_or_else(|| overflow(&self.to_string()))?;
        }
        Ok(out)
    }

    /// Checks the descr on its own, nested records included: names and titles are unique
    /// within a record (an unnamed field that is not padding takes NumPy's name `f{i}`, and
    /// a titled field needs a name), and sizes do not overflow or pass NumPy's limit
    /// ([`MAX_ITEMSIZE`]). Returns the item size. A record may have no fields
    /// (`numpy.dtype([])`, whose interface is `'|V0'` with descr `[]`).
    ///
    /// Padding takes no name here: NumPy names it `f{i}` too when it reads the descr, and
    /// then refuses `[('f0', '|u1'), ('', '|V3'), ('f1', '<f4')]`, which its own records
    /// with those names export; cai reads it.
    pub fn check(&self) -> Result<usize> {
        if let Some(i) = self.fields.iter().position(|f| f.name.is_empty() && f.title.is_some()) {
            return Err(self.invalid(&format!("entry {i} has a title but no name; NumPy needs both")));
        }
        let labels = || {
            self.fields.iter().enumerate().filter(|(_, f)| !f.is_padding()).flat_map(|(i, f)| {
                f.title.iter().map(|t| std::borrow::Cow::Borrowed(t.as_str())).chain([f.numpy_name(i)])
            })
        };
        // Records have a handful of fields: comparing pairs beats allocating a set.
        let duplicate = if self.fields.len() <= 16 {
            labels().enumerate().find(|(i, l)| labels().take(*i).any(|earlier| earlier == *l)).map(|(_, l)| l)
        } else {
            let mut seen = HashSet::new();
            labels().find(|l| !seen.insert(l.clone()))
        };
        if let Some(label) = duplicate {
            return Err(self.invalid(&format!(
                "the name {} is used twice (NumPy names an unnamed field f<i>)",
                crate::error::quoted(&label)
            )));
        }
        for field in &self.fields {
            if let (FieldType::Record(inner), _) = field.flattened() {
                inner.check()?;
            }
        }
        let itemsize = self.itemsize()?;
        if itemsize > MAX_ITEMSIZE {
            return Err(self.invalid(&format!(
                "a record of {itemsize} bytes is larger than {MAX_ITEMSIZE}, the largest item NumPy can describe"
            )));
        }
        Ok(itemsize)
    }

    /// Checks the descr against the typestr it accompanies: a record (`|V{n}`) must be
    /// described by a descr of exactly `n` bytes; any other typestr by the plain descr
    /// `[('', typestr)]` of an equivalent type.
    pub fn check_typestr(&self, typestr: &TypeStr) -> Result<()> {
        let itemsize = self.check()?;
        if typestr.kind() == Kind::Void {
            if itemsize != typestr.itemsize() {
                return Err(self.invalid(&format!(
                    "its fields take {itemsize} bytes, but typestr '{}' says {}",
                    typestr,
                    typestr.itemsize()
                )));
            }
            return Ok(());
        }
        match self.plain_type() {
            Some(t) if t.is_equivalent(typestr) => Ok(()),
            _ => Err(self.invalid(&format!(
                "typestr '{}' is not a record (|V), so descr must be [('', '{}')]",
                typestr, typestr
            ))),
        }
    }

    fn invalid(&self, reason: &str) -> Error {
        Error::Descr { value: crate::error::shortened(self.to_string()), reason: reason.to_owned() }
    }
}

fn overflow(value: &str) -> Error {
    Error::Overflow {
        key: "descr",
        value: crate::error::shortened(value.to_owned()),
        detail: "the record's size in bytes exceeds usize",
    }
}

/// Writes a string as a single-quoted Python literal, its control characters escaped as
/// Python's `repr` escapes them (a message stays on one line).
fn py_str(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("'")?;
    for c in s.chars() {
        match c {
            '\'' | '\\' => write!(f, "\\{c}")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if c < ' ' || ('\x7f'..='\u{9f}').contains(&c) => write!(f, "\\x{:02x}", u32::from(c))?,
            '\u{2028}' | '\u{2029}' => write!(f, "\\u{:04x}", u32::from(c))?,
            _ => write!(f, "{c}")?,
        }
    }
    f.write_str("'")
}

/// Python's notation: `[('a', '<f4'), ('', '|V4'), ('b', '|u1', (2, 3))]`.
impl fmt::Display for Descr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, field) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{field}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        match &self.title {
            Some(title) => {
                f.write_str("(")?;
                py_str(f, title)?;
                f.write_str(", ")?;
                py_str(f, &self.name)?;
                f.write_str(")")?;
            }
            None => py_str(f, &self.name)?,
        }
        f.write_str(", ")?;
        match (&self.ty, self.shape.is_empty()) {
            // An explicit `()`, as it was written: `('', '<V2', ())`.
            (FieldType::SubArray { base, shape }, true) if shape.is_empty() => write!(f, "{base}, ()")?,
            (ty, true) => write!(f, "{ty}")?,
            (ty, false) => write!(f, "{ty}, {}", tuple(&self.shape))?,
        }
        f.write_str(")")
    }
}

/// Python's notation: `'<f4'`, a nested descr, or `('<f2', (2,))` for a sub-array type.
impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldType::Scalar(t) => py_str(f, &t.to_string()),
            FieldType::Record(d) => write!(f, "{d}"),
            FieldType::SubArray { base, shape } => write!(f, "({base}, {})", tuple(shape)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> TypeStr {
        TypeStr::parse(s).unwrap()
    }

    /// NumPy: `dtype({'names': ['a', 'b'], 'formats': ['u1', '<f4'], 'offsets': [0, 4], 'itemsize': 12})`.
    fn padded() -> Descr {
        Descr::new(vec![Field::new("a", t("|u1")), Field::padding(3), Field::new("b", t("<f4")), Field::padding(4)])
    }

    #[test]
    fn offsets_and_itemsize_follow_the_entries() {
        let d = padded();
        assert_eq!(d.itemsize().unwrap(), 12);
        let layout: Vec<_> = d.layout().unwrap().iter().map(|l| (l.field.name.as_str(), l.offset, l.size)).collect();
        assert_eq!(layout, [("a", 0, 1), ("b", 4, 4)]);
        assert!(d.check_typestr(&TypeStr::void(12)).is_ok());
        assert_eq!(d.to_string(), "[('a', '|u1'), ('', '|V3'), ('b', '<f4'), ('', '|V4')]");
    }

    #[test]
    fn nested_records_subarrays_and_titles() {
        // NumPy: dtype([(('title', 'a'), '<i4'), ('b', [('x', '<f8'), ('y', 'u1', (2, 3))])]).itemsize == 18
        let inner = Descr::new(vec![Field::new("x", t("<f8")), Field::new("y", t("|u1")).with_shape([2, 3])]);
        let d = Descr::new(vec![Field::new("a", t("<i4")).with_title("title"), Field::new("b", inner)]);
        assert_eq!(d.itemsize().unwrap(), 18);
        assert_eq!(d.layout().unwrap()[1].offset, 4);
        assert_eq!(d.to_string(), "[(('title', 'a'), '<i4'), ('b', [('x', '<f8'), ('y', '|u1', (2, 3))])]");
        assert!(d.check_typestr(&TypeStr::void(18)).is_ok());
    }

    #[test]
    fn a_record_must_match_its_void_typestr() {
        let message = padded().check_typestr(&TypeStr::void(16)).unwrap_err().to_string();
        assert!(message.starts_with("descr: [('a', '|u1')"), "{message}");
        assert!(message.contains("its fields take 12 bytes, but typestr '|V16' says 16"), "{message}");
    }

    #[test]
    fn a_plain_typestr_needs_the_plain_descr() {
        assert!(Descr::simple(t("<f4")).check_typestr(&t("<f4")).is_ok());
        assert!(Descr::simple(t("|u1")).check_typestr(&t("<u1")).is_ok());
        let wrong = Descr::simple(t("<i4")).check_typestr(&t("<f4")).unwrap_err().to_string();
        assert!(wrong.contains("descr: [('', '<i4')]") && wrong.contains("must be [('', '<f4')]"), "{wrong}");
        assert!(padded().check_typestr(&t("<f4")).is_err());
        assert_eq!(Descr::simple(t("<f4")).as_simple(), Some(t("<f4")));
        assert_eq!(padded().as_simple(), None);
    }

    #[test]
    fn duplicate_names_are_refused_and_empty_records_read() {
        // NumPy's `dtype([])`: no fields, no bytes.
        assert_eq!(Descr::new(vec![]).check().unwrap(), 0);
        assert!(Descr::new(vec![]).check_typestr(&t("|V0")).is_ok());
        let dup = Descr::new(vec![Field::new("a", t("<f4")), Field::new("a", t("<i4"))]);
        assert!(dup.check().unwrap_err().to_string().contains("the name 'a' is used twice"));
        let title_clash = Descr::new(vec![Field::new("a", t("<f4")).with_title("b"), Field::new("b", t("<i4"))]);
        assert!(title_clash.check().is_err());
        let many: Vec<Field> = (0..40).map(|i| Field::new(format!("f{}", i % 39), t("<f4"))).collect();
        assert!(Descr::new(many).check().unwrap_err().to_string().contains("the name 'f0' is used twice"));
        let distinct: Vec<Field> = (0..40).map(|i| Field::new(format!("f{i}"), t("<f4"))).collect();
        assert_eq!(Descr::new(distinct).check().unwrap(), 160);
        let nested_dup =
            Descr::new(vec![Field::new("r", Descr::new(vec![Field::new("x", t("<f4")), Field::new("x", t("<f4"))]))]);
        assert!(nested_dup.check().is_err());
        // Several padding entries share the empty name, as NumPy writes them.
        assert!(padded().check().is_ok());
    }

    #[test]
    fn sizes_that_overflow_are_errors() {
        let huge = Descr::new(vec![Field::new("a", t("<f8")).with_shape([usize::MAX / 2, 3])]);
        let e = huge.itemsize().unwrap_err();
        assert_eq!(e.key(), "descr");
        assert!(e.to_string().contains("exceeds usize"));
        let sum = Descr::new(vec![Field::new("a", TypeStr::void(usize::MAX)), Field::new("b", TypeStr::void(1))]);
        assert!(sum.check().is_err());
        assert!(sum.layout().is_err());
    }

    #[test]
    fn nested_sub_array_types_have_the_flat_layout() {
        // NumPy: dtype([('f', ('<f2', (2,)), (3,))]).itemsize == 12, written back as given.
        let halves = FieldType::SubArray { base: Box::new(t("<f2").into()), shape: vec![2] };
        let nested = Descr::new(vec![Field::new("f", halves).with_shape([3])]);
        assert_eq!(nested.to_string(), "[('f', ('<f2', (2,)), (3,))]");
        assert!(nested.check_typestr(&TypeStr::void(12)).is_ok());
        let (base, shape) = nested.fields[0].flattened();
        assert_eq!((base, shape.as_slice()), (&FieldType::Scalar(t("<f2")), &[3, 2][..]));
        let flat = Descr::new(vec![Field::new("f", t("<f2")).with_shape([3, 2])]);
        assert!(nested.is_equivalent(&flat) && flat.is_equivalent(&nested));
        assert!(!nested.is_equivalent(&Descr::new(vec![Field::new("f", t("<f2")).with_shape([2, 3])])));
        // Records inside sub-array types are checked too.
        let dup = Descr::new(vec![Field::new("x", t("<f4")), Field::new("x", t("<f4"))]);
        let inner = FieldType::SubArray { base: Box::new(dup.into()), shape: vec![2] };
        assert!(Descr::new(vec![Field::new("r", inner)])
            .check()
            .unwrap_err()
            .to_string()
            .contains("'x' is used twice"));
        let huge = FieldType::SubArray { base: Box::new(t("<f8").into()), shape: vec![usize::MAX / 2] };
        assert_eq!(huge.itemsize().unwrap_err().key(), "descr");
    }

    #[test]
    fn unnamed_fields_take_numpys_names_and_titles_need_names() {
        // NumPy: dtype([('', '<f4'), ('f0', '<i4')]) raises "field 'f0' occurs more than once".
        let clash = Descr::new(vec![Field::new("", t("<f4")), Field::new("f0", t("<i4"))]);
        let message = clash.check().unwrap_err().to_string();
        assert!(message.contains("the name 'f0' is used twice (NumPy names an unnamed field f<i>)"), "{message}");
        assert!(Descr::new(vec![Field::new("", t("<f4")), Field::new("", t("<i4"))]).check().is_ok());
        let titled = Descr::new(vec![Field::new("", t("<f4")).with_title("t")]);
        assert!(titled.check().unwrap_err().to_string().contains("entry 0 has a title but no name"));
        // NumPy: dtype([('', '<f4')]) == dtype([('f0', '<f4')]).
        let unnamed = Descr::new(vec![Field::new("", t("<f4")), Field::new("", t("<i4"))]);
        let named = Descr::new(vec![Field::new("f0", t("<f4")), Field::new("f1", t("<i4"))]);
        assert!(unnamed.is_equivalent(&named) && named.is_equivalent(&unnamed));
        assert!(!unnamed.is_equivalent(&Descr::new(vec![Field::new("f1", t("<f4")), Field::new("f0", t("<i4"))])));
        // Padding takes no name: NumPy's own export of these names reads.
        let padded_names = Descr::new(vec![Field::new("f0", t("|u1")), Field::padding(3), Field::new("f1", t("<f4"))]);
        assert_eq!(padded_names.check().unwrap(), 8);
    }

    #[test]
    fn a_descr_restates_only_an_equivalent_typestr() {
        assert!(Descr::simple(t("<f4")).restates(&t("<f4")));
        assert!(Descr::simple(t("|V4")).restates(&t("|V4")));
        // With a raw-bytes typestr, another type is a record of one field (NumPy's f0).
        assert!(!Descr::simple(t("<f2")).restates(&t("<V2")));
        assert!(!Descr::simple(t("<f4")).restates(&t("|V4")));
        assert!(Descr::simple(t("<f2")).check_typestr(&t("<V2")).is_ok());
        // Raw bytes restate only the same type string, without an explicit shape `()`.
        assert!(!Descr::simple(t("|V2")).restates(&t("<V2")));
        let explicit = FieldType::SubArray { base: Box::new(t("<V2").into()), shape: vec![] };
        let explicit = Descr::new(vec![Field::new("", explicit)]);
        assert_eq!(explicit.to_string(), "[('', '<V2', ())]");
        assert!(!explicit.restates(&t("<V2")));
        // A plain type's descr restates an equivalent type, `()` or not (NumPy ignores it).
        let f4 =
            Descr::new(vec![Field::new("", FieldType::SubArray { base: Box::new(t("<f4").into()), shape: vec![] })]);
        assert!(f4.restates(&t("<f4")) && Descr::simple(t("|u1")).restates(&t("<u1")));
        assert!(f4.check_typestr(&t("<f4")).is_ok());
        assert!(!padded().restates(&TypeStr::void(12)));
    }

    #[test]
    fn records_past_numpys_item_size_limit_are_refused() {
        let big = Descr::new(vec![Field::new("a", TypeStr::void(MAX_ITEMSIZE)), Field::new("b", t("|u1"))]);
        let message = big.check().unwrap_err().to_string();
        assert!(message.contains("a record of 2147483648 bytes is larger than 2147483647"), "{message}");
        let at_limit = Descr::new(vec![Field::new("a", TypeStr::void(MAX_ITEMSIZE - 1)), Field::new("b", t("|u1"))]);
        assert_eq!(at_limit.check().unwrap(), MAX_ITEMSIZE);
    }

    #[test]
    fn quotes_in_names_are_escaped() {
        assert_eq!(Descr::new(vec![Field::new("it's", t("<f4"))]).to_string(), r"[('it\'s', '<f4')]");
    }
}
