//! The doc comments of typify's payload and headers types, rewritten to say where each type
//! came from.
//!
//! typify documents a type by its schema's `description`, or else by its own name in
//! backticks (`` /// `AddressLine1` ``), and its modules by generic lines ("Error types.");
//! its doc strings also keep whatever characters the schema held. Here every generated type
//! gets its schema's `title` (when it says more than the name) and `description` as written,
//! then where it was read: a definition names its schema file and JSON pointer and the
//! messages it carries, a type typify made for part of one names the field it types.
//! Field and variant docs (property descriptions) are kept, made [safe](super::docs::doc);
//! a field without one names its JSON property and schema file, a variant its JSON value, a
//! builder the type it builds and a setter the property it sets, so every public item typify
//! writes is documented (the `types` module does not allow `missing_docs`).

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{Attribute, Expr, ExprLit, Fields, Item, Lit, Meta};

use super::GenerateError;
use super::docs::{code, compose_attrs, doc_attrs};
use crate::contract::Contract;

/// The items of typify's `stream` with their doc comments rewritten. Parsed once, here, and
/// handed to the printer as syntax ([`fill`]): the types are most of a large contract's code,
/// and parsing them twice cost a fifth of generating it.
pub(super) fn rewrite(
    stream: TokenStream,
    contract: &Contract,
) -> Result<Vec<Item>, GenerateError> {
    let mut file = syn::parse2::<syn::File>(stream)
        .map_err(|e| GenerateError::Internal(format!("typify's code does not parse ({e})")))?;
    let users = users(&file.items);
    // Which messages carry each type, gathered once rather than asked per type.
    let mut carried: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for message in contract.messages.values() {
        let marker = super::ident(&message.name, crate::naming::Role::Message);
        let types = [
            Some(("payload", &message.payload)),
            message.headers.as_ref().map(|h| ("headers", h)),
        ];
        for (what, schema) in types.into_iter().flatten() {
            carried
                .entry(schema.type_name.as_str())
                .or_default()
                .push(format!(
                    "the {what} of message {} ([`messages::{marker}`])",
                    code(&message.name)
                ));
        }
    }
    // Only a builder's setters are documented by their property (settings' `builders`).
    let has_builders =
        (file.items.iter()).any(|item| matches!(item, Item::Mod(m) if m.ident == "builder"));
    let properties = match has_builders {
        true => properties(&file.items),
        false => BTreeMap::new(),
    };
    // A generated type's doc: its schema's words, then where it came from and who carries it.
    let type_docs = |name: &str, attrs: &mut Vec<Attribute>| {
        let docs = type_doc(contract, &users, &carried, name, attrs);
        replace_docs(attrs, docs);
    };
    for item in &mut file.items {
        match item {
            Item::Struct(item) => {
                let name = item.ident.to_string();
                type_docs(&name, &mut item.attrs);
                let place = property_place(contract, &name);
                fields_docs(&mut item.fields, &place);
            }
            Item::Enum(item) => {
                let name = item.ident.to_string();
                type_docs(&name, &mut item.attrs);
                let tagging = Tagging::of(&item.attrs);
                for variant in &mut item.variants {
                    let value =
                        serde_rename(&variant.attrs).unwrap_or_else(|| variant.ident.to_string());
                    let own = doc_text(&variant.attrs);
                    let docs = if own.trim().is_empty() {
                        compose_attrs(
                            &variant_origin(&tagging, &name, &value, &variant.fields),
                            None,
                            "",
                        )
                    } else {
                        doc_attrs(&own)
                    };
                    replace_docs(&mut variant.attrs, docs);
                    let place = format!("variant {}", code(&value));
                    fields_docs(&mut variant.fields, &place);
                }
            }
            Item::Type(item) => type_docs(&item.ident.to_string(), &mut item.attrs),
            Item::Impl(item) if item.trait_.is_none() => {
                let owner = item.self_ty.to_token_stream().to_string();
                methods_docs(item, |method| match method {
                    "builder" => Ok(format!(
                        "A [`builder::{owner}`] of this type, every field unset (or at its \
                         default): set them, then convert it with `try_into()`."
                    )),
                    _ => Ok(format!("A method typify generated for [`{owner}`].")),
                })?;
            }
            Item::Mod(item) => {
                let module = item.ident.to_string();
                if let Some(text) = module_doc(&module) {
                    replace_docs(&mut item.attrs, compose_attrs(text, None, ""));
                }
                if let Some((_, content)) = &mut item.content {
                    module_items_docs(&module, content, &properties)?;
                }
            }
            _ => {}
        }
    }
    Ok(file.items)
}

/// The docs of the items of typify's module `module`: a builder and its setters say which
/// type and which JSON property they build, a default function which default it gives.
fn module_items_docs(
    module: &str,
    items: &mut [Item],
    properties: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<(), GenerateError> {
    for item in items {
        match (module, item) {
            ("builder", Item::Struct(item)) => {
                let text = format!(
                    "Builder of [`super::{}`]: start from `default()`, set the fields, then \
                     convert it with `try_into()`.",
                    item.ident
                );
                replace_docs(&mut item.attrs, compose_attrs(&text, None, ""));
            }
            ("builder", Item::Impl(item)) if item.trait_.is_none() => {
                let owner = item.self_ty.to_token_stream().to_string();
                let fields = properties.get(&owner);
                methods_docs(item, |field| {
                    let json = fields.and_then(|f| f.get(field)).ok_or_else(|| {
                        GenerateError::Internal(format!(
                            "builder `{owner}` sets `{field}`, which type `{owner}` does not have"
                        ))
                    })?;
                    Ok(format!(
                        "Sets field `{field}` (JSON property {}).",
                        code(json)
                    ))
                })?;
            }
            ("defaults", Item::Fn(item)) => {
                // The field it serves names it in its `#[serde(default = "defaults::…")]`.
                let text = "A default value a schema gives a field, for serde's `default`.";
                replace_docs(&mut item.attrs, compose_attrs(text, None, ""));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Documents each method of `item` that has no doc by `text(its name)`.
fn methods_docs(
    item: &mut syn::ItemImpl,
    text: impl Fn(&str) -> Result<String, GenerateError>,
) -> Result<(), GenerateError> {
    for member in &mut item.items {
        let syn::ImplItem::Fn(method) = member else {
            continue;
        };
        if doc_text(&method.attrs).trim().is_empty() {
            let name = method.sig.ident.to_string();
            let name = name.trim_start_matches("r#");
            replace_docs(&mut method.attrs, compose_attrs(&text(name)?, None, ""));
        }
    }
    Ok(())
}

/// How serde writes an enum's variants: typify's `#[serde(tag = "…")]` and
/// `#[serde(untagged)]`, or else externally tagged.
enum Tagging {
    External,
    Internal(String),
    Untagged,
}

impl Tagging {
    fn of(attrs: &[Attribute]) -> Self {
        let mut tagging = Self::External;
        for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
            let _ = attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("untagged") {
                    tagging = Self::Untagged;
                } else if meta.path.is_ident("tag") {
                    let value: syn::LitStr = meta.value()?.parse()?;
                    tagging = Self::Internal(value.value());
                } else if let Ok(value) = meta.value() {
                    let _: Expr = value.parse()?;
                }
                Ok(())
            });
        }
        tagging
    }
}

/// The doc of a variant without a description of its own: its JSON value, or the shape of
/// JSON it stands for.
fn variant_origin(tagging: &Tagging, owner: &str, value: &str, fields: &Fields) -> String {
    let json = serde_json::Value::String(value.to_owned()).to_string();
    match (tagging, fields) {
        (Tagging::Untagged, _) => format!("One of the shapes a [`{owner}`] may take."),
        (Tagging::Internal(tag), _) => format!(
            "A [`{owner}`] whose JSON property {} is {}.",
            code(tag),
            code(&json)
        ),
        (Tagging::External, Fields::Unit) => format!("The JSON value {}.", code(&json)),
        (Tagging::External, _) => format!(
            "A [`{owner}`] written as a JSON object of the one property {}.",
            code(&json)
        ),
    }
}

/// Which schema the fields of the generated type `name` are properties of: a definition's
/// file (and pointer), or else the type's own schema.
fn property_place(contract: &Contract, name: &str) -> String {
    match contract.schemas.sources.get(name) {
        Some(source) => code(source),
        None => format!("the schema of [`{name}`]"),
    }
}

/// For each generated struct, its fields (as Rust names them) with their JSON property
/// names: what a builder's setter sets.
fn properties(items: &[Item]) -> BTreeMap<String, BTreeMap<String, String>> {
    items
        .iter()
        .filter_map(|item| match item {
            Item::Struct(item) => Some((
                item.ident.to_string(),
                item.fields
                    .iter()
                    .filter_map(|field| field.ident.as_ref().map(|ident| (ident, field)))
                    .map(|(ident, field)| {
                        let rust = ident.to_string().trim_start_matches("r#").to_owned();
                        let json = serde_rename(&field.attrs).unwrap_or_else(|| rust.clone());
                        (rust, json)
                    })
                    .collect(),
            )),
            _ => None,
        })
        .collect()
}

/// The file of `shell`, an empty module, with `items` as the module's content.
pub(super) fn fill(shell: TokenStream, items: Vec<Item>) -> Result<syn::File, GenerateError> {
    let mut file = syn::parse2::<syn::File>(shell)
        .map_err(|e| GenerateError::Internal(format!("the types module does not parse ({e})")))?;
    match file.items.as_mut_slice() {
        [Item::Mod(module)] => {
            module.content = Some((syn::token::Brace::default(), items));
            Ok(file)
        }
        _ => Err(GenerateError::Internal(
            "the types module is not one module".to_owned(),
        )),
    }
}

/// Better lines for typify's modules than its own ("Error types.").
fn module_doc(name: &str) -> Option<&'static str> {
    match name {
        "error" => Some(
            "The error of the `TryFrom` and `FromStr` conversions of types with constraints \
             (a pattern, a length, an enumeration): which constraint the value broke.",
        ),
        "builder" => Some(
            "Builders of the struct types, one each of the same name: start from `default()`, \
             set the fields, then convert with `try_into()`, which says which required field is \
             missing or which value is invalid.",
        ),
        "defaults" => Some("The default values the schemas give, for serde."),
        _ => None,
    }
}

/// The doc of the generated type `name`: its schema's own words, then where it came from.
fn type_doc(
    contract: &Contract,
    users: &BTreeMap<String, (String, String)>,
    carried: &BTreeMap<&str, Vec<String>>,
    name: &str,
    attrs: &[Attribute],
) -> Vec<Attribute> {
    let schemas = &contract.schemas;
    let Some(body) = schemas.definitions.get(name) else {
        // A type typify made for part of a schema: its description, if typify found one, and
        // the field it types.
        let own = doc_text(attrs);
        let own = (own.trim() != format!("`{name}`")).then_some(own);
        let origin = users.get(name).map_or_else(String::new, |(owner, field)| {
            format!("The type of field {} of [`{owner}`].", code(field))
        });
        return compose_attrs("", own.as_deref(), &origin);
    };
    let text = |key: &str| body.get(key).and_then(|v| v.as_str()).map(str::trim);
    // A file's root is named by its title, so a title is often the name itself.
    let names_it = |title: &str| {
        crate::naming::ident(title, crate::naming::Case::Type).is_ok_and(|id| id.text == name)
    };
    let own: Vec<&str> = [text("title").filter(|t| !names_it(t)), text("description")]
        .into_iter()
        .flatten()
        .filter(|t| !t.is_empty())
        .collect();
    let mut origin = match schemas.sources.get(name) {
        Some(source) => format!("From the JSON Schema at {}.", code(source)),
        None => String::new(),
    };
    let mut carries = carried.get(name).cloned().unwrap_or_default();
    if let Some(first) = carries.first_mut() {
        // Each starts with "the", lower case: the first begins a sentence.
        first[..1].make_ascii_uppercase();
        origin.push_str(&format!(" {}.", carries.join("; ")));
    }
    compose_attrs("", Some(&own.join("\n\n")), &origin)
}

/// For each generated type used by a field of another, the first such type and field (by
/// its name in JSON): how a type typify made for part of a schema is found again.
fn users(items: &[Item]) -> BTreeMap<String, (String, String)> {
    let names: BTreeSet<String> = items
        .iter()
        .filter_map(|item| match item {
            Item::Struct(item) => Some(item.ident.to_string()),
            Item::Enum(item) => Some(item.ident.to_string()),
            Item::Type(item) => Some(item.ident.to_string()),
            _ => None,
        })
        .collect();
    let mut users = BTreeMap::new();
    for item in items {
        let Item::Struct(item) = item else { continue };
        let owner = item.ident.to_string();
        for field in &item.fields {
            let Some(ident) = &field.ident else { continue };
            let json = serde_rename(&field.attrs)
                .unwrap_or_else(|| ident.to_string().trim_start_matches("r#").to_owned());
            for tree in flatten(field.ty.to_token_stream()) {
                let used = tree.to_string();
                if used != owner && names.contains(&used) && !users.contains_key(&used) {
                    users.insert(used, (owner.clone(), json.clone()));
                }
            }
        }
    }
    users
}

/// Every identifier of `tokens`, groups opened.
fn flatten(tokens: TokenStream) -> Vec<proc_macro2::Ident> {
    let mut out = Vec::new();
    for tree in tokens {
        match tree {
            proc_macro2::TokenTree::Ident(ident) => out.push(ident),
            proc_macro2::TokenTree::Group(group) => out.extend(flatten(group.stream())),
            _ => {}
        }
    }
    out
}

/// The name of a field in JSON when serde renames it: `#[serde(rename = "…")]`.
fn serde_rename(attrs: &[Attribute]) -> Option<String> {
    let mut renamed = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        // Other serde arguments (`default`, `skip_serializing_if = …`) are skipped whole.
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename") {
                let value: syn::LitStr = meta.value()?.parse()?;
                renamed = Some(value.value());
            } else if let Ok(value) = meta.value() {
                let _: Expr = value.parse()?;
            }
            Ok(())
        });
    }
    renamed
}

/// The field docs of `fields`, made safe; a named field without one whose JSON property has
/// another name says which property of `place` it is. A field named as its property gets no
/// doc of its own: its type's doc says which schema it is from, and a line per field saying
/// so again was a sixth of a large contract's generated file.
fn fields_docs(fields: &mut Fields, place: &str) {
    for field in fields.iter_mut() {
        let own = doc_text(&field.attrs);
        let docs = match &field.ident {
            Some(ident) if own.trim().is_empty() => {
                let rust = ident.to_string().trim_start_matches("r#").to_owned();
                match serde_rename(&field.attrs).filter(|json| *json != rust) {
                    Some(json) => compose_attrs(
                        &format!("JSON property {} of {place}.", code(&json)),
                        None,
                        "",
                    ),
                    None => Vec::new(),
                }
            }
            _ => doc_attrs(&own),
        };
        replace_docs(&mut field.attrs, docs);
    }
}

/// The text of the doc attributes of `attrs`, one per line.
fn doc_text(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter_map(|attr| match &attr.meta {
            Meta::NameValue(nv) if nv.path.is_ident("doc") => match &nv.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Str(text),
                    ..
                }) => Some(text.value()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let lines: Vec<&str> = lines
        .iter()
        .map(|line| line.strip_prefix(' ').unwrap_or(line))
        .collect();
    lines.join("\n")
}

/// Replaces the doc attributes of `attrs` by `docs`, before the others.
fn replace_docs(attrs: &mut Vec<Attribute>, mut docs: Vec<Attribute>) {
    // Only `#[doc = "…"]` lines: a `#[doc(alias = …)]` or `#[doc(hidden)]` a user asked
    // for in the generator settings stays.
    attrs.retain(|attr| !matches!(&attr.meta, Meta::NameValue(nv) if nv.path.is_ident("doc")));
    docs.append(attrs);
    *attrs = docs;
}

#[cfg(test)]
mod tests {
    use quote::quote;
    use syn::parse::Parser;

    use super::{doc_text, replace_docs, serde_rename};

    #[test]
    fn docs_are_replaced_and_other_attributes_kept() {
        let mut attrs = syn::Attribute::parse_outer
            .parse2(quote! { #[doc = "old"] #[serde(default)] #[doc(alias = "kept")] })
            .expect("attributes");
        replace_docs(&mut attrs, crate::emit::docs::doc_attrs("new"));
        assert_eq!(doc_text(&attrs), "new");
        assert_eq!(attrs.len(), 3);
    }

    #[test]
    fn reads_docs_and_serde_renames() {
        let attrs = syn::Attribute::parse_outer
            .parse2(quote! {
                #[doc = "first"]
                #[doc = " second"]
                #[serde(default, skip_serializing_if = "x", rename = "quote\"d")]
            })
            .expect("attributes");
        assert_eq!(doc_text(&attrs), "first\nsecond");
        assert_eq!(serde_rename(&attrs).as_deref(), Some("quote\"d"));
    }
}
