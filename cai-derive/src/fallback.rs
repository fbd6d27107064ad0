//! What a derive emits when the input has errors: the errors, and stub impls (for the
//! interface derives, of both traits and the array names `#[cai_py::export]` reads), so
//! the user sees the errors in the struct rather than a cascade of "trait not implemented"
//! wherever the struct is used.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::Input;
use crate::check::Flavor;
use crate::expand::{array_names, krate};

pub(crate) fn interface(input: Option<&Input<'_>>, flavor: Flavor, errors: syn::Error) -> TokenStream {
    let errors = errors.into_compile_error();
    let Some(input) = input else { return errors };
    let krate = krate(input);
    let (trait_, method, named, named_method) = match flavor {
        Flavor::Device => (
            quote!(#krate::CudaArrayInterface),
            quote!(cuda_array_interface),
            quote!(#krate::NamedCudaArrays),
            quote!(cuda_array),
        ),
        Flavor::Host => {
            (quote!(#krate::ArrayInterface), quote!(array_interface), quote!(#krate::NamedArrays), quote!(array))
        }
    };
    // The names the attributes give, as far as they parsed: an export that names them then
    // compiles, and only the attribute errors show.
    let names: Vec<String> = input
        .fields
        .iter()
        .filter_map(|f| f.attrs.array.as_ref().map(|a| a.value.clone().unwrap_or_else(|| f.array_name())))
        .collect();
    let array_names = array_names(input, flavor, names.iter().map(String::as_str));
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let ident = input.ident;
    quote! {
        #errors
        const _: () = {
            #[automatically_derived]
            impl #impl_generics #trait_ for #ident #ty_generics #where_clause {
                fn #method(&self) -> #krate::Result<#krate::Descriptor> {
                    ::core::unreachable!()
                }
            }

            #[automatically_derived]
            impl #impl_generics #named for #ident #ty_generics #where_clause {
                const NAMES: &'static [&'static str] = &[#(#names),*];

                fn #named_method(
                    &self,
                    _: &::core::primitive::str,
                ) -> ::core::option::Option<#krate::Result<#krate::Descriptor>> {
                    ::core::unreachable!()
                }
            }
        };

        #array_names
    }
}

/// `#[derive(Element)]` with errors: a stub `Element` (a record of opaque bytes), so that
/// arrays of the record do not fail too. Never run: the errors stop the build.
pub(crate) fn element(input: Option<&Input<'_>>, errors: syn::Error) -> TokenStream {
    let errors = errors.into_compile_error();
    let Some(input) = input else { return errors };
    let krate = krate(input);
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let ident = input.ident;
    quote! {
        #errors
        const _: () = {
            #[automatically_derived]
            unsafe impl #impl_generics #krate::Element for #ident #ty_generics #where_clause {
                const TYPESTR: #krate::TypeStr = #krate::TypeStr::void(::core::mem::size_of::<Self>());
            }
        };
    }
}
