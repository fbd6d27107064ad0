//! `#[cai_py::export]`: adds the interface properties to a `#[pymethods]` block, so that a
//! `#[pyclass]` exports without pyo3's `multiple-pymethods` feature.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Ident, ItemImpl, LitStr, Token};

/// What the block should gain.
#[derive(Default)]
struct Args {
    cuda: bool,
    host: bool,
    arrays: Vec<Ident>,
    host_arrays: Vec<Ident>,
    options: Option<syn::Member>,
    krate: Option<syn::Path>,
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = Args::default();
        while !input.is_empty() {
            let key: Ident = input.call(syn::ext::IdentExt::parse_any)?;
            match key.to_string().as_str() {
                "cuda" => args.cuda = true,
                "host" => args.host = true,
                "arrays" | "host_arrays" => {
                    let content;
                    syn::parenthesized!(content in input);
                    let names = Punctuated::<Ident, Token![,]>::parse_terminated(&content)?;
                    if names.is_empty() {
                        return Err(syn::Error::new_spanned(
                            &key,
                            format!("`{key}(...)` lists at least one array name"),
                        ));
                    }
                    let list = if key == "arrays" { &mut args.arrays } else { &mut args.host_arrays };
                    list.extend(names);
                }
                "options" => {
                    input.parse::<Token![=]>()?;
                    args.options = Some(input.parse()?);
                }
                "crate" => {
                    input.parse::<Token![=]>()?;
                    let lit: LitStr = input.parse()?;
                    args.krate = Some(lit.parse()?);
                }
                other => {
                    return Err(syn::Error::new_spanned(
                        &key,
                        format!(
                            "unknown argument `{other}`: expected `cuda`, `host`, `arrays(name, ...)`, \
                             `host_arrays(name, ...)`, `options = field` or `crate = \"path\"`"
                        ),
                    ))
                }
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        if !args.host && args.arrays.is_empty() && args.host_arrays.is_empty() {
            args.cuda = true;
        }
        Ok(args)
    }
}

pub(crate) fn expand(args: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let args: Args = syn::parse2(args)?;
    let mut block: ItemImpl = syn::parse2(item).map_err(|e| {
        syn::Error::new(
            e.span(),
            "#[cai_py::export] goes on an `impl` block marked #[pymethods], written above #[pymethods]",
        )
    })?;
    if !block.attrs.iter().any(|a| a.path().segments.last().is_some_and(|s| s.ident == "pymethods")) {
        return Err(syn::Error::new_spanned(
            &block.self_ty,
            "#[cai_py::export] must be written above #[pymethods] on the same impl block",
        ));
    }
    if let Some((_, path, _)) = &block.trait_ {
        return Err(syn::Error::new_spanned(path, "#[cai_py::export] goes on an inherent impl, not a trait impl"));
    }
    if !block.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(&block.generics, "a #[pyclass] impl block cannot be generic"));
    }
    let krate = args.krate.clone().map_or_else(|| quote!(::cai_py), |p| quote!(#p));
    let p = quote!(#krate::__private);
    let ty = &block.self_ty;
    let mut items: Vec<TokenStream> = Vec::new();
    let mut checks: Vec<TokenStream> = Vec::new();
    let getter = |attr: &str, fn_name: Ident, body: TokenStream, ret: TokenStream| {
        let attr = Ident::new(attr, Span::call_site());
        quote! {
            #[getter(#attr)]
            fn #fn_name<'py>(slf: &#p::pyo3::Bound<'py, Self>) -> #p::pyo3::PyResult<#ret> {
                #body
            }
        }
    };
    if args.options.is_some() && !args.cuda {
        let span = args.options.as_ref().map_or_else(Span::call_site, syn::spanned::Spanned::span);
        return Err(syn::Error::new(span, "`options = field` applies to `__cuda_array_interface__`: add `cuda`"));
    }
    if args.cuda {
        let body = match &args.options {
            Some(field) => quote!(#p::cuda_interface_with(slf, |this: &Self| this.#field)),
            None => quote!(#p::cuda_interface(slf)),
        };
        items.push(getter(
            "__cuda_array_interface__",
            format_ident!("__cai_cuda_array_interface"),
            body,
            quote!(#p::pyo3::Bound<'py, #p::pyo3::types::PyDict>),
        ));
    }
    // DLPack: the same array through `__dlpack__` / `__dlpack_device__` (device memory when
    // the block exports `__cuda_array_interface__`, host memory otherwise).
    if args.cuda || args.host {
        let dlpack_options = match &args.options {
            Some(field) => quote!(|this: &Self| this.#field),
            None => quote!(|_: &Self| ::core::default::Default::default()),
        };
        let (call, device) = if args.cuda {
            (
                quote!(#p::cuda_dlpack(slf, #dlpack_options, stream, max_version, dl_device, copy)),
                quote!(#p::cuda_dlpack_device(slf)),
            )
        } else {
            (
                quote!(#p::host_dlpack(slf, stream, max_version, dl_device, copy)),
                quote!(::core::result::Result::Ok(#p::host_dlpack_device(slf))),
            )
        };
        items.push(quote! {
            #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
            fn __dlpack__<'py>(
                slf: &#p::pyo3::Bound<'py, Self>,
                stream: ::core::option::Option<&#p::pyo3::Bound<'py, #p::pyo3::PyAny>>,
                max_version: ::core::option::Option<&#p::pyo3::Bound<'py, #p::pyo3::PyAny>>,
                dl_device: ::core::option::Option<&#p::pyo3::Bound<'py, #p::pyo3::PyAny>>,
                copy: ::core::option::Option<&#p::pyo3::Bound<'py, #p::pyo3::PyAny>>,
            ) -> #p::pyo3::PyResult<#p::pyo3::Bound<'py, #p::pyo3::PyAny>> {
                #call
            }
        });
        items.push(quote! {
            fn __dlpack_device__(slf: &#p::pyo3::Bound<'_, Self>) -> #p::pyo3::PyResult<(i32, i32)> {
                #device
            }
        });
    }
    if args.host {
        items.push(getter(
            "__array_interface__",
            format_ident!("__cai_array_interface"),
            quote!(#p::host_interface(slf)),
            quote!(#p::pyo3::Bound<'py, #p::pyo3::types::PyDict>),
        ));
    }
    for (names, host) in [(&args.arrays, false), (&args.host_arrays, true)] {
        for name in names {
            let text = name.to_string();
            let (fn_name, call, trait_) = if host {
                (format_ident!("__cai_host_array_{}", name), quote!(host_named), quote!(NamedArrays))
            } else {
                (format_ident!("__cai_cuda_array_{}", name), quote!(cuda_named), quote!(NamedCudaArrays))
            };
            items.push(getter(
                &text,
                fn_name,
                quote!(#p::#call(slf, #text)),
                quote!(#p::pyo3::Bound<'py, #p::pyo3::PyAny>),
            ));
            let message = format!(
                "#[cai_py::export]: `{text}` is not one of the arrays the derive names (its `{trait_}::NAMES`)"
            );
            checks.push(quote! {
                const _: () = ::core::assert!(#p::has_name(<#ty as #p::#trait_>::NAMES, #text), #message);
            });
        }
    }
    for item in items {
        block.items.push(syn::parse2(item)?);
    }
    Ok(quote! {
        #block
        #(#checks)*
    })
}
