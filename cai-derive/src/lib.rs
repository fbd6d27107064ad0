//! Derive macros for cai-core, and the attribute `#[cai_py::export]` for cai-py.
//!
//! Use the derives through cai-core's `derive` feature (`cai-array-core = { version =
//! "0.1", features = ["derive"] }`, used as `cai_core`), which re-exports each under its
//! trait's name, as in `use cai_core::{ArrayInterface, CudaArrayInterface, Element};`;
//! cai-core's documentation of those re-exports has compiled examples. Use `export` as
//! `#[cai_py::export]`, re-exported by cai-py.
//!
//! Each macro documents its own grammar. Parsing (`attr`, `ast`), rules (`check`) and code
//! generation (`expand`) are separate phases. Errors are collected in a `Ctxt`, spanned on
//! the offending tokens; the rules run only on attributes that parsed, and an input with
//! errors still gets stub impls (`fallback`), so that each mistake is one error.

mod ast;
mod attr;
mod check;
mod ctxt;
mod expand;
mod fallback;
mod pyexport;

use proc_macro::TokenStream;
use syn::{parse_macro_input, DeriveInput};

use crate::ast::Input;
use crate::attr::Which;
use crate::check::Flavor;
use crate::ctxt::Ctxt;

/// Adds the interface properties of a `#[pyclass]` to its `#[pymethods]` block: write
/// `#[cai_py::export]` (re-exported by cai-py) above `#[pymethods]` on the class's impl
/// block, which then needs no `multiple-pymethods` feature (an empty
/// `#[pymethods] impl Class {}` will do).
///
/// ```text
/// #[cai_py::export]                       // = #[cai_py::export(cuda)]
/// #[cai_py::export(<argument>, ...)]
///
/// <argument> :=
///     cuda                     // __cuda_array_interface__, __dlpack__, __dlpack_device__
///   | host                     // __array_interface__ (and DLPack of it when no `cuda`)
///   | arrays(name, ...)        // a property per named device array: a cai.CudaArray view
///   | host_arrays(name, ...)   // a property per named host array: a cai.HostArray view
///   | options = field          // per-object export options (with `cuda` or `arrays`)
///   | crate = "path"           // where cai_py is, when it is renamed
/// ```
///
/// Without `host`, `arrays(...)` or `host_arrays(...)` the block gets `cuda`. What each
/// argument needs of the class, usually from cai-core's derives:
///
/// - `cuda`: `CudaArrayInterface` (`#[derive(CudaArrayInterface)]`). Adds the getter
///   `__cuda_array_interface__` and DLPack's `__dlpack__` / `__dlpack_device__` for the
///   same device array.
/// - `host`: `ArrayInterface` (`#[derive(ArrayInterface)]`), for a class of host memory.
///   Adds `__array_interface__`, and `__dlpack__` / `__dlpack_device__` for the host array
///   unless `cuda` is given too.
/// - `arrays(name, ...)`: `NamedCudaArrays`; `host_arrays(name, ...)`: `NamedArrays`. Each
///   name becomes a property returning a view that keeps the object alive. The names are
///   checked at compile time against those the derive gives (`#[cai(array)]`,
///   `#[cai(..., array = "name")]`): an unknown name is an error on the name that lists the
///   valid ones. With a hand-written trait impl they are checked against its `NAMES`.
/// - `options = field`: a field of the class of type `cai_py::ExportOptions`, read (it is
///   `Copy`) on every `__cuda_array_interface__` and `__dlpack__` export: per-object
///   control over the process-wide export options (`cai.configure`, `CAI_EXPORT_STREAM`,
///   `CAI_EXPORT_VERSION`). Its `None` fields follow the process-wide ones;
///   `stream_none: Some(true)` exports `stream: None`, `version: Some(2)` exports version 2
///   without a stream. The named device arrays' views take them when they are made (a view
///   re-exports version 3 whatever it was made under, with `stream: None` under version
///   2; its `version` attribute reads 2).
///   Needs `cuda` or `arrays(...)`. `field` is a field name, or an index for a tuple
///   struct.
///
/// A missing trait is reported once, on the argument that needs it (on the attribute for
/// the default `cuda`), with what to derive: a host class exported without `host` is told
/// to write `#[cai_py::export(host)]`.
#[proc_macro_attribute]
pub fn export(args: TokenStream, item: TokenStream) -> TokenStream {
    pyexport::expand(args.into(), item.into()).into()
}

/// Implements `CudaArrayInterface` and `NamedCudaArrays` for a struct holding device
/// buffers.
///
/// ```text
/// #[derive(CudaArrayInterface)]
/// #[cai(readonly, version = N, shape = <expr>, strides = <expr>, crate = "path")]  // each optional
/// struct Name {
///     #[cai(data)]                  field: <DeviceBuffer>,        // the struct's own array
///     #[cai(shape)]                 field: <AsShape>,
///     #[cai(strides)]               field: <AsStrides>,
///     #[cai(mask)]                  field: <CudaArrayInterface>,
///     #[cai(stream)]                field: <AsStream>,            // every array's stream
///     #[cai(data, array = "name")]  field: <DeviceBuffer>,        // the named array `name`
///     #[cai(shape, array = "name")] field: <AsShape>,             // strides, mask: likewise
///     #[cai(array)]                 field: <CudaArrayInterface>,  // an array named after the field
///     #[cai(array = "name")]        field: <CudaArrayInterface>,  // an array named `name`
///     field: T,                                                   // not exported
/// }
/// ```
///
/// Field attributes (one role per field):
/// - `data`: the buffer, a `DeviceBuffer`: `RawDeviceBuffer<T>`, or cudarc's
///   `CudaSlice<T>`, `CudaView<T>`, `CudaViewMut<T>` (cai-core's `cuda` feature). One per
///   array.
/// - `shape`: the shape, an `AsShape`: `[usize; N]`, `Vec<usize>`, `[usize]`, a tuple of
///   up to six `usize`, a `usize` (1-d). Without one the array is 1-d over the whole
///   buffer.
/// - `strides`: strides in bytes, an `AsStrides`: `[isize; N]`, `Vec<isize>`, a tuple of
///   `isize`. Without one the array is C-contiguous.
/// - `mask`: a field whose type itself implements `CudaArrayInterface`. Version 1 and later.
/// - `stream`: the stream the data is ordered on, an `AsStream`: a `Stream`, a raw handle
///   as `usize`, an `Option` of either, cudarc's `Arc<CudaStream>`, a `TrackedStream`.
///   Shared by every buffer array of the struct (not a nested one, below); version 3
///   only. When it is not the buffer's own stream, the buffer's pending work is ordered
///   before it on export (`DeviceBuffer::order_before`).
/// - `array = "name"`: with a role, the field belongs to the named array `name`; without
///   one, the field is itself an array (its type implements the trait). A bare `array`
///   names it after the field. Such a nested array (and a mask) is described by its own
///   type, with its own version and stream: where its data is ordered is known there. A
///   nested array behind a shared pointer (`&T`, `Rc<T>`, `Arc<T>`) is read-only.
///
/// Struct attributes:
/// - `readonly`: consumers must not write any array of the struct, nested ones included.
/// - `version = N`: the CUDA Array Interface version to export, 0 to 3 (default 3), for
///   the struct's buffer arrays.
/// - `shape = <expr>`, `strides = <expr>`: the struct's own array's shape (strides)
///   computed from its fields, an expression over `self` of an `AsShape` (`AsStrides`)
///   type, e.g. `#[cai(shape = [self.height, self.width])]`. Not with a `shape`
///   (`strides`) field.
/// - `crate = "path"`: where cai-core is, when it is renamed.
///
/// `CudaArrayInterface` is implemented when the struct has an array of its own (a `data`
/// field without `array`); `NamedCudaArrays` always, with its named arrays in declaration
/// order (none when there are none). Every export validates the descriptor by its version
/// and checks that the bytes it reaches lie in the buffer. Fields of generic types get
/// `where` bounds; others are checked where they are declared, and a field of the wrong
/// type is an error on its type saying which types fit.
#[proc_macro_derive(CudaArrayInterface, attributes(cai))]
pub fn derive_cuda_array_interface(input: TokenStream) -> TokenStream {
    interface(parse_macro_input!(input as DeriveInput), Flavor::Device).into()
}

/// Implements `ArrayInterface` and `NamedArrays` for a struct holding host buffers, for
/// NumPy's `__array_interface__`.
///
/// ```text
/// #[derive(ArrayInterface)]
/// #[cai(readonly, version = N, shape = <expr>, strides = <expr>, crate = "path")]  // each optional
/// struct Name {
///     #[cai(data)]                  field: <HostBuffer>,      // the struct's own array
///     #[cai(shape)]                 field: <AsShape>,
///     #[cai(strides)]               field: <AsStrides>,
///     #[cai(mask)]                  field: <ArrayInterface>,
///     #[cai(data, array = "name")]  field: <HostBuffer>,      // the named array `name`
///     #[cai(shape, array = "name")] field: <AsShape>,         // strides, mask: likewise
///     #[cai(array)]                 field: <ArrayInterface>,  // an array named after the field
///     #[cai(array = "name")]        field: <ArrayInterface>,  // an array named `name`
///     field: T,                                               // not exported
/// }
/// ```
///
/// The attributes are those of `CudaArrayInterface`, without `stream` (NumPy's interface
/// has none), and `data` is a `HostBuffer`: `Vec<T>`, `Box<[T]>`, `[T; N]`, `&[T]` (exported
/// read-only), `&mut [T]` or cai-core's `StableVec<T>` (which a consumer's view survives
/// growing), with `T: Element`. Elements that hold a `bool` (alone or in a
/// record) are exported read-only: a consumer could write a byte Rust's `bool` cannot
/// hold. `ArrayInterface` is implemented when the struct has an array of its own;
/// `NamedArrays` always.
#[proc_macro_derive(ArrayInterface, attributes(cai))]
pub fn derive_array_interface(input: TokenStream) -> TokenStream {
    interface(parse_macro_input!(input as DeriveInput), Flavor::Host).into()
}

/// Implements `Element` for a record: a `#[repr(C)]` (or `#[repr(C, packed)]`, with
/// `align` allowed) struct that is `Copy` and whose fields are all `Element`s or arrays of
/// them (sub-array fields).
///
/// ```text
/// #[derive(Clone, Copy, Element)]
/// #[repr(C)]
/// #[cai(crate = "path")]        // optional: where cai-core is, when it is renamed
/// struct Name {
///     field: <Element>,
///     field: [<Element>; N],
///     #[cai(padding)]           // optional: bytes exported as padding
///     field: [u8; N],
/// }
/// ```
///
/// The record's typestr is `|V{size}` and its descr lists every field at its offset, with
/// padding entries in the gaps and at the end, as `numpy.dtype` reads it. A field marked
/// `#[cai(padding)]` (of type `u8` or an array of them) is left out of the descr, so a
/// padding entry covers it: declared padding has bytes Rust sets (implicit padding is
/// uninitialised), and the descr is still that of NumPy's `align=True` dtype of the other
/// fields. A raw name (`r#type`) is exported without its `r#`. A tuple
/// struct's field is named `f{i}`, `i` its place in the descr, padding entries counted, as
/// NumPy names a descr's unnamed fields: `struct Pair(u8, f32)` has fields `f0` and `f2`
/// (NumPy names the padding between them `f1`). A named field called `f{i}` can clash
/// with NumPy's name for padding at place `i` (`struct S { a: u8, f1: f32 }`), and NumPy
/// then refuses the dtype: give padded records other names. A generic record needs no
/// bound of its own: `Pair<T>` is an `Element` wherever `T` is one (or an array of them;
/// for a padding field, wherever `T` is padding bytes), and `Pair<char>` is an error that
/// names `char`.
#[proc_macro_derive(Element, attributes(cai))]
pub fn derive_element(input: TokenStream) -> TokenStream {
    element(parse_macro_input!(input as DeriveInput)).into()
}

fn interface(input: DeriveInput, flavor: Flavor) -> proc_macro2::TokenStream {
    let cx = Ctxt::new();
    let parsed = Input::from_ast(&cx, &input, Which::Interface, flavor.derive_name());
    // One error per mistake: the rules run on attributes that parsed.
    let model = parsed.as_ref().filter(|_| !cx.has_errors()).map(|p| check::model(&cx, p, flavor));
    match (cx.check(), &parsed, &model) {
        (Ok(()), Some(p), Some(m)) => expand::interface(p, m, flavor),
        (Err(errors), _, _) => fallback::interface(parsed.as_ref(), flavor, errors),
        _ => unreachable!("a struct that failed to parse reported an error"),
    }
}

fn element(input: DeriveInput) -> proc_macro2::TokenStream {
    let cx = Ctxt::new();
    let parsed = Input::from_ast(&cx, &input, Which::Element, "Element");
    if let Some(p) = parsed.as_ref().filter(|_| !cx.has_errors()) {
        check::check_record(&cx, p);
    }
    match (cx.check(), &parsed) {
        (Ok(()), Some(p)) => expand::element(p),
        (Err(errors), _) => fallback::element(parsed.as_ref(), errors),
        _ => unreachable!("a struct that failed to parse reported an error"),
    }
}

/// Expansion snapshots: a change in generated code shows in review as a change to
/// `snapshots/*.expanded.rs`. Run with `CAI_BLESS=1` to accept a change.
#[cfg(test)]
mod snapshots {
    use std::path::PathBuf;

    fn snapshot(name: &str, expanded: proc_macro2::TokenStream) {
        let file = syn::parse2::<syn::File>(expanded).expect("generated code parses as a file");
        let actual = prettyplease::unparse(&file);
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("snapshots").join(format!("{name}.expanded.rs"));
        if std::env::var_os("CAI_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &actual).unwrap();
            return;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            expected == actual,
            "the expansion of {name} changed; review it and run with CAI_BLESS=1 to accept:\n{actual}"
        );
    }

    fn parse(source: &str) -> syn::DeriveInput {
        syn::parse_str(source).expect("test input parses")
    }

    #[test]
    fn device_buffer_with_shape_and_stream() {
        let input = parse(
            "struct Image { #[cai(data)] pixels: CudaSlice<f32>, #[cai(shape)] shape: [usize; 2], \
             #[cai(stream)] stream: Arc<CudaStream> }",
        );
        snapshot("device_image", super::interface(input, super::Flavor::Device));
    }

    #[test]
    fn host_multi_array_with_computed_shape() {
        let input = parse(
            "#[cai(readonly, version = 2, shape = [self.n, 3])] struct Cloud { #[cai(data)] xyz: Vec<f32>, \
             n: usize, #[cai(data, array = \"rgb\")] rgb: Vec<u8>, #[cai(strides, array = \"rgb\")] rgb_strides: \
             [isize; 1], #[cai(array)] normals: Normals }",
        );
        snapshot("host_cloud", super::interface(input, super::Flavor::Host));
    }

    #[test]
    fn generic_struct_bounds_only_generic_fields() {
        let input = parse(
            "#[cai(crate = \"::renamed\")] struct Tensor<T: Element, S> { #[cai(data)] buf: CudaSlice<T>, \
             #[cai(shape)] shape: S, #[cai(mask)] mask: Mask }",
        );
        snapshot("generic_tensor", super::interface(input, super::Flavor::Device));
    }

    #[test]
    fn record_element() {
        let input = parse("#[repr(C)] struct Particle { id: u8, position: [f32; 3], mass: f64 }");
        snapshot("record", super::element(input));
    }

    #[test]
    fn export_with_options_and_named_arrays() {
        let args = "cuda, options = export, arrays(xyz, rgb)".parse().unwrap();
        let item = "#[pymethods] impl Cloud { fn count(&self) -> usize { 0 } }".parse().unwrap();
        snapshot("export_cloud", super::pyexport::expand(args, item));
    }

    #[test]
    fn export_named_arrays_alone_with_options() {
        // Options without `cuda`: they reach the named device arrays only.
        let args = "arrays(xyz), options = export".parse().unwrap();
        let item = "#[pymethods] impl Cloud {}".parse().unwrap();
        snapshot("export_named_options", super::pyexport::expand(args, item));
    }

    #[test]
    fn errors_come_with_a_stub_impl() {
        let input = parse("#[cai(version = 9)] struct Bad { #[cai(data, shape)] a: Vec<f32> }");
        snapshot("errors", super::interface(input, super::Flavor::Host));
    }
}
