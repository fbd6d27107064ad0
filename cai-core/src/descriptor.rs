//! The descriptor: everything an interface dict says about one array.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use crate::descr::Descr;
use crate::dims::DimVec;
use crate::element::Element;
use crate::error::{tuple, Error, PyTuple, Result};
use crate::stream::Stream;
use crate::typestr::{Kind, TypeStr};

/// The newest version of the CUDA Array Interface, the one producers export by default.
pub const CURRENT_VERSION: u32 = 3;

/// One array as the CUDA Array Interface (or NumPy's `__array_interface__`) describes it.
///
/// The fields are the keys of the interface dict. A descriptor can be built in any state,
/// valid or not (a consumer parses what it receives into one); [`Descriptor::validate`]
/// applies the rules of the version it declares.
///
/// ```
/// use cai_core::{Descriptor, Stream, StreamHandle};
///
/// // A 3x4 C-contiguous f32 array on stream 0x5000, viewed transposed.
/// let d = Descriptor::new::<f32>(0x7000_0000, [4, 3])
///     .with_strides([4, 16])
///     .with_stream(Stream::Handle(StreamHandle::new(0x5000).unwrap()));
/// let extent = d.validate()?;
/// assert_eq!((extent.start, extent.end), (0, 48));
/// assert!(d.is_f_contiguous() && !d.is_c_contiguous());
/// assert_eq!(d.size()?, 12);
/// # Ok::<(), cai_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Descriptor {
    /// `shape`: the size of each dimension; empty for a 0-d array.
    pub shape: DimVec<usize>,
    /// `strides` in bytes, one per dimension, possibly negative or zero; `None` means
    /// C-contiguous. Strides need not be multiples of the item size: NumPy makes such
    /// arrays (a field of a packed record), so they are described faithfully and
    /// [`Descriptor::has_element_strides`] tells whether a typed view is possible (a
    /// stride that is never stepped, of an axis of length 1 or of an empty array, never
    /// stands in its way).
    pub strides: Option<DimVec<isize>>,
    /// `typestr`: the element type.
    pub typestr: TypeStr,
    /// `descr`: the field list of a record; `None` means the plain `[('', typestr)]`.
    pub descr: Option<Descr>,
    /// `data[0]`: the address of the element at index zero; 0 only for an empty array.
    pub data: usize,
    /// `data[1]`: whether the consumer must not write.
    pub readonly: bool,
    /// `version`: the interface version whose rules apply (0 to 3).
    pub version: u32,
    /// `mask` (version 1 and later): validity of each element, same shape as the array.
    pub mask: Option<Box<Descriptor>>,
    /// `stream` (version 3): where pending work on the data is ordered.
    pub stream: Stream,
}

/// The bytes an array can reach, as offsets from its data pointer.
///
/// `start` is the lowest offset (negative when a stride is), `end` one past the highest;
/// an empty array has `start == end == 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Extent {
    /// The lowest reachable byte offset (zero or negative).
    pub start: isize,
    /// One past the highest reachable byte offset.
    pub end: isize,
}

impl Extent {
    /// The number of bytes from `start` to `end`.
    pub fn len(&self) -> usize {
        self.end.abs_diff(self.start)
    }

    /// Whether no byte is reachable.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

impl Descriptor {
    /// A C-contiguous, writable, version 3 array of `T` at `data`, with no stream.
    pub fn new<T: Element>(data: usize, shape: impl Into<DimVec<usize>>) -> Descriptor {
        // Only void types (records, bf16) can have a descr of their own; asking the others
        // would allocate one to throw away.
        let descr = match T::TYPESTR.kind() {
            Kind::Void => Some(T::descr()).filter(|d| !d.restates(&T::TYPESTR)),
            _ => None,
        };
        Descriptor { descr, ..Descriptor::from_typestr(T::TYPESTR, data, shape) }
    }

    /// A C-contiguous, writable, version 3 array of `typestr` elements at `data`.
    pub fn from_typestr(typestr: TypeStr, data: usize, shape: impl Into<DimVec<usize>>) -> Descriptor {
        Descriptor {
            shape: shape.into(),
            strides: None,
            typestr,
            descr: None,
            data,
            readonly: false,
            version: CURRENT_VERSION,
            mask: None,
            stream: Stream::None,
        }
    }

    /// The same array with explicit strides in bytes.
    pub fn with_strides(self, strides: impl Into<DimVec<isize>>) -> Descriptor {
        Descriptor { strides: Some(strides.into()), ..self }
    }

    /// The same array, read-only or writable.
    pub fn with_readonly(self, readonly: bool) -> Descriptor {
        Descriptor { readonly, ..self }
    }

    /// The same array read-only, and its mask (and the mask's mask) too: what a consumer
    /// of memory it must not write gets.
    pub fn into_read_only(mut self) -> Descriptor {
        let mut d = &mut self;
        loop {
            d.readonly = true;
            match d.mask.as_deref_mut() {
                Some(mask) => d = mask,
                None => break,
            }
        }
        self
    }

    /// The same array declaring another interface version.
    pub fn with_version(self, version: u32) -> Descriptor {
        Descriptor { version, ..self }
    }

    /// The same array with a validity mask.
    pub fn with_mask(self, mask: Descriptor) -> Descriptor {
        Descriptor { mask: Some(Box::new(mask)), ..self }
    }

    /// The same array with pending work on `stream`.
    pub fn with_stream(self, stream: Stream) -> Descriptor {
        Descriptor { stream, ..self }
    }

    /// The same array with a record descr.
    pub fn with_descr(self, descr: Descr) -> Descriptor {
        Descriptor { descr: Some(descr), ..self }
    }

    /// The number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The size of one element in bytes.
    pub fn itemsize(&self) -> usize {
        self.typestr.itemsize()
    }

    /// The `descr` to export: the record's, or `[('', typestr)]`.
    pub fn descr(&self) -> Cow<'_, Descr> {
        match &self.descr {
            Some(d) => Cow::Borrowed(d),
            None => Cow::Owned(Descr::simple(self.typestr)),
        }
    }

    /// The number of elements: 0 when any dimension is 0, whatever the others.
    ///
    /// As NumPy does, the sizes of the non-empty dimensions times the item size must fit
    /// `isize` even when the array is empty: `(0, 2**62)` of `<f8` is refused in every
    /// order of its dimensions, `(0, 2**40)` accepted.
    #[inline]
    pub fn size(&self) -> Result<usize> {
        let mut count: usize = 1;
        let mut empty = false;
        for &n in &self.shape {
            if n == 0 {
                empty = true;
            } else {
                count = count.checked_mul(n).ok_or_else(|| self.size_overflow(false))?;
            }
        }
        let fits = count.checked_mul(self.itemsize().max(1)).is_some_and(|bytes| isize::try_from(bytes).is_ok());
        if !fits {
            return Err(self.size_overflow(true));
        }
        Ok(if empty { 0 } else { count })
    }

    /// The number of bytes of the elements (`size * itemsize`), whatever their layout.
    pub fn nbytes(&self) -> Result<usize> {
        // `size` checked that the product fits.
        Ok(self.size()? * self.itemsize())
    }

    /// The strides in bytes, computed for C order when the descriptor has none, as NumPy
    /// computes them: dimensions of size 0 count as 1, so an empty array's strides are
    /// those of the same array with its empty dimensions set to 1.
    pub fn strides(&self) -> Result<Cow<'_, [isize]>> {
        match &self.strides {
            Some(s) => Ok(Cow::Borrowed(s)),
            None => self.c_strides().map(Cow::Owned),
        }
    }

    fn c_strides(&self) -> Result<Vec<isize>> {
        let mut strides = vec![0isize; self.ndim()];
        let mut step = isize::try_from(self.itemsize()).ok();
        for (stride, &n) in strides.iter_mut().zip(&self.shape).rev() {
            *stride = step.ok_or_else(|| self.overflow("shape", "a C-order stride exceeds isize"))?;
            step = isize::try_from(n.max(1)).ok().and_then(|n| stride.checked_mul(n));
        }
        Ok(strides)
    }

    /// Whether the strides have one entry per dimension (always true without strides).
    #[inline]
    fn check_strides_length(&self) -> Result<()> {
        match &self.strides {
            Some(s) if s.len() != self.ndim() => Err(self.strides_length_error(s)),
            _ => Ok(()),
        }
    }

    #[cold]
    fn strides_length_error(&self, strides: &[isize]) -> Error {
        Error::StridesLength {
            strides: tuple(strides),
            shape: tuple(&self.shape),
            received: strides.len(),
            expected: self.ndim(),
        }
    }

    /// Whether the elements are laid out in C order without gaps. As NumPy's flags:
    /// dimensions of size 1 are ignored, and an empty array is contiguous.
    pub fn is_c_contiguous(&self) -> bool {
        match &self.strides {
            None => true,
            Some(strides) => self.dims_contiguous(strides, self.shape.iter().zip(strides).rev().map(|(&n, &s)| (n, s))),
        }
    }

    /// Whether the elements are laid out in Fortran order without gaps. As NumPy's flags:
    /// dimensions of size 1 are ignored, and an empty array is contiguous.
    pub fn is_f_contiguous(&self) -> bool {
        let Some(strides) = &self.strides else {
            // C order is also Fortran order when at most one dimension exceeds 1, and for
            // elements of size 0 (every stride is 0).
            return self.shape.contains(&0)
                || self.itemsize() == 0
                || self.shape.iter().filter(|&&n| n != 1).count() <= 1;
        };
        self.dims_contiguous(strides, self.shape.iter().zip(strides).map(|(&n, &s)| (n, s)))
    }

    /// Walks dimensions from the fastest-varying one: each stride must be the product of
    /// the item size and the sizes of the faster dimensions.
    fn dims_contiguous(&self, strides: &[isize], dims: impl Iterator<Item = (usize, isize)>) -> bool {
        if strides.len() != self.ndim() {
            return false;
        }
        if self.shape.contains(&0) {
            return true;
        }
        let mut expected = isize::try_from(self.itemsize()).ok();
        for (n, s) in dims {
            if n == 1 {
                continue;
            }
            match expected {
                Some(e) if e == s => expected = isize::try_from(n).ok().and_then(|n| e.checked_mul(n)),
                _ => return false,
            }
        }
        true
    }

    /// Whether every stride that is ever stepped is a whole number of elements, so that
    /// the array can be viewed as a typed strided slice. False for some NumPy views into
    /// packed records. The stride of an axis of length 1, and every stride of an empty
    /// array, is never stepped and may be anything, as NumPy has it (see
    /// [`Descriptor::stride_is_stepped`]).
    #[inline]
    pub fn has_element_strides(&self) -> bool {
        // C order (the common argument) is decided before the item size is looked at.
        let Some(strides) = &self.strides else { return true };
        match self.itemsize() {
            0 => true,
            itemsize => strides
                .iter()
                .enumerate()
                .all(|(axis, s)| s.unsigned_abs() % itemsize == 0 || !self.stride_is_stepped(axis)),
        }
    }

    /// Whether the stride of `axis` is ever stepped in reaching an element: not for an
    /// axis of length 1 (its one index is 0), nor for any axis of an empty array. A stride
    /// past the shape (a descriptor not validated) counts as stepped, unless the array is
    /// empty.
    pub fn stride_is_stepped(&self, axis: usize) -> bool {
        !matches!(self.shape.get(axis), Some(&n) if n <= 1) && !self.shape.contains(&0)
    }

    /// The bytes the array can reach, relative to [`data`](Descriptor::data), with every
    /// step checked: an overflow is an error, never a wrap.
    pub fn extent(&self) -> Result<Extent> {
        self.check_strides_length()?;
        if self.shape.contains(&0) || self.itemsize() == 0 {
            return Ok(Extent { start: 0, end: 0 });
        }
        if self.strides.is_none() {
            return self.c_order_extent(self.shape.iter().try_fold(1usize, |count, &n| count.checked_mul(n)));
        }
        let overflow = || self.overflow("strides", "the byte extent exceeds isize");
        let strides = self.strides()?;
        let (mut start, mut end) = (0isize, 0isize);
        for (&n, &stride) in self.shape.iter().zip(strides.iter()) {
            let last = isize::try_from(n - 1).map_err(|_| overflow())?;
            let span = stride.checked_mul(last).ok_or_else(overflow)?;
            if span < 0 {
                start = start.checked_add(span).ok_or_else(overflow)?;
            } else {
                end = end.checked_add(span).ok_or_else(overflow)?;
            }
        }
        let itemsize = isize::try_from(self.itemsize()).map_err(|_| overflow())?;
        end = end.checked_add(itemsize).ok_or_else(overflow)?;
        // Each side fits, and so must the whole: negative and positive strides together
        // (or negative ones alone) can reach more than isize::MAX bytes.
        end.checked_sub(start).ok_or_else(overflow)?;
        Ok(Extent { start, end })
    }

    /// The extent of a C-order array of `count` elements (`None`: the count overflowed).
    #[inline]
    fn c_order_extent(&self, count: Option<usize>) -> Result<Extent> {
        let end = count
            .and_then(|n| n.checked_mul(self.itemsize()))
            .and_then(|bytes| isize::try_from(bytes).ok())
            .ok_or_else(|| self.overflow("shape", "the byte extent exceeds isize"))?;
        Ok(Extent { start: 0, end })
    }

    /// The absolute addresses the array can reach: `data + start .. data + end`.
    pub fn byte_range(&self) -> Result<Range<usize>> {
        let extent = self.extent()?;
        self.byte_range_of(extent)
    }

    /// The absolute addresses of `extent` (this descriptor's, from [`validate`] or
    /// [`extent`]) from this descriptor's pointer.
    ///
    /// [`validate`]: Descriptor::validate
    /// [`extent`]: Descriptor::extent
    #[inline]
    pub fn byte_range_of(&self, extent: Extent) -> Result<Range<usize>> {
        let overflow = || self.outside_address_space();
        let start = self.data.checked_add_signed(extent.start).ok_or_else(overflow)?;
        let end = self.data.checked_add_signed(extent.end).ok_or_else(overflow)?;
        Ok(start..end)
    }

    /// Checks the descriptor against the rules of the version it declares and returns its
    /// extent.
    ///
    /// | rule | versions |
    /// |---|---|
    /// | `version` is 0, 1, 2 or 3 | all |
    /// | at most [`MAX_DIMS`](crate::MAX_DIMS) (64) dimensions and strides | all |
    /// | `strides` has one entry per dimension | all |
    /// | `descr` agrees with `typestr` (same item size; records use `\|V{n}`) | all |
    /// | the element count and byte extent fit the machine's integers | all |
    /// | a null pointer only when no byte is reachable | all |
    /// | reachable addresses lie inside the address space | all |
    /// | `mask` absent | 0 |
    /// | `mask` has the array's shape and is itself valid | 1 and later |
    /// | `stream` absent or `None` | 0 to 2 |
    ///
    /// Versions 0 and 1 said nothing of empty arrays; an empty one with a null pointer is
    /// accepted in every version, since it reaches no byte (RMM exports such version 0
    /// buffers). Strides that are not multiples of the item size are accepted (see
    /// [`strides`](Descriptor::strides)).
    pub fn validate(&self) -> Result<Extent> {
        // With `First`, the walk ends at the first rule broken: when it returns `Ok`, it
        // computed the extent.
        let mut extent = Extent { start: 0, end: 0 };
        self.walk(&mut First, &mut extent)?;
        Ok(extent)
    }

    /// Every rule of [`validate`](Self::validate)'s table that this descriptor breaks, in
    /// the table's order: empty where `validate` succeeds, and otherwise led by the error
    /// it returns. What `cai.validate` reports.
    ///
    /// A rule that needs another to hold is checked only where it does: the extent needs
    /// strides with one entry per dimension and an item size within bounds, the pointer's
    /// range needs the extent, and no rule that prints the shape or the strides is checked
    /// past [`MAX_DIMS`](crate::MAX_DIMS) dimensions. The mask's own problems follow its
    /// rules, each as an [`Error::Mask`]. `producer`: the [rules a producer
    /// follows](Self::check_producer_rules) too, where the extent is known.
    pub fn problems(&self, producer: bool) -> Vec<Error> {
        let mut found = Vec::new();
        let mut extent = None;
        // Noting in a Vec never ends the walk: it returns `Ok`.
        if let (Ok(()), Some(extent)) = (self.walk(&mut found, &mut extent), extent) {
            if producer {
                if let Err(e) = self.check_producer_rules(extent) {
                    found.push(e);
                }
            }
        }
        found
    }

    /// Checks the rules of [`validate`](Self::validate)'s table in order, noting each one
    /// broken in `findings` (see [`problems`](Self::problems) for the rules that wait on
    /// others), and writes the extent to `extent` where it could compute it. One walk for
    /// both, so that the rules are written once.
    #[inline(always)]
    fn walk(&self, findings: &mut impl Findings, extent: &mut impl From<Extent>) -> Result<()> {
        if self.version > CURRENT_VERSION {
            findings.note(Error::Version { value: u64::from(self.version) })?;
        }
        // First, so that no later message prints a tuple of a million entries.
        let mut dims_fit = true;
        for (key, len) in [("shape", self.shape.len()), ("strides", self.strides.as_ref().map_or(0, |s| s.len()))] {
            if len > crate::MAX_DIMS {
                findings.note(Error::TooManyDims { key, received: len })?;
                dims_fit = false;
            }
        }
        let strides_fit = dims_fit
            && match self.check_strides_length() {
                Ok(()) => true,
                Err(e) => {
                    findings.note(e)?;
                    false
                }
            };
        // Parsed typestrs are within it; `TypeStr::void`, a `const fn`, is not checked.
        let item_fits = self.typestr.itemsize() <= crate::MAX_ITEMSIZE;
        if !item_fits {
            findings.note(crate::typestr::too_large(&self.typestr))?;
        }
        if let Some(descr) = &self.descr {
            if let Err(e) = descr.check_typestr(&self.typestr) {
                findings.note(e)?;
            }
        }
        if strides_fit && item_fits {
            // In C order the count just checked gives the extent (no second walk of the shape).
            let computed = self.size().and_then(|count| match self.strides {
                None => self.c_order_extent(Some(count)),
                Some(_) => self.extent(),
            });
            match computed {
                Ok(x) => {
                    if self.data == 0 && !x.is_empty() {
                        findings.note(Error::NullPointer {
                            shape: tuple(&self.shape),
                            typestr: self.typestr.to_string(),
                            nbytes: x.len(),
                        })?;
                    } else if let Err(e) = self.byte_range_of(x) {
                        findings.note(e)?;
                    }
                    *extent = x.into();
                }
                Err(e) => findings.note(e)?,
            }
        }
        if let Some(mask) = &self.mask {
            if let Err(e) = Self::check_mask_version(self.version) {
                findings.note(e)?;
            }
            // Both shapes print: each within the limit.
            if self.shape.len() <= crate::MAX_DIMS && mask.shape.len() <= crate::MAX_DIMS && mask.shape != self.shape {
                findings.note(Error::MaskShape { mask: tuple(&mask.shape), shape: tuple(&self.shape) })?;
            }
            findings.mask(mask)?;
        }
        if let Err(e) = Self::check_stream_version(self.version, self.stream) {
            findings.note(e)?;
        }
        Ok(())
    }

    /// The rule of version `version` for a mask, which needs nothing else of the array
    /// (`cai.validate` checks it where the rest cannot be read): none in version 0.
    pub fn check_mask_version(version: u32) -> Result<()> {
        match version {
            0 => Err(Error::MaskVersion { version }),
            _ => Ok(()),
        }
    }

    /// The rule of version `version` for `stream`, which needs nothing else of the array:
    /// a stream only from version 3.
    #[inline]
    pub fn check_stream_version(version: u32, stream: Stream) -> Result<()> {
        match stream.to_raw() {
            Some(value) if !Self::has_stream_key(version) => Err(Error::StreamVersion { value, version }),
            _ => Ok(()),
        }
    }

    /// Whether a dict of version `version` has a `stream` key: from version 3 (a consumer
    /// of an older dict synchronizes as that version says, before it reads).
    #[inline]
    pub fn has_stream_key(version: u32) -> bool {
        version >= 3
    }

    /// The version whose rules apply to a dict declaring version `declared`: its own, from
    /// 0 to [`CURRENT_VERSION`], and the current one's for a newer version (which a reader
    /// accepts only when every key the dict carries is one the current version defines).
    #[inline]
    pub fn rules_version(declared: u64) -> u32 {
        u32::try_from(declared).ok().filter(|&v| v <= CURRENT_VERSION).unwrap_or(CURRENT_VERSION)
    }

    /// Restates the array as a dict of the older `version` describes it: that version, and
    /// no stream below version 3. A version no older than the array's changes nothing.
    /// (Below version 1 a mask is kept, and validation refuses it.)
    pub fn lower_version(&mut self, version: u32) {
        if version < self.version {
            self.version = version;
            if !Self::has_stream_key(version) {
                self.stream = Stream::None;
            }
        }
    }

    /// The pointer a conforming producer exports: 0 for an array that reaches no byte from
    /// version 2 on, else the pointer.
    pub fn exported_pointer(&self, extent: Extent) -> usize {
        if extent.is_empty() && self.version >= 2 {
            0
        } else {
            self.data
        }
    }

    /// The rules a producer follows beyond what a consumer needs (`cai.validate` reports
    /// them; imports accept what breaks them): an empty array exports pointer 0 from
    /// version 2 on.
    pub fn check_producer_rules(&self, extent: Extent) -> Result<()> {
        if self.exported_pointer(extent) != self.data {
            return Err(Error::EmptyPointer { data: self.data, shape: tuple(&self.shape) });
        }
        Ok(())
    }

    /// The strides as Python prints them: a tuple, or `None`.
    pub(crate) fn strides_text(&self) -> String {
        self.strides.as_deref().map_or_else(|| "None".to_owned(), tuple)
    }

    #[cold]
    fn outside_address_space(&self) -> Error {
        Error::Overflow {
            key: "data",
            value: format!("0x{:x}", self.data),
            detail: "the array's bytes would lie outside the address space",
        }
    }

    /// The error of [`size`](Self::size): too many elements, or (`bytes`) too many bytes.
    /// An empty array has no elements to count: its message says what is bounded.
    #[cold]
    fn size_overflow(&self, bytes: bool) -> Error {
        // cai bounds an array of 0-byte items as one of 1-byte items; NumPy bounds only its
        // dimensions.
        let zero_bytes = bytes && self.itemsize() == 0;
        let detail = match (self.shape.contains(&0), bytes, zero_bytes) {
            (false, false, _) => "the number of elements exceeds usize",
            (false, true, false) => "the number of bytes exceeds isize",
            (false, true, true) => {
                "the number of elements exceeds isize (cai counts an item of 0 bytes as 1 byte; NumPy does not bound \
                 such arrays)"
            }
            (true, false, _) => {
                "the product of its non-zero dimensions exceeds usize (bounded as NumPy bounds it, though the array \
                 is empty)"
            }
            (true, true, false) => {
                "the product of its non-zero dimensions and the item size exceeds isize (bounded as NumPy bounds it, \
                 though the array is empty)"
            }
            (true, true, true) => {
                "the product of its non-zero dimensions exceeds isize (cai counts an item of 0 bytes as 1 byte, though \
                 the array is empty; NumPy does not bound such arrays)"
            }
        };
        self.overflow("shape", detail)
    }

    #[cold]
    fn overflow(&self, key: &'static str, detail: &'static str) -> Error {
        let value = match key {
            "shape" => tuple(&self.shape),
            _ => self.strides_text(),
        };
        Error::Overflow { key, value, detail }
    }
}

/// The interface dict in Python's notation, with the keys a producer exports: `strides`
/// always (`None` when C-contiguous was not spelled out), `descr` always, `mask` when
/// present, `stream` from version 3.
impl fmt::Display for Descriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let py_bool = |b: bool| if b { "True" } else { "False" };
        write!(f, "{{'shape': {}, 'typestr': '{}', 'descr': {}, ", PyTuple(&self.shape), self.typestr, self.descr())?;
        write!(f, "'data': ({}, {}), 'version': {}, 'strides': ", self.data, py_bool(self.readonly), self.version)?;
        match &self.strides {
            Some(s) => write!(f, "{}", PyTuple(s))?,
            None => f.write_str("None")?,
        }
        if let Some(mask) = &self.mask {
            write!(f, ", 'mask': {mask}")?;
        }
        if Self::has_stream_key(self.version) {
            write!(f, ", 'stream': {}", self.stream)?;
        }
        f.write_str("}")
    }
}

/// Where a walk of the descriptor rules puts what breaks them: [`Descriptor::validate`]
/// stops at the first, [`Descriptor::problems`] notes each and goes on.
trait Findings {
    /// Notes `error`; an `Err` ends the walk.
    fn note(&mut self, error: Error) -> Result<()>;

    /// Notes what breaks the rules in `mask`, a descriptor's mask (each as an
    /// [`Error::Mask`]). A method, not a walk of `mask` with these findings, so that the
    /// walk is not made generic over ever deeper adapters.
    fn mask(&mut self, mask: &Descriptor) -> Result<()>;
}

/// The first error ends the walk.
struct First;

impl Findings for First {
    #[inline(always)]
    fn note(&mut self, error: Error) -> Result<()> {
        Err(error)
    }

    fn mask(&mut self, mask: &Descriptor) -> Result<()> {
        mask.validate().map(drop).map_err(|e| Error::Mask(Box::new(e)))
    }
}

impl Findings for Vec<Error> {
    fn note(&mut self, error: Error) -> Result<()> {
        self.push(error);
        Ok(())
    }

    fn mask(&mut self, mask: &Descriptor) -> Result<()> {
        self.extend(mask.problems(false).into_iter().map(|e| Error::Mask(Box::new(e))));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descr::Field;
    use crate::stream::StreamHandle;

    const PTR: usize = 0x7f00_0000_0000;

    fn f4(shape: &[usize]) -> Descriptor {
        Descriptor::new::<f32>(PTR, shape)
    }

    fn handle(n: usize) -> Stream {
        Stream::Handle(StreamHandle::new(n).unwrap())
    }

    #[test]
    fn c_contiguous_constructor() {
        let d = f4(&[3, 4]);
        assert_eq!((d.ndim(), d.itemsize(), d.size().unwrap(), d.nbytes().unwrap()), (2, 4, 12, 48));
        assert_eq!(d.strides().unwrap().as_ref(), &[16, 4]);
        assert_eq!((d.version, d.readonly, d.stream, d.descr.as_ref()), (3, false, Stream::None, None));
        assert_eq!(d.descr().as_simple(), Some(TypeStr::parse("<f4").unwrap()));
        assert_eq!(d.validate().unwrap(), Extent { start: 0, end: 48 });
        assert_eq!(d.byte_range().unwrap(), PTR..PTR + 48);
    }

    #[test]
    fn zero_dimensional() {
        let d = f4(&[]);
        assert_eq!((d.ndim(), d.size().unwrap()), (0, 1));
        assert!(d.strides().unwrap().is_empty());
        assert_eq!(d.validate().unwrap().len(), 4);
        assert!(d.is_c_contiguous() && d.is_f_contiguous());
    }

    #[test]
    fn contiguity_flags_follow_numpy() {
        // numpy.zeros((3, 4), 'f4').T: strides (4, 16)
        let t = f4(&[4, 3]).with_strides([4, 16]);
        assert!(!t.is_c_contiguous() && t.is_f_contiguous());
        // C layout given explicitly
        let c = f4(&[3, 4]).with_strides([16, 4]);
        assert!(c.is_c_contiguous() && !c.is_f_contiguous());
        // Size-1 dimensions may have any stride.
        let ones = f4(&[1, 4, 1]).with_strides([999, 4, -7]);
        assert!(ones.is_c_contiguous() && ones.is_f_contiguous());
        // Empty arrays are contiguous whatever their strides.
        let empty = f4(&[0, 4]).with_strides([3, 5]);
        assert!(empty.is_c_contiguous() && empty.is_f_contiguous());
        // A slice with a step, a reversed array, a broadcast.
        assert!(!f4(&[3]).with_strides([8]).is_c_contiguous());
        assert!(!f4(&[3]).with_strides([-4]).is_c_contiguous());
        assert!(!f4(&[3, 4]).with_strides([0, 4]).is_c_contiguous());
        // Without strides: C always; Fortran only with at most one dimension above 1.
        assert!(f4(&[1, 5]).is_f_contiguous());
        assert!(!f4(&[2, 5]).is_f_contiguous());
        assert!(f4(&[2, 0]).is_f_contiguous());
        // Wrong stride count: neither.
        assert!(!f4(&[2, 2]).with_strides([8]).is_c_contiguous());
    }

    #[test]
    fn extent_with_negative_and_zero_strides() {
        // numpy.arange(12, dtype='f4').reshape(3, 4)[::-1, ::2]: data points at row 2.
        let d = f4(&[3, 2]).with_strides([-16, 8]);
        assert_eq!(d.extent().unwrap(), Extent { start: -32, end: 12 });
        // Broadcast: every row is the same 4 floats.
        let b = f4(&[1000, 4]).with_strides([0, 4]);
        assert_eq!(b.extent().unwrap(), Extent { start: 0, end: 16 });
        let empty = f4(&[5, 0]).with_strides([-4, 4]);
        assert!(empty.extent().unwrap().is_empty());
    }

    #[test]
    fn strides_need_not_be_element_multiples() {
        // The f4 field of a packed record (|u1, <f4): stride 5.
        let d = f4(&[10]).with_strides([5]);
        assert_eq!(d.validate().unwrap(), Extent { start: 0, end: 49 });
        assert!(!d.has_element_strides());
        assert!(f4(&[10]).with_strides([-8]).has_element_strides());
        assert!(f4(&[10]).has_element_strides());
        // A stride that is never stepped may be anything: an axis of length 1, or any
        // axis of an empty array.
        assert!(f4(&[3, 1]).with_strides([4, 6]).has_element_strides());
        assert!(f4(&[0]).with_strides([5]).has_element_strides());
        assert!(f4(&[2, 0]).with_strides([5, 7]).has_element_strides());
        assert!(!f4(&[2, 1]).with_strides([5, 4]).has_element_strides());
        assert!(!f4(&[1, 2]).with_strides([4, 6]).has_element_strides());
        assert!(f4(&[3, 1]).stride_is_stepped(0));
        assert!(!f4(&[3, 1]).stride_is_stepped(1));
        assert!(!f4(&[3, 0]).stride_is_stepped(0));
        assert!(f4(&[3]).stride_is_stepped(1));
        assert!(!f4(&[3]).with_strides([4, 6]).has_element_strides());
    }

    #[test]
    fn extent_overflow_is_an_error() {
        let e = f4(&[3]).with_strides([isize::MAX]).extent().unwrap_err();
        assert_eq!(e.key(), "strides");
        assert!(e.to_string().contains(&format!("({},)", isize::MAX)), "{e}");
        let e = f4(&[4, 3]).with_strides([isize::MIN / 2, 8]).validate().unwrap_err();
        assert!(matches!(e, Error::Overflow { key: "strides", .. }), "{e}");
        let e = f4(&[usize::MAX, 2]).with_strides([0, 0]).validate().unwrap_err();
        assert!(matches!(e, Error::Overflow { key: "shape", .. }), "{e}");
        let e = f4(&[usize::MAX / 2]).strides().map(|_| ()).err();
        assert!(e.is_none(), "a 1-d array's stride is the item size");
        let e = f4(&[2, usize::MAX / 2]).c_strides().unwrap_err();
        assert_eq!(e.key(), "shape");
        // The mirror images of a span too wide are too wide as well: negative strides, and
        // a negative and a positive side that each fit.
        let wide = isize::MAX - 3;
        for strides in [vec![wide], vec![-wide], vec![-(1 << 62), 1 << 62]] {
            let shape = vec![2; strides.len()];
            let e = f4(&shape).with_strides(strides.clone()).validate().unwrap_err();
            assert!(matches!(e, Error::Overflow { key: "strides", .. }), "{strides:?}: {e}");
        }
        let fits = f4(&[2, 2]).with_strides([-(1 << 61), 1 << 61]).extent().unwrap();
        assert_eq!(fits.len(), (1 << 62) + 4);
    }

    #[test]
    fn empty_arrays_are_sized_as_numpy_sizes_them_in_any_dimension_order() {
        let f8 = |shape: &[usize]| Descriptor::new::<f64>(0, shape.to_vec());
        for shape in [[0, 1 << 63, 2], [2, 1 << 63, 0], [1 << 62, 0, 1]] {
            let e = f8(&shape).validate().unwrap_err();
            assert!(matches!(e, Error::Overflow { key: "shape", .. }), "{shape:?}: {e}");
        }
        for shape in [[0, 1 << 40, 2], [2, 1 << 40, 0]] {
            let d = f8(&shape);
            assert_eq!(d.validate().unwrap(), Extent { start: 0, end: 0 });
            assert_eq!((d.size().unwrap(), d.nbytes().unwrap()), (0, 0));
            let expected: Vec<isize> = if shape[0] == 0 { vec![16 << 40, 16, 8] } else { vec![8 << 40, 8, 8] };
            assert_eq!(d.strides().unwrap().as_ref(), expected, "NumPy's strides: empty dimensions count as 1");
            assert!(d.is_c_contiguous() && d.is_f_contiguous());
        }
    }

    #[test]
    fn elements_of_size_zero_are_contiguous_both_ways() {
        let d = Descriptor::from_typestr(TypeStr::parse("|V0").unwrap(), 0x1000, [3, 4]);
        assert_eq!(d.strides().unwrap().as_ref(), [0, 0]);
        assert!(d.is_c_contiguous() && d.is_f_contiguous());
        assert!(d.clone().with_strides([0, 0]).is_f_contiguous());
    }

    #[test]
    fn the_empty_pointer_rule_is_a_producer_rule() {
        let empty = Descriptor::new::<f32>(0, [0, 3]);
        let e = Descriptor { data: 0x1000, ..empty.clone() };
        let extent = e.validate().unwrap();
        assert_eq!(e.exported_pointer(extent), 0);
        let err = e.check_producer_rules(extent).unwrap_err();
        assert_eq!(
            err.to_string(),
            "data: an empty array exports pointer 0 from version 2 on, received 0x1000 for shape (0, 3)"
        );
        assert!(Descriptor { version: 1, ..e }.check_producer_rules(extent).is_ok());
        assert!(empty.check_producer_rules(extent).is_ok());
    }

    #[test]
    fn address_range_overflow_is_an_error() {
        let near_top = Descriptor::new::<f32>(usize::MAX - 4, [2]);
        let e = near_top.validate().unwrap_err();
        assert_eq!(e.key(), "data");
        assert!(e.to_string().contains(&format!("0x{:x}", usize::MAX - 4)), "{e}");
        let below_zero = Descriptor::new::<f32>(8, [3]).with_strides([-8]);
        assert_eq!(below_zero.validate().unwrap_err().key(), "data");
    }

    #[test]
    fn rule_version_must_be_known() {
        for v in 0..=3 {
            assert!(f4(&[2]).with_version(v).validate().is_ok());
        }
        let e = f4(&[2]).with_version(4).validate().unwrap_err();
        assert_eq!(e, Error::Version { value: 4 });
        assert!(e.to_string().starts_with("version: 4 is not supported"));
    }

    #[test]
    fn rule_strides_length_equals_ndim() {
        let e = f4(&[2, 3]).with_strides([4]).validate().unwrap_err();
        assert_eq!(e.to_string(), "strides: (4,) has 1 entries, but shape (2, 3) has 2 dimensions");
        for v in 0..=3 {
            assert!(f4(&[2, 3]).with_strides([12, 4, 4]).with_version(v).validate().is_err());
        }
    }

    #[test]
    fn rule_null_pointer_only_when_empty() {
        for v in 0..=3 {
            let e = Descriptor::new::<f32>(0, [2, 3]).with_version(v).validate().unwrap_err();
            assert_eq!(e.key(), "data");
            assert!(e.to_string().contains("shape (2, 3)") && e.to_string().contains("24 bytes"), "{e}");
            // Empty arrays: every version (nothing is reachable).
            assert!(Descriptor::new::<f32>(0, [0, 3]).with_version(v).validate().is_ok());
        }
        // A zero-size type reaches nothing either.
        assert!(Descriptor::from_typestr(TypeStr::void(0), 0, [4]).validate().is_ok());
    }

    #[test]
    fn rule_mask_from_version_1() {
        let mask = Descriptor::new::<bool>(PTR + 4096, [2, 3]);
        let e = f4(&[2, 3]).with_version(0).with_mask(mask.clone()).validate().unwrap_err();
        assert_eq!(e.to_string(), "mask: received a mask in a version 0 descriptor; masks exist from version 1");
        for v in 1..=3 {
            assert!(f4(&[2, 3]).with_version(v).with_mask(mask.clone()).validate().is_ok());
        }
    }

    #[test]
    fn rule_mask_has_the_array_shape_and_is_valid() {
        let e = f4(&[2, 3]).with_mask(Descriptor::new::<bool>(PTR, [3, 2])).validate().unwrap_err();
        assert_eq!(e.to_string(), "mask: shape (3, 2) does not match the array's shape (2, 3)");
        let bad = Descriptor::new::<bool>(0, [2, 3]);
        let e = f4(&[2, 3]).with_mask(bad).validate().unwrap_err();
        assert!(matches!(&e, Error::Mask(inner) if inner.key() == "data"), "{e}");
        assert!(e.to_string().starts_with("mask: data: pointer 0"));
    }

    #[test]
    fn rule_stream_from_version_3() {
        for v in 0..3 {
            let e = f4(&[2]).with_version(v).with_stream(handle(77)).validate().unwrap_err();
            assert_eq!(e, Error::StreamVersion { value: 77, version: v });
            assert_eq!(
                e.to_string(),
                format!("stream: received 77 in a version {v} descriptor; streams exist from version 3")
            );
            assert!(f4(&[2]).with_version(v).with_stream(Stream::LegacyDefault).validate().is_err());
            assert!(f4(&[2]).with_version(v).validate().is_ok());
        }
        assert!(f4(&[2]).with_stream(handle(77)).validate().is_ok());
        assert!(f4(&[2]).with_stream(Stream::PerThreadDefault).validate().is_ok());
    }

    #[test]
    fn a_newer_version_is_read_by_the_current_rules() {
        for v in 0..=3u32 {
            assert_eq!(Descriptor::rules_version(u64::from(v)), v);
        }
        for v in [4, 70, u64::from(u32::MAX), u64::from(u32::MAX) + 1, u64::MAX] {
            assert_eq!(Descriptor::rules_version(v), CURRENT_VERSION);
        }
    }

    #[test]
    fn lowering_the_version_drops_what_the_older_version_lacks() {
        let array = f4(&[2, 3]).with_stream(handle(77));
        let mut v2 = array.clone();
        v2.lower_version(2);
        assert_eq!((v2.version, v2.stream), (2, Stream::None));
        assert!(v2.validate().is_ok());
        assert!(!v2.to_string().contains("stream"));
        // Not older: unchanged.
        for v in [3, 4] {
            let mut same = array.clone();
            same.lower_version(v);
            assert_eq!((same.version, same.stream), (3, handle(77)));
        }
        let mut old = array.with_version(1);
        old.lower_version(2);
        assert_eq!(old.version, 1);
        // Below version 1 the mask stays, for validation to refuse.
        let mut masked = f4(&[2]).with_mask(Descriptor::new::<bool>(PTR + 4096, [2]));
        masked.lower_version(0);
        assert_eq!(masked.validate().unwrap_err(), Error::MaskVersion { version: 0 });
    }

    #[test]
    fn rule_descr_agrees_with_typestr() {
        let t = |s: &str| TypeStr::parse(s).unwrap();
        let record = Descr::new(vec![Field::new("x", t("<f4")), Field::new("id", t("|u1")), Field::padding(3)]);
        let ok = Descriptor::from_typestr(TypeStr::void(8), PTR, [5]).with_descr(record.clone());
        assert_eq!(ok.validate().unwrap().len(), 40);
        let e = Descriptor::from_typestr(TypeStr::void(12), PTR, [5]).with_descr(record).validate().unwrap_err();
        assert_eq!(e.key(), "descr");
        let e = f4(&[5]).with_descr(Descr::simple(t("<i4"))).validate().unwrap_err();
        assert_eq!(e.key(), "descr");
    }

    #[test]
    fn prints_as_the_python_dict() {
        let d = Descriptor::new::<f32>(4096, [2, 3]).with_readonly(true);
        assert_eq!(
            d.to_string(),
            "{'shape': (2, 3), 'typestr': '<f4', 'descr': [('', '<f4')], 'data': (4096, True), 'version': 3, \
             'strides': None, 'stream': None}"
        );
        let old = Descriptor::new::<u8>(4096, [4])
            .with_version(1)
            .with_strides([-1])
            .with_mask(Descriptor::new::<bool>(8192, [4]).with_version(1));
        assert_eq!(
            old.to_string(),
            "{'shape': (4,), 'typestr': '|u1', 'descr': [('', '|u1')], 'data': (4096, False), 'version': 1, \
             'strides': (-1,), 'mask': {'shape': (4,), 'typestr': '|b1', 'descr': [('', '|b1')], 'data': (8192, False), \
             'version': 1, 'strides': None}}"
        );
    }

    #[test]
    fn validation_ignores_readonly_and_accepts_every_layout() {
        let d = f4(&[3, 4, 5, 6]).with_strides([-480, 4, 16, 80]).with_readonly(true);
        let extent = d.validate().unwrap();
        assert_eq!(extent, Extent { start: -960, end: 4 + 12 + 64 + 400 });
    }
}
