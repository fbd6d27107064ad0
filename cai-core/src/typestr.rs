//! NumPy's type strings (`typestr`): byte order, kind, item size and datetime unit.
//!
//! The grammar accepted is the one NumPy writes in `__array_interface__` and every CAI
//! producer copies: `<order><kind><size>[<unit>]`, where
//!
//! - `order` is `<` (little-endian), `>` (big-endian), `|` (not applicable) or `=`
//!   (native: resolved to `<` or `>` when parsed, and to `|` for the types no order
//!   applies to, as NumPy resolves it: `=V2` is raw bytes, `|V2`, not bfloat16's `<V2`);
//! - `kind` is one of `b i u f c m M O S U V`;
//! - `size` is a decimal number without sign or leading zeros: the item size in bytes,
//!   except for `U` where it counts UCS-4 characters (`<U3` is 12 bytes). It may be left
//!   out for `O` only (`|O`, pointer-sized);
//! - `unit`, for `m` and `M` only, is `[unit]` or `[Nunit]` with unit one of
//!   `Y M W D h m s ms us ns ps fs as` (`<M8[ns]`, `<m8[25s]`); without it the type is
//!   NumPy's generic (unit-less) datetime.
//!
//! The byte order is kept exactly as given (a big-endian `>f4` stays big-endian); use
//! [`TypeStr::normalized`] or [`TypeStr::is_equivalent`] to compare types the way NumPy's
//! `dtype` does.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// The byte order of a type string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// `<`: little-endian.
    Little,
    /// `>`: big-endian.
    Big,
    /// `|`: byte order does not apply (single bytes, strings, records).
    NotApplicable,
}

impl ByteOrder {
    /// The byte order of the machine this code runs on (what `=` means where a byte order
    /// applies).
    pub const NATIVE: ByteOrder = if cfg!(target_endian = "little") { ByteOrder::Little } else { ByteOrder::Big };

    /// The order a typestr's first byte names (`=` read as [`ByteOrder::NATIVE`]; see
    /// [`TypeStr::parse`] for the types it leaves without one).
    const fn from_code(code: u8) -> Option<ByteOrder> {
        Some(match code {
            b'<' => ByteOrder::Little,
            b'>' => ByteOrder::Big,
            b'|' => ByteOrder::NotApplicable,
            b'=' => ByteOrder::NATIVE,
            _ => return None,
        })
    }

    /// The character NumPy writes for this order.
    pub const fn as_char(self) -> char {
        match self {
            ByteOrder::Little => '<',
            ByteOrder::Big => '>',
            ByteOrder::NotApplicable => '|',
        }
    }

    /// Whether data in this order can be read without swapping bytes on this machine.
    pub const fn is_native(self) -> bool {
        !matches!((self, Self::NATIVE), (ByteOrder::Little, ByteOrder::Big) | (ByteOrder::Big, ByteOrder::Little))
    }
}

/// The kind letter of a type string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `b`: boolean, one byte.
    Bool,
    /// `i`: signed integer.
    Int,
    /// `u`: unsigned integer.
    UInt,
    /// `f`: floating point.
    Float,
    /// `c`: complex floating point (two floats).
    Complex,
    /// `m`: timedelta, 8 bytes.
    TimeDelta,
    /// `M`: datetime, 8 bytes.
    DateTime,
    /// `O`: Python object pointer.
    Object,
    /// `S`: fixed-length byte string.
    Bytes,
    /// `U`: fixed-length UCS-4 string.
    Unicode,
    /// `V`: raw bytes, including records described by `descr`.
    Void,
}

impl Kind {
    /// Every kind, in NumPy's documentation order.
    pub const ALL: [Kind; 11] = [
        Kind::Bool,
        Kind::Int,
        Kind::UInt,
        Kind::Float,
        Kind::Complex,
        Kind::TimeDelta,
        Kind::DateTime,
        Kind::Object,
        Kind::Bytes,
        Kind::Unicode,
        Kind::Void,
    ];

    /// The kind letter.
    pub const fn code(self) -> char {
        match self {
            Kind::Bool => 'b',
            Kind::Int => 'i',
            Kind::UInt => 'u',
            Kind::Float => 'f',
            Kind::Complex => 'c',
            Kind::TimeDelta => 'm',
            Kind::DateTime => 'M',
            Kind::Object => 'O',
            Kind::Bytes => 'S',
            Kind::Unicode => 'U',
            Kind::Void => 'V',
        }
    }

    /// The kind of a letter, if it is one.
    pub const fn from_code(code: u8) -> Option<Kind> {
        Some(match code {
            b'b' => Kind::Bool,
            b'i' => Kind::Int,
            b'u' => Kind::UInt,
            b'f' => Kind::Float,
            b'c' => Kind::Complex,
            b'm' => Kind::TimeDelta,
            b'M' => Kind::DateTime,
            b'O' => Kind::Object,
            b'S' => Kind::Bytes,
            b'U' => Kind::Unicode,
            b'V' => Kind::Void,
            _ => return None,
        })
    }

    /// Whether a value of `itemsize` bytes can be of this kind.
    pub const fn accepts_itemsize(self, itemsize: usize) -> bool {
        match self {
            Kind::Bool => itemsize == 1,
            Kind::Int | Kind::UInt => matches!(itemsize, 1 | 2 | 4 | 8),
            // 10, 12 and 16 are the `long double` layouts of the platforms NumPy runs on.
            Kind::Float => matches!(itemsize, 2 | 4 | 8 | 10 | 12 | 16),
            // `<c4` is PyTorch's complex32 (two halves).
            Kind::Complex => matches!(itemsize, 4 | 8 | 16 | 20 | 24 | 32),
            Kind::TimeDelta | Kind::DateTime => itemsize == 8,
            Kind::Object => itemsize == std::mem::size_of::<usize>(),
            Kind::Bytes | Kind::Void => itemsize <= MAX_ITEMSIZE,
            Kind::Unicode => itemsize % 4 == 0 && itemsize <= MAX_ITEMSIZE,
        }
    }

    /// The item sizes this kind accepts, in words, for error messages.
    fn itemsize_rule(self) -> &'static str {
        match self {
            Kind::Bool => "a boolean is 1 byte",
            Kind::Int | Kind::UInt => "an integer is 1, 2, 4 or 8 bytes",
            Kind::Float => "a float is 2, 4, 8, 10, 12 or 16 bytes",
            Kind::Complex => "a complex is 4, 8, 16, 20, 24 or 32 bytes",
            Kind::TimeDelta | Kind::DateTime => "a datetime or timedelta is 8 bytes",
            Kind::Object => "an object is pointer-sized",
            Kind::Bytes | Kind::Void => "bytes and raw bytes take any size up to 2147483647 (NumPy's limit)",
            Kind::Unicode => {
                "a unicode string is a whole number of 4-byte characters, up to 536870911 (NumPy's limit of \
                 2147483647 bytes)"
            }
        }
    }
}

/// The largest item NumPy can describe, in bytes (`2**31 - 1`: its item sizes are C
/// `int`s); the libraries that take NumPy's dtypes (CuPy, Numba) share it. A larger type
/// string or record could be read by nothing that consumes the interface.
pub const MAX_ITEMSIZE: usize = i32::MAX as usize;

/// The unit of a datetime or timedelta.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeUnit {
    /// `Y`
    Year,
    /// `M`
    Month,
    /// `W`
    Week,
    /// `D`
    Day,
    /// `h`
    Hour,
    /// `m`
    Minute,
    /// `s`
    Second,
    /// `ms`
    Millisecond,
    /// `us`
    Microsecond,
    /// `ns`
    Nanosecond,
    /// `ps`
    Picosecond,
    /// `fs`
    Femtosecond,
    /// `as`
    Attosecond,
}

impl TimeUnit {
    /// Every unit, from the longest to the shortest.
    pub const ALL: [TimeUnit; 13] = [
        TimeUnit::Year,
        TimeUnit::Month,
        TimeUnit::Week,
        TimeUnit::Day,
        TimeUnit::Hour,
        TimeUnit::Minute,
        TimeUnit::Second,
        TimeUnit::Millisecond,
        TimeUnit::Microsecond,
        TimeUnit::Nanosecond,
        TimeUnit::Picosecond,
        TimeUnit::Femtosecond,
        TimeUnit::Attosecond,
    ];

    /// The unit's code, as NumPy writes it.
    pub const fn code(self) -> &'static str {
        match self {
            TimeUnit::Year => "Y",
            TimeUnit::Month => "M",
            TimeUnit::Week => "W",
            TimeUnit::Day => "D",
            TimeUnit::Hour => "h",
            TimeUnit::Minute => "m",
            TimeUnit::Second => "s",
            TimeUnit::Millisecond => "ms",
            TimeUnit::Microsecond => "us",
            TimeUnit::Nanosecond => "ns",
            TimeUnit::Picosecond => "ps",
            TimeUnit::Femtosecond => "fs",
            TimeUnit::Attosecond => "as",
        }
    }

    fn from_code(code: &[u8]) -> Option<TimeUnit> {
        TimeUnit::ALL.into_iter().find(|u| u.code().as_bytes() == code)
    }
}

/// The unit of a datetime or timedelta with its multiplier: `[25s]` is 25 seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DateTimeUnit {
    /// The base unit.
    pub unit: TimeUnit,
    /// How many base units one step is; at least 1.
    pub count: std::num::NonZeroU32,
}

impl DateTimeUnit {
    /// One step of `unit`.
    pub const fn new(unit: TimeUnit) -> Self {
        DateTimeUnit { unit, count: std::num::NonZeroU32::MIN }
    }
}

impl fmt::Display for DateTimeUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.count.get() == 1 {
            write!(f, "[{}]", self.unit.code())
        } else {
            write!(f, "[{}{}]", self.count, self.unit.code())
        }
    }
}

/// A parsed type string.
///
/// Only legal combinations can be built: the item size fits the kind, and only datetime and
/// timedelta types carry a unit. (The one exception, [`void`](TypeStr::void), a `const fn`
/// for records, takes any size: [`Descriptor::validate`](crate::Descriptor::validate)
/// refuses one past [`MAX_ITEMSIZE`].)
///
/// ```
/// use cai_core::{ByteOrder, Kind, TypeStr};
///
/// let t: TypeStr = ">f8".parse()?;
/// assert_eq!((t.byte_order(), t.kind(), t.itemsize()), (ByteOrder::Big, Kind::Float, 8));
/// assert!(!t.byte_order().is_native() || cfg!(target_endian = "big"));
/// assert_eq!(t.to_string(), ">f8");
///
/// let u: TypeStr = "<U3".parse()?;
/// assert_eq!(u.itemsize(), 12); // three UCS-4 characters
/// assert!("<f3".parse::<TypeStr>().is_err());
/// # Ok::<(), cai_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TypeStr {
    order: ByteOrder,
    kind: Kind,
    itemsize: usize,
    unit: Option<DateTimeUnit>,
}

impl TypeStr {
    /// The type string of the Rust element type `T` (its [`Element::TYPESTR`]).
    ///
    /// ```
    /// use cai_core::TypeStr;
    ///
    /// assert_eq!(TypeStr::of::<f32>().to_string(), if cfg!(target_endian = "little") { "<f4" } else { ">f4" });
    /// assert_eq!(TypeStr::of::<bool>().to_string(), "|b1");
    /// ```
    ///
    /// [`Element::TYPESTR`]: crate::Element::TYPESTR
    pub const fn of<T: crate::Element>() -> TypeStr {
        T::TYPESTR
    }

    /// A type string, if `itemsize` fits `kind` (see [`Kind::accepts_itemsize`]).
    ///
    /// Usable in constants; [`TypeStr::new`] is the same with an error that says why.
    pub const fn try_new(order: ByteOrder, kind: Kind, itemsize: usize) -> Option<TypeStr> {
        if kind.accepts_itemsize(itemsize) {
            Some(TypeStr { order, kind, itemsize, unit: None })
        } else {
            None
        }
    }

    /// A type string, or an error quoting it when `itemsize` does not fit `kind`.
    pub fn new(order: ByteOrder, kind: Kind, itemsize: usize) -> Result<TypeStr> {
        Self::try_new(order, kind, itemsize).ok_or_else(|| {
            // A unicode typestr counts characters, not the bytes given here.
            let value = match kind {
                Kind::Unicode => format!("{}{} of {itemsize} bytes", order.as_char(), kind.code()),
                _ => format!("{}{}{}", order.as_char(), kind.code(), itemsize),
            };
            malformed(&value, kind.itemsize_rule())
        })
    }

    /// A raw-bytes type `|V{itemsize}`, the typestr of records. The size is not checked
    /// here (this is a `const fn`): a descriptor with one past [`MAX_ITEMSIZE`] fails
    /// validation, as the text fails [`TypeStr::parse`].
    pub const fn void(itemsize: usize) -> TypeStr {
        TypeStr { order: ByteOrder::NotApplicable, kind: Kind::Void, itemsize, unit: None }
    }

    /// The same datetime or timedelta type with a unit, or `None` to make it generic.
    pub fn with_unit(self, unit: Option<DateTimeUnit>) -> Result<TypeStr> {
        if unit.is_some() && !matches!(self.kind, Kind::DateTime | Kind::TimeDelta) {
            return Err(malformed(&self.to_string(), "only datetime (M) and timedelta (m) types have a unit"));
        }
        Ok(TypeStr { unit, ..self })
    }

    /// A native-order numeric type for [`Element`](crate::Element) impls; fails to compile
    /// when evaluated in a constant with a size that does not fit the kind.
    pub(crate) const fn native(kind: Kind, itemsize: usize) -> TypeStr {
        let order = if itemsize == 1 { ByteOrder::NotApplicable } else { ByteOrder::NATIVE };
        match Self::try_new(order, kind, itemsize) {
            Some(t) => t,
            None => panic!("item size does not fit the kind"),
        }
    }

    /// Parses a type string; see the [module documentation](self) for the grammar.
    #[inline]
    pub fn parse(s: &str) -> Result<TypeStr> {
        let bytes = s.as_bytes();
        // The common spelling, a byte order, a kind and a one-digit size (`<f4`, `|u1`),
        // read directly; anything else, and any error, takes the general path below.
        if let &[order, code, digit @ b'1'..=b'9'] = bytes {
            if let (Some(order), Some(kind)) = (ByteOrder::from_code(order), Kind::from_code(code)) {
                let n = usize::from(digit - b'0');
                let itemsize = if kind == Kind::Unicode { n * 4 } else { n };
                if kind.accepts_itemsize(itemsize) {
                    return Ok(TypeStr { order, kind, itemsize, unit: None }.resolve_equals(bytes[0]));
                }
            }
        }
        TypeStr::parse_general(s)
    }

    /// [`TypeStr::parse`] for every spelling, with the error that names what is wrong.
    #[inline(never)]
    fn parse_general(s: &str) -> Result<TypeStr> {
        let bytes = s.as_bytes();
        let (&order, rest) = bytes.split_first().ok_or_else(|| malformed(s, "it is empty"))?;
        let order = ByteOrder::from_code(order)
            .ok_or_else(|| malformed(s, "it must start with a byte order: one of <, >, | or ="))?;
        let (&code, rest) =
            rest.split_first().ok_or_else(|| malformed(s, "the kind letter is missing after the byte order"))?;
        let kind = Kind::from_code(code)
            .ok_or_else(|| malformed(s, "the kind letter must be one of b, i, u, f, c, m, M, O, S, U, V"))?;
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let (number, rest) = rest.split_at(digits);
        let itemsize = if number.is_empty() {
            if kind != Kind::Object {
                return Err(malformed(s, "the item size is missing after the kind letter"));
            }
            std::mem::size_of::<usize>()
        } else {
            let n = parse_decimal(number).ok_or_else(|| {
                malformed(s, "the item size must be a decimal number without leading zeros that fits in usize")
            })?;
            if kind == Kind::Unicode {
                n.checked_mul(4).ok_or_else(|| malformed(s, "the unicode length overflows usize in bytes"))?
            } else {
                n
            }
        };
        if !kind.accepts_itemsize(itemsize) {
            return Err(malformed(s, kind.itemsize_rule()));
        }
        let unit = if rest.is_empty() {
            None
        } else if matches!(kind, Kind::DateTime | Kind::TimeDelta) {
            Some(parse_unit(s, rest)?)
        } else {
            return Err(malformed(s, "unexpected characters after the item size"));
        };
        Ok(TypeStr { order, kind, itemsize, unit }.resolve_equals(bytes[0]))
    }

    /// The type written with `code` as its byte order: `=` is the native order where a
    /// byte order applies and `|` where none does (`=b1`, `=i1`, `=V2` and `=S3` are
    /// `|b1`, `|i1`, `|V2` and `|S3`, as NumPy reads them: raw two bytes, not the `<V2`
    /// of bfloat16).
    const fn resolve_equals(self, code: u8) -> TypeStr {
        if code == b'=' && !order_applies(self.kind, self.itemsize) {
            return TypeStr { order: ByteOrder::NotApplicable, ..self };
        }
        self
    }

    /// The byte order as written (`=` already resolved: see [`TypeStr::parse`]).
    pub const fn byte_order(&self) -> ByteOrder {
        self.order
    }

    /// The kind.
    pub const fn kind(&self) -> Kind {
        self.kind
    }

    /// The size of one element in bytes (for `U`, four bytes a character).
    pub const fn itemsize(&self) -> usize {
        self.itemsize
    }

    /// The unit of a datetime or timedelta type; `None` for every other type and for
    /// generic (unit-less) datetimes.
    pub const fn unit(&self) -> Option<DateTimeUnit> {
        self.unit
    }

    /// The type string NumPy's `dtype(...).str` would print: the byte order is `|` where it
    /// cannot matter (one-byte types, byte strings, raw bytes, objects) and explicit
    /// elsewhere (`|f4` becomes the native `<f4` on a little-endian machine).
    pub const fn normalized(self) -> TypeStr {
        let order = if !order_applies(self.kind, self.itemsize) {
            ByteOrder::NotApplicable
        } else if matches!(self.order, ByteOrder::NotApplicable) {
            ByteOrder::NATIVE
        } else {
            self.order
        };
        TypeStr { order, ..self }
    }

    /// Whether two type strings describe the same values in the same bytes, the way NumPy
    /// compares dtypes: `|i1` and `<i1` are the same type, `<f4` and `>f4` are not.
    pub const fn is_equivalent(&self, other: &TypeStr) -> bool {
        let (a, b) = (self.normalized(), other.normalized());
        let same_unit = match (a.unit, b.unit) {
            (None, None) => true,
            (Some(x), Some(y)) => x.count.get() == y.count.get() && x.unit as u8 == y.unit as u8,
            _ => false,
        };
        a.order as u8 == b.order as u8 && a.kind as u8 == b.kind as u8 && a.itemsize == b.itemsize && same_unit
    }
}

impl fmt::Display for TypeStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.order.as_char(), self.kind.code())?;
        match self.kind {
            Kind::Object => {}
            Kind::Unicode => write!(f, "{}", self.itemsize / 4)?,
            _ => write!(f, "{}", self.itemsize)?,
        }
        if let Some(unit) = self.unit {
            write!(f, "{unit}")?;
        }
        Ok(())
    }
}

impl FromStr for TypeStr {
    type Err = Error;

    fn from_str(s: &str) -> Result<TypeStr> {
        TypeStr::parse(s)
    }
}

/// Whether a byte order applies to values of `kind` and `itemsize`: not to one-byte types,
/// byte strings, raw bytes or objects (NumPy writes `|` for those).
const fn order_applies(kind: Kind, itemsize: usize) -> bool {
    !(itemsize <= 1 && !matches!(kind, Kind::Unicode) || matches!(kind, Kind::Bytes | Kind::Void | Kind::Object))
}

/// The error of a typestr whose item size is past [`MAX_ITEMSIZE`] (only
/// [`TypeStr::void`] makes one).
#[cold]
pub(crate) fn too_large(t: &TypeStr) -> Error {
    malformed(&t.to_string(), t.kind.itemsize_rule())
}

fn malformed(value: &str, reason: &str) -> Error {
    Error::Typestr { value: value.to_owned(), reason: reason.to_owned() }
}

/// A decimal without sign or leading zeros (`0` itself is fine), checked against overflow.
fn parse_decimal(digits: &[u8]) -> Option<usize> {
    if digits.len() > 1 && digits[0] == b'0' {
        return None;
    }
    digits.iter().try_fold(0usize, |acc, &d| acc.checked_mul(10)?.checked_add(usize::from(d - b'0')))
}

/// `[unit]` or `[Nunit]` after a datetime or timedelta size.
fn parse_unit(s: &str, rest: &[u8]) -> Result<DateTimeUnit> {
    let inner = rest
        .strip_prefix(b"[")
        .and_then(|r| r.strip_suffix(b"]"))
        .ok_or_else(|| malformed(s, "a datetime unit must be written in brackets, as in [ns] or [25s]"))?;
    let digits = inner.iter().take_while(|b| b.is_ascii_digit()).count();
    let (number, code) = inner.split_at(digits);
    let count = if number.is_empty() {
        std::num::NonZeroU32::MIN
    } else {
        parse_decimal(number).and_then(|n| u32::try_from(n).ok()).and_then(std::num::NonZeroU32::new).ok_or_else(
            || {
                malformed(
                    s,
                    "a datetime unit multiplier must be a decimal number from 1 to 4294967295 without leading zeros",
                )
            },
        )?
    };
    let unit = TimeUnit::from_code(code)
        .ok_or_else(|| malformed(s, "the datetime unit must be one of Y, M, W, D, h, m, s, ms, us, ns, ps, fs, as"))?;
    Ok(DateTimeUnit { unit, count })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> String {
        TypeStr::parse(s).unwrap_err().to_string()
    }

    #[test]
    fn the_short_path_agrees_with_the_general_one() {
        // Every three-byte string of a printable first and second byte and a digit, and
        // some bytes around them: the same value, or the same error.
        let firsts = (b' '..=b'~').chain([0, 0x7f]);
        for first in firsts {
            for code in (b' '..=b'~').chain([0, 0x7f]) {
                for digit in b'0'..=b'9' {
                    let text = [first, code, digit];
                    let s = std::str::from_utf8(&text).unwrap();
                    let short = TypeStr::parse(s).map_err(|e| e.to_string());
                    let general = TypeStr::parse_general(s).map_err(|e| e.to_string());
                    assert_eq!(short, general, "{s:?}");
                }
            }
        }
    }

    #[test]
    fn parses_the_numeric_types() {
        let t = TypeStr::parse("<f4").unwrap();
        assert_eq!((t.byte_order(), t.kind(), t.itemsize(), t.unit()), (ByteOrder::Little, Kind::Float, 4, None));
        assert_eq!(TypeStr::parse("|b1").unwrap().kind(), Kind::Bool);
        assert_eq!(TypeStr::parse(">i8").unwrap().byte_order(), ByteOrder::Big);
        assert_eq!(TypeStr::parse("<c32").unwrap().itemsize(), 32);
        assert_eq!(TypeStr::parse("<f16").unwrap().itemsize(), 16);
        assert_eq!(TypeStr::parse("<c4").unwrap().itemsize(), 4);
    }

    #[test]
    fn equals_sign_resolves_to_native_order() {
        let t = TypeStr::parse("=f8").unwrap();
        assert_eq!(t.byte_order(), ByteOrder::NATIVE);
        assert!(t.byte_order().is_native());
        assert_eq!(t.to_string().as_bytes()[0] as char, ByteOrder::NATIVE.as_char());
    }

    #[test]
    fn equals_sign_gives_no_order_where_none_applies() {
        // NumPy: np.dtype('=V2').str == '|V2' (raw bytes, not bfloat16's '<V2').
        let native = ByteOrder::NATIVE.as_char();
        for (given, read) in [
            ("=V2", "|V2".to_owned()),
            ("=b1", "|b1".to_owned()),
            ("=i1", "|i1".to_owned()),
            ("=u1", "|u1".to_owned()),
            ("=S3", "|S3".to_owned()),
            ("=S12", "|S12".to_owned()),
            ("=V16", "|V16".to_owned()),
            ("=O", "|O".to_owned()),
            ("=O8", "|O".to_owned()),
            ("=U1", format!("{native}U1")),
            ("=f2", format!("{native}f2")),
            ("=i2", format!("{native}i2")),
            ("=c16", format!("{native}c16")),
            ("=M8[ns]", format!("{native}M8[ns]")),
        ] {
            assert_eq!(TypeStr::parse(given).unwrap().to_string(), read, "{given}");
        }
        // Written explicitly, an order stays as given.
        assert_eq!(TypeStr::parse("<V2").unwrap().byte_order(), ByteOrder::Little);
        assert_eq!(TypeStr::parse(">b1").unwrap().byte_order(), ByteOrder::Big);
    }

    #[test]
    fn non_native_order_is_kept() {
        let foreign = if cfg!(target_endian = "little") { ">f4" } else { "<f4" };
        let t = TypeStr::parse(foreign).unwrap();
        assert!(!t.byte_order().is_native());
        assert_eq!(t.to_string(), foreign);
        assert!(!t.is_equivalent(&t.normalized().with_order_for_test(ByteOrder::NATIVE)));
    }

    impl TypeStr {
        fn with_order_for_test(self, order: ByteOrder) -> TypeStr {
            TypeStr { order, ..self }
        }
    }

    #[test]
    fn datetime_units() {
        let t = TypeStr::parse("<M8[ns]").unwrap();
        assert_eq!(t.kind(), Kind::DateTime);
        assert_eq!(t.unit(), Some(DateTimeUnit::new(TimeUnit::Nanosecond)));
        let d = TypeStr::parse("<m8[D]").unwrap();
        assert_eq!((d.kind(), d.unit().unwrap().unit), (Kind::TimeDelta, TimeUnit::Day));
        let generic = TypeStr::parse("<M8").unwrap();
        assert_eq!(generic.unit(), None);
        let counted = TypeStr::parse("<M8[25s]").unwrap();
        assert_eq!(counted.unit().unwrap().count.get(), 25);
        assert_eq!(counted.to_string(), "<M8[25s]");
        // `m` is minutes, `M` months: case matters.
        assert_eq!(TypeStr::parse("<m8[m]").unwrap().unit().unwrap().unit, TimeUnit::Minute);
        assert_eq!(TypeStr::parse("<m8[M]").unwrap().unit().unwrap().unit, TimeUnit::Month);
    }

    #[test]
    fn strings_objects_and_void() {
        let u = TypeStr::parse("<U3").unwrap();
        assert_eq!((u.itemsize(), u.to_string().as_str()), (12, "<U3"));
        assert_eq!(TypeStr::parse("|S5").unwrap().itemsize(), 5);
        assert_eq!(TypeStr::parse("|S0").unwrap().itemsize(), 0);
        assert_eq!(TypeStr::parse("|V12").unwrap().kind(), Kind::Void);
        // NumPy's largest items (`numpy.dtype('S2147483647')`, `'U536870911'`).
        assert_eq!(TypeStr::parse("|S2147483647").unwrap().itemsize(), MAX_ITEMSIZE);
        assert_eq!(TypeStr::parse("<U536870911").unwrap().itemsize(), 2147483644);
        let o = TypeStr::parse("|O").unwrap();
        assert_eq!((o.itemsize(), o.to_string().as_str()), (std::mem::size_of::<usize>(), "|O"));
        let explicit = format!("|O{}", std::mem::size_of::<usize>());
        assert_eq!(TypeStr::parse(&explicit).unwrap(), o);
    }

    #[test]
    fn malformed_strings_are_refused_with_the_string_quoted() {
        for (input, reason) in [
            ("", "it is empty"),
            ("<", "kind letter is missing"),
            ("<f", "item size is missing"),
            ("<x4", "kind letter must be one of"),
            ("<f4junk", "unexpected characters"),
            ("<M8[parsec]", "datetime unit must be one of"),
            ("<f3", "a float is 2, 4, 8, 10, 12 or 16 bytes"),
            ("<b2", "a boolean is 1 byte"),
            ("<i16", "an integer is 1, 2, 4 or 8 bytes"),
            ("<c2", "a complex is"),
            ("<M4", "a datetime or timedelta is 8 bytes"),
            ("|O4", "pointer-sized"),
            ("f4", "must start with a byte order"),
            (" <f4", "must start with a byte order"),
            ("<f04", "without leading zeros"),
            ("<f+4", "item size is missing"),
            ("<f99999999999999999999999", "fits in usize"),
            ("<U9999999999999999999", "overflows usize"),
            ("<M8[ns", "in brackets"),
            ("<M8ns]", "in brackets"),
            ("<M8[0ns]", "multiplier"),
            ("<M8[05ns]", "multiplier"),
            ("<M8[]", "datetime unit must be one of"),
            ("<f8[ns]", "unexpected characters"),
            ("<V", "item size is missing"),
            ("|S2147483648", "up to 2147483647 (NumPy's limit)"),
            ("|V9223372036854775807", "up to 2147483647 (NumPy's limit)"),
            ("<U536870912", "up to 536870911 (NumPy's limit of 2147483647 bytes)"),
        ] {
            let message = err(input);
            assert!(message.starts_with(&format!("typestr: '{input}' is malformed: ")), "{message}");
            assert!(message.contains(reason), "{input:?}: {message}");
        }
        // A long one is quoted by its start, the length after the closing quote; the error
        // keeps the whole string.
        let long = format!("<f{}", "4".repeat(200));
        let e = TypeStr::parse(&long).unwrap_err();
        let shown = format!("'<f{}'... (202 characters)", "4".repeat(78));
        assert!(e.to_string().starts_with(&format!("typestr: {shown} is malformed: ")), "{e}");
        assert!(matches!(e, Error::Typestr { value, .. } if value == long));
    }

    #[test]
    fn constructors_check_the_size() {
        assert!(TypeStr::new(ByteOrder::Little, Kind::Float, 3).unwrap_err().to_string().contains("'<f3'"));
        assert_eq!(TypeStr::try_new(ByteOrder::Little, Kind::Int, 3), None);
        assert_eq!(TypeStr::void(7).to_string(), "|V7");
        let f4 = TypeStr::new(ByteOrder::Little, Kind::Float, 4).unwrap();
        assert!(f4.with_unit(Some(DateTimeUnit::new(TimeUnit::Second))).is_err());
        let m8 = TypeStr::new(ByteOrder::Little, Kind::DateTime, 8).unwrap();
        assert_eq!(m8.with_unit(Some(DateTimeUnit::new(TimeUnit::Second))).unwrap().to_string(), "<M8[s]");
    }

    #[test]
    fn normalization_follows_numpy() {
        let norm = |s: &str| TypeStr::parse(s).unwrap().normalized().to_string();
        let native = ByteOrder::NATIVE.as_char();
        assert_eq!(norm("<i1"), "|i1");
        assert_eq!(norm("|f4"), format!("{native}f4"));
        assert_eq!(norm(">V2"), "|V2");
        assert_eq!(norm("<S3"), "|S3");
        assert_eq!(norm(">f4"), ">f4");
        assert_eq!(norm("|U1"), format!("{native}U1"));
        let eq = |a: &str, b: &str| TypeStr::parse(a).unwrap().is_equivalent(&TypeStr::parse(b).unwrap());
        assert!(eq("|u1", "<u1"));
        assert!(eq("<V2", "|V2"));
        assert!(!eq("<f4", ">f4"));
        assert!(!eq("<f4", "<i4"));
        assert!(!eq("<M8[ns]", "<M8[us]"));
        assert!(!eq("<M8[ns]", "<M8"));
        assert!(eq("<M8[ns]", "<M8[1ns]"));
    }
}
