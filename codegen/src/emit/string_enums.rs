//! typify's conversions of a string enum, turned into one invocation of the runtime's
//! `string_enum!`.
//!
//! For every enum of strings typify writes `Display`, `FromStr` and two `TryFrom`s, ~35 lines
//! of which only the variants and their JSON values differ from one enum to the next. Those
//! are read from typify's `Display` and checked against its `FromStr`; the four impls become
//! `::warren_runtime::codegen::string_enum! { Enum { Variant = "value", … } }`, which expands
//! to the same. An enum whose impls have another shape keeps them as typify wrote them.

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::Ident;
use quote::ToTokens;
use syn::{Expr, Item, ItemImpl, Lit, Pat};

use super::invocations::{parsed_from_text, shape};

/// `items` of the `types` module with each string enum's conversions as one invocation.
pub(super) fn compact(items: Vec<Item>) -> Vec<Item> {
    // Only an enum's impls can be its conversions: a constrained string's `TryFrom`s are
    // not compared with the templates (a large contract has a thousand of them).
    let enum_names: BTreeSet<String> = items
        .iter()
        .filter_map(|item| match item {
            Item::Enum(item) => Some(item.ident.to_string()),
            _ => None,
        })
        .collect();
    let mut enums: BTreeMap<String, Conversions> = BTreeMap::new();
    for (index, item) in items.iter().enumerate() {
        if let Item::Impl(item) = item
            && let Some((name, part)) = part(item, &enum_names)
        {
            let conversions = enums.entry(name).or_default();
            conversions.indices.push(index);
            match part {
                Part::Display(values) => conversions.display = Some(values),
                Part::FromStr(values) => conversions.from_str = Some(values),
                Part::TryFrom => conversions.try_froms += 1,
            }
        }
    }
    let replacements = enums.iter().filter_map(|(name, conversions)| {
        Some((
            conversions.indices.as_slice(),
            invocation(name, conversions)?,
        ))
    });
    super::invocations::replace(items, replacements)
}

/// The conversions of one enum found among the items, by their index.
#[derive(Default)]
struct Conversions {
    /// Each variant and the text `Display` writes for it, in order.
    display: Option<Vec<(Ident, String)>>,
    /// Each variant and the text `FromStr` reads as it.
    from_str: Option<Vec<(Ident, String)>>,
    try_froms: usize,
    indices: Vec<usize>,
}

/// What one `impl` is of an enum's conversions.
enum Part {
    Display(Vec<(Ident, String)>),
    FromStr(Vec<(Ident, String)>),
    /// `TryFrom<&str>` or `TryFrom<String>`, parsing the value.
    TryFrom,
}

/// The enum `item` converts, one of `enums`, and which conversion it is; `None` for any
/// other `impl`.
fn part(item: &ItemImpl, enums: &BTreeSet<String>) -> Option<(String, Part)> {
    let (trait_path, _) = item.trait_.as_ref()?;
    let syn::Type::Path(self_ty) = &*item.self_ty else {
        return None;
    };
    let ident = self_ty.path.get_ident()?;
    let name = ident.to_string();
    if !item.generics.params.is_empty() || !enums.contains(&name) {
        return None;
    }
    use syn::ImplItem::{Fn, Type};
    let part = match (
        trait_path.segments.last()?.ident.to_string().as_str(),
        &item.items[..],
    ) {
        ("Display", [Fn(method)]) => Part::Display(display_arms(method)?),
        // `FromStr` and `TryFrom` hold their error type besides the function.
        ("FromStr", [Type(_), Fn(method)]) => Part::FromStr(from_str_arms(method)?),
        ("TryFrom", _) if parsed_from_text(ident).contains(&shape(item)) => Part::TryFrom,
        _ => return None,
    };
    Some((name, part))
}

/// The `match *self` of typify's `Display`: `Self::V => f.write_str("value")` each.
fn display_arms(method: &syn::ImplItemFn) -> Option<Vec<(Ident, String)>> {
    let arms = only_match(method)?;
    arms.iter()
        .map(|arm| {
            let variant = self_variant(&arm.pat)?;
            let Expr::MethodCall(call) = &*arm.body else {
                return None;
            };
            let [text] = call.args.iter().collect::<Vec<_>>()[..] else {
                return None;
            };
            (call.method == "write_str").then_some(())?;
            Some((variant, string(text)?))
        })
        .collect()
}

/// The `match value` of typify's `FromStr`: `"value" => Ok(Self::V)` each, then `_ =>
/// Err("invalid value".into())`, which `string_enum!` writes.
fn from_str_arms(method: &syn::ImplItemFn) -> Option<Vec<(Ident, String)>> {
    let (fallback, arms) = only_match(method)?.split_last()?;
    let fallback_is_typify = matches!(fallback.pat, Pat::Wild(_))
        && fallback.body.to_token_stream().to_string() == "Err (\"invalid value\" . into ())";
    if !fallback_is_typify {
        return None;
    }
    arms.iter()
        .map(|arm| {
            let Pat::Lit(text) = &arm.pat else {
                return None;
            };
            let Expr::Call(ok) = &*arm.body else {
                return None;
            };
            let [Expr::Path(variant)] = ok.args.iter().collect::<Vec<_>>()[..] else {
                return None;
            };
            let variant = self_path_variant(&variant.path)?;
            Some((variant, string(&Expr::Lit(text.clone()))?))
        })
        .collect()
}

/// The arms of a method whose body is one `match`.
fn only_match(method: &syn::ImplItemFn) -> Option<&[syn::Arm]> {
    match method.block.stmts.as_slice() {
        [syn::Stmt::Expr(Expr::Match(matched), None)] => Some(&matched.arms),
        _ => None,
    }
}

/// `V` of a pattern `Self::V`.
fn self_variant(pat: &Pat) -> Option<Ident> {
    match pat {
        Pat::Path(path) => self_path_variant(&path.path),
        _ => None,
    }
}

/// `V` of a path `Self::V`.
fn self_path_variant(path: &syn::Path) -> Option<Ident> {
    match path.segments.iter().collect::<Vec<_>>()[..] {
        [first, variant] if first.ident == "Self" => Some(variant.ident.clone()),
        _ => None,
    }
}

/// The text of a string literal.
fn string(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Lit(lit) => match &lit.lit {
            Lit::Str(text) => Some(text.value()),
            _ => None,
        },
        _ => None,
    }
}

/// `string_enum! { E { V = "value", … } }` for enum `name`, when its four conversions were
/// found and `Display` writes each variant as `FromStr` reads it.
fn invocation(name: &str, conversions: &Conversions) -> Option<Item> {
    let (Some(display), Some(from_str)) = (&conversions.display, &conversions.from_str) else {
        return None;
    };
    // Each variant read as the text it is written as, whatever the order of the arms.
    let pairs = |arms: &[(Ident, String)]| -> BTreeSet<(String, String)> {
        arms.iter()
            .map(|(variant, value)| (variant.to_string(), value.clone()))
            .collect()
    };
    let same = pairs(display) == pairs(from_str);
    if !same || conversions.try_froms != 2 || conversions.indices.len() != 4 {
        return None;
    }
    let name = syn::parse_str::<Ident>(name).ok()?;
    let variants = display.iter().map(|(variant, value)| {
        quote::quote! { #variant = #value }
    });
    Some(syn::parse_quote! {
        string_enum! { #name { #( #variants ),* } }
    })
}
