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

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

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
    // Each candidate's items as compared, made once for every round: a round only puts the
    // names found shared in their places.
    let mut shapes: BTreeMap<&str, Shape<'_>> = BTreeMap::new();
    for (item, owner) in items.iter().zip(owners) {
        let Some(owner) = owner.as_deref().and_then(|owner| candidates.get(owner)) else {
            continue;
        };
        let shape = shapes.entry(owner).or_default();
        shape.add(item.to_token_stream(), owner, candidates);
        shape.text.push('\n');
    }
    let mut aliases: BTreeMap<String, String> = BTreeMap::new();
    loop {
        let mut first_of: BTreeMap<(&str, Vec<&str>), &str> = BTreeMap::new();
        let mut found = Vec::new();
        for (owner, shape) in &shapes {
            if aliases.contains_key(*owner) {
                continue;
            }
            let named = (shape.named.iter())
                .map(|name| aliases.get(*name).map_or(*name, String::as_str))
                .collect();
            match first_of.entry((&shape.text, named)) {
                Entry::Occupied(first) => found.push((*owner, *first.get())),
                Entry::Vacant(place) => {
                    place.insert(owner);
                }
            }
        }
        if found.is_empty() {
            return aliases;
        }
        for (owner, first) in found {
            aliases.insert(owner.to_owned(), first.to_owned());
        }
    }
}

/// A candidate's items as compared: their tokens as text, docs left out and the candidate
/// itself as `Self`, with [`NAMED`] wherever another candidate is named, and those candidates
/// in order. Two candidates whose texts are equal and whose named candidates are shared with
/// the same types are the same type.
#[derive(Default)]
struct Shape<'a> {
    text: String,
    named: Vec<&'a str>,
}

/// Where a [`Shape`]'s text names another candidate: a character no token's text holds
/// (a literal's control characters are escaped).
const NAMED: char = '\u{1}';

impl<'a> Shape<'a> {
    /// Appends the tokens of `stream`, an item of candidate `owner`.
    fn add(&mut self, stream: TokenStream, owner: &str, candidates: &'a BTreeSet<String>) {
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
                    self.text.push_str(match group.delimiter() {
                        proc_macro2::Delimiter::Parenthesis => "(",
                        proc_macro2::Delimiter::Brace => "{",
                        proc_macro2::Delimiter::Bracket => "[",
                        proc_macro2::Delimiter::None => "«",
                    });
                    self.add(group.stream(), owner, candidates);
                    self.text.push_str(match group.delimiter() {
                        proc_macro2::Delimiter::Parenthesis => ")",
                        proc_macro2::Delimiter::Brace => "}",
                        proc_macro2::Delimiter::Bracket => "]",
                        proc_macro2::Delimiter::None => "»",
                    });
                }
                // Written straight into the text, then looked at there: a large contract's
                // types hold millions of tokens, and a `String` for each cost more than the rest.
                TokenTree::Ident(ident) => {
                    let start = self.text.len();
                    let _ = write!(self.text, "{ident}");
                    let name = &self.text[start..];
                    // A type's name begins with a capital; a field's or a keyword does not.
                    let candidate = (name.starts_with(|c: char| c.is_ascii_uppercase()))
                        .then(|| candidates.get(name))
                        .flatten();
                    if name == owner {
                        self.text.truncate(start);
                        self.text.push_str("Self");
                    } else if let Some(candidate) = candidate {
                        self.text.truncate(start);
                        self.text.push(NAMED);
                        self.named.push(candidate);
                    }
                    self.text.push(' ');
                }
                other => {
                    let _ = write!(self.text, "{other} ");
                }
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
    let note = super::docs::doc_attrs(&format!("An alias: the same schema as [`{shared}`]."));
    let mut alias: syn::ItemType = syn::parse_quote! { pub type #ident = #shared; };
    // The docs put in as syntax, not printed and parsed again.
    alias.attrs = docs.cloned().chain(note).collect();
    Some(Item::Type(alias))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use quote::quote;

    use super::Shape;

    #[test]
    fn docs_are_left_out_the_owner_is_self_and_other_candidates_are_named() {
        let candidates: BTreeSet<String> = ["BItem", "BNote", "ANote"].map(String::from).into();
        let shape = |tokens| {
            let mut shape = Shape::default();
            shape.add(tokens, "BItem", &candidates);
            (shape.text, shape.named)
        };
        let first = shape(quote! {
            /// Item of B.
            pub struct BItem { /// The note.
                pub note: BNote, pub size: u8 }
        });
        assert_eq!(
            first.0,
            "pub struct Self {pub note : \u{1} , pub size : u8 }"
        );
        assert_eq!(first.1, ["BNote"]);
        let second = shape(quote! { pub struct BItem { pub note: ANote, pub size: u8 } });
        assert_eq!(second.0, first.0);
        assert_eq!(second.1, ["ANote"]);
    }
}
