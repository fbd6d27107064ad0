//! `#[cai_py::export]`: adds the interface properties to a `#[pymethods]` block, so that a
//! `#[pyclass]` exports without pyo3's `multiple-pymethods` feature.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt as _;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned as _;
use syn::{Ident, ItemImpl, LitStr, Token};

/// What the block should gain.
#[derive(Default)]
struct Args {
    /// `cuda`, with the span a missing `CudaArrayInterface` is reported on: the argument,
    /// or the whole attribute when `cuda` is the default.
    cuda: Option<Span>,
    /// `host`, with its span.
    host: Option<Span>,
    arrays: Option<Named>,
    host_arrays: Option<Named>,
    options: Option<syn::Member>,
    krate: Option<syn::Path>,
}

/// `arrays(...)` or `host_arrays(...)`.
struct Named {
    names: Vec<Ident>,
    /// The keyword's span, where a missing `NamedCudaArrays` (`NamedArrays`) is reported.
    span: Span,
    host: bool,
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = Args::default();
        let mut given: Vec<String> = Vec::new();
        while !input.is_empty() {
            let key: Ident = input.call(syn::ext::IdentExt::parse_any)?;
            // `arrays(...)` may be split over several lists; any other argument is given once.
            let text = key.to_string();
            if !matches!(text.as_str(), "arrays" | "host_arrays") {
                if given.contains(&text) {
                    return Err(syn::Error::new_spanned(&key, format!("`{text}` is given twice")));
                }
                given.push(text.clone());
            }
            match text.as_str() {
                "cuda" => args.cuda = Some(key.span()),
                "host" => args.host = Some(key.span()),
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
                    let host = key == "host_arrays";
                    let slot = if host { &mut args.host_arrays } else { &mut args.arrays };
                    let named = slot.get_or_insert_with(|| Named { names: Vec::new(), span: key.span(), host });
                    for name in names {
                        if named.names.iter().any(|n| n.unraw() == name.unraw()) {
                            return Err(syn::Error::new_spanned(&name, format!("`{name}` is listed twice")));
                        }
                        named.names.push(name);
                    }
                    // One property per name: a device and a host array cannot share one.
                    if let (Some(device_names), Some(host_names)) = (&args.arrays, &args.host_arrays) {
                        let (this, other) = if host { (host_names, device_names) } else { (device_names, host_names) };
                        if let Some(name) =
                            this.names.iter().find(|n| other.names.iter().any(|o| o.unraw() == n.unraw()))
                        {
                            return Err(syn::Error::new_spanned(
                                name,
                                format!(
                                    "`{}` is listed in both `arrays(...)` and `host_arrays(...)`: each name is one \
                                     property, of a device or of a host array",
                                    name.unraw()
                                ),
                            ));
                        }
                    }
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
        if args.host.is_none() && args.arrays.is_none() && args.host_arrays.is_none() {
            args.cuda = Some(Span::call_site());
        }
        Ok(args)
    }
}

/// The attribute's expansion; on an error, the error and the block unchanged, so that
/// nothing else in the block fails for want of it.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    match expand_block(args, item.clone()) {
        Ok(tokens) => tokens,
        Err(error) => {
            let error = error.into_compile_error();
            quote!(#error #item)
        }
    }
}

/// The functions the getters call, gathered in one constant: every trait bound on the
/// class is then checked in one body, where rustc reports one failure once, instead of
/// once per getter.
struct Table {
    types: Vec<TokenStream>,
    values: Vec<TokenStream>,
}

impl Table {
    /// Adds a function; returns its index for the getter.
    fn push(&mut self, ty: TokenStream, value: TokenStream) -> syn::Index {
        self.types.push(ty);
        self.values.push(value);
        syn::Index::from(self.types.len() - 1)
    }
}

fn expand_block(args: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
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
    if let (Some(options), false) = (&args.options, args.cuda.is_some() || args.arrays.is_some()) {
        return Err(syn::Error::new(
            options.span(),
            "`options = field` applies to device exports (`__cuda_array_interface__`, named device arrays): add \
             `cuda` or `arrays(...)`",
        ));
    }
    let krate = args.krate.clone().map_or_else(|| quote!(::cai_py), |p| quote!(#p));
    let p = quote!(#krate::__private);
    let py = quote!(#p::pyo3);
    // `cai_py::__private` written at `span`: a failed bound in a call through it is then
    // reported on that one place (a `crate = "..."` path keeps its own spans).
    let private_at = |span: Span| match &args.krate {
        Some(path) => quote!(#path::__private),
        None => quote_spanned!(span=> ::cai_py::__private),
    };
    let ty = &block.self_ty;
    let mut table = Table { types: Vec::new(), values: Vec::new() };
    let mut items: Vec<TokenStream> = Vec::new();
    // `attr` may be raw (`r#type`, an array named by a keyword): pyo3 names the property
    // without the `r#` (a string would not do: pyo3 parses it as an identifier).
    let getter = |attr: Ident, fn_name: Ident, body: TokenStream, ret: TokenStream| {
        quote! {
            #[getter(#attr)]
            fn #fn_name<'py>(__cai_slf: &#py::Bound<'py, Self>) -> #py::PyResult<#ret> {
                #body
            }
        }
    };
    let dict = quote!(#py::Bound<'py, #py::types::PyDict>);
    let any = quote!(#py::Bound<'py, #py::PyAny>);
    let arg = quote!(::core::option::Option<&#py::Bound<'py, #py::PyAny>>);
    let interface_type = quote!(for<'py> fn(&#py::Bound<'py, Self>) -> #py::PyResult<#dict>);
    let dlpack_type = quote!(for<'py> fn(&#py::Bound<'py, Self>, #arg, #arg, #arg, #arg) -> #py::PyResult<#any>);
    let device_type = quote!(for<'py> fn(&#py::Bound<'py, Self>) -> #py::PyResult<(i32, i32)>);
    let dlpack_method = |index: &syn::Index| {
        quote! {
            // The defaults by full path (no prelude needed), shown as Python writes them.
            #[pyo3(
                signature = (
                    *,
                    stream = ::core::option::Option::None,
                    max_version = ::core::option::Option::None,
                    dl_device = ::core::option::Option::None,
                    copy = ::core::option::Option::None,
                ),
                text_signature = "($self, *, stream=None, max_version=None, dl_device=None, copy=None)",
            )]
            fn __dlpack__<'py>(
                __cai_slf: &#py::Bound<'py, Self>,
                stream: #arg,
                max_version: #arg,
                dl_device: #arg,
                copy: #arg,
            ) -> #py::PyResult<#any> {
                (Self::__CAI_PY_EXPORT.#index)(__cai_slf, stream, max_version, dl_device, copy)
            }
        }
    };
    let device_method = |index: &syn::Index| {
        quote! {
            fn __dlpack_device__(__cai_slf: &#py::Bound<'_, Self>) -> #py::PyResult<(i32, i32)> {
                (Self::__CAI_PY_EXPORT.#index)(__cai_slf)
            }
        }
    };
    // The per-object export options, for the device array and the named device arrays.
    let options = match &args.options {
        Some(field) => quote!(|__cai_this: &Self| __cai_this.#field),
        None => quote!(|_: &Self| ::core::default::Default::default()),
    };
    if let Some(span) = &args.cuda {
        let at = private_at(*span);
        // `__cuda_array_interface__`, and DLPack's `__dlpack__` / `__dlpack_device__` for
        // the same device array.
        let interface = table.push(
            interface_type.clone(),
            quote_spanned!(*span=> |__cai_slf| #at::cuda_interface_with(__cai_slf, #options)),
        );
        items.push(getter(
            Ident::new("__cuda_array_interface__", Span::call_site()),
            format_ident!("__cai_cuda_array_interface"),
            quote!((Self::__CAI_PY_EXPORT.#interface)(__cai_slf)),
            dict.clone(),
        ));
        let dlpack = table.push(
            dlpack_type.clone(),
            quote_spanned!(*span=> |__cai_slf, stream, max_version, dl_device, copy| {
                #at::cuda_dlpack(__cai_slf, #options, stream, max_version, dl_device, copy)
            }),
        );
        let device =
            table.push(device_type.clone(), quote_spanned!(*span=> |__cai_slf| #at::cuda_dlpack_device(__cai_slf)));
        items.push(dlpack_method(&dlpack));
        items.push(device_method(&device));
    }
    if let Some(span) = &args.host {
        let at = private_at(*span);
        let interface =
            table.push(interface_type.clone(), quote_spanned!(*span=> |__cai_slf| #at::host_interface(__cai_slf)));
        items.push(getter(
            Ident::new("__array_interface__", Span::call_site()),
            format_ident!("__cai_array_interface"),
            quote!((Self::__CAI_PY_EXPORT.#interface)(__cai_slf)),
            dict.clone(),
        ));
        // With `cuda` too, DLPack exports the device array.
        if args.cuda.is_none() {
            let dlpack = table.push(
                dlpack_type.clone(),
                quote_spanned!(*span=> |__cai_slf, stream, max_version, dl_device, copy| {
                    #at::host_dlpack(__cai_slf, stream, max_version, dl_device, copy)
                }),
            );
            let device = table.push(
                device_type.clone(),
                quote_spanned!(*span=> |__cai_slf| ::core::result::Result::Ok(#at::host_dlpack_device(__cai_slf))),
            );
            items.push(dlpack_method(&dlpack));
            items.push(device_method(&device));
        }
    }
    // Named arrays: a getter per name, and the name checked against the derive's. When the
    // class has no derive of this flavor, `Self::__cai_cuda_arrays` is the fallback trait's
    // constant, which has every requested name: the missing trait is then the one error.
    let mut checks: Vec<TokenStream> = Vec::new();
    let mut requested: Vec<TokenStream> = Vec::new();
    for named in [&args.arrays, &args.host_arrays] {
        let Some(named) = named else { continue };
        let (call, trait_, names_const, holder, fallback, prefix) = match named.host {
            false => (
                quote!(cuda_named),
                quote!(NamedCudaArrays),
                format_ident!("__cai_cuda_arrays"),
                format_ident!("__CaiRequestedCudaArrays"),
                format_ident!("__CaiNotDerivedCuda"),
                "__cai_cuda_array_",
            ),
            true => (
                quote!(host_named),
                quote!(NamedArrays),
                format_ident!("__cai_host_arrays"),
                format_ident!("__CaiRequestedHostArrays"),
                format_ident!("__CaiNotDerivedHost"),
                "__cai_host_array_",
            ),
        };
        let span = named.span;
        let at = private_at(span);
        // An instance of `cai.CudaArray` / `cai.HostArray` (the `cai` package's class when it
        // can be imported).
        let view = quote!(#py::Bound<'py, #py::PyAny>);
        let index = table.push(
            quote!(for<'py> fn(&#py::Bound<'py, Self>, &::core::primitive::str) -> #py::PyResult<#view>),
            if named.host {
                quote_spanned!(span=> |__cai_slf, __cai_name| #at::#call(__cai_slf, __cai_name))
            } else {
                quote_spanned!(span=> |__cai_slf, __cai_name| #at::#call(__cai_slf, __cai_name, #options))
            },
        );
        let texts: Vec<String> = named.names.iter().map(|n| n.unraw().to_string()).collect();
        for (name, text) in named.names.iter().zip(&texts) {
            let fn_name = format_ident!("{}{}", prefix, name.unraw());
            items.push(getter(
                name.clone(),
                fn_name,
                quote!((Self::__CAI_PY_EXPORT.#index)(__cai_slf, #text)),
                view.clone(),
            ));
            // The derive's names are the fields of `Self::__cai_cuda_arrays`: an unknown name
            // is rustc's "no field" error on the name, with the valid names listed.
            let holder_path = quote_spanned!(span=> Self::#names_const);
            checks.push(quote!(let _ = #holder_path.#name;));
            // A hand-written `NamedCudaArrays` has no such constant (the fallback below
            // accepts every name): its `NAMES` are checked when the constant is evaluated.
            let names = quote_spanned!(span=> <Self as #at::#trait_>::NAMES);
            let message = format!(
                "#[cai_py::export]: `{text}` is not an array of `{}`: its `{trait_}::NAMES` does not list it",
                quote!(#ty).to_string().replace(' ', "")
            );
            checks.push(quote_spanned! {name.span()=>
                if !#p::has_name(#names, #text) {
                    ::core::panic!("{}", #message)
                }
            });
        }
        let fields = &named.names;
        requested.push(quote! {
            #[allow(dead_code, non_camel_case_types)]
            struct #holder { #(#fields: &'static ::core::primitive::str,)* }

            #[allow(non_upper_case_globals)]
            trait #fallback {
                const #names_const: #holder = #holder { #(#fields: #texts,)* };
            }
            impl<T: ?::core::marker::Sized> #fallback for T {}
        });
    }
    for item in items {
        block.items.push(syn::parse2(item)?);
    }
    let (types, values) = (&table.types, &table.values);
    // Evaluated at compile time only when named arrays are checked.
    let evaluate = (!checks.is_empty()).then(|| quote!(const _: () = { let _ = <#ty>::__CAI_PY_EXPORT; };));
    Ok(quote! {
        #block

        impl #ty {
            #[doc(hidden)]
            #[allow(clippy::type_complexity, clippy::redundant_closure)]
            const __CAI_PY_EXPORT: (#(#types,)*) = {
                #(#requested)*
                #(#checks)*
                (#(#values,)*)
            };
        }

        #evaluate
    })
}
