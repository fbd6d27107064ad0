//! Code generation from a checked model. Reports no user errors: `check` did.

use std::collections::HashSet;

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt as _;
use syn::spanned::Spanned;
use syn::{Ident, Type, WherePredicate};

use crate::ast::{Field, Input};
use crate::check::{Array, Flavor, Model, Source};

/// The path generated code names cai-core by: `#[cai(crate = "...")]` or `::cai_core`.
pub(crate) fn krate(input: &Input<'_>) -> TokenStream {
    match &input.attrs.krate {
        Some(path) => quote!(#path),
        None => quote!(::cai_core),
    }
}

/// The pieces that differ between the device and the host derive.
struct Names {
    interface: TokenStream,
    method: Ident,
    named: TokenStream,
    named_method: Ident,
    buffer: TokenStream,
    start: TokenStream,
}

impl Names {
    fn new(krate: &TokenStream, flavor: Flavor) -> Names {
        let ident = |s: &str| Ident::new(s, Span::call_site());
        match flavor {
            Flavor::Device => Names {
                interface: quote!(#krate::CudaArrayInterface),
                method: ident("cuda_array_interface"),
                named: quote!(#krate::NamedCudaArrays),
                named_method: ident("cuda_array"),
                buffer: quote!(#krate::DeviceBuffer),
                start: quote!(#krate::__private::device_array),
            },
            Flavor::Host => Names {
                interface: quote!(#krate::ArrayInterface),
                method: ident("array_interface"),
                named: quote!(#krate::NamedArrays),
                named_method: ident("array"),
                buffer: quote!(#krate::HostBuffer),
                start: quote!(#krate::__private::host_array),
            },
        }
    }
}

/// Whether a type names one of the struct's type parameters (and so needs a bound in the
/// impl's where clause rather than a check at the use site).
fn mentions(ty: &Type, params: &HashSet<Ident>) -> bool {
    fn walk(tokens: TokenStream, params: &HashSet<Ident>) -> bool {
        tokens.into_iter().any(|t| match t {
            TokenTree::Ident(ident) => params.contains(&ident),
            TokenTree::Group(group) => walk(group.stream(), params),
            _ => false,
        })
    }
    walk(quote!(#ty), params)
}

/// Bounds for generic field types, each spanned on the field's type.
struct Bounds {
    params: HashSet<Ident>,
    predicates: Vec<WherePredicate>,
}

impl Bounds {
    fn new(input: &Input<'_>) -> Bounds {
        Bounds { params: input.generics.type_params().map(|p| p.ident.clone()).collect(), predicates: Vec::new() }
    }

    fn require(&mut self, ty: &Type, bound: &TokenStream) {
        if mentions(ty, &self.params) {
            self.predicates.push(syn::parse_quote_spanned!(ty.span()=> #ty: #bound));
        }
    }

    fn generics(&self, input: &Input<'_>) -> syn::Generics {
        let mut generics = input.generics.clone();
        generics.make_where_clause().predicates.extend(self.predicates.iter().cloned());
        generics
    }
}

/// The `Option<Vec<_>>` expression for a shape or strides.
fn source(source: &Source<'_>, as_trait: TokenStream, method: &str, bounds: &mut Bounds) -> TokenStream {
    let method = Ident::new(method, Span::call_site());
    match source {
        Source::Default => quote!(::core::option::Option::None),
        Source::Field(field) => {
            bounds.require(field.ty, &as_trait);
            let (ty, member) = (field.ty, &field.member);
            quote_spanned!(ty.span()=> ::core::option::Option::Some(<#ty as #as_trait>::#method(&self.#member)))
        }
        Source::Expr(expr) => {
            quote_spanned!(expr.span()=> ::core::option::Option::Some(#as_trait::#method(&(#expr))))
        }
    }
}

/// The expression, of type `Result<Descriptor>`, that exports one array.
fn array(krate: &TokenStream, names: &Names, model: &Model<'_>, array: &Array<'_>, bounds: &mut Bounds) -> TokenStream {
    let interface = &names.interface;
    let method = &names.method;
    let nested = |field: &Field<'_>, bounds: &mut Bounds| {
        bounds.require(field.ty, interface);
        let (ty, member) = (field.ty, &field.member);
        quote_spanned!(ty.span()=> <#ty as #interface>::#method(&self.#member))
    };
    let (data, shape, strides, mask) = match array {
        // Its own type describes it, read-only when the struct is.
        Array::Nested(field) => {
            let call = nested(field, bounds);
            return match model.readonly {
                true => quote!(#krate::__private::read_only(#call)),
                false => call,
            };
        }
        Array::Buffer { data, shape, strides, mask } => (data, shape, strides, mask),
    };
    bounds.require(data.ty, &names.buffer);
    let shape = source(shape, quote!(#krate::AsShape), "as_shape", bounds);
    let strides = source(strides, quote!(#krate::AsStrides), "as_strides", bounds);
    let (version, readonly) = (model.version, model.readonly);
    let (ty, member, start, buffer) = (data.ty, &data.member, &names.start, &names.buffer);
    let field_name = data.name();
    // The buffer trait is named first, on the field's type, so that a field of the wrong type
    // is reported there with the trait's own message (the call below then adds nothing: same
    // span, same bound).
    let check = quote_spanned!(ty.span()=> let _ = <#ty as #buffer>::len;);
    let begin = quote_spanned!(ty.span()=> #start::<#ty>(&self.#member, #field_name, __cai_layout));
    let stream = model.stream.map(|field| {
        bounds.require(field.ty, &quote!(#krate::AsStream));
        let (ty, member) = (field.ty, &field.member);
        let buffer = &data.member;
        quote_spanned!(ty.span()=> .and_then(|__cai_export| __cai_export.stream_for(&self.#buffer, <#ty as #krate::AsStream>::as_stream(&self.#member))))
    });
    let mask = mask.map(|field| {
        let mask = nested(field, bounds);
        let mask = match model.readonly {
            true => quote!(#krate::__private::read_only(#mask)),
            false => mask,
        };
        quote!(.and_then(|__cai_export| __cai_export.mask(#mask)))
    });
    quote!({
        #check
        let __cai_layout = #krate::__private::Layout {
            shape: #shape,
            strides: #strides,
            version: #version,
            readonly: #readonly,
        };
        #begin #stream #mask .and_then(#krate::__private::Export::finish)
    })
}

/// The inherent constant that `#[cai_py::export(arrays(...))]` (`host_arrays(...)`) reads
/// a name from: `__cai_cuda_arrays` (`__cai_host_arrays`), a struct with one field per array
/// name. The export writes `Struct::__cai_cuda_arrays.name`, so an unknown name is rustc's
/// "no field" error, on the name, listing the valid names (or suggesting a close one). Names
/// that are not identifiers cannot be written in `arrays(...)` and get no field. The block
/// of its own keeps the struct's name (`CloudCudaArrays`) from shadowing a type the
/// derive's impls name.
pub(crate) fn array_names<'n>(
    input: &Input<'_>,
    flavor: Flavor,
    names: impl IntoIterator<Item = &'n str>,
) -> TokenStream {
    let ident = input.ident;
    let (konst, holder) = match flavor {
        Flavor::Device => (format_ident!("__cai_cuda_arrays"), format_ident!("{}CudaArrays", ident)),
        Flavor::Host => (format_ident!("__cai_host_arrays"), format_ident!("{}HostArrays", ident)),
    };
    let mut seen = HashSet::new();
    let (fields, texts): (Vec<Ident>, Vec<&str>) = names
        .into_iter()
        .filter_map(|name| Some((field_ident(name)?, name)))
        .filter(|(field, _)| seen.insert(field.clone()))
        .unzip();
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        const _: () = {
            #[doc(hidden)]
            #[allow(dead_code, non_camel_case_types)]
            pub struct #holder {
                #(pub #fields: &'static ::core::primitive::str,)*
            }

            #[automatically_derived]
            impl #impl_generics #ident #ty_generics #where_clause {
                #[doc(hidden)]
                #[allow(dead_code, non_upper_case_globals)]
                pub(crate) const #konst: #holder = #holder { #(#fields: #texts,)* };
            }
        };
    }
}

/// `name` as a field name: itself, or raw (`r#type`) when it is a keyword; `None` when it
/// is neither. The text is lexed only once its characters make an identifier: other text
/// (`1e`) could make rustc's lexer report an error of its own.
fn field_ident(name: &str) -> Option<Ident> {
    let mut chars = name.chars();
    let first = chars.next()?;
    let identifier = (first == '_' || unicode_ident::is_xid_start(first)) && chars.all(unicode_ident::is_xid_continue);
    // Keywords that cannot be raw either (`r#self` is itself a lexer error).
    if !identifier || matches!(name, "self" | "Self" | "super" | "crate" | "_") {
        return None;
    }
    syn::parse_str::<Ident>(name).or_else(|_| syn::parse_str::<Ident>(&format!("r#{name}"))).ok()
}

/// `#[derive(CudaArrayInterface)]` and `#[derive(ArrayInterface)]`.
pub(crate) fn interface(input: &Input<'_>, model: &Model<'_>, flavor: Flavor) -> TokenStream {
    let krate = krate(input);
    let names = Names::new(&krate, flavor);
    let mut bounds = Bounds::new(input);
    let primary = model.primary.as_ref().map(|a| array(&krate, &names, model, a, &mut bounds));
    let named: Vec<_> = model.named.iter().map(|(_, a)| array(&krate, &names, model, a, &mut bounds)).collect();
    let labels: Vec<&str> = model.named.iter().map(|(n, _)| n.as_str()).collect();
    let generics = bounds.generics(input);
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let ident = input.ident;
    let array_names = array_names(input, flavor, labels.iter().copied());
    let (interface, method, named_trait, named_method) =
        (&names.interface, &names.method, &names.named, &names.named_method);
    let primary_impl = primary.map(|body| {
        quote! {
            #[automatically_derived]
            impl #impl_generics #interface for #ident #ty_generics #where_clause {
                fn #method(&self) -> #krate::Result<#krate::Descriptor> {
                    #body
                }
            }
        }
    });
    quote! {
        const _: () = {
            #primary_impl

            #[automatically_derived]
            impl #impl_generics #named_trait for #ident #ty_generics #where_clause {
                const NAMES: &'static [&'static str] = &[#(#labels),*];

                fn #named_method(
                    &self,
                    __cai_name: &::core::primitive::str,
                ) -> ::core::option::Option<#krate::Result<#krate::Descriptor>> {
                    match __cai_name {
                        #(#labels => ::core::option::Option::Some(#named),)*
                        _ => ::core::option::Option::None,
                    }
                }
            }
        };

        #array_names
    }
}

/// `#[derive(Element)]` for a `#[repr(C)]` record.
pub(crate) fn element(input: &Input<'_>) -> TokenStream {
    let krate = krate(input);
    let mut bounds = Bounds::new(input);
    let record_field = quote!(#krate::__private::RecordField);
    let padding_bytes = quote!(#krate::__private::PaddingBytes);
    // Padding fields are left out of the descr, whose padding entries then cover them;
    // their type must be bytes that any value may fill (a consumer may write them).
    let (mut padding, mut entries) = (Vec::new(), Vec::new());
    for field in &input.fields {
        let (ty, member) = (field.ty, &field.member);
        if field.attrs.padding.is_some() {
            bounds.require(ty, &padding_bytes);
            padding.push(quote_spanned!(ty.span()=> let _ = <#ty as #padding_bytes>::BYTES;));
            continue;
        }
        bounds.require(ty, &record_field);
        // A tuple struct's fields are named by `record`, by their place in the descr.
        let name = match member {
            syn::Member::Named(ident) => ident.unraw().to_string(),
            syn::Member::Unnamed(_) => String::new(),
        };
        let describe = quote_spanned!(ty.span()=> <#ty as #record_field>::describe());
        entries.push(quote!((#name, ::core::mem::offset_of!(Self, #member), #describe)));
    }
    let generics = bounds.generics(input);
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let ident = input.ident;
    quote! {
        const _: () = {
            #[automatically_derived]
            // SAFETY: `TYPESTR` is `|V{size_of::<Self>()}` and `descr` lists every field at
            // its `offset_of!` offset with its own element type, padding in between (and
            // over the fields marked as padding, which are bytes of any value).
            unsafe impl #impl_generics #krate::Element for #ident #ty_generics #where_clause {
                const TYPESTR: #krate::TypeStr = #krate::TypeStr::void(::core::mem::size_of::<Self>());

                fn descr() -> #krate::Descr {
                    #(#padding)*
                    #krate::__private::record(::core::mem::size_of::<Self>(), &[#(#entries),*])
                }
            }
        };
    }
}
