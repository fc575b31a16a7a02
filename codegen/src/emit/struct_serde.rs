//! typify's `#[derive(serde::Serialize, serde::Deserialize)]` on a struct of named fields,
//! written as one invocation of the runtime's `serde_struct!` instead.
//!
//! serde's `Deserialize` derive expands to ~19 KB of code for a struct of six fields, which the
//! user's crate type-checks and borrow-checks for every payload: on a contract of a thousand
//! messages, 1.0 GB of the 1.6 GB the compiler took to check the types, and three quarters of
//! their time; its `Serialize` derive, a call and a `?` per field, 230 MB and a third of what
//! was left. The runtime's macro reads and writes the same documents with the same errors (its
//! tests compare the two) and expands to the struct's own part only. A struct carrying any
//! serde attribute the macro does not read (`flatten`, `default = "path"`, a container
//! `default`, …), or a derive that might read serde's attributes (a settings' extra derive,
//! such as schemars' `JsonSchema`), keeps serde's derives.
//!
//! The struct's constructor ([`super::constructors`]) goes into the same invocation when it
//! fills each field from its argument or with its type's default (`new(…) unset(…)`): on a
//! large contract the constructors' `impl`s were a sixth of the file.

use proc_macro2::TokenStream;
use quote::quote;
use syn::ext::IdentExt;
use syn::punctuated::Punctuated;
use syn::{Attribute, Item, ItemStruct, Meta, Token};

use super::constructors::Constructor;

/// `items` of the `types` module with each struct of named fields given its constructor after
/// it ([`super::constructors`]), and each the macro can stand for its `serde_struct!` after
/// that, serde's derives and attributes taken off it. The invocation makes the constructor
/// too when it fills each field from its argument or with its type's default.
pub(super) fn compact(items: Vec<Item>) -> Vec<Item> {
    let unset = super::constructors::unset();
    let mut out = Vec::with_capacity(items.len() * 2);
    for mut item in items {
        let Item::Struct(structure) = &mut item else {
            out.push(item);
            continue;
        };
        // Read before the serde attributes it reads from come off.
        let constructor = Constructor::of(structure);
        let mut invocation = invocation(structure);
        out.push(item);
        let entry = (invocation.as_ref())
            .and(constructor.as_ref())
            .and_then(Constructor::macro_entry);
        match (entry, &mut invocation) {
            (Some(entry), Some(invocation)) => invocation.mac.tokens.extend(entry),
            // What the struct is, how it is made, then how it is read and written.
            _ => out.extend(constructor.map(|constructor| constructor.into_impl(&unset))),
        }
        out.extend(invocation.map(Item::Macro));
    }
    out
}

/// The invocation for `item`, with serde's derives and attributes taken off it; `None`, and
/// `item` untouched, when the macro cannot stand for the derives.
fn invocation(item: &mut ItemStruct) -> Option<syn::ItemMacro> {
    let syn::Fields::Named(fields) = &mut item.fields else {
        return None;
    };
    if !item.generics.params.is_empty() || !derives_serde_alone(&item.attrs) {
        return None;
    }
    let deny = container_deny_unknown(&item.attrs)?;
    let entries = fields
        .named
        .iter()
        .map(entry)
        .collect::<Option<Vec<TokenStream>>>()?;
    // The attributes are the derives' helpers: with the derives gone, they would name nothing.
    for field in &mut fields.named {
        field.attrs.retain(|attr| !attr.path().is_ident("serde"));
    }
    remove_serde(&mut item.attrs);
    let name = &item.ident;
    let deny = deny.then(|| quote! { deny_unknown_fields });
    Some(syn::parse_quote! {
        serde_struct! { #name #deny { #( #entries ),* } }
    })
}

/// Whether the derives of `attrs` are serde's `Serialize` and `Deserialize`, and besides them
/// only std's, which read no serde attribute: another derive (an extra one of the settings)
/// may read them, and they go with serde's derives.
fn derives_serde_alone(attrs: &[Attribute]) -> bool {
    let (mut serialize, mut deserialize) = (false, false);
    for path in attrs.iter().filter_map(derive_paths).flatten() {
        match serde_trait(&path) {
            Some("Serialize") => serialize = true,
            Some("Deserialize") => deserialize = true,
            _ if is_std_derive(&path) => {}
            _ => return false,
        }
    }
    serialize && deserialize
}

/// Whether `path` names one of std's derives, which read no serde attribute.
fn is_std_derive(path: &syn::Path) -> bool {
    const STD: &[&str] = &[
        "Clone",
        "Copy",
        "Debug",
        "Default",
        "PartialEq",
        "Eq",
        "PartialOrd",
        "Ord",
        "Hash",
    ];
    let names: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    match names.as_slice() {
        [name] => STD.contains(&name.as_str()),
        [krate, _, name] if krate == "std" || krate == "core" => STD.contains(&name.as_str()),
        _ => false,
    }
}

fn derive_paths(attr: &Attribute) -> Option<Punctuated<syn::Path, Token![,]>> {
    if !attr.path().is_ident("derive") {
        return None;
    }
    attr.parse_args_with(Punctuated::parse_terminated).ok()
}

/// `Serialize` or `Deserialize` when `path` names that trait of serde's.
fn serde_trait(path: &syn::Path) -> Option<&'static str> {
    if path.segments.first().is_none_or(|s| s.ident != "serde") {
        return None;
    }
    let last = &path.segments.last()?.ident;
    ["Serialize", "Deserialize"]
        .into_iter()
        .find(|name| last == name)
}

/// `attrs` without serde's derives (a derive left empty goes) and without its attributes.
fn remove_serde(attrs: &mut Vec<Attribute>) {
    attrs.retain_mut(|attr| {
        if attr.path().is_ident("serde") {
            return false;
        }
        let Some(paths) = derive_paths(attr) else {
            return true;
        };
        let kept: Vec<syn::Path> = paths
            .into_iter()
            .filter(|p| serde_trait(p).is_none())
            .collect();
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

/// A field's entry: `name`, `: default` when a missing one takes its type's default (serde's
/// `default`, or an `Option`, which serde reads as `None` when missing: the same value, without
/// the macro asking the type), `= "serialized"` when its serialized name differs, `if path`
/// when it is not written where `path(&field)` holds, or the macro's shorthands for the two
/// typify writes on most optional fields (`: skip_none`, `: skip_empty`); `None` for a field
/// the macro cannot read.
fn entry(field: &syn::Field) -> Option<TokenStream> {
    let ident = field.ident.as_ref()?;
    let mut serialized = ident.unraw().to_string();
    let mut default = is_option(&field.ty);
    let mut skip = None;
    for meta in serde_metas(&field.attrs)? {
        match &meta {
            Meta::Path(path) if path.is_ident("default") => default = true,
            Meta::NameValue(value) if value.path.is_ident("rename") => {
                serialized = string_value(value)?.value();
            }
            Meta::NameValue(value) if value.path.is_ident("skip_serializing_if") => {
                skip = Some(string_value(value)?.value());
            }
            _ => return None,
        }
    }
    let (flag, skip) = match (default, skip.as_deref()) {
        (true, Some("::std::option::Option::is_none")) => (Some(quote! { : skip_none }), None),
        (true, Some("::std::vec::Vec::is_empty")) => (Some(quote! { : skip_empty }), None),
        (default, None) => (default.then(|| quote! { : default }), None),
        // Not what typify writes: parsed, for the few fields that have one.
        (default, Some(path)) => {
            let path: syn::Path = syn::parse_str(path).ok()?;
            (
                default.then(|| quote! { : default }),
                Some(quote! { if #path }),
            )
        }
    };
    // Named in full unless the field's name is its serialized name: a raw one (`r#type`) is
    // always named, as the macro would write it `"r#type"`.
    let renamed = (*ident != serialized).then(|| quote! { = #serialized });
    Some(quote! { #ident #flag #renamed #skip })
}

/// The string an attribute's `name = "value"` gives; `None` for a value of another kind.
fn string_value(meta: &syn::MetaNameValue) -> Option<&syn::LitStr> {
    match &meta.value {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(text),
            ..
        }) => Some(text),
        _ => None,
    }
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

    use super::invocation;

    /// The struct `item` and the invocation made of it (serde's derives and attributes taken
    /// off the struct when there is one), as text.
    fn compacted(item: Item) -> Vec<String> {
        let Item::Struct(mut structure) = item else {
            panic!("a struct");
        };
        let invocation = invocation(&mut structure).map(|i| i.to_token_stream());
        (std::iter::once(structure.to_token_stream()).chain(invocation))
            .map(|tokens| tokens.to_string())
            .collect()
    }

    #[test]
    fn a_struct_of_known_attributes_is_read_and_written_through_the_macro() {
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
                #[serde(default, skip_serializing_if = "crate::tags::none")]
                pub tags: Tags,
            }
        });
        assert_eq!(items.len(), 2, "{items:?}");
        assert_eq!(
            items[0],
            "# [derive (Clone)] pub struct Order { pub id : String , pub r#type : Option < String > , \
             pub lines : Vec < u32 > , pub note : :: std :: option :: Option < String > , \
             pub tags : Tags , }"
        );
        assert_eq!(
            items[1],
            "serde_struct ! { Order deny_unknown_fields { \
             id , r#type : default = \"type\" , lines : skip_empty , \
             note : skip_none = \"order-note\" , tags : default if crate :: tags :: none } }"
        );
    }

    #[test]
    fn a_struct_with_an_attribute_the_macro_does_not_read_keeps_the_derive() {
        let unread: [Item; 6] = [
            syn::parse_quote! {
                #[derive(serde::Deserialize, serde::Serialize)]
                pub struct A { #[serde(flatten)] pub extra: std::collections::BTreeMap<String, u8> }
            },
            syn::parse_quote! {
                #[derive(serde::Deserialize, serde::Serialize)]
                pub struct B { #[serde(default = "defaults::b_count")] pub count: u64 }
            },
            syn::parse_quote! {
                #[derive(serde::Deserialize, serde::Serialize)]
                #[serde(rename_all = "camelCase")]
                pub struct C { pub first_name: String }
            },
            syn::parse_quote! {
                #[derive(serde::Deserialize, serde::Serialize)]
                pub struct D(pub String);
            },
            syn::parse_quote! {
                #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
                pub struct E { #[serde(rename = "e")] pub value: u8 }
            },
            syn::parse_quote! {
                #[derive(serde::Deserialize, serde::Serialize)]
                pub struct F { #[serde(serialize_with = "f::write")] pub value: u8 }
            },
        ];
        for item in unread {
            let before = item.to_token_stream().to_string();
            assert_eq!(compacted(item), [before]);
        }
    }
}
