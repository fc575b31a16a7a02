//! Payload and headers types, through typify.

use std::panic::{AssertUnwindSafe, catch_unwind};

use proc_macro2::{Delimiter, Group, Ident, Punct, Spacing, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote};
use typify::{TypeSpace, TypeSpaceSettings};

use super::{GenerateError, type_ident};
use crate::contract::Contract;
use crate::settings::TypeOptions;

/// Crates typify's output names that the runtime re-exports under `codegen`.
const REROUTED_CRATES: &[&str] = &["chrono", "regress", "serde", "serde_json", "uuid"];

/// The bundled definitions as typify reads them.
fn definitions(
    contract: &Contract,
) -> Result<Vec<(String, schemars::schema::Schema)>, GenerateError> {
    let mut definitions = Vec::new();
    for (name, body) in &contract.schemas.definitions {
        // Read from the value in place, not from a copy of it.
        let schema = <schemars::schema::Schema as serde::Deserialize>::deserialize(body)
            .map_err(|e| GenerateError::Types(format!("definition `{name}`: {e}")))?;
        definitions.push((name.clone(), schema));
    }
    Ok(definitions)
}

/// The names of the types typify makes from the contract's definitions: the definitions'
/// own and those it makes for their parts (`MoneyCurrency` for field `currency` of `Money`).
/// Empty when typify fails, which generation then reports.
pub(crate) fn type_names(contract: &Contract) -> std::collections::BTreeSet<String> {
    let Ok(definitions) = definitions(contract) else {
        return Default::default();
    };
    catch_unwind(AssertUnwindSafe(|| {
        let mut space = TypeSpace::new(&TypeSpaceSettings::default());
        if space.add_ref_types(definitions).is_err() {
            return Default::default();
        }
        space
            .iter_types()
            .filter(|t| {
                matches!(
                    t.details(),
                    typify::TypeDetails::Struct(_)
                        | typify::TypeDetails::Enum(_)
                        | typify::TypeDetails::Newtype(_)
                )
            })
            .map(|t| t.name())
            .collect()
    }))
    .unwrap_or_default()
}

/// typify alone on `contract`'s bundled definitions, with the settings [`emit`] gives it:
/// the type space built, then its tokens as text, unformatted, or `formatted` by
/// `prettyplease` as typify's own documentation prints a file. What warren-bench measures
/// the generator against (`warren_codegen::Checked::__typify_alone`).
pub(crate) fn typify_alone(
    contract: &Contract,
    options: &TypeOptions,
    formatted: bool,
) -> Result<String, GenerateError> {
    let definitions = definitions(contract)?;
    let mut space = TypeSpace::new(&type_space_settings(options));
    space
        .add_ref_types(definitions)
        .map_err(|error| GenerateError::Types(error.to_string()))?;
    if !formatted {
        return Ok(space.to_stream().to_string());
    }
    let file = syn::parse2(space.to_stream())
        .map_err(|e| GenerateError::Internal(format!("typify's code does not parse ({e})")))?;
    Ok(prettyplease::unparse(&file))
}

/// The settings the generator gives typify: `PartialEq` and `BTreeMap` always, then the
/// user's derives, attributes, builders and replacements.
fn type_space_settings(options: &TypeOptions) -> TypeSpaceSettings {
    let mut settings = TypeSpaceSettings::default();
    settings
        .with_derive("PartialEq".to_owned())
        .with_map_type("::std::collections::BTreeMap")
        .with_struct_builder(options.builders);
    // Each was parsed by `Settings::resolve`: typify unwraps its own parse of them.
    for derive in &options.derives {
        settings.with_derive(derive.clone());
    }
    for attribute in &options.attributes {
        settings.with_attr(attribute.clone());
    }
    for (name, rust_type) in &options.replacements {
        settings.with_replacement(name, rust_type.to_token_stream(), std::iter::empty());
    }
    settings
}

/// `pub mod types { … }` with every bundled definition.
pub(super) fn emit(contract: &Contract, options: &TypeOptions) -> Result<syn::File, GenerateError> {
    let definitions = definitions(contract)?;
    let settings = type_space_settings(options);
    // typify panics on some inputs instead of returning errors; the front end rejects what
    // is known to do that, and this turns anything left into an error, not a crashed build.
    let generated = catch_unwind(AssertUnwindSafe(|| {
        let mut space = TypeSpace::new(&settings);
        space.add_ref_types(definitions).map(|()| space.to_stream())
    }));
    let stream = match generated {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => return Err(GenerateError::Types(error.to_string())),
        Err(panic) => {
            let reason = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "typify panicked".to_owned());
            return Err(GenerateError::Types(reason));
        }
    };
    // typify writes nothing for a replaced type; the alias keeps `types::Money` a name for
    // it, so messages, publishers and the user's code name it the same either way.
    let aliases = options.replacements.iter().map(|(name, rust_type)| {
        let alias = type_ident(name);
        let docs = super::docs::doc(&format!(
            "The contract's {}, replaced by {} (generator settings).",
            super::docs::code(name),
            super::docs::code(&rust_type.to_token_stream().to_string().replace(' ', ""))
        ));
        quote! { #docs pub type #alias = #rust_type; }
    });
    let items = super::type_docs::rewrite(reroute(quote! { #stream #( #aliases )* }), contract)?;
    let items = super::builders::compact(items);
    let items = super::string_enums::compact(shared_error(items));
    // A builder module names each type's builder after it: its types are left as they are.
    let items = match options.builders {
        true => items,
        false => super::shared_types::share(items, contract),
    };
    // After sharing: a type made an alias needs no constructor, no invocation and no tidying,
    // and two of every three of a large contract's types can be (a constructor's serde
    // attributes read and its skeleton parsed, a constrained string's impls compared as text,
    // a struct's serde attributes read). Sharing compares typify's items as it would what these make of them: each is
    // made of the items alone.
    // Each struct's constructor and its `serde_struct!` together: the constructor reads which
    // fields are optional from serde's attributes, which the invocation takes off the struct.
    let mut items = super::struct_serde::compact(super::string_newtypes::compact(items));
    items.iter_mut().for_each(tidy_attributes);
    items.insert(0, crates_in_scope());
    // The markers the payload and headers types' docs link to (`[`messages::Order`]`).
    if !contract.messages.is_empty() {
        items.insert(1, syn::parse_quote! { use super::messages; });
    }
    // typify's output is not written for every lint a user's crate may enable (it unwraps
    // its pattern regexes, for one), hence the allows on this module only. A field named as
    // its JSON property has no doc (`type_docs::fields_docs`), hence `missing_docs`.
    let allow_markdown = super::docs::allow_contract_markdown();
    let shell = quote! {
        /// Payload and headers types, generated by typify from the contract's JSON Schemas.
        ///
        /// Each struct of named fields has a `new` taking its required properties, in field
        /// order, and leaving every optional one unset (`None`, empty, or its schema's
        /// default), to be set on the value: unlike a struct literal, which names every field,
        /// it keeps compiling when a schema gains an optional property.
        #allow_markdown
        #[allow(
            clippy::all,
            clippy::pedantic,
            clippy::restriction,
            dead_code,
            missing_docs,
            unreachable_pub,
            unused_imports
        )]
        pub mod types {}
    };
    super::type_docs::fill(shell, items)
}

/// `item`'s attributes as they read best, a line each: consecutive `#[serde(…)]` as one
/// (`#[serde(crate = "…", deny_unknown_fields)]`, not a line for the crate [`reroute`] names
/// and another for what typify wrote), and a derive list too long for a line as two, serde's
/// derives and the others (prettyplease would write it a trait a line).
fn tidy_attributes(item: &mut syn::Item) {
    let attrs = match item {
        syn::Item::Struct(item) => &mut item.attrs,
        syn::Item::Enum(item) => &mut item.attrs,
        _ => return,
    };
    let mut tidy: Vec<syn::Attribute> = Vec::with_capacity(attrs.len() + 1);
    for attr in attrs.drain(..) {
        if let (Some(syn::Meta::List(last)), syn::Meta::List(list)) =
            (tidy.last_mut().map(|last| &mut last.meta), &attr.meta)
            && last.path.is_ident("serde")
            && list.path.is_ident("serde")
        {
            let tokens = &list.tokens;
            last.tokens.extend(quote! { , #tokens });
        } else if let Some((serde_derives, others)) = split_derives(&attr) {
            tidy.push(syn::parse_quote! { #[derive(#( #serde_derives ),*)] });
            tidy.push(syn::parse_quote! { #[derive(#( #others ),*)] });
        } else {
            tidy.push(attr);
        }
    }
    *attrs = tidy;
}

/// The widest line prettyplease writes (its margin) less a `types` item's indentation: a
/// derive list wider than this is written a trait a line.
const DERIVE_LINE: usize = 89 - 4;

/// `attr`'s serde derives and its other derives, when it is a derive list naming both that
/// would not fit a line.
fn split_derives(attr: &syn::Attribute) -> Option<(Vec<syn::Path>, Vec<syn::Path>)> {
    if !attr.path().is_ident("derive") {
        return None;
    }
    let paths = attr
        .parse_args_with(syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated)
        .ok()?;
    // `#[derive(` … `)]`, the paths parted by `, `.
    let width = "#[derive()]".len() - ", ".len()
        + paths
            .iter()
            .map(|path| path.to_token_stream().to_string().replace(' ', "").len() + ", ".len())
            .sum::<usize>();
    let (serde_derives, others): (Vec<syn::Path>, Vec<syn::Path>) = paths
        .into_iter()
        .partition(|path| path.segments.first().is_some_and(|s| s.ident == "serde"));
    (width > DERIVE_LINE && !serde_derives.is_empty() && !others.is_empty())
        .then_some((serde_derives, others))
}

/// `items` with typify's `error` module, the same `ConversionError` in every file, a `pub use`
/// of the runtime's copy of it when it is what typify writes (else as it is).
fn shared_error(mut items: Vec<syn::Item>) -> Vec<syn::Item> {
    let expected = super::invocations::shapes(quote! {
        pub struct ConversionError(::std::borrow::Cow<'static, str>);
        impl ::std::error::Error for ConversionError {}
        impl ::std::fmt::Display for ConversionError {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> Result<(), ::std::fmt::Error> {
                ::std::fmt::Display::fmt(&self.0, f)
            }
        }
        impl ::std::fmt::Debug for ConversionError {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> Result<(), ::std::fmt::Error> {
                ::std::fmt::Debug::fmt(&self.0, f)
            }
        }
        impl From<&'static str> for ConversionError {
            fn from(value: &'static str) -> Self {
                Self(value.into())
            }
        }
        impl From<String> for ConversionError {
            fn from(value: String) -> Self {
                Self(value.into())
            }
        }
    });
    for item in &mut items {
        if let syn::Item::Mod(module) = item
            && module.ident == "error"
            && let Some((_, content)) = &mut module.content
        {
            let written: Vec<String> = content.iter().map(without_docs).collect();
            if written == expected {
                *content = vec![syn::parse_quote! {
                    pub use ::warren_runtime::codegen::ConversionError;
                }];
            }
        }
    }
    items
}

/// The [`shape`](super::invocations::shape) of `item` without its doc attributes.
fn without_docs(item: &syn::Item) -> String {
    let mut item = item.clone();
    if let syn::Item::Struct(item) = &mut item {
        item.attrs.retain(|attr| !attr.path().is_ident("doc"));
    }
    super::invocations::shape(&item)
}

/// Points typify's `::serde::…`, `::uuid::…` (and the other crates it names) at the
/// runtime's re-exports, and tells serde's derives where serde is, so the generated code
/// needs no dependency but `warren-runtime`. In the `types` module itself a path is
/// `uuid::…`, the `use` of the runtime's re-export that heads the module
/// ([`crates_in_scope`]): a derive list then fits a line instead of taking one per trait,
/// and a field's type is written without `::warren_runtime::codegen::` before each crate.
/// In a module typify nests in it (`builder`, `defaults`) a path is the re-export's whole.
fn reroute(stream: TokenStream) -> TokenStream {
    let mut out = Vec::new();
    reroute_into(stream, &mut out, false);
    out.into_iter().collect()
}

/// The `use` that puts the runtime's re-exports of the crates typify names in scope of the
/// `types` module, for its derives and its types, and the runtime's macros its invocations
/// name. No type is named after one of them: type names are upper camel case, and typify
/// nests no module of those names (and a macro's name is apart from a type's).
fn crates_in_scope() -> syn::Item {
    let mut names: Vec<&str> = REROUTED_CRATES
        .iter()
        .chain(TYPES_MACROS)
        .copied()
        .collect();
    names.sort_unstable();
    let names = names.iter().map(|name| Ident::new(name, Span::call_site()));
    syn::parse_quote! { use ::warren_runtime::codegen::{ #( #names ),* }; }
}

/// The runtime's macros invoked in the `types` module itself, named there by the `use` of
/// [`crates_in_scope`]; a module typify nests (`builder`) names them in full.
const TYPES_MACROS: &[&str] = &["serde_struct", "string_enum", "string_newtype"];

/// [`reroute`] of `stream`, its trees pushed onto `out`; `nested` in a module typify nests
/// in `types`, where [`crates_in_scope`] does not name the crates. Every tree is moved, not
/// copied, and each stream built once: typify's output is a large share of a contract's code.
fn reroute_into(stream: TokenStream, out: &mut Vec<TokenTree>, nested: bool) {
    let mut trees = stream.into_iter().peekable();
    while let Some(tree) = trees.next() {
        match tree {
            TokenTree::Group(group) => {
                let (delimiter, span) = (group.delimiter(), group.span());
                // The group dropped first, its stream is this one's alone: not copied.
                let stream = group.stream();
                drop(group);
                // The tree before this one, for what it makes of this one: the last written is
                // it (or the crate's name after a reroute, or the attribute added after a
                // derive, which count the same).
                let derive_attribute = is_derive(out.last(), delimiter, &stream);
                let module = delimiter == Delimiter::Brace && is_module(out);
                let mut inner = Vec::new();
                reroute_into(stream, &mut inner, nested || module);
                let derives_serde = derive_attribute && lists_serde_traits(&inner);
                let mut rerouted = Group::new(delimiter, inner.into_iter().collect());
                rerouted.set_span(span);
                out.push(TokenTree::Group(rerouted));
                if derives_serde {
                    out.extend(quote! { #[serde(crate = "::warren_runtime::codegen::serde")] });
                }
            }
            TokenTree::Punct(first) if is_path_sep(&first, trees.peek()) => {
                let second = trees.next();
                match trees.peek() {
                    // The crate's name asked first: most paths are `::std::…`, or continue one.
                    Some(TokenTree::Ident(krate))
                        if REROUTED_CRATES.iter().any(|rerouted| krate == rerouted)
                            && starts_path(out.last()) =>
                    {
                        // `::` dropped, or the re-export's path in its place; then the
                        // crate's name, next.
                        if nested {
                            out.extend(quote! { ::warren_runtime::codegen:: });
                        }
                    }
                    _ => out.extend([TokenTree::Punct(first)].into_iter().chain(second)),
                }
            }
            other => out.push(other),
        }
    }
}

/// Whether the trees written last are `mod name`, before the braces of a module's items.
fn is_module(written: &[TokenTree]) -> bool {
    matches!(
        written,
        [.., TokenTree::Ident(keyword), TokenTree::Ident(_)] if keyword == "mod"
    )
}

/// Keywords after which `::x` is a path from the crate root (`<D::Error as ::serde::…>`).
const KEYWORDS_BEFORE_PATHS: &[&str] = &[
    "as", "dyn", "impl", "for", "in", "where", "mut", "return", "let", "const", "static", "else",
    "match", "if", "while", "move", "ref", "unsafe", "async", "pub", "type", "use",
];

/// Whether a `::` after `previous` begins a path rather than continuing one (`x::serde`).
fn starts_path(previous: Option<&TokenTree>) -> bool {
    match previous {
        Some(TokenTree::Ident(previous)) => KEYWORDS_BEFORE_PATHS
            .iter()
            .any(|keyword| previous == keyword),
        _ => true,
    }
}

/// `::` as two punctuation tokens.
fn is_path_sep(first: &Punct, second: Option<&TokenTree>) -> bool {
    first.as_char() == ':'
        && first.spacing() == Spacing::Joint
        && matches!(second, Some(TokenTree::Punct(p)) if p.as_char() == ':')
}

/// Whether a group of `delimiter` holding `inside`, after `previous`, is a `#[derive(…)]`.
fn is_derive(previous: Option<&TokenTree>, delimiter: Delimiter, inside: &TokenStream) -> bool {
    let after_hash = matches!(previous, Some(TokenTree::Punct(p)) if p.as_char() == '#');
    after_hash
        && delimiter == Delimiter::Bracket
        && matches!(inside.clone().into_iter().next(), Some(TokenTree::Ident(id)) if id == "derive")
}

/// Whether a derive list (the group after `derive`, among `inside`) names serde's traits.
fn lists_serde_traits(inside: &[TokenTree]) -> bool {
    inside.iter().any(|tree| match tree {
        TokenTree::Group(list) => list
            .stream()
            .into_iter()
            .any(|t| matches!(t, TokenTree::Ident(id) if id == "Serialize" || id == "Deserialize")),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::reroute;

    #[test]
    fn reroutes_crate_paths_and_serde_derives() {
        let input = quote! {
            #[derive(::serde::Deserialize, Clone)]
            pub struct A { id: ::uuid::Uuid, at: ::chrono::DateTime<::chrono::offset::Utc> }
            impl<'de> ::serde::Deserialize<'de> for B {
                fn f<D>() where D: ::serde::Deserializer<'de> { <D::Error as ::serde::de::Error>::custom("") }
            }
            fn g() -> ::std::string::String { x::serde::y() }
            pub mod defaults {
                pub(super) fn at() -> ::chrono::DateTime<::chrono::offset::Utc> { todo!() }
            }
        };
        let output = reroute(input).to_string();
        let (types, nested) = output.split_once("pub mod defaults").expect(&output);
        assert!(
            types.contains("# [derive (serde :: Deserialize , Clone)]"),
            "{output}"
        );
        assert!(
            types.contains("# [serde (crate = \"::warren_runtime::codegen::serde\")]"),
            "{output}"
        );
        assert!(types.contains("id : uuid :: Uuid"), "{output}");
        assert!(
            types.contains("at : chrono :: DateTime < chrono :: offset :: Utc >"),
            "{output}"
        );
        assert!(types.contains("as serde :: de :: Error"), "{output}");
        assert!(types.contains(":: std :: string :: String"), "{output}");
        assert!(types.contains("x :: serde :: y"), "{output}");
        // A nested module does not see the `use` heading `types`.
        assert!(
            nested.contains(
                ":: warren_runtime :: codegen :: chrono :: DateTime < :: warren_runtime :: codegen :: chrono :: offset :: Utc >"
            ),
            "{output}"
        );
        assert_eq!(output.matches("codegen").count(), 3, "{output}");
    }
}
