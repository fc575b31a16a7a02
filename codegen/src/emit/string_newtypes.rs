//! typify's impls of a constrained string, turned into one invocation of the runtime's
//! `string_newtype!`.
//!
//! For a string with a length or a pattern typify writes `pub struct T(String)` and six impls
//! (~55 lines) of which only the checks in `FromStr` differ from one type to the next. Each
//! impl is compared, as tokens, with what the macro writes for the type; when all six are
//! found and the same, they become `::warren_runtime::codegen::string_newtype! { T |value| {
//! checks } }`. Any other shape keeps them as typify wrote them.

use std::collections::BTreeMap;

use proc_macro2::{Ident, TokenStream};
use quote::{ToTokens, quote};
use syn::{Item, ItemImpl};

use super::invocations::{NamedShapes, parsed_from_text, shape};

/// `items` of the `types` module with each constrained string's impls as one invocation.
pub(super) fn compact(items: Vec<Item>) -> Vec<Item> {
    let mut newtypes: BTreeMap<String, Impls> = BTreeMap::new();
    for item in &items {
        if let Item::Struct(item) = item
            && is_string_newtype(item)
        {
            let impls = Impls {
                fixed: fixed_impls(&item.ident),
                ..Impls::default()
            };
            newtypes.insert(item.ident.to_string(), impls);
        }
    }
    for (index, item) in items.iter().enumerate() {
        let Item::Impl(item) = item else { continue };
        let Some(name) = owner(item) else { continue };
        let Some(impls) = newtypes.get_mut(&name.to_string()) else {
            continue;
        };
        if let Some(checks) = from_str_checks(item, &name) {
            impls.checks = Some(checks);
            impls.indices.push(index);
        } else if impls.fixed.contains(&shape(item)) {
            impls.indices.push(index);
        }
    }
    let replacements = newtypes
        .iter()
        .filter_map(|(name, impls)| Some((impls.indices.as_slice(), invocation(name, impls)?)));
    super::invocations::replace(items, replacements)
}

/// The type an impl is of: its self type, or `T` of `From<T> for String`.
pub(super) fn owner(item: &ItemImpl) -> Option<Ident> {
    let syn::Type::Path(self_ty) = &*item.self_ty else {
        return None;
    };
    if let Some(ident) = self_ty.path.get_ident() {
        return Some(ident.clone());
    }
    let (trait_path, _) = item.trait_.as_ref()?;
    let last = trait_path.segments.last()?;
    let syn::PathArguments::AngleBracketed(arguments) = &last.arguments else {
        return None;
    };
    match arguments.args.iter().collect::<Vec<_>>()[..] {
        [syn::GenericArgument::Type(syn::Type::Path(owner))] if last.ident == "From" => {
            owner.path.get_ident().cloned()
        }
        _ => None,
    }
}

/// The impls of one newtype found among the items, by their index.
#[derive(Default)]
struct Impls {
    /// The text of the five impls that never change ([`fixed_impls`]).
    fixed: Vec<String>,
    /// The statements of `FromStr` before its `Ok(Self(value.to_string()))`.
    checks: Option<TokenStream>,
    indices: Vec<usize>,
}

/// Whether `item` is `pub struct T(String)`.
fn is_string_newtype(item: &syn::ItemStruct) -> bool {
    let syn::Fields::Unnamed(fields) = &item.fields else {
        return false;
    };
    let [field] = fields.unnamed.iter().collect::<Vec<_>>()[..] else {
        return false;
    };
    item.generics.params.is_empty()
        && field.ty.to_token_stream().to_string() == quote!(::std::string::String).to_string()
}

/// The five impls of `name` whose text never changes, as typify writes them (its crate paths
/// rerouted to the `use` heading the `types` module), as [`shapes`](super::invocations::shapes).
fn fixed_impls(name: &Ident) -> Vec<String> {
    static FIXED: NamedShapes = NamedShapes::new(fixed_template);
    let mut fixed = FIXED.of(name);
    fixed.extend(parsed_from_text(name));
    fixed
}

/// What [`fixed_impls`] compares with, for `name`.
fn fixed_template(name: &Ident) -> TokenStream {
    quote! {
        impl ::std::ops::Deref for #name {
            type Target = ::std::string::String;
            fn deref(&self) -> &::std::string::String { &self.0 }
        }
        impl ::std::convert::From<#name> for ::std::string::String {
            fn from(value: #name) -> Self { value.0 }
        }
        impl<'de> serde::Deserialize<'de> for #name {
            fn deserialize<D>(deserializer: D) -> ::std::result::Result<Self, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                ::std::string::String::deserialize(deserializer)?
                    .parse()
                    .map_err(|e: self::error::ConversionError| {
                        <D::Error as serde::de::Error>::custom(
                            e.to_string(),
                        )
                    })
            }
        }
    }
}

/// The checks of `item` when it is typify's `FromStr` of `name`: its statements but the
/// last, `Ok(Self(value.to_string()))`.
fn from_str_checks(item: &ItemImpl, name: &Ident) -> Option<TokenStream> {
    let [syn::ImplItem::Type(_), syn::ImplItem::Fn(method)] = item.items.as_slice() else {
        return None;
    };
    let (last, checks) = method.block.stmts.split_last()?;
    let without_checks = {
        let mut item = item.clone();
        if let syn::ImplItem::Fn(method) = &mut item.items[1] {
            method.block.stmts = vec![last.clone()];
        }
        shape(&item)
    };
    static UNCHECKED: NamedShapes = NamedShapes::new(unchecked_from_str);
    (UNCHECKED.of(name) == [without_checks]).then(|| quote! { #( #checks )* })
}

/// typify's `FromStr` of `name` without its checks.
fn unchecked_from_str(name: &Ident) -> TokenStream {
    quote! {
        impl ::std::str::FromStr for #name {
            type Err = self::error::ConversionError;
            fn from_str(value: &str) -> ::std::result::Result<Self, self::error::ConversionError> {
                Ok(Self(value.to_string()))
            }
        }
    }
}

/// `string_newtype! { T |value| { checks } }` for `name`, when its six impls were found.
fn invocation(name: &str, impls: &Impls) -> Option<Item> {
    let checks = impls.checks.as_ref()?;
    if impls.indices.len() != 6 {
        return None;
    }
    let name = syn::parse_str::<Ident>(name).ok()?;
    Some(syn::parse_quote! {
        string_newtype! { #name |value| { #checks } }
    })
}
