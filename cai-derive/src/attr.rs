//! The `#[cai(...)]` attribute grammar, parsed into typed values.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned as _;
use syn::{Expr, LitInt, LitStr};

use crate::ctxt::Ctxt;

/// A value with the span of the tokens it came from.
#[derive(Clone)]
pub(crate) struct Spanned<T> {
    pub(crate) value: T,
    pub(crate) span: Span,
}

/// `#[cai(...)]` on the struct.
#[derive(Default)]
pub(crate) struct Container {
    pub(crate) krate: Option<syn::Path>,
    pub(crate) readonly: Option<Span>,
    pub(crate) version: Option<Spanned<u32>>,
    pub(crate) shape: Option<Expr>,
    pub(crate) strides: Option<Expr>,
}

/// What a field is to the array it belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Role {
    Data,
    Shape,
    Strides,
    Stream,
    Mask,
}

impl Role {
    pub(crate) fn key(self) -> &'static str {
        match self {
            Role::Data => "data",
            Role::Shape => "shape",
            Role::Strides => "strides",
            Role::Stream => "stream",
            Role::Mask => "mask",
        }
    }
}

/// `#[cai(...)]` on a field.
#[derive(Default)]
pub(crate) struct FieldAttrs {
    pub(crate) role: Option<Spanned<Role>>,
    /// `array` (the field is itself an array, named after the field) or `array = "name"`
    /// (the field is, or belongs to, the array `name`).
    pub(crate) array: Option<Spanned<Option<String>>>,
    /// `padding`, on a record's field: bytes the descr lists as padding, not as a field.
    pub(crate) padding: Option<proc_macro2::Span>,
}

/// Which derive is parsing, for the keys it accepts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Which {
    /// `CudaArrayInterface` and `ArrayInterface`.
    Interface,
    /// `Element`.
    Element,
}

const CONTAINER_KEYS: &str = "crate, readonly, version, shape, strides";
const FIELD_KEYS: &str = "data, shape, strides, stream, mask, array";

fn set_once<T>(cx: &Ctxt, slot: &mut Option<T>, value: T, meta: &ParseNestedMeta<'_>, key: &str) {
    if slot.is_some() {
        cx.error_spanned_by(&meta.path, format!("duplicate cai attribute `{key}`"));
    } else {
        *slot = Some(value);
    }
}

/// Reports an unknown key and skips its value (`= ...` or `(...)`), so that the keys after
/// it are still read: each mistake gets its own error, and only one.
fn unknown_key(cx: &Ctxt, meta: &ParseNestedMeta<'_>, message: String) -> syn::Result<()> {
    cx.push(meta.error(message));
    if meta.input.peek(syn::Token![=]) {
        meta.value()?.parse::<Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        let content;
        syn::parenthesized!(content in meta.input);
        content.parse::<proc_macro2::TokenStream>()?;
    }
    Ok(())
}

/// Whether a key that takes no value is given one, as `key = ...` or `key(...)`.
fn takes_a_value(meta: &ParseNestedMeta<'_>) -> bool {
    meta.input.peek(syn::Token![=]) || meta.input.peek(syn::token::Paren)
}

fn key_of(meta: &ParseNestedMeta<'_>) -> String {
    let path = &meta.path;
    path.get_ident().map_or_else(|| quote::quote!(#path).to_string().replace(' ', ""), ToString::to_string)
}

impl Container {
    pub(crate) fn parse(cx: &Ctxt, attrs: &[syn::Attribute], which: Which) -> Container {
        let mut out = Container::default();
        for attr in attrs.iter().filter(|a| a.path().is_ident("cai")) {
            let result = attr.parse_nested_meta(|meta| {
                let key = key_of(&meta);
                match key.as_str() {
                    "crate" => {
                        let lit: LitStr = meta.value()?.parse()?;
                        let path = lit.parse::<syn::Path>().map_err(|_| {
                            syn::Error::new(lit.span(), format!("crate = {:?} is not a path", lit.value()))
                        })?;
                        set_once(cx, &mut out.krate, path, &meta, "crate");
                    }
                    "readonly" if which == Which::Interface => {
                        if takes_a_value(&meta) {
                            return Err(meta.error("`readonly` takes no value: write #[cai(readonly)]"));
                        }
                        set_once(cx, &mut out.readonly, meta.path.span(), &meta, "readonly");
                    }
                    "version" if which == Which::Interface => {
                        let lit: LitInt = meta.value()?.parse()?;
                        let value = lit.base10_parse::<u32>()?;
                        set_once(cx, &mut out.version, Spanned { value, span: lit.span() }, &meta, "version");
                    }
                    "shape" if which == Which::Interface => {
                        let expr: Expr = meta.value()?.parse()?;
                        set_once(cx, &mut out.shape, expr, &meta, "shape");
                    }
                    "strides" if which == Which::Interface => {
                        let expr: Expr = meta.value()?.parse()?;
                        set_once(cx, &mut out.strides, expr, &meta, "strides");
                    }
                    _ => {
                        let expected = if which == Which::Interface { CONTAINER_KEYS } else { "crate" };
                        return unknown_key(
                            cx,
                            &meta,
                            format!("unknown cai attribute `{key}` on the struct; expected one of: {expected}"),
                        );
                    }
                }
                Ok(())
            });
            if let Err(e) = result {
                cx.push(e);
            }
        }
        out
    }
}

impl FieldAttrs {
    pub(crate) fn parse(cx: &Ctxt, attrs: &[syn::Attribute], which: Which) -> FieldAttrs {
        let mut out = FieldAttrs::default();
        for attr in attrs.iter().filter(|a| a.path().is_ident("cai")) {
            if which == Which::Element {
                let result = attr.parse_nested_meta(|meta| {
                    let key = key_of(&meta);
                    if key != "padding" {
                        return unknown_key(
                            cx,
                            &meta,
                            format!("unknown cai attribute `{key}` on a record's field; expected `padding`"),
                        );
                    }
                    if takes_a_value(&meta) {
                        return Err(meta.error("`padding` takes no value: it marks the field as padding bytes"));
                    }
                    set_once(cx, &mut out.padding, meta.path.span(), &meta, "padding");
                    Ok(())
                });
                if let Err(e) = result {
                    cx.push(e);
                }
                continue;
            }
            let result = attr.parse_nested_meta(|meta| {
                let key = key_of(&meta);
                let role = match key.as_str() {
                    "data" => Role::Data,
                    "shape" => Role::Shape,
                    "strides" => Role::Strides,
                    "stream" => Role::Stream,
                    "mask" => Role::Mask,
                    "array" => {
                        if meta.input.peek(syn::token::Paren) {
                            return Err(meta.error("name an array with array = \"name\", or write a bare `array`"));
                        }
                        let name = if meta.input.peek(syn::Token![=]) {
                            let lit: LitStr = meta.value()?.parse()?;
                            if lit.value().is_empty() {
                                return Err(syn::Error::new(lit.span(), "array = \"\" needs a name"));
                            }
                            Some(lit.value())
                        } else {
                            None
                        };
                        set_once(cx, &mut out.array, Spanned { value: name, span: meta.path.span() }, &meta, "array");
                        return Ok(());
                    }
                    _ => {
                        return unknown_key(
                            cx,
                            &meta,
                            format!("unknown cai attribute `{key}` on a field; expected one of: {FIELD_KEYS}"),
                        )
                    }
                };
                if takes_a_value(&meta) {
                    return Err(meta
                        .error(format!("`{key}` on a field takes no value: it marks the field as the array's {key}")));
                }
                match &out.role {
                    Some(previous) if previous.value == role => {
                        cx.error_spanned_by(&meta.path, format!("duplicate cai attribute `{key}`"))
                    }
                    Some(previous) => cx.error_spanned_by(
                        &meta.path,
                        format!("a field has one role: this one is already `{}`", previous.value.key()),
                    ),
                    None => out.role = Some(Spanned { value: role, span: meta.path.span() }),
                }
                Ok(())
            });
            if let Err(e) = result {
                cx.push(e);
            }
        }
        out
    }
}
