//! One type for the same inline schema written in many places.
//!
//! typify makes a type for every inline object, enumeration or constrained string, named
//! after where it is (`OrderPlacedNote` for property `note` of `OrderPlaced`). A contract whose
//! messages each spell out `"note": {"type": "string", "maxLength": 200}`, or the same line
//! items, gets as many identical types, each with its derives and impls compiled: on the
//! 1,000-message benchmark contract, two of every three types. Here each group of identical
//! types keeps its first (by name), and the others become aliases of it
//! (`pub type OrderCancelledNote = OrderPlacedNote;`): every name still names the type, and a
//! value of one can be given where another is expected while their schemas agree.
//!
//! Only the types typify named after a place are shared: a definition of the bundle (a
//! message's payload, a shared schema) is a type of its own, whatever its shape. Types are
//! compared by their items (definition, impls, runtime macro invocations) without their
//! docs, with their own name and the names of types already shared replaced, until nothing
//! more is found (a type made of shared types can then be shared too). A type named in the
//! trait of another type's impl (`impl From<Note> for Text`) is left alone: two of those,
//! made one, would conflict.

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::Item;

use super::type_ident;
use crate::contract::Contract;

/// `items` of the `types` module with every type identical to an earlier one (see the module
/// docs) replaced by an alias of it.
pub(super) fn share(items: Vec<Item>, contract: &Contract) -> Vec<Item> {
    let definitions: BTreeSet<String> = (contract.schemas.definitions.keys())
        .map(|name| type_ident(name).to_string())
        .collect();
    let owners: Vec<Option<String>> = items.iter().map(owner).collect();
    let candidates = candidates(&items, &owners, &definitions);
    let aliases = aliases(&items, &owners, &candidates);
    if aliases.is_empty() {
        return items;
    }
    items
        .into_iter()
        .zip(owners)
        .filter_map(|(item, owner)| match owner.and_then(|o| aliases.get(&o)) {
            None => Some(item),
            // The definition becomes the alias, its docs kept; its impls go.
            Some(shared) => alias(&item, shared),
        })
        .collect()
}

/// The types that may be shared: those typify named after a place, each a struct or an enum,
/// not named in the trait of another type's impl.
fn candidates(
    items: &[Item],
    owners: &[Option<String>],
    definitions: &BTreeSet<String>,
) -> BTreeSet<String> {
    let mut candidates: BTreeSet<String> = (items.iter())
        .filter_map(|item| match item {
            Item::Struct(item) => Some(item.ident.to_string()),
            Item::Enum(item) => Some(item.ident.to_string()),
            _ => None,
        })
        .filter(|name| !definitions.contains(name))
        .collect();
    for (item, owner) in items.iter().zip(owners) {
        if let Item::Impl(item) = item
            && let Some((path, _)) = &item.trait_
        {
            for ident in idents(path.to_token_stream()) {
                if owner.as_deref() != Some(ident.as_str()) {
                    candidates.remove(&ident);
                }
            }
        }
    }
    candidates
}

/// Each candidate identical to an earlier one, and that one: compared again with those found
/// replaced, until a round finds none.
fn aliases(
    items: &[Item],
    owners: &[Option<String>],
    candidates: &BTreeSet<String>,
) -> BTreeMap<String, String> {
    // Each candidate's items as tokens, made once for every round.
    let streams: Vec<(&str, TokenStream)> = (items.iter().zip(owners))
        .filter_map(|(item, owner)| {
            let owner = owner
                .as_deref()
                .filter(|owner| candidates.contains(*owner))?;
            Some((owner, item.to_token_stream()))
        })
        .collect();
    let mut aliases: BTreeMap<String, String> = BTreeMap::new();
    loop {
        let mut texts: BTreeMap<&str, String> = BTreeMap::new();
        for (owner, stream) in &streams {
            if !aliases.contains_key(*owner) {
                let text = texts.entry(owner).or_default();
                compared(stream.clone(), owner, &aliases, text);
                text.push('\n');
            }
        }
        let mut first_of: BTreeMap<String, &str> = BTreeMap::new();
        let mut found = false;
        for (name, text) in texts {
            match first_of.get(&text) {
                Some(first) => {
                    aliases.insert(name.to_owned(), (*first).to_owned());
                    found = true;
                }
                None => {
                    first_of.insert(text, name);
                }
            }
        }
        if !found {
            return aliases;
        }
    }
}

/// Appends to `text` the tokens of `stream` as compared: docs left out, `owner` as `Self`, and
/// each type found shared as the one it is shared with.
fn compared(
    stream: TokenStream,
    owner: &str,
    aliases: &BTreeMap<String, String>,
    text: &mut String,
) {
    let mut trees = stream.into_iter().peekable();
    while let Some(tree) = trees.next() {
        match tree {
            TokenTree::Punct(punct)
                if punct.as_char() == '#'
                    && matches!(trees.peek(), Some(TokenTree::Group(group)) if is_doc(group)) =>
            {
                trees.next();
            }
            TokenTree::Group(group) => {
                text.push_str(match group.delimiter() {
                    proc_macro2::Delimiter::Parenthesis => "(",
                    proc_macro2::Delimiter::Brace => "{",
                    proc_macro2::Delimiter::Bracket => "[",
                    proc_macro2::Delimiter::None => "«",
                });
                compared(group.stream(), owner, aliases, text);
                text.push_str(match group.delimiter() {
                    proc_macro2::Delimiter::Parenthesis => ")",
                    proc_macro2::Delimiter::Brace => "}",
                    proc_macro2::Delimiter::Bracket => "]",
                    proc_macro2::Delimiter::None => "»",
                });
            }
            TokenTree::Ident(ident) => {
                let name = ident.to_string();
                match aliases.get(&name) {
                    _ if name == owner => text.push_str("Self"),
                    Some(shared) => text.push_str(shared),
                    None => text.push_str(&name),
                }
                text.push(' ');
            }
            other => {
                text.push_str(&other.to_string());
                text.push(' ');
            }
        }
    }
}

/// Whether an attribute's brackets hold a doc: `[doc = "…"]`.
fn is_doc(group: &proc_macro2::Group) -> bool {
    group.delimiter() == proc_macro2::Delimiter::Bracket
        && matches!(group.stream().into_iter().next(), Some(TokenTree::Ident(ident)) if ident == "doc")
}

/// The type an item of the `types` module is of: a struct's or an enum's own, an impl's self
/// type (or `T` of `From<T> for String`), the first name in a runtime macro's invocation.
fn owner(item: &Item) -> Option<String> {
    match item {
        Item::Struct(item) => Some(item.ident.to_string()),
        Item::Enum(item) => Some(item.ident.to_string()),
        Item::Impl(item) => super::string_newtypes::owner(item).map(|ident| ident.to_string()),
        Item::Macro(item) => (item.mac.tokens.clone().into_iter()).find_map(|tree| match tree {
            TokenTree::Ident(ident) => Some(ident.to_string()),
            _ => None,
        }),
        _ => None,
    }
}

/// Every identifier of `tokens`, groups opened, as text.
fn idents(tokens: TokenStream) -> Vec<String> {
    let mut out = Vec::new();
    for tree in tokens {
        match tree {
            TokenTree::Ident(ident) => out.push(ident.to_string()),
            TokenTree::Group(group) => out.extend(idents(group.stream())),
            _ => {}
        }
    }
    out
}

/// The alias standing for the definition `item` of a type shared with `shared`, its docs
/// kept and saying so; `None` for the type's other items.
fn alias(item: &Item, shared: &str) -> Option<Item> {
    let (ident, attrs) = match item {
        Item::Struct(item) => (&item.ident, &item.attrs),
        Item::Enum(item) => (&item.ident, &item.attrs),
        _ => return None,
    };
    let docs = attrs.iter().filter(|attr| attr.path().is_ident("doc"));
    let shared = type_ident(shared);
    // No blank line: rustdoc makes one paragraph of the type's own doc and this.
    let note = super::docs::doc(&format!(
        "The same schema as [`{shared}`], so the same type."
    ));
    Some(syn::parse_quote! {
        #( #docs )*
        #note
        pub type #ident = #shared;
    })
}

#[cfg(test)]
mod tests {
    use quote::quote;

    #[test]
    fn docs_are_left_out_and_the_owner_and_shared_types_renamed() {
        let mut aliases = std::collections::BTreeMap::new();
        aliases.insert("BNote".to_owned(), "ANote".to_owned());
        let compare = |tokens| {
            let mut text = String::new();
            super::compared(tokens, "BItem", &aliases, &mut text);
            text
        };
        let first = compare(quote! {
            /// Item of B.
            pub struct BItem { /// The note.
                pub note: BNote }
        });
        let second = compare(quote! { pub struct BItem { pub note: ANote } });
        assert_eq!(first, second);
        assert_eq!(first, "pub struct Self {pub note : ANote }");
    }
}
