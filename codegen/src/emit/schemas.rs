//! The messages' JSON Schemas as text in the generated file, each shared definition once.
//!
//! Every message's schema is self-contained (its `$ref` plus every definition it reaches),
//! so a definition many messages reach (`Money`, `Currency`) was copied into each of their
//! schemas. A definition that two or more schemas hold is written once, as a
//! `macro_rules!` macro expanding to its member of `$defs` (its name and body), and each
//! schema that holds it is the `concat!` of its own text and those macros (the runtime's
//! `message!` writes the `concat!`, and the head every bundled schema starts with). `concat!`
//! runs in the compiler, so `Message::PAYLOAD_SCHEMA` is one `&'static str`, the schema's
//! compact JSON text, with no work at run time. The text is compact (`serde_json::to_string`)
//! rather than pretty printed: the runtime only parses it, and a pretty schema was a tenth of
//! the lines of a generated file (the types' docs name each schema's file, which is where a
//! reader goes).

use std::collections::BTreeMap;

use proc_macro2::{Ident, Literal, TokenStream};
use quote::{format_ident, quote};
use serde_json::Value;

use super::docs::{code, compose};
use crate::contract::Contract;

/// The keyword of a bundled schema that holds its definitions.
const DEFS: &str = "$defs";

/// The definitions two or more of a contract's schemas hold, each with its macro.
pub(super) struct SharedDefinitions<'a> {
    shared: BTreeMap<&'a str, Shared<'a>>,
    /// [`bundled_head`], made once for every schema.
    head: String,
}

/// One shared definition.
struct Shared<'a> {
    /// The macro expanding to its text.
    name: Ident,
    /// Its body, as every schema that holds it has it.
    body: &'a Value,
    /// How many schemas hold it, for its doc.
    holders: usize,
}

impl<'a> SharedDefinitions<'a> {
    /// The definitions the payload and headers schemas of `contract`'s messages share.
    pub(super) fn of(contract: &'a Contract) -> Self {
        let mut holders: BTreeMap<&str, (&Value, usize)> = BTreeMap::new();
        let schemas = contract
            .messages
            .values()
            .flat_map(|message| std::iter::once(&message.payload).chain(message.headers.as_ref()));
        for schema in schemas {
            for (name, body) in definitions(&schema.schema) {
                holders.entry(name.as_str()).or_insert((body, 0)).1 += 1;
            }
        }
        let shared = holders
            .into_iter()
            .filter(|(_, (_, count))| *count > 1)
            .map(|(name, (body, holders))| {
                let name_ident = macro_name(name);
                let shared = Shared {
                    name: name_ident,
                    body,
                    holders,
                };
                (name, shared)
            })
            .collect();
        Self {
            shared,
            head: bundled_head(),
        }
    }

    /// One `macro_rules!` per shared definition, to come before the schemas that use them
    /// (a macro is in scope from where it is written to the end of its module).
    pub(super) fn macros(&self) -> TokenStream {
        let macros = self.shared.iter().map(|(definition, shared)| {
            let Shared {
                name,
                body,
                holders,
            } = shared;
            let docs = compose(
                &format!(
                    "Definition {} of the bundled JSON Schemas, which {holders} of the \
                     messages' schemas hold: written once, its name and body, for `concat!` to \
                     put into each.",
                    code(definition)
                ),
                None,
                "",
            );
            let text = text_literal(&member(definition, body));
            quote! {
                #docs
                macro_rules! #name {
                    () => { #text };
                }
            }
        });
        quote! { #( #macros )* }
    }

    /// `schema` as the runtime's `message!` takes it: the pieces of its text for `concat!`,
    /// its own text and the macros of the definitions it shares, after `bundled` (and without
    /// the head that stands for) when it starts as every bundled schema does.
    pub(super) fn pieces_for_message(&self, schema: &Value) -> TokenStream {
        let mut pieces = self.pieces(schema);
        let bundled = match pieces.first_mut() {
            Some(Piece::Text(text)) if text.starts_with(&self.head) => {
                text.drain(..self.head.len());
                Some(quote! { bundled })
            }
            _ => None,
        };
        let parts = pieces.iter().map(|piece| match piece {
            Piece::Text(text) => {
                let literal = text_literal(text);
                quote! { #literal }
            }
            Piece::Shared(name) => quote! { #name!() },
        });
        quote! { #bundled #( #parts ),* }
    }

    /// `schema`'s compact text, cut around the shared definitions it holds: the pieces'
    /// texts, each macro's in its place, are `serde_json::to_string(schema)`.
    fn pieces(&self, schema: &Value) -> Vec<Piece<'_>> {
        let members = match schema {
            Value::Object(members) if !members.is_empty() => members,
            _ => return vec![Piece::Text(compact(schema))],
        };
        let mut pieces = Vec::new();
        let mut text = String::from("{");
        for (i, (key, value)) in members.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(&json_string(key));
            text.push(':');
            match value {
                Value::Object(definitions) if key == DEFS && !definitions.is_empty() => {
                    text.push('{');
                    for (j, (name, body)) in definitions.iter().enumerate() {
                        if j > 0 {
                            text.push(',');
                        }
                        match self.shared.get(name.as_str()) {
                            Some(shared) if shared.body == body => {
                                pieces.push(Piece::Text(std::mem::take(&mut text)));
                                pieces.push(Piece::Shared(&shared.name));
                            }
                            _ => text.push_str(&member(name, body)),
                        }
                    }
                    text.push('}');
                }
                _ => text.push_str(&compact(value)),
            }
        }
        text.push('}');
        pieces.push(Piece::Text(text));
        pieces
    }
}

/// The text every schema the bundler writes starts with, up to its definition's name: what
/// the runtime's `message!` writes after `bundled` (the compile-fixtures' tests compare each
/// message's schema with the bundler's text).
fn bundled_head() -> String {
    format!(
        r##"{{"{}":{},"$ref":"#/{DEFS}/"##,
        "$schema",
        json_string(crate::schema::DIALECT)
    )
}

/// A run of a schema's text: written out, or a shared definition's macro.
enum Piece<'a> {
    Text(String),
    Shared(&'a Ident),
}

/// The definitions a bundled schema holds.
fn definitions(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    schema
        .get(DEFS)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

/// The macro of definition `name`, a Rust type name (which is an identifier already, and
/// unique among the definitions): `__schema_Money`. The generator's own names start with
/// `_`, which no name derived from a contract does.
fn macro_name(name: &str) -> Ident {
    format_ident!("__schema_{}", super::type_ident(name))
}

/// Definition `name` as a member of `$defs`: its name, then its `body`. A shared
/// definition's macro holds both, so that a schema's pieces do not name it again.
fn member(name: &str, body: &Value) -> String {
    format!("{}:{}", json_string(name), compact(body))
}

/// `text` as a JSON string, quoted and escaped.
fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}

/// `value` as compact JSON text, as `serde_json` writes it.
fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// Text as a raw string literal, so it reads in an editor.
///
/// The runtime parses the text as JSON, so only its value matters: every
/// [hidden](crate::diagnostics::is_hidden) character, which JSON text can only hold inside a
/// string, is written as its `\uXXXX` escape, since rustc refuses a bidirectional override
/// in a literal. The literal gets one `#` more than the longest run of `#` after a `"` in
/// the text, so no content can end it early; past the 255 `#` a raw string can take, it is
/// an escaped string instead.
fn text_literal(json: &str) -> Literal {
    let mut text = String::with_capacity(json.len());
    for c in json.chars() {
        if crate::diagnostics::is_hidden(c) && c != '\n' {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                text.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            text.push(c);
        }
    }
    let hashes = "#".repeat(longest_hash_run(&text) + 1);
    let source = format!("r{hashes}\"{text}\"{hashes}");
    // A raw string literal takes at most 255 `#`: a schema holding a `"` followed by 255
    // or more of them cannot be one, and gets the escaped literal, which has the same value
    // on one line.
    source
        .parse::<Literal>()
        .unwrap_or_else(|_| Literal::string(&text))
}

/// The longest run of `#` right after a `"` in `text`.
fn longest_hash_run(text: &str) -> usize {
    text.split('"')
        .skip(1)
        .map(|after| after.len() - after.trim_start_matches('#').len())
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{Piece, SharedDefinitions, compact, text_literal};

    /// Whatever a schema holds, its literal is one token whose value parses back to the same
    /// JSON, with no bare hidden character in the file.
    #[test]
    fn schema_literals_survive_hostile_content() {
        // Each with whether its literal is a raw string.
        let cases = [
            (json!({"$ref": "#/$defs/A"}), true),
            (
                json!({"description": "ends \"### early? \"#\"## r#\"x\"#"}),
                true,
            ),
            (json!({"title": "\"##########"}), true),
            (
                json!({"description": "\u{202e} bidi, \r CR, \u{0} NUL, \u{2028} LS, */ /* `"}),
                true,
            ),
            (json!({"enum": ["\"#", "#\"", "\\\"#"]}), true),
            // The most `#` a raw string can take after the `"`, then one too many: past 255
            // `#` only an escaped string holds the text.
            (json!({"title": format!("\"{}", "#".repeat(254))}), true),
            (json!({"title": format!("\"{}", "#".repeat(255))}), false),
        ];
        for (schema, raw) in cases {
            let literal = text_literal(&compact(&schema));
            let written = literal.to_string();
            let prefix = if raw { "r#" } else { "\"" };
            assert!(written.starts_with(prefix), "{written}");
            assert!(
                !written
                    .chars()
                    .any(|c| crate::diagnostics::is_hidden(c) && c != '\n'),
                "{written}"
            );
            let parsed: syn::LitStr = syn::parse_str(&written).expect("one string literal");
            let value: Value = serde_json::from_str(&parsed.value()).expect("the value is JSON");
            assert_eq!(value, schema, "{written}");
        }
    }

    /// A schema cut around its shared definitions, each macro's text put back in its place,
    /// is the schema's compact text exactly, whatever its definitions hold: the text the
    /// runtime reads is what it was when every schema was written out whole.
    #[test]
    fn a_schema_cut_around_shared_definitions_is_its_compact_text() {
        let money = json!({
            "type": "object",
            "properties": {"currency": {"$ref": "#/$defs/Currency"}, "tags": [], "x": {}},
            "description": "nested \"quotes\",\n newlines \\n and ##\"# hashes"
        });
        let currency = json!({"type": "string", "pattern": "^[A-Z]{3}$"});
        let schemas = [
            json!({"$schema": "s", "$ref": "#/$defs/A", "$defs": {
                "A": {"$ref": "#/$defs/Money"}, "Currency": currency, "Money": money}}),
            json!({"$schema": "s", "$ref": "#/$defs/Money", "$defs": {
                "Currency": currency, "Money": money}}),
            // The shared definitions first, last and alone; and a schema without any.
            json!({"$ref": "#/$defs/Currency", "$defs": {"Currency": currency}}),
            json!({"$defs": {}, "type": "null"}),
            json!({}),
            json!(true),
        ];
        let mut shared = SharedDefinitions {
            shared: Default::default(),
            head: super::bundled_head(),
        };
        for (name, body) in [("Currency", &currency), ("Money", &money)] {
            shared.shared.insert(
                name,
                super::Shared {
                    name: super::macro_name(name),
                    body,
                    holders: 2,
                },
            );
        }
        for schema in &schemas {
            let text: String = shared
                .pieces(schema)
                .iter()
                .map(|piece| match piece {
                    Piece::Text(text) => text.clone(),
                    Piece::Shared(name) => {
                        let body = if *name == "__schema_Money" {
                            &money
                        } else {
                            &currency
                        };
                        super::member(
                            if *name == "__schema_Money" {
                                "Money"
                            } else {
                                "Currency"
                            },
                            body,
                        )
                    }
                })
                .collect();
            assert_eq!(text, compact(schema), "{schema}");
        }
        assert_eq!(shared.pieces(&schemas[0]).len(), 5);
        assert_eq!(shared.pieces(&schemas[3]).len(), 1);
    }
}
