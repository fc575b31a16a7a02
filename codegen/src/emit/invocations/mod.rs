//! The runtime macros' invocations in a generated file: typify's items they stand for,
//! recognised by their shape and replaced, and the invocations laid out as those items read.
//!
//! prettyplease writes a macro's tokens as a run of words (`Option < String >`, fields
//! wrapped at the margin); the invocations the generator writes (`builder!`, `string_enum!`,
//! `adapters!`, `declared_errors!`) hold a list of entries, most under a name,
//! `name: Type = start` or `Variant = "value"`, so each is laid out one entry a line, its type
//! and value as prettyplease writes them in code. Those that stand for one item, its docs
//! inside (`publisher!`, `register!`, `message!`), are laid out by [`items`].

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{Ident, TokenStream};
use quote::{ToTokens, quote};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Item, Token, Type};

mod items;

use items::{Function, MessageImpls};

/// `items` with each replacement's invocation in the place of the first of its items' indices,
/// and the others of them left out: typify's items of one builder or one enum's conversions,
/// written as one invocation of the runtime's macro.
pub(super) fn replace<'a>(
    items: Vec<Item>,
    replacements: impl Iterator<Item = (&'a [usize], Item)>,
) -> Vec<Item> {
    let mut invocations: BTreeMap<usize, Item> = BTreeMap::new();
    let mut replaced = BTreeSet::new();
    for (indices, invocation) in replacements {
        if let Some(&first) = indices.first() {
            invocations.insert(first, invocation);
            replaced.extend(indices.iter().copied());
        }
    }
    items
        .into_iter()
        .enumerate()
        .filter_map(|(index, item)| match invocations.remove(&index) {
            Some(invocation) => Some(invocation),
            None if replaced.contains(&index) => None,
            None => Some(item),
        })
        .collect()
}

/// The text an item of typify's is compared by: its tokens, without a comma before a closing
/// parenthesis, which typify writes in some lists and not in others.
pub(super) fn shape(item: &impl ToTokens) -> String {
    item.to_token_stream().to_string().replace(" ,)", ")")
}

/// The [`shape`] of each item `template` holds, once parsed: what typify's items are when
/// they are these.
pub(super) fn shapes(template: TokenStream) -> Vec<String> {
    syn::parse2::<syn::File>(template)
        .map(|file| file.items.iter().map(shape).collect())
        .unwrap_or_default()
}

/// The [`shapes`] of the items a template writes for a type, parsed once: the same for
/// every type but for its name, which is put into their text. Parsing a template for each of
/// a large contract's thousands of types was a fifth of the generator's work.
pub(super) struct NamedShapes {
    template: fn(&Ident) -> TokenStream,
    parsed: std::sync::OnceLock<Vec<String>>,
}

/// The name the templates are parsed with, replaced by each type's: no generated type is
/// named so (typify's names are a schema's title or place in `UpperCamelCase`).
const PLACEHOLDER: &str = "__WarrenShapeOf";

impl NamedShapes {
    /// The shapes of what `template` writes for a type of the name it is given.
    pub(super) const fn new(template: fn(&Ident) -> TokenStream) -> Self {
        Self {
            template,
            parsed: std::sync::OnceLock::new(),
        }
    }

    /// The shapes for `name`: a token's text does not depend on its neighbours' lengths, so
    /// the placeholder's text replaced by the name's is what parsing the template for the name
    /// gives.
    pub(super) fn of(&self, name: &Ident) -> Vec<String> {
        let parsed = self.parsed.get_or_init(|| {
            shapes((self.template)(&Ident::new(
                PLACEHOLDER,
                proc_macro2::Span::call_site(),
            )))
        });
        let name = name.to_string();
        (parsed.iter())
            .map(|shape| shape.replace(PLACEHOLDER, &name))
            .collect()
    }
}

/// typify's `TryFrom<&str>` and `TryFrom<String>` of `name`, which parse the value with its
/// `FromStr` (a string enum's and a constrained string's alike; the runtime's
/// `__warren_parsed_from_text!`), as [`shapes`].
pub(super) fn parsed_from_text(name: &Ident) -> Vec<String> {
    static PARSED_FROM_TEXT: NamedShapes = NamedShapes::new(parsed_from_text_template);
    PARSED_FROM_TEXT.of(name)
}

/// What [`parsed_from_text`] compares with, for `name`.
fn parsed_from_text_template(name: &Ident) -> TokenStream {
    quote! {
        impl ::std::convert::TryFrom<&str> for #name {
            type Error = self::error::ConversionError;
            fn try_from(value: &str) -> ::std::result::Result<Self, self::error::ConversionError> {
                value.parse()
            }
        }
        impl ::std::convert::TryFrom<::std::string::String> for #name {
            type Error = self::error::ConversionError;
            fn try_from(
                value: ::std::string::String,
            ) -> ::std::result::Result<Self, self::error::ConversionError> {
                value.parse()
            }
        }
    }
}

/// The first lines of the invocations laid out, as prettyplease writes them.
const INVOCATIONS: &[&str] = &[
    "::warren_runtime::codegen::adapters! {",
    "::warren_runtime::codegen::builder! {",
    "::warren_runtime::codegen::declared_errors! {",
    MESSAGE,
    PUBLISHER,
    REGISTER,
    "serde_struct! {",
    "string_enum! {",
    "string_newtype! {",
];

/// The invocation of one message marker's impls ([`MessageImpls`]).
const MESSAGE: &str = "message! {";

/// The invocations of one generated function: a publisher's method, a consumer's register
/// function; each its docs and one [`Function`].
const PUBLISHER: &str = "publisher! {";
const REGISTER: &str = "register! {";

/// The invocation whose body is written on one line when it fits, else its entries filling
/// the lines: a struct's fields, named and no more, read best as the struct's list of them.
const ONE_LINE: &str = "serde_struct! {";

/// The widest line prettyplease writes.
const MARGIN: usize = 100;

/// `text` (prettyplease's) with the body of every invocation of [`INVOCATIONS`] laid out.
pub(super) fn lay_out(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        if !INVOCATIONS.contains(&line.trim_start()) {
            continue;
        }
        let indent = &line[..line.len() - line.trim_start().len()];
        let close = format!("{indent}}}");
        let mut body = String::new();
        for line in lines.by_ref() {
            if line == close {
                break;
            }
            body.push_str(line);
            body.push(' ');
        }
        if [PUBLISHER, REGISTER].contains(&line.trim_start())
            && let Ok(parsed) = syn::parse_str::<Function>(&body)
        {
            out.push_str(&parsed.lay_out(indent));
        } else if line.trim_start() == MESSAGE
            && let Ok(parsed) = syn::parse_str::<MessageImpls>(&body)
        {
            out.push_str(&parsed.lay_out(indent));
        } else if let Ok(parsed) = syn::parse_str::<Body>(&body) {
            let one_line = (line.trim_start() == ONE_LINE)
                .then(|| parsed.filled_entries(indent))
                .flatten();
            out.push_str(&one_line.unwrap_or_else(|| parsed.lay_out(indent)));
        } else if let Ok(parsed) = syn::parse_str::<Checks>(&body) {
            out.push_str(&parsed.lay_out(indent));
        } else {
            // Not a shape written above: as prettyplease wrote it.
            out.push_str(&format!("{indent}    {}\n", body.trim_end()));
        }
        out.push_str(&close);
        out.push('\n');
    }
    out
}

/// What a `string_newtype!` holds: `Name |value| { checks }`.
struct Checks {
    name: Ident,
    value: Ident,
    block: syn::Block,
}

impl Parse for Checks {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let name = input.parse()?;
        input.parse::<Token![|]>()?;
        let value = input.parse()?;
        input.parse::<Token![|]>()?;
        let block = input.parse()?;
        Ok(Self { name, value, block })
    }
}

impl Checks {
    /// The checks' lines, under an invocation indented by `indent`: the block as prettyplease
    /// writes a function's body.
    fn lay_out(&self, indent: &str) -> String {
        let block = &self.block;
        let function = written(quote! { fn f() #block }, "");
        let mut text = format!("{indent}    {} |{}| {{\n", self.name, self.value);
        let lines: Vec<&str> = function.lines().collect();
        if let [_, body @ .., _] = lines.as_slice() {
            for line in body {
                text.push_str(&format!("{indent}    {line}\n"));
            }
        }
        text.push_str(&format!("{indent}    }}\n"));
        text
    }
}

/// What an invocation holds: `Name { entry, … }` (with a flag after the name:
/// `Name deny_unknown_fields { … }`), or its entries alone.
struct Body {
    name: Option<Ident>,
    flag: Option<Ident>,
    entries: Punctuated<Entry, Token![,]>,
    /// `serde_struct!`'s constructor after the braces.
    constructor: Option<Constructor>,
}

/// `new(field: Type, …) unset(field, …)`: a struct's constructor, its arguments' types
/// written as prettyplease writes them.
struct Constructor {
    arguments: Vec<String>,
    unset: Vec<String>,
}

impl Parse for Constructor {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let new: Ident = input.parse()?;
        if new != "new" {
            return Err(syn::Error::new(new.span(), "expected `new`"));
        }
        let content;
        syn::parenthesized!(content in input);
        let mut arguments = Vec::new();
        while !content.is_empty() {
            let name: Ident = content.parse()?;
            content.parse::<Token![:]>()?;
            let ty: Type = content.parse()?;
            arguments.push(format!("{name}: {}", written_type(&ty)));
            if content.parse::<Option<Token![,]>>()?.is_none() {
                break;
            }
        }
        let mut unset = Vec::new();
        if input.peek(syn::Ident) {
            let keyword: Ident = input.parse()?;
            if keyword != "unset" {
                return Err(syn::Error::new(keyword.span(), "expected `unset`"));
            }
            let content;
            syn::parenthesized!(content in input);
            let names = content.parse_terminated(Ident::parse, Token![,])?;
            unset.extend(names.iter().map(Ident::to_string));
        }
        Ok(Self { arguments, unset })
    }
}

impl Constructor {
    /// Its lines under an invocation indented by `indent`: `new(…)` on one line when it fits,
    /// else an argument a line; `unset(…)` on the next, filling lines.
    fn lay_out(&self, indent: &str) -> String {
        let inner = format!("{indent}    ");
        let line = format!("{inner}new({})", self.arguments.join(", "));
        let mut text = if line.len() <= MARGIN {
            format!("{line}\n")
        } else {
            let mut text = format!("{inner}new(\n");
            for argument in &self.arguments {
                text.push_str(&format!("{inner}    {argument},\n"));
            }
            text.push_str(&format!("{inner})\n"));
            text
        };
        if !self.unset.is_empty() {
            text.push_str(&filled(&inner, "unset(", &self.unset, ")"));
        }
        text
    }
}

/// `open`, the `items` separated by `, ` and `close` on one line under `indent` when they fit
/// within [`MARGIN`], else the items filling the lines between `open` and `close` (each
/// without the spaces it has inside a line).
fn filled(indent: &str, open: &str, items: &[String], close: &str) -> String {
    let line = format!("{indent}{open}{}{close}\n", items.join(", "));
    if line.len() <= MARGIN + 1 {
        return line;
    }
    let (open, close) = (open.trim_end(), close.trim_start());
    let item_indent = format!("{indent}    ");
    let mut text = format!("{indent}{open}\n");
    let mut current = String::new();
    for item in items {
        let next = match current.is_empty() {
            true => format!("{item_indent}{item},"),
            false => format!("{current} {item},"),
        };
        if next.len() > MARGIN && !current.is_empty() {
            text.push_str(&current);
            text.push('\n');
            current = format!("{item_indent}{item},");
        } else {
            current = next;
        }
    }
    text.push_str(&current);
    text.push('\n');
    text.push_str(&format!("{indent}{close}\n"));
    text
}

/// One entry of a [`Body`]: `name`, then `: Type`, `= value`, `if path` (a field's
/// `skip_serializing_if`) and `{ A => a, … }` (the adapters' methods of a consumer of
/// several), each when it has one.
struct Entry {
    name: Ident,
    ty: Option<Type>,
    value: Option<Expr>,
    skip: Option<syn::Path>,
    arms: Option<Punctuated<Arm, Token![,]>>,
}

/// `Variant => method`.
struct Arm {
    from: Ident,
    to: Ident,
}

impl Parse for Arm {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let from = input.parse()?;
        input.parse::<Token![=>]>()?;
        let to = input.parse()?;
        Ok(Self { from, to })
    }
}

impl Parse for Body {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let flagged = input.peek2(syn::Ident) && input.peek3(syn::token::Brace);
        if !input.peek2(syn::token::Brace) && !flagged {
            let entries = input.parse_terminated(Entry::parse, Token![,])?;
            return Ok(Self {
                name: None,
                flag: None,
                entries,
                constructor: None,
            });
        }
        let name = input.parse()?;
        let flag = flagged.then(|| input.parse()).transpose()?;
        let entries;
        syn::braced!(entries in input);
        let entries = entries.parse_terminated(Entry::parse, Token![,])?;
        let constructor = (!input.is_empty()).then(|| input.parse()).transpose()?;
        Ok(Self {
            name: Some(name),
            flag,
            entries,
            constructor,
        })
    }
}

/// What follows an entry's `:`: a lone name (a `serde_struct!` field's flag, most entries of
/// a large contract) taken as it is, without the trials of a type's grammar; else a type.
fn flag_or_type(input: ParseStream<'_>) -> syn::Result<Type> {
    let fork = input.fork();
    if let Ok(flag) = fork.parse::<Ident>()
        && (fork.is_empty()
            || fork.peek(Token![,])
            || fork.peek(Token![=])
            || fork.peek(Token![if]))
    {
        use syn::parse::discouraged::Speculative;
        input.advance_to(&fork);
        return Ok(Type::Path(syn::TypePath {
            attrs: Vec::new(),
            qself: None,
            path: flag.into(),
        }));
    }
    input.parse()
}

impl Parse for Entry {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let name = input.parse()?;
        let ty = match input.parse::<Option<Token![:]>>()? {
            Some(_) => Some(flag_or_type(input)?),
            None => None,
        };
        let value = match input.parse::<Option<Token![=]>>()? {
            Some(_) => Some(input.parse()?),
            None => None,
        };
        let skip = match input.parse::<Option<Token![if]>>()? {
            Some(_) => Some(input.parse()?),
            None => None,
        };
        let arms = match input.peek(syn::token::Brace) {
            true => {
                let arms;
                syn::braced!(arms in input);
                Some(arms.parse_terminated(Arm::parse, Token![,])?)
            }
            false => None,
        };
        Ok(Self {
            name,
            ty,
            value,
            skip,
            arms,
        })
    }
}

impl Body {
    /// The flag after the name, with the space before it; empty without one.
    fn flag_text(&self) -> String {
        self.flag.iter().map(|flag| format!(" {flag}")).collect()
    }

    /// The body under an invocation indented by `indent`, on one line when it fits within
    /// [`MARGIN`], else its entries filling the lines, when its entries are names with at most
    /// an identifier and a literal.
    fn filled_entries(&self, indent: &str) -> Option<String> {
        let mut entries = Vec::with_capacity(self.entries.len());
        for entry in &self.entries {
            let mut text = entry.name.to_string();
            if entry.arms.is_some() {
                return None;
            }
            if let Some(ty) = &entry.ty {
                text.push_str(&format!(": {}", ty.to_token_stream()));
            }
            if let Some(value) = &entry.value {
                text.push_str(&format!(" = {}", value.to_token_stream()));
            }
            if let Some(skip) = &entry.skip {
                text.push_str(&format!(" if {}", written_path(skip)));
            }
            entries.push(text);
        }
        let name = self.name.as_ref()?;
        let flag = self.flag_text();
        let open = format!("{name}{flag} {{ ");
        let entries = filled(&format!("{indent}    "), &open, &entries, " }");
        Some(entries + &self.constructor_text(indent))
    }

    /// The body's lines, under an invocation indented by `indent`.
    fn lay_out(&self, indent: &str) -> String {
        // Named, the entries are a level deeper, inside the name's braces.
        let flag = self.flag_text();
        let (mut text, entry_indent) = match &self.name {
            Some(name) => (
                format!("{indent}    {name}{flag} {{\n"),
                format!("{indent}        "),
            ),
            None => (String::new(), format!("{indent}    ")),
        };
        for entry in &self.entries {
            let mut line = entry.name.to_string();
            if let Some(ty) = &entry.ty {
                line.push_str(": ");
                line.push_str(&written_type(ty));
            }
            if let Some(value) = &entry.value {
                line.push_str(" = ");
                line.push_str(&written_value(value));
            }
            if let Some(skip) = &entry.skip {
                line.push_str(" if ");
                line.push_str(&written_path(skip));
            }
            if let Some(arms) = &entry.arms {
                line.push_str(" {");
                for arm in arms {
                    line.push_str(&format!("\n    {} => {},", arm.from, arm.to));
                }
                line.push_str("\n}");
            }
            line.push(',');
            // A line prettyplease broke keeps its own indentation under the entry's.
            for part in line.lines() {
                text.push_str(&format!("{entry_indent}{part}\n"));
            }
        }
        if self.name.is_some() {
            text.push_str(&format!("{indent}    }}\n"));
        }
        text + &self.constructor_text(indent)
    }

    /// The constructor's lines, when there is one.
    fn constructor_text(&self, indent: &str) -> String {
        (self.constructor.as_ref())
            .map(|constructor| constructor.lay_out(indent))
            .unwrap_or_default()
    }
}

/// `path` as prettyplease writes it in code (a field's `skip_serializing_if` other than the
/// shorthands typify's own come as: rare, so printed the long way).
fn written_path(path: &syn::Path) -> String {
    written(quote! { type T = #path; }, "type T = ")
}

/// `ty` as prettyplease writes it in code. A lone name (a flag such as `default`, most of
/// what entries hold) is its own text: printing each through prettyplease was a third of
/// laying out a large contract's invocations.
fn written_type(ty: &Type) -> String {
    let mut text = String::new();
    match written_path_type(ty, &mut text) {
        // Short enough that prettyplease would keep it on one line.
        Some(()) if text.len() <= SHORT_TYPE => text,
        _ => written(quote! { type T = #ty; }, "type T = "),
    }
}

/// The longest type [`written_type`] writes itself: prettyplease keeps it on a line.
const SHORT_TYPE: usize = 60;

/// `ty` pushed onto `text` as prettyplease writes a path type with type arguments
/// (`chrono::DateTime<chrono::offset::Utc>`), the common case of a constructor's argument:
/// one prettyplease call per argument was most of laying out a large contract's types.
/// `None` for any other type.
fn written_path_type(ty: &Type, text: &mut String) -> Option<()> {
    let Type::Path(path) = ty else {
        return None;
    };
    if path.qself.is_some() {
        return None;
    }
    if path.path.leading_colon.is_some() {
        text.push_str("::");
    }
    for (i, segment) in path.path.segments.iter().enumerate() {
        if i > 0 {
            text.push_str("::");
        }
        text.push_str(&segment.ident.to_string());
        match &segment.arguments {
            syn::PathArguments::None => {}
            syn::PathArguments::AngleBracketed(arguments) if arguments.colon2_token.is_none() => {
                text.push('<');
                for (j, argument) in arguments.args.iter().enumerate() {
                    if j > 0 {
                        text.push_str(", ");
                    }
                    let syn::GenericArgument::Type(argument) = argument else {
                        return None;
                    };
                    written_path_type(argument, text)?;
                }
                text.push('>');
            }
            _ => return None,
        }
    }
    Some(())
}

/// `value` as prettyplease writes it in code; a literal (a field's JSON name) as written.
fn written_value(value: &Expr) -> String {
    match value {
        Expr::Lit(literal) if literal.attrs.is_empty() => literal.lit.to_token_stream().to_string(),
        _ => written(quote! { const C: () = #value; }, "const C: () = "),
    }
}

/// What follows `prefix` in prettyplease's text of `item`, the `;` that ends it left off: a
/// type or an expression as prettyplease writes it in code.
fn written(item: TokenStream, prefix: &str) -> String {
    let text = syn::parse2(item)
        .map(|file| prettyplease::unparse(&file))
        .unwrap_or_default();
    let text = text.trim_end().trim_end_matches(';');
    text.strip_prefix(prefix).unwrap_or(text).to_owned()
}
