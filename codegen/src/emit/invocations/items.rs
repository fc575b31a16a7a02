//! The invocations that stand for one generated item each, its docs inside: a publisher's
//! method or a consumer's register function ([`Function`]), a message marker's impls
//! ([`MessageImpls`]). Each is laid out as the item reads: its docs as `///` lines, then what
//! names it, then its value.

use proc_macro2::Ident;
use quote::{ToTokens, quote};
use syn::parse::{Parse, ParseStream};
use syn::{Expr, Token};

use super::{filled, written, written_type, written_value};

/// What a `publisher!` or a `register!` holds: docs, then `name(placeholders): Path, Type… =
/// expression` (a publisher's `(placeholders)`, marker, payload and headers types and
/// publication; a register function's trait, marker and consumer spec).
pub(super) struct Function {
    attrs: Vec<syn::Attribute>,
    /// Everything before the `=`, as written.
    signature: String,
    publication: Expr,
}

impl Parse for Function {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(syn::Attribute::parse_outer)?;
        let name: Ident = input.parse()?;
        let placeholders = match input.peek(syn::token::Paren) {
            true => {
                let placeholders;
                syn::parenthesized!(placeholders in input);
                let placeholders = placeholders.parse_terminated(Ident::parse, Token![,])?;
                let placeholders: Vec<String> = placeholders.iter().map(Ident::to_string).collect();
                format!("({})", placeholders.join(", "))
            }
            false => String::new(),
        };
        input.parse::<Token![:]>()?;
        let marker: syn::Path = input.parse()?;
        // `messages::Name`: its segments, as written.
        let marker: Vec<String> = (marker.segments.iter())
            .map(|segment| segment.ident.to_string())
            .collect();
        let mut types = vec![];
        while input.parse::<Option<Token![,]>>()?.is_some() {
            types.push(written_type(&input.parse()?));
        }
        input.parse::<Token![=]>()?;
        let publication = input.parse()?;
        let mut signature = format!("{name}{placeholders}: {}", marker.join("::"));
        for ty in types {
            signature.push_str(&format!(", {ty}"));
        }
        Ok(Self {
            attrs,
            signature,
            publication,
        })
    }
}

impl Function {
    /// The docs, the signature on a line and the publication on the next, under an
    /// invocation indented by `indent`.
    pub(super) fn lay_out(&self, indent: &str) -> String {
        let mut text = doc_lines(&self.attrs, &format!("{indent}    "));
        text.push_str(&format!("{indent}    {}\n", self.signature));
        let publication = written_value(&self.publication);
        for (i, line) in publication.lines().enumerate() {
            let lead = if i == 0 { "= " } else { "" };
            text.push_str(&format!("{indent}        {lead}{line}\n"));
        }
        text
    }
}

/// What a `message!` holds: `Name = "name" [as "content/type"]: Payload [schema]`, then
/// `, Headers [schema]` when there are headers. Held as the texts it is laid out from.
pub(super) struct MessageImpls {
    /// Everything before the payload schema's bracket.
    head: String,
    /// The payload's schema, and the headers' type and schema.
    payload: Vec<String>,
    headers: Option<(String, Vec<String>)>,
}

impl Parse for MessageImpls {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        input.parse::<Token![=]>()?;
        let message: syn::LitStr = input.parse()?;
        let mut head = format!("{name} = {}", message.to_token_stream());
        if input.parse::<Option<Token![as]>>()?.is_some() {
            let content_type: syn::LitStr = input.parse()?;
            head.push_str(&format!(" as {}", content_type.to_token_stream()));
        }
        input.parse::<Token![:]>()?;
        head.push_str(&format!(": {}", written_type(&input.parse()?)));
        let payload = schema_pieces(input)?;
        let headers = match input.parse::<Option<Token![,]>>()? {
            Some(_) => {
                let ty = written_type(&input.parse()?);
                Some((ty, schema_pieces(input)?))
            }
            None => None,
        };
        Ok(Self {
            head,
            payload,
            headers,
        })
    }
}

/// A schema's `[pieces]` as their texts, `bundled` before the first when it is there.
fn schema_pieces(input: ParseStream<'_>) -> syn::Result<Vec<String>> {
    let content;
    syn::bracketed!(content in input);
    let bundled = (content.peek(syn::Ident))
        .then(|| content.parse::<Ident>())
        .transpose()?;
    let pieces = content.parse_terminated(Expr::parse, Token![,])?;
    let mut texts: Vec<String> = Vec::with_capacity(pieces.len());
    for piece in &pieces {
        let text = match piece {
            // A shared definition's macro.
            Expr::Macro(call) => format!("{}!()", call.mac.path.to_token_stream()),
            // A literal, as written (the raw strings the schemas are).
            piece => piece.to_token_stream().to_string(),
        };
        texts.push(text);
    }
    if let (Some(bundled), Some(first)) = (bundled, texts.first_mut()) {
        *first = format!("{bundled} {first}");
    }
    Ok(texts)
}

impl MessageImpls {
    /// The head, each schema after its type: on the head's line when it fits, else its
    /// pieces filling the lines under it.
    pub(super) fn lay_out(&self, indent: &str) -> String {
        let inner = format!("{indent}    ");
        let mut text = schema_lines(&inner, &self.head, &self.payload);
        if let Some((ty, pieces)) = &self.headers {
            // The `,` after the payload's schema starts the headers' line.
            text.pop();
            text.push_str(",\n");
            text.push_str(&schema_lines(&inner, ty, pieces));
        }
        text
    }
}

/// `lead [pieces]` on one line under `indent` when it fits within [`MARGIN`](super::MARGIN), else the pieces
/// filling the lines between `lead [` and `]`.
fn schema_lines(indent: &str, lead: &str, pieces: &[String]) -> String {
    filled(indent, &format!("{lead} ["), pieces, "]")
}

/// `attrs` as prettyplease writes them before an item, each line indented by `indent`: a doc
/// attribute as its `///` line.
fn doc_lines(attrs: &[syn::Attribute], indent: &str) -> String {
    let mut text = String::new();
    for attr in attrs {
        let doc = match &attr.meta {
            syn::Meta::NameValue(pair) if pair.path.is_ident("doc") => match &pair.value {
                Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(line),
                    ..
                }) => Some(line.value()),
                _ => None,
            },
            _ => None,
        };
        match doc {
            Some(line) if !line.contains('\n') => text.push_str(&format!("{indent}///{line}\n")),
            // Another attribute (a doc hidden from doctests): as prettyplease writes it.
            _ => {
                let item = written(quote! { #attr struct S; }, "");
                for line in item.lines().filter(|line| *line != "struct S") {
                    text.push_str(&format!("{indent}{line}\n"));
                }
            }
        }
    }
    text
}
