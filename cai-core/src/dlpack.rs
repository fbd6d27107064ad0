//! DLPack's C ABI (version 1.x, and the legacy unversioned form) and its correspondence
//! with the descriptor model: the structs a `__dlpack__` capsule points at, device types,
//! and the mapping between DLPack data types and typestrs.
//!
//! Only the ABI lives here; the capsule protocol (names, deleters, the stream handshake)
//! is cai-py's. The structs follow `dlpack.h` field for field.

use std::ffi::c_void;
use std::fmt;

use crate::descriptor::Descriptor;
use crate::typestr::{ByteOrder, Kind, TypeStr};

/// The DLPack version these structs implement.
pub const VERSION: DLPackVersion = DLPackVersion { major: 1, minor: 0 };

/// `DLDeviceType` values cai knows.
pub mod device_type {
    /// Host memory.
    pub const CPU: i32 = 1;
    /// CUDA device memory.
    pub const CUDA: i32 = 2;
    /// Pinned (page-locked) host memory, accessible from CUDA devices.
    pub const CUDA_HOST: i32 = 3;
    /// CUDA managed (unified) memory.
    pub const CUDA_MANAGED: i32 = 13;
}

/// The name of a DLPack device type, for messages.
pub fn device_type_name(device_type: i32) -> &'static str {
    match device_type {
        1 => "kDLCPU",
        2 => "kDLCUDA",
        3 => "kDLCUDAHost",
        4 => "kDLOpenCL",
        7 => "kDLVulkan",
        8 => "kDLMetal",
        9 => "kDLVPI",
        10 => "kDLROCM",
        11 => "kDLROCMHost",
        12 => "kDLExtDev",
        13 => "kDLCUDAManaged",
        14 => "kDLOneAPI",
        15 => "kDLWebGPU",
        16 => "kDLHexagon",
        17 => "kDLMAIA",
        _ => "an unknown device type",
    }
}

/// `DLDevice`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDevice {
    /// A `DLDeviceType`.
    pub device_type: i32,
    /// The device ordinal (0 for the host).
    pub device_id: i32,
}

/// `DLDataType`: a type code, the bits of one lane, and the number of lanes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDataType {
    /// A `DLDataTypeCode`.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes per element (1 for scalars).
    pub lanes: u16,
}

/// `DLDataTypeCode` values.
pub mod type_code {
    /// Signed integers.
    pub const INT: u8 = 0;
    /// Unsigned integers.
    pub const UINT: u8 = 1;
    /// IEEE floats.
    pub const FLOAT: u8 = 2;
    /// Opaque handles.
    pub const OPAQUE_HANDLE: u8 = 3;
    /// bfloat16.
    pub const BFLOAT: u8 = 4;
    /// Complex numbers (two floats).
    pub const COMPLEX: u8 = 5;
    /// Booleans.
    pub const BOOL: u8 = 6;
}

/// The name of a DLPack type code, for messages.
pub fn type_code_name(code: u8) -> &'static str {
    match code {
        0 => "kDLInt",
        1 => "kDLUInt",
        2 => "kDLFloat",
        3 => "kDLOpaqueHandle",
        4 => "kDLBfloat",
        5 => "kDLComplex",
        6 => "kDLBool",
        7 => "kDLFloat8_e3m4",
        8 => "kDLFloat8_e4m3",
        9 => "kDLFloat8_e4m3b11fnuz",
        10 => "kDLFloat8_e4m3fn",
        11 => "kDLFloat8_e4m3fnuz",
        12 => "kDLFloat8_e5m2",
        13 => "kDLFloat8_e5m2fnuz",
        14 => "kDLFloat8_e8m0fnu",
        15 => "kDLFloat6_e2m3fn",
        16 => "kDLFloat6_e3m2fn",
        17 => "kDLFloat4_e2m1fn",
        _ => "an unknown type code",
    }
}

impl fmt::Display for DLDataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} bits", type_code_name(self.code), self.bits)?;
        if self.lanes != 1 {
            write!(f, ", {} lanes", self.lanes)?;
        }
        f.write_str(")")
    }
}

/// `DLTensor`.
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// The data pointer (device or host), before `byte_offset`.
    pub data: *mut c_void,
    /// Where the data lives.
    pub device: DLDevice,
    /// The number of dimensions.
    pub ndim: i32,
    /// The element type.
    pub dtype: DLDataType,
    /// `ndim` sizes.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or null for a compact row-major tensor.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// `DLManagedTensor`: the legacy capsule's (`"dltensor"`) tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; called once, by the consumer or the capsule.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DLPackVersion {
    /// Incompatible ABI changes.
    pub major: u32,
    /// Compatible additions.
    pub minor: u32,
}

/// `DLManagedTensorVersioned`: the versioned capsule's (`"dltensor_versioned"`) tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The DLPack version of this struct.
    pub version: DLPackVersion,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; called once, by the consumer or the capsule.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// [`flags`] bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

/// `DLManagedTensorVersioned::flags` bits.
pub mod flags {
    /// The consumer must not write.
    pub const READ_ONLY: u64 = 1 << 0;
    /// The tensor is a copy the producer made for this export.
    pub const IS_COPIED: u64 = 1 << 1;
}

/// The DLPack type of a typestr, or why it has none. Native byte order only; `<V2` is
/// bfloat16 (as PyTorch and `ml_dtypes` export it through the interface).
pub fn data_type(typestr: &TypeStr) -> Result<DLDataType, String> {
    let size = typestr.itemsize();
    // A byte order means nothing to one-byte items and raw bytes (NumPy exports `>u1` as
    // uint8); `<V2` is bfloat16 only in the native order, which the match below checks.
    let ordered = size > 1 && typestr.kind() != Kind::Void;
    if ordered && typestr.byte_order() != ByteOrder::NATIVE && typestr.byte_order() != ByteOrder::NotApplicable {
        return Err(format!("'{typestr}' is not in this machine's byte order, which DLPack requires"));
    }
    let bits = u8::try_from(size * 8).ok();
    let code = match (typestr.kind(), size) {
        (Kind::Bool, 1) => type_code::BOOL,
        (Kind::Int, 1 | 2 | 4 | 8) => type_code::INT,
        (Kind::UInt, 1 | 2 | 4 | 8) => type_code::UINT,
        (Kind::Float, 2 | 4 | 8) => type_code::FLOAT,
        (Kind::Complex, 8 | 16) => type_code::COMPLEX,
        // Only the native order marks bfloat16: `|V2` is two raw bytes (NumPy's `V2`).
        (Kind::Void, 2) if typestr.byte_order() == ByteOrder::NATIVE => type_code::BFLOAT,
        _ => return Err(format!("'{typestr}' has no DLPack data type")),
    };
    Ok(DLDataType { code, bits: bits.unwrap_or(0), lanes: 1 })
}

/// The typestr of a DLPack type, or why it has none (lanes, fp8 and other kinds).
pub fn typestr(dtype: DLDataType) -> Result<TypeStr, String> {
    if dtype.lanes != 1 {
        return Err(format!("{dtype} has {} lanes; only scalar types (1 lane) have a typestr", dtype.lanes));
    }
    let kind = match (dtype.code, dtype.bits) {
        (type_code::BOOL, 8) => Kind::Bool,
        (type_code::INT, 8 | 16 | 32 | 64) => Kind::Int,
        (type_code::UINT, 8 | 16 | 32 | 64) => Kind::UInt,
        (type_code::FLOAT, 16 | 32 | 64) => Kind::Float,
        (type_code::COMPLEX, 64 | 128) => Kind::Complex,
        (type_code::BFLOAT, 16) => Kind::Void,
        _ => return Err(format!("{dtype} has no typestr")),
    };
    let order = if dtype.bits == 8 { ByteOrder::NotApplicable } else { ByteOrder::NATIVE };
    TypeStr::try_new(order, kind, usize::from(dtype.bits / 8)).ok_or_else(|| format!("{dtype} has no typestr"))
}

/// Writes the strides of `descriptor` in elements into `out` (one per dimension), as
/// DLPack counts them, or says why they are not whole elements. C-order strides (the
/// descriptor has none) are computed without allocating: empty dimensions count as 1.
pub fn write_element_strides(descriptor: &Descriptor, out: &mut [i64]) -> Result<(), String> {
    if out.len() != descriptor.ndim() {
        return Err(format!("{} strides asked for a {}-d array", out.len(), descriptor.ndim()));
    }
    match &descriptor.strides {
        // A descriptor not validated may have strides of another length.
        Some(strides) if strides.len() != out.len() => {
            return Err(format!("{} strides given for a {}-d array", strides.len(), descriptor.ndim()));
        }
        Some(_) => {
            for (slot, s) in out.iter_mut().zip(element_strides(descriptor)?) {
                *slot = s;
            }
        }
        None => {
            let mut step: i64 = 1;
            for (slot, &n) in out.iter_mut().zip(&descriptor.shape).rev() {
                *slot = step;
                let n = i64::try_from(n.max(1)).map_err(|_| format!("dimension {n} does not fit DLPack's int64"))?;
                step = step.checked_mul(n).ok_or_else(|| "C-order strides overflow DLPack's int64".to_owned())?;
            }
        }
    }
    Ok(())
}

/// The strides of `descriptor` in elements, as DLPack counts them, or why they are not
/// whole elements. A stride that is never stepped (of an axis of length 1, or of an empty
/// array) may be any number of bytes: it is divided rounding toward zero, as NumPy's
/// export does.
pub fn element_strides(descriptor: &Descriptor) -> Result<Vec<i64>, String> {
    let itemsize = descriptor.itemsize();
    let strides = descriptor.strides().map_err(|e| e.to_string())?;
    strides
        .iter()
        .enumerate()
        .map(|(axis, &s)| {
            let size = isize::try_from(itemsize).unwrap_or(isize::MAX);
            if size == 0 {
                return Ok(0);
            }
            if s % size != 0 && descriptor.stride_is_stepped(axis) {
                return Err(format!(
                    "strides {} are not whole multiples of the element size {itemsize}, which DLPack's strides must be",
                    crate::error::PyTuple(&strides)
                ));
            }
            i64::try_from(s / size).map_err(|_| format!("stride {s} does not fit DLPack's int64"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> TypeStr {
        TypeStr::parse(s).unwrap()
    }

    #[test]
    fn every_type_with_a_dlpack_type_round_trips() {
        for s in
            ["|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8", "<c8", "<c16", "<V2"]
        {
            let t = ts(s);
            let d = data_type(&t).unwrap();
            assert_eq!(typestr(d).unwrap(), t, "{s} -> {d}");
        }
        assert_eq!(data_type(&ts("|b1")).unwrap(), DLDataType { code: type_code::BOOL, bits: 8, lanes: 1 });
        assert_eq!(data_type(&ts("<V2")).unwrap(), DLDataType { code: type_code::BFLOAT, bits: 16, lanes: 1 });
        // Two raw bytes (NumPy's `V2`, a two-byte record) are not bfloat16.
        assert!(data_type(&ts("|V2")).is_err());
        // One-byte items have no byte order to be wrong: NumPy exports `>u1` as uint8.
        for s in [">u1", "<u1", ">i1", ">b1"] {
            assert_eq!(data_type(&ts(s)).unwrap(), data_type(&ts(&format!("|{}", &s[1..]))).unwrap(), "{s}");
        }
        // Raw bytes in the other order are still raw bytes, not bfloat16, and say so.
        let other = if cfg!(target_endian = "little") { ">V2" } else { "<V2" };
        assert_eq!(data_type(&ts(other)).unwrap_err(), format!("'{other}' has no DLPack data type"));
    }

    #[test]
    fn types_without_a_counterpart_are_refused_by_name() {
        for s in ["<M8[ns]", "|S5", "<U3", "|V8", "<f16", ">f4"] {
            assert!(data_type(&ts(s)).is_err(), "{s}");
        }
        let fp8 = DLDataType { code: 10, bits: 8, lanes: 1 };
        assert_eq!(typestr(fp8).unwrap_err(), "kDLFloat8_e4m3fn (8 bits) has no typestr");
        let vector = DLDataType { code: type_code::FLOAT, bits: 32, lanes: 4 };
        assert!(typestr(vector).unwrap_err().contains("4 lanes"));
    }

    #[test]
    fn strides_are_counted_in_elements() {
        let d = Descriptor::new::<f32>(0x1000, [3, 4]);
        assert_eq!(element_strides(&d).unwrap(), [4, 1]);
        let t = d.clone().with_strides([4, 16]);
        assert_eq!(element_strides(&t).unwrap(), [1, 4]);
        let packed = d.with_strides([6, 2]);
        assert!(element_strides(&packed).unwrap_err().contains("not whole multiples of the element size 4"));
        // Strides never stepped need not be whole elements.
        let unit_axis = Descriptor::new::<f32>(0x1000, [3, 1]).with_strides([4, 6]);
        assert_eq!(element_strides(&unit_axis).unwrap(), vec![1, 1]);
        let empty = Descriptor::new::<f32>(0x1000, [0, 2]).with_strides([5, -9]);
        assert_eq!(element_strides(&empty).unwrap(), vec![1, -2]);
        let mut out = [0; 2];
        write_element_strides(&unit_axis, &mut out).unwrap();
        assert_eq!(out, [1, 1]);
    }

    #[test]
    fn written_strides_match_computed_ones() {
        for d in [
            Descriptor::new::<f32>(0x1000, [3, 4]),
            Descriptor::new::<f64>(0x1000, [0, 5, 2]),
            Descriptor::new::<u8>(0x1000, [7]),
        ] {
            let mut out = vec![0; d.ndim()];
            write_element_strides(&d, &mut out).unwrap();
            assert_eq!(out, element_strides(&d).unwrap());
        }
    }

    #[test]
    fn struct_sizes_match_the_c_header() {
        assert_eq!(std::mem::size_of::<DLDevice>(), 8);
        assert_eq!(std::mem::size_of::<DLDataType>(), 4);
        assert_eq!(std::mem::size_of::<DLTensor>(), 48);
        assert_eq!(std::mem::size_of::<DLManagedTensor>(), 64);
        assert_eq!(std::mem::size_of::<DLManagedTensorVersioned>(), 80);
    }
}
