//! Cross-attribute rules, one function each, and the grouping of fields into arrays.
//! Every rule reports through the `Ctxt`; expansion never sees an invalid model.

use proc_macro2::Span;
use syn::Expr;

use crate::ast::{Field, Input};
use crate::attr::Role;
use crate::ctxt::Ctxt;

/// The newest CUDA Array Interface version, and the default.
const CURRENT_VERSION: u32 = 3;

/// Device (`CudaArrayInterface`) or host (`ArrayInterface`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    Device,
    Host,
}

impl Flavor {
    pub(crate) fn derive_name(self) -> &'static str {
        match self {
            Flavor::Device => "CudaArrayInterface",
            Flavor::Host => "ArrayInterface",
        }
    }
}

/// Where a shape or strides come from.
pub(crate) enum Source<'a> {
    Default,
    Field(&'a Field<'a>),
    Expr(&'a Expr),
}

/// One exported array.
pub(crate) enum Array<'a> {
    /// A buffer with the fields that describe it.
    Buffer { data: &'a Field<'a>, shape: Source<'a>, strides: Source<'a>, mask: Option<&'a Field<'a>> },
    /// A field whose type itself implements the trait.
    Nested(&'a Field<'a>),
}

/// What the derive exports, checked.
pub(crate) struct Model<'a> {
    pub(crate) primary: Option<Array<'a>>,
    pub(crate) named: Vec<(String, Array<'a>)>,
    pub(crate) stream: Option<&'a Field<'a>>,
    pub(crate) version: u32,
    pub(crate) readonly: bool,
}

/// The fields that belong to one array, before checks.
#[derive(Default)]
struct Group<'a> {
    data: Option<&'a Field<'a>>,
    shape: Option<&'a Field<'a>>,
    strides: Option<&'a Field<'a>>,
    mask: Option<&'a Field<'a>>,
}

fn error(cx: &Ctxt, span: Span, message: impl std::fmt::Display) {
    cx.push(syn::Error::new(span, message));
}

/// Groups fields by array and applies every rule.
pub(crate) fn model<'a>(cx: &Ctxt, input: &'a Input<'a>, flavor: Flavor) -> Model<'a> {
    let version = check_version(cx, input);
    // Each group with the place of its first field, so that the named arrays keep the
    // order of declaration.
    let mut groups: Vec<(Option<String>, Group<'a>, usize)> = vec![(None, Group::default(), 0)];
    let mut nested: Vec<(String, &'a Field<'a>, usize)> = Vec::new();
    let mut stream = None;
    for (place, field) in input.fields.iter().enumerate() {
        check_array_has_a_name(cx, field);
        let array_name = field.attrs.array.as_ref().map(|a| a.value.clone().unwrap_or_else(|| field.array_name()));
        let Some(role) = &field.attrs.role else {
            if let Some(name) = array_name {
                nested.push((name, field, place));
            }
            continue;
        };
        if role.value == Role::Stream {
            check_stream(cx, field, role.span, flavor, version, stream.is_some());
            check_stream_not_named(cx, field);
            stream = Some(field);
            continue;
        }
        let index = groups.iter().position(|(n, _, _)| *n == array_name).unwrap_or_else(|| {
            groups.push((array_name.clone(), Group::default(), place));
            groups.len() - 1
        });
        let group = &mut groups[index].1;
        let slot = match role.value {
            Role::Data => &mut group.data,
            Role::Shape => &mut group.shape,
            Role::Strides => &mut group.strides,
            Role::Mask => &mut group.mask,
            Role::Stream => unreachable!("handled above"),
        };
        check_one_per_array(cx, role.value, role.span, slot.as_deref().map(Field::name), field, &array_name);
        slot.get_or_insert(field);
        if role.value == Role::Mask {
            check_mask_version(cx, role.span, version);
        }
    }
    let readonly = input.attrs.readonly.is_some();
    let mut model = Model { primary: None, named: Vec::new(), stream, version, readonly };
    let mut places = Vec::new();
    for (name, group, place) in groups {
        let is_primary = name.is_none();
        let Some(array) = finish_group(cx, input, group, is_primary) else { continue };
        match name {
            None => model.primary = Some(array),
            Some(name) => {
                model.named.push((name, array));
                places.push(place);
            }
        }
    }
    for (name, field, place) in nested {
        check_unique_name(cx, &model, &name, field);
        model.named.push((name, Array::Nested(field)));
        places.push(place);
    }
    let mut placed: Vec<_> = places.into_iter().zip(std::mem::take(&mut model.named)).collect();
    placed.sort_by_key(|(place, _)| *place);
    model.named = placed.into_iter().map(|(_, named)| named).collect();
    check_container_layout_has_primary(cx, input, &model);
    check_something_to_export(cx, input, &model, flavor);
    model
}

/// A bare `array` takes the field's name, which a tuple field does not have.
fn check_array_has_a_name(cx: &Ctxt, field: &Field<'_>) {
    if let Some(array) = &field.attrs.array {
        if array.value.is_none() && matches!(field.member, syn::Member::Unnamed(_)) {
            error(
                cx,
                array.span,
                format!("field {} has no name to give its array: write array = \"...\"", field.name()),
            );
        }
    }
}

/// `version = N` must be a version the specification defines.
fn check_version(cx: &Ctxt, input: &Input<'_>) -> u32 {
    match &input.attrs.version {
        None => CURRENT_VERSION,
        Some(v) if v.value <= CURRENT_VERSION => v.value,
        Some(v) => {
            error(cx, v.span, format!("version = {} is not a CUDA Array Interface version; use 0, 1, 2 or 3", v.value));
            CURRENT_VERSION
        }
    }
}

/// A stream field is for device buffers, from version 3, once per struct.
fn check_stream(cx: &Ctxt, field: &Field<'_>, span: Span, flavor: Flavor, version: u32, seen: bool) {
    if flavor == Flavor::Host {
        error(
            cx,
            span,
            "#[cai(stream)] is for device buffers: #[derive(ArrayInterface)] exports NumPy's __array_interface__, \
             which has no stream",
        );
    } else if version < 3 {
        error(cx, span, format!("#[cai(stream)] needs version 3; this struct declares version = {version}"));
    }
    if seen {
        error(cx, span, format!("a second #[cai(stream)] field (`{}`): a struct has one stream", field.name()));
    }
}

/// The stream is shared by every array of the struct, so it names none.
fn check_stream_not_named(cx: &Ctxt, field: &Field<'_>) {
    if let Some(array) = &field.attrs.array {
        error(cx, array.span, "the #[cai(stream)] field serves every array of the struct; remove `array`");
    }
}

/// Each array has at most one field of each role. The error says how to write what the
/// second field was meant for: another array, or a shape (strides) from several fields.
fn check_one_per_array(
    cx: &Ctxt,
    role: Role,
    span: Span,
    first: Option<String>,
    second: &Field<'_>,
    array: &Option<String>,
) {
    let Some(first) = first else { return };
    let which = array.as_ref().map_or_else(|| "the struct's array".to_owned(), |a| format!("array \"{a}\""));
    let hint = match role {
        Role::Data => "; to export several arrays, name each with array = \"...\"".to_owned(),
        Role::Shape | Role::Strides => {
            let (key, int) = if role == Role::Shape { ("shape", "usize") } else { ("strides", "isize") };
            let one_field = format!("give the whole {key} in one field (`[{int}; N]`, `Vec<{int}>`, a tuple)");
            // Only the struct's own array takes an expression.
            match array {
                None => format!(
                    "; {one_field}, or compute it from several fields: remove the #[cai({key})] attributes \
                     and write #[cai({key} = [self.{first}, self.{}])] on the struct",
                    second.name()
                ),
                Some(_) => format!("; {one_field}"),
            }
        }
        Role::Stream | Role::Mask => String::new(),
    };
    error(cx, span, format!("a second #[cai({})] field for {which} (the first is `{first}`){hint}", role.key()));
}

/// Masks exist from version 1.
fn check_mask_version(cx: &Ctxt, span: Span, version: u32) {
    if version == 0 {
        error(cx, span, "#[cai(mask)] needs version 1 or later; this struct declares version = 0");
    }
}

/// A group needs its data field; its shape and strides come from one place each.
fn finish_group<'a>(cx: &Ctxt, input: &'a Input<'a>, group: Group<'a>, is_primary: bool) -> Option<Array<'a>> {
    let Some(data) = group.data else {
        for (field, role) in [(group.shape, Role::Shape), (group.strides, Role::Strides), (group.mask, Role::Mask)] {
            if let Some(field) = field {
                cx.error_spanned_by(
                    field.original,
                    format!("#[cai({})] field `{}` has no #[cai(data)] field in its array", role.key(), field.name()),
                );
            }
        }
        return None;
    };
    let (shape_expr, strides_expr) =
        if is_primary { (input.attrs.shape.as_ref(), input.attrs.strides.as_ref()) } else { (None, None) };
    let shape = source(cx, group.shape, shape_expr, "shape");
    let strides = source(cx, group.strides, strides_expr, "strides");
    Some(Array::Buffer { data, shape, strides, mask: group.mask })
}

/// A shape (or strides) from a field or from the struct's expression, not both.
fn source<'a>(cx: &Ctxt, field: Option<&'a Field<'a>>, expr: Option<&'a Expr>, key: &str) -> Source<'a> {
    match (field, expr) {
        (Some(field), Some(_)) => {
            cx.error_spanned_by(
                field.original,
                format!("{key} is given twice: by #[cai({key} = ...)] on the struct and by field `{}`", field.name()),
            );
            Source::Field(field)
        }
        (Some(field), None) => Source::Field(field),
        (None, Some(expr)) => Source::Expr(expr),
        (None, None) => Source::Default,
    }
}

/// Array names are unique.
fn check_unique_name(cx: &Ctxt, model: &Model<'_>, name: &str, field: &Field<'_>) {
    if model.named.iter().any(|(n, _)| n == name) {
        let span = field.attrs.array.as_ref().map_or_else(Span::call_site, |a| a.span);
        error(cx, span, format!("two arrays are named \"{name}\""));
    }
}

/// `shape = ...` and `strides = ...` on the struct describe the struct's own array.
fn check_container_layout_has_primary(cx: &Ctxt, input: &Input<'_>, model: &Model<'_>) {
    if model.primary.is_none() {
        for expr in input.attrs.shape.iter().chain(&input.attrs.strides) {
            cx.error_spanned_by(expr, "the struct has no #[cai(data)] field of its own for this to describe");
        }
    }
}

/// A struct exports at least one array.
fn check_something_to_export(cx: &Ctxt, input: &Input<'_>, model: &Model<'_>, flavor: Flavor) {
    if model.primary.is_none() && model.named.is_empty() {
        cx.error_spanned_by(
            input.ident,
            format!(
                "#[derive({})] found no array: mark the field that holds the buffer with #[cai(data)], \
                 or a field that is itself an array with #[cai(array)]",
                flavor.derive_name()
            ),
        );
    }
}

/// `#[derive(Element)]` needs `#[repr(C)]` (packed and align allowed) and at least one field.
pub(crate) fn check_record(cx: &Ctxt, input: &Input<'_>) {
    let mut has_c = false;
    for attr in input.original.attrs.iter().filter(|a| a.path().is_ident("repr")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("C") {
                has_c = true;
            } else if meta.input.peek(syn::token::Paren) {
                // packed(N), align(N): parsed and accepted.
                let content;
                syn::parenthesized!(content in meta.input);
                content.parse::<proc_macro2::TokenStream>()?;
            }
            Ok(())
        });
    }
    if !has_c {
        cx.error_spanned_by(
            input.ident,
            "#[derive(Element)] needs #[repr(C)] (or #[repr(C, packed)]): the default Rust layout may reorder fields, \
             so their offsets cannot be exported",
        );
    }
    if input.fields.is_empty() {
        cx.error_spanned_by(
            input.ident,
            "#[derive(Element)] needs at least one field: a record of no bytes has no descr",
        );
    } else if input.fields.iter().all(|f| f.attrs.padding.is_some()) {
        cx.error_spanned_by(
            input.ident,
            "#[derive(Element)] needs at least one field that is not #[cai(padding)]: a record of padding alone \
             has no fields to export",
        );
    }
}
