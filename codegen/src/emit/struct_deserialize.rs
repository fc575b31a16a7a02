//! typify's `#[derive(serde::Deserialize)]` on a struct of named fields, written as one
//! invocation of the runtime's `deserialize_struct!` instead.
//!
//! serde's derive expands to ~19 KB of code for a struct of six fields, which the user's crate
//! type-checks and borrow-checks for every payload: on a contract of a thousand messages,
//! 1.0 GB of the 1.6 GB the compiler took to check the types, and three quarters of their time. The
//! runtime's macro reads the same documents with the same errors (its tests compare the two)
//! and expands to the struct's own part only. A struct carrying any serde attribute the macro
//! does not read (`flatten`, `default = "path"`, a container `default`, …) keeps the derive.

use proc_macro2::TokenStream;
use quote::quote;
use syn::ext::IdentExt;
use syn::punctuated::Punctuated;
use syn::{Attribute, Item, ItemStruct, Meta, Token};

/// `items` of the `types` module with each struct the macro can read given its
/// `deserialize_struct!` after it, and `serde::Deserialize` left out of its derives.
pub(super) fn compact(items: Vec<Item>) -> Vec<Item> {
    let mut out = Vec::with_capacity(items.len() * 2);
    for mut item in items {
        let invocation = match &mut item {
            Item::Struct(item) => invocation(item),
            _ => None,
        };
        out.push(item);
        out.extend(invocation);
    }
    out
}

/// The invocation for `item`, with `serde::Deserialize` taken out of its derives; `None`, and
/// `item` untouched, when the macro cannot stand for the derive.
fn invocation(item: &mut ItemStruct) -> Option<Item> {
    let syn::Fields::Named(fields) = &item.fields else {
        return None;
    };
    if !item.generics.params.is_empty() || !derives_deserialize(&item.attrs) {
        return None;
    }
    let deny = container_deny_unknown(&item.attrs)?;
    let entries = fields
        .named
        .iter()
        .map(entry)
        .collect::<Option<Vec<TokenStream>>>()?;
    remove_deserialize(&mut item.attrs);
    let name = &item.ident;
    let deny = deny.then(|| quote! { deny_unknown_fields });
    Some(syn::parse_quote! {
        ::warren_runtime::codegen::deserialize_struct! { #name #deny { #( #entries ),* } }
    })
}

/// Whether a derive of `attrs` names serde's `Deserialize`.
fn derives_deserialize(attrs: &[Attribute]) -> bool {
    attrs
        .iter()
        .filter_map(derive_paths)
        .flatten()
        .any(|path| is_deserialize(&path))
}

fn derive_paths(attr: &Attribute) -> Option<Punctuated<syn::Path, Token![,]>> {
    if !attr.path().is_ident("derive") {
        return None;
    }
    attr.parse_args_with(Punctuated::parse_terminated).ok()
}

fn is_deserialize(path: &syn::Path) -> bool {
    path.segments.first().is_some_and(|s| s.ident == "serde")
        && path
            .segments
            .last()
            .is_some_and(|s| s.ident == "Deserialize")
}

/// `attrs` without `serde::Deserialize` in their derives (a derive left empty goes).
fn remove_deserialize(attrs: &mut Vec<Attribute>) {
    attrs.retain_mut(|attr| {
        let Some(paths) = derive_paths(attr) else {
            return true;
        };
        let kept: Vec<syn::Path> = paths.into_iter().filter(|p| !is_deserialize(p)).collect();
        *attr = syn::parse_quote! { #[derive(#( #kept ),*)] };
        !kept.is_empty()
    });
}

/// The serde metas of `attrs`' `#[serde(…)]` attributes; `None` when one does not parse.
fn serde_metas(attrs: &[Attribute]) -> Option<Vec<Meta>> {
    let mut metas = Vec::new();
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("serde")) {
        let list = attr
            .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
            .ok()?;
        metas.extend(list);
    }
    Some(metas)
}

/// Whether the struct denies unknown fields; `None` when a container attribute is one the
/// macro does not read (the `crate` path is the runtime's serde, which the macro names too).
fn container_deny_unknown(attrs: &[Attribute]) -> Option<bool> {
    let mut deny = false;
    for meta in serde_metas(attrs)? {
        match &meta {
            Meta::Path(path) if path.is_ident("deny_unknown_fields") => deny = true,
            Meta::NameValue(value) if value.path.is_ident("crate") => {}
            _ => return None,
        }
    }
    Some(deny)
}

/// A field's entry: `name`, `= "serialized"` when its serialized name differs, `: default`
/// when a missing one takes its type's default (serde's `default`, or an `Option`, which serde
/// reads as `None` when missing: the same value, without the macro asking the type); `None` for
/// a field the macro cannot read.
fn entry(field: &syn::Field) -> Option<TokenStream> {
    let ident = field.ident.as_ref()?;
    let mut serialized = ident.unraw().to_string();
    let mut default = is_option(&field.ty).then(|| quote! { : default });
    for meta in serde_metas(&field.attrs)? {
        match &meta {
            Meta::Path(path) if path.is_ident("default") => default = Some(quote! { : default }),
            Meta::NameValue(value) if value.path.is_ident("rename") => {
                let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(name),
                    ..
                }) = &value.value
                else {
                    return None;
                };
                serialized = name.value();
            }
            // Serializing only.
            Meta::NameValue(value) if value.path.is_ident("skip_serializing_if") => {}
            _ => return None,
        }
    }
    // Named in full unless the field's name is its serialized name: a raw one (`r#type`) is
    // always named, as the macro would write it `"r#type"`.
    let renamed = (*ident != serialized).then(|| quote! { = #serialized });
    Some(quote! { #ident #default #renamed })
}

/// Whether `ty` is `::std::option::Option<…>` (or `Option<…>`), as typify writes an optional
/// or nullable property's type.
fn is_option(ty: &syn::Type) -> bool {
    let syn::Type::Path(ty) = ty else {
        return false;
    };
    let names: Vec<String> = ty
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    ty.qself.is_none()
        && (names == ["Option"]
            || names == ["std", "option", "Option"]
            || names == ["core", "option", "Option"])
}

#[cfg(test)]
mod tests {
    use quote::ToTokens;
    use syn::Item;

    use super::compact;

    /// The items `compact` makes of `item`, as text.
    fn compacted(item: Item) -> Vec<String> {
        compact(vec![item])
            .iter()
            .map(|item| item.to_token_stream().to_string())
            .collect()
    }

    #[test]
    fn a_struct_of_known_attributes_reads_itself_through_the_macro() {
        let items = compacted(syn::parse_quote! {
            #[derive(serde::Deserialize, serde::Serialize, Clone)]
            #[serde(crate = "::warren_runtime::codegen::serde", deny_unknown_fields)]
            pub struct Order {
                pub id: String,
                #[serde(rename = "type")]
                pub r#type: Option<String>,
                #[serde(default, skip_serializing_if = "::std::vec::Vec::is_empty")]
                pub lines: Vec<u32>,
                #[serde(rename = "order-note", skip_serializing_if = "::std::option::Option::is_none")]
                pub note: ::std::option::Option<String>,
            }
        });
        assert_eq!(items.len(), 2, "{items:?}");
        assert!(
            items[0].starts_with("# [derive (serde :: Serialize , Clone)]"),
            "{}",
            items[0]
        );
        assert_eq!(
            items[1],
            ":: warren_runtime :: codegen :: deserialize_struct ! { Order deny_unknown_fields { \
             id , r#type : default = \"type\" , lines : default , note : default = \"order-note\" } }"
        );
    }

    #[test]
    fn a_struct_with_an_attribute_the_macro_does_not_read_keeps_the_derive() {
        let unread: [Item; 4] = [
            syn::parse_quote! {
                #[derive(serde::Deserialize)]
                pub struct A { #[serde(flatten)] pub extra: std::collections::BTreeMap<String, u8> }
            },
            syn::parse_quote! {
                #[derive(serde::Deserialize)]
                pub struct B { #[serde(default = "defaults::b_count")] pub count: u64 }
            },
            syn::parse_quote! {
                #[derive(serde::Deserialize)]
                #[serde(rename_all = "camelCase")]
                pub struct C { pub first_name: String }
            },
            syn::parse_quote! {
                #[derive(serde::Deserialize)]
                pub struct D(pub String);
            },
        ];
        for item in unread {
            let before = item.to_token_stream().to_string();
            assert_eq!(compacted(item), [before]);
        }
    }
}
