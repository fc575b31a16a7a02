//! `new` on every generated struct: its required properties as arguments, every other field
//! at its default.
//!
//! A struct literal names every field, so it stops compiling when a schema gains an optional
//! property; a constructor of the required ones alone does not, and still stops compiling
//! when a required property is added, removed or retyped, which is when code building the
//! type must change. Typify's builders would fail at run time instead (`try_into` reports the
//! missing field), so the constructor is what the docs show first and what `warren diff`'s
//! `rust-code` verdicts are measured against.
//!
//! Which fields are required is read from typify's own serde attributes, as its builders
//! read it: a field with `default` (or `default = "…"`), or an `Option` skipped when `None`,
//! may be absent from the JSON; every other field is an argument, in field order (the
//! properties' names, sorted), so reordering a schema's properties changes nothing.

use proc_macro2::Ident;
use syn::punctuated::Punctuated;
use syn::{
    Expr, ExprLit, ExprPath, Field, FieldValue, Fields, FnArg, ImplItem, Item, ItemImpl,
    ItemStruct, Lit, Member, Meta, Pat, PatIdent, PatType, Path, Stmt, Token, Type,
};

use super::docs::{code, compose_attrs};

/// `items` with an `impl … { pub fn new(…) }` after each struct of named fields.
pub(super) fn add(items: Vec<Item>) -> Vec<Item> {
    let unset: Expr = syn::parse_quote! { ::std::default::Default::default() };
    debug_assert!(is_unset(&unset));
    let mut out = Vec::with_capacity(items.len() * 2);
    for item in items {
        let constructor = match &item {
            Item::Struct(item) => constructor(item, &unset),
            _ => None,
        };
        out.push(item);
        out.extend(constructor);
    }
    out
}

/// How a field is filled by `new`.
enum Filled {
    /// From the argument of its name.
    Argument,
    /// With its type's default.
    Unset,
    /// With this expression.
    Default(Expr),
}

/// The `impl` holding `new` for `item`, when its fields are named; `unset` is a field's
/// type's default.
fn constructor(item: &ItemStruct, unset: &Expr) -> Option<Item> {
    let Fields::Named(fields) = &item.fields else {
        return None;
    };
    let name = &item.ident;
    let mut arguments: Punctuated<FnArg, Token![,]> = Punctuated::new();
    let mut required = Vec::new();
    let mut inits: Punctuated<FieldValue, Token![,]> = Punctuated::new();
    for field in &fields.named {
        let ident = field.ident.as_ref()?;
        match filled(field) {
            Filled::Argument => {
                arguments.push(argument(ident, &field.ty));
                required.push(code(&ident.to_string()));
                inits.push(init(ident, None));
            }
            Filled::Unset => inits.push(init(ident, Some(unset.clone()))),
            Filled::Default(value) => inits.push(init(ident, Some(value))),
        }
    }
    let required = if required.is_empty() {
        "none".to_owned()
    } else {
        required.join(", ")
    };
    // Why it is there, and what "unset" is, the `types` module's docs say once.
    let docs = compose_attrs(
        &format!("A [`{name}`] of its required properties ({required}), the others unset."),
        None,
        "",
    );
    let mut constructor: ItemImpl = syn::parse_quote! {
        impl #name {
            pub fn new() -> Self {
                Self {}
            }
        }
    };
    // The docs, the arguments and the fields are put in as syntax, not printed and parsed
    // again: a large contract has a thousand constructors, and their types are most of their
    // text.
    let ImplItem::Fn(new) = constructor.items.first_mut()? else {
        return None;
    };
    new.attrs = docs;
    new.sig.inputs = arguments;
    let Some(Stmt::Expr(Expr::Struct(body), None)) = new.block.stmts.first_mut() else {
        return None;
    };
    body.fields = inits;
    Some(Item::Impl(constructor))
}

/// `ident: ty`, an argument of `new`.
fn argument(ident: &Ident, ty: &Type) -> FnArg {
    FnArg::Typed(PatType {
        attrs: Vec::new(),
        pat: Box::new(Pat::Ident(PatIdent {
            attrs: Vec::new(),
            by_ref: None,
            mutability: None,
            ident: ident.clone(),
            subpat: None,
        })),
        colon_token: Default::default(),
        ty: Box::new(ty.clone()),
    })
}

/// The field `ident` of the struct `new` makes: `ident: value`, or `ident` from the argument
/// of its name.
fn init(ident: &Ident, value: Option<Expr>) -> FieldValue {
    let (colon_token, expr) = match value {
        Some(value) => (Some(Default::default()), value),
        None => (
            None,
            Expr::Path(ExprPath {
                attrs: Vec::new(),
                qself: None,
                path: ident.clone().into(),
            }),
        ),
    };
    FieldValue {
        attrs: Vec::new(),
        member: Member::Named(ident.clone()),
        colon_token,
        expr,
    }
}

/// Whether `value` is what `new` fills a field with its type's default with:
/// `::std::default::Default::default()`.
pub(super) fn is_unset(value: &Expr) -> bool {
    let Expr::Call(call) = value else {
        return false;
    };
    let Expr::Path(function) = &*call.func else {
        return false;
    };
    let names: Vec<String> = (function.path.segments.iter())
        .map(|segment| segment.ident.to_string())
        .collect();
    call.args.is_empty() && names == ["std", "default", "Default", "default"]
}

/// Whether `field` is an argument of `new`, or else its default: typify's serde attributes
/// say whether the JSON may leave it out, and with what it is then filled.
fn filled(field: &Field) -> Filled {
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let Ok(options) =
            attr.parse_args_with(syn::punctuated::Punctuated::<Meta, Token![,]>::parse_terminated)
        else {
            continue;
        };
        for option in options {
            match option {
                Meta::Path(path) if path.is_ident("default") => return Filled::Unset,
                Meta::NameValue(pair) if pair.path.is_ident("default") => {
                    if let Some(function) = string_path(&pair.value) {
                        return Filled::Default(syn::parse_quote! { #function() });
                    }
                }
                Meta::NameValue(pair)
                    if pair.path.is_ident("skip_serializing_if")
                        && string(&pair.value).is_some_and(|p| is_option_is_none(&p)) =>
                {
                    return Filled::Unset;
                }
                _ => {}
            }
        }
    }
    Filled::Argument
}

/// The path a serde attribute's string names (`"defaults::job_priority"`).
fn string_path(value: &Expr) -> Option<Path> {
    syn::parse_str(&string(value)?).ok()
}

/// The string a serde attribute gives.
fn string(value: &Expr) -> Option<String> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(text),
            ..
        }) => Some(text.value()),
        _ => None,
    }
}

/// Whether the path written `text` is `Option::is_none`, typify's mark of an optional
/// `Option` field. Read as words between `::`, not parsed: every optional field has one.
fn is_option_is_none(text: &str) -> bool {
    let segments: Vec<&str> = text.split("::").map(str::trim).collect();
    segments.ends_with(&["Option", "is_none"])
}
