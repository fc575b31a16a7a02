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

use proc_macro2::{Ident, TokenStream};
use quote::quote;
use syn::punctuated::Punctuated;
use syn::{
    Expr, ExprLit, ExprPath, Field, FieldValue, Fields, FnArg, ImplItem, Item, ItemImpl,
    ItemStruct, Lit, Member, Meta, Pat, PatIdent, PatType, Path, Stmt, Token, Type,
};

use super::docs::{code, compose_attrs};

/// A struct's constructor: how `new` fills each of its named fields, in field order.
pub(super) struct Constructor {
    name: Ident,
    fields: Vec<(Ident, Type, Filled)>,
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

/// What `new` fills a field with its type's default with, for [`Constructor::into_impl`]:
/// made once for a module's constructors.
pub(super) fn unset() -> Expr {
    syn::parse_quote! { ::std::default::Default::default() }
}

impl Constructor {
    /// `item`'s constructor, when its fields are named: read from typify's serde attributes,
    /// so before they come off the struct.
    pub(super) fn of(item: &ItemStruct) -> Option<Self> {
        let Fields::Named(fields) = &item.fields else {
            return None;
        };
        let fields = (fields.named.iter())
            .map(|field| Some((field.ident.clone()?, field.ty.clone(), filled(field))))
            .collect::<Option<_>>()?;
        Some(Self {
            name: item.ident.clone(),
            fields,
        })
    }

    /// The constructor as the runtime's `serde_struct!` takes it after a struct's fields,
    /// `new(field: Type, …) unset(field, …)`; `None` when a field is filled with an expression
    /// of its own, which only an `impl` writes.
    pub(super) fn macro_entry(&self) -> Option<TokenStream> {
        let mut arguments = Vec::new();
        let mut unset = Vec::new();
        for (ident, ty, filled) in &self.fields {
            match filled {
                Filled::Argument => arguments.push(quote! { #ident: #ty }),
                Filled::Unset => unset.push(ident),
                Filled::Default(_) => return None,
            }
        }
        let unset = (!unset.is_empty()).then(|| quote! { unset(#( #unset ),*) });
        Some(quote! { new(#( #arguments ),*) #unset })
    }

    /// The `impl` holding `new`; `unset` is a field's type's default ([`unset`]).
    pub(super) fn into_impl(self, unset: &Expr) -> Item {
        let name = &self.name;
        let mut arguments: Punctuated<FnArg, Token![,]> = Punctuated::new();
        let mut required = Vec::new();
        let mut inits: Punctuated<FieldValue, Token![,]> = Punctuated::new();
        for (ident, ty, filled) in self.fields {
            match filled {
                Filled::Argument => {
                    required.push(code(&ident.to_string()));
                    inits.push(init(&ident, None));
                    arguments.push(argument(ident, ty));
                }
                Filled::Unset => inits.push(init(&ident, Some(unset.clone()))),
                Filled::Default(value) => inits.push(init(&ident, Some(value))),
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
        // again: a large contract has a thousand constructors, and their types are most of
        // their text.
        if let Some(ImplItem::Fn(new)) = constructor.items.first_mut() {
            new.attrs = docs;
            new.sig.inputs = arguments;
            if let Some(Stmt::Expr(Expr::Struct(body), None)) = new.block.stmts.first_mut() {
                body.fields = inits;
            }
        }
        Item::Impl(constructor)
    }
}

/// `ident: ty`, an argument of `new`.
fn argument(ident: Ident, ty: Type) -> FnArg {
    FnArg::Typed(PatType {
        attrs: Vec::new(),
        pat: Box::new(Pat::Ident(PatIdent {
            attrs: Vec::new(),
            by_ref: None,
            mutability: None,
            ident,
            subpat: None,
        })),
        colon_token: Default::default(),
        ty: Box::new(ty),
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
