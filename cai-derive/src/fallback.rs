//! What a derive emits when the input has errors: the errors, and for the interface
//! derives a stub impl, so the user sees the errors in the struct rather than a cascade of
//! "trait not implemented" wherever the struct is used.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::Input;
use crate::check::Flavor;
use crate::expand::krate;

pub(crate) fn interface(input: Option<&Input<'_>>, flavor: Flavor, errors: syn::Error) -> TokenStream {
    let errors = errors.into_compile_error();
    let Some(input) = input else { return errors };
    let krate = krate(input);
    let (trait_, method) = match flavor {
        Flavor::Device => (quote!(#krate::CudaArrayInterface), quote!(cuda_array_interface)),
        Flavor::Host => (quote!(#krate::ArrayInterface), quote!(array_interface)),
    };
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
        };
    }
}
