//! Every derive, expanded in a crate with no prelude and with cai-core under another
//! name: generated code must name everything by absolute path.
#![no_implicit_prelude]

/// Items named as the generated code's locals would be, were they not prefixed: a pattern
/// `let layout = ...` would match this constant, a parameter `name: &str` the next, a
/// closure `|export| ...` the struct below.
#[allow(non_upper_case_globals, dead_code)]
const layout: u8 = 0;

/// See `layout`.
#[allow(non_upper_case_globals, dead_code)]
const name: u8 = 0;

/// See `layout`.
#[allow(non_camel_case_types, dead_code)]
#[derive(::core::fmt::Debug)]
pub struct export;

/// A host array whose shape is computed from its fields.
#[derive(::renamed::ArrayInterface)]
#[cai(crate = "::renamed", shape = [self.rows, self.cols], readonly)]
#[derive(::core::fmt::Debug)]
pub struct Grid {
    /// The values, row-major.
    #[cai(data)]
    pub values: ::std::vec::Vec<f32>,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
}

/// A device array with a stream, a mask and a named second array.
#[derive(::renamed::CudaArrayInterface)]
#[cai(crate = "::renamed")]
#[derive(::core::fmt::Debug)]
pub struct Device<T: ::renamed::Element> {
    /// The values.
    #[cai(data)]
    pub values: ::renamed::RawDeviceBuffer<T>,
    /// Their shape.
    #[cai(shape)]
    pub shape: [usize; 1],
    /// Validity.
    #[cai(mask)]
    pub valid: Valid,
    /// Stream.
    #[cai(stream)]
    pub stream: ::renamed::Stream,
    /// A second array.
    #[cai(data, array = "ids")]
    pub ids: ::renamed::RawDeviceBuffer<u32>,
}

/// A mask.
#[derive(::renamed::CudaArrayInterface)]
#[cai(crate = "::renamed")]
#[derive(::core::fmt::Debug)]
pub struct Valid {
    /// The flags.
    #[cai(data)]
    pub bits: ::renamed::RawDeviceBuffer<bool>,
}

/// A record.
#[derive(::core::clone::Clone, ::core::marker::Copy, ::renamed::Element)]
#[cai(crate = "::renamed")]
#[repr(C)]
#[derive(::core::fmt::Debug)]
pub struct Record {
    /// An id.
    pub id: u8,
    /// A value.
    pub value: f64,
}
