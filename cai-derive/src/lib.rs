//! Derive macros for cai-core. Use them through cai-core's `derive` feature, which
//! re-exports each under its trait's name:
//!
//! ```ignore
//! use cai_core::{ArrayInterface, CudaArrayInterface, Element};
//! ```
//!
//! The attribute grammar is documented on each macro. Parsing (`attr`, `ast`), rules
//! (`check`) and code generation (`expand`) are separate phases; errors are collected in a
//! `Ctxt` and reported together, spanned on the offending tokens.

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

/// Implements `CudaArrayInterface` (and `NamedCudaArrays`) for a struct holding device
/// buffers.
///
/// Field attributes, under `#[cai(...)]`:
/// - `data`: the buffer (a `DeviceBuffer`: cudarc's `CudaSlice`, `CudaView`,
///   `CudaViewMut`, or `RawDeviceBuffer`); one per array.
/// - `shape`: a field giving the shape (`[usize; N]`, `Vec<usize>`, a tuple of `usize`, or
///   any `AsShape`). Without one the array is 1-d over the whole buffer.
/// - `strides`: a field giving strides in bytes (any `AsStrides`).
/// - `stream`: the stream the data is ordered on (`Arc<CudaStream>`, a `Stream`, a raw
///   handle, a `TrackedStream`; any `AsStream`), shared by every array of the struct.
///   Version 3 only. When it is not the buffer's own stream, the buffer's pending work is
///   ordered before it on export (`DeviceBuffer::order_before`).
/// - `mask`: a field whose type itself implements `CudaArrayInterface`.
/// - `array = "name"`: the field belongs to the named array `name` (with `data`, `shape`,
///   ...), or, without a role, is itself an array (its type implements the trait). A bare
///   `array` names it after the field.
///
/// Struct attributes: `readonly`, `version = N` (0 to 3, default 3), `shape = <expr>` and
/// `strides = <expr>` (expressions over `self`), `crate = "path"`.
///
/// Every export validates the descriptor by its version and checks that the bytes it
/// reaches lie in the buffer.
/// Adds the interface properties of a `#[pyclass]` to its `#[pymethods]` block. Use it as
/// `#[cai_py::export]`, written above `#[pymethods]`; see cai-py's documentation.
///
/// Arguments: `cuda` (the default: `__cuda_array_interface__`), `host`
/// (`__array_interface__`), `arrays(name, ...)` and `host_arrays(name, ...)` (a property per
/// named array, returning a view that keeps the object alive; each name is checked at
/// compile time against the derive's `NAMES`), `crate = "path"` (where cai-py is).
#[proc_macro_attribute]
pub fn export(args: TokenStream, item: TokenStream) -> TokenStream {
    pyexport::expand(args.into(), item.into()).into()
}

#[proc_macro_derive(CudaArrayInterface, attributes(cai))]
pub fn derive_cuda_array_interface(input: TokenStream) -> TokenStream {
    interface(parse_macro_input!(input as DeriveInput), Flavor::Device).into()
}

/// Implements `ArrayInterface` (and `NamedArrays`) for a struct holding host buffers
/// (`Vec<T>`, `Box<[T]>`, `[T; N]`, `&[T]`, `&mut [T]`), for NumPy's
/// `__array_interface__`. Same attributes as `CudaArrayInterface`, without `stream`.
#[proc_macro_derive(ArrayInterface, attributes(cai))]
pub fn derive_array_interface(input: TokenStream) -> TokenStream {
    interface(parse_macro_input!(input as DeriveInput), Flavor::Host).into()
}

/// Implements `Element` for a `#[repr(C)]` (or `#[repr(C, packed)]`) struct whose fields
/// are all `Element`s (or arrays of them): typestr `|V{size}` and a descr with every field
/// at its offset and padding entries in the gaps, as `numpy.dtype` reads it.
/// The struct must be `Copy`. Accepts `#[cai(crate = "path")]`.
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
        (Err(errors), _) => errors.into_compile_error(),
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
    fn errors_come_with_a_stub_impl() {
        let input = parse("#[cai(version = 9)] struct Bad { #[cai(data, shape)] a: Vec<f32> }");
        snapshot("errors", super::interface(input, super::Flavor::Host));
    }
}
