//! The derive input, borrowed and annotated with parsed attributes.

use syn::ext::IdentExt as _;
use syn::{Data, DeriveInput, Fields, Generics, Ident, Member, Type};

use crate::attr::{Container, FieldAttrs, Which};
use crate::ctxt::Ctxt;

pub(crate) struct Input<'a> {
    pub(crate) ident: &'a Ident,
    pub(crate) generics: &'a Generics,
    pub(crate) attrs: Container,
    pub(crate) fields: Vec<Field<'a>>,
    pub(crate) original: &'a DeriveInput,
}

pub(crate) struct Field<'a> {
    pub(crate) member: Member,
    pub(crate) ty: &'a Type,
    pub(crate) attrs: FieldAttrs,
    pub(crate) original: &'a syn::Field,
}

impl Field<'_> {
    /// The field's name as Rust writes it: `pixels`, `r#type`, or `0` for a tuple field.
    pub(crate) fn name(&self) -> String {
        match &self.member {
            Member::Named(ident) => ident.to_string(),
            Member::Unnamed(index) => index.index.to_string(),
        }
    }

    /// The name a bare `#[cai(array)]` gives the field's array: its name without `r#`.
    pub(crate) fn array_name(&self) -> String {
        match &self.member {
            Member::Named(ident) => ident.unraw().to_string(),
            Member::Unnamed(index) => index.index.to_string(),
        }
    }
}

impl<'a> Input<'a> {
    /// Parses a struct; reports an enum or a union (which have no single layout) and
    /// returns `None` for them.
    pub(crate) fn from_ast(cx: &Ctxt, input: &'a DeriveInput, which: Which, derive: &str) -> Option<Input<'a>> {
        let attrs = Container::parse(cx, &input.attrs, which);
        let fields = match &input.data {
            Data::Struct(data) => &data.fields,
            Data::Enum(data) => {
                cx.error_spanned_by(data.enum_token, format!("#[derive({derive})] works on structs, not enums"));
                return None;
            }
            Data::Union(data) => {
                cx.error_spanned_by(data.union_token, format!("#[derive({derive})] works on structs, not unions"));
                return None;
            }
        };
        let fields = match fields {
            Fields::Named(named) => named.named.iter().collect::<Vec<_>>(),
            Fields::Unnamed(unnamed) => unnamed.unnamed.iter().collect(),
            Fields::Unit => Vec::new(),
        };
        let fields = fields
            .into_iter()
            .enumerate()
            .map(|(i, f)| Field {
                member: f.ident.clone().map_or_else(|| Member::from(i), Member::Named),
                ty: &f.ty,
                attrs: FieldAttrs::parse(cx, &f.attrs, which),
                original: f,
            })
            .collect();
        Some(Input { ident: &input.ident, generics: &input.generics, attrs, fields, original: input })
    }
}
