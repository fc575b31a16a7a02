//! typify's builders, each turned into one invocation of the runtime's `builder!`.
//!
//! typify writes every struct's builder out in full: the struct of `Result` fields, its
//! `Default`, a seven-line setter per field and two conversions, the same shape each time
//! (half the lines of a generated file with builders on). What differs from one builder to
//! the next is its name, its fields' names and types, and which fields start at a default;
//! that is what is read here, from typify's own items, and handed to
//! `::warren_runtime::codegen::builder!`, which expands to the same items. A builder that
//! does not have exactly the shape the macro writes (another typify, say) is left as typify
//! wrote it: the file then is longer, never different.

use std::collections::BTreeMap;

use proc_macro2::{Ident, TokenStream};
use quote::{ToTokens, quote};
use syn::{Expr, Fields, GenericArgument, Item, ItemImpl, ItemStruct, PathArguments, Type};

/// `items` of typify's `types` module with the builders in its `builder` module compacted.
pub(super) fn compact(mut items: Vec<Item>) -> Vec<Item> {
    for item in &mut items {
        if let Item::Mod(module) = item
            && module.ident == "builder"
            && let Some((_, content)) = &mut module.content
        {
            *content = compact_module(std::mem::take(content));
        }
    }
    items
}

/// The parts of one builder found among the module's items, by their index.
#[derive(Default)]
struct Parts {
    fields: Option<Vec<(Ident, Type)>>,
    starts: Option<BTreeMap<String, Option<Expr>>>,
    setters: Option<usize>,
    conversions: usize,
    indices: Vec<usize>,
}

/// The builder module's `items` with each builder of the macro's shape as one invocation, in
/// the place of its struct; anything else as it was.
fn compact_module(items: Vec<Item>) -> Vec<Item> {
    let mut builders: BTreeMap<String, Parts> = BTreeMap::new();
    for (index, item) in items.iter().enumerate() {
        let Some((name, part)) = part(item) else {
            continue;
        };
        let parts = builders.entry(name).or_default();
        parts.indices.push(index);
        match part {
            Part::Struct(fields) => parts.fields = Some(fields),
            Part::Default(starts) => parts.starts = Some(starts),
            Part::Setters(count) => parts.setters = Some(count),
            Part::Conversion => parts.conversions += 1,
        }
    }
    let mut invocations: BTreeMap<usize, Item> = BTreeMap::new();
    let mut replaced = Vec::new();
    for (name, parts) in &builders {
        if let Some(invocation) = invocation(name, parts) {
            invocations.insert(parts.indices[0], invocation);
            replaced.extend(parts.indices.iter().copied());
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

/// What one item of a builder module is of the builder it belongs to.
enum Part {
    /// The struct: each field's name and the type its `Result` holds.
    Struct(Vec<(Ident, Type)>),
    /// `Default`: each field's start, `None` when it must be set.
    Default(BTreeMap<String, Option<Expr>>),
    /// The setters, how many.
    Setters(usize),
    /// `TryFrom` of the builder, or `From` of the built type.
    Conversion,
}

/// The builder `item` is part of, and which part; `None` for anything of another shape.
fn part(item: &Item) -> Option<(String, Part)> {
    match item {
        Item::Struct(item) => Some((item.ident.to_string(), Part::Struct(struct_fields(item)?))),
        Item::Impl(item) => impl_part(item),
        _ => None,
    }
}

/// The fields of a builder struct: named, each a `Result<T, String>`, with typify's derives.
fn struct_fields(item: &ItemStruct) -> Option<Vec<(Ident, Type)>> {
    let derives = item.attrs.iter().filter(|a| a.path().is_ident("derive"));
    let derives: Vec<String> = derives
        .map(|a| a.meta.to_token_stream().to_string())
        .collect();
    if derives != ["derive (Clone , Debug)"] || !item.generics.params.is_empty() {
        return None;
    }
    let Fields::Named(fields) = &item.fields else {
        return None;
    };
    fields
        .named
        .iter()
        .map(|field| Some((field.ident.clone()?, result_value(&field.ty)?)))
        .collect()
}

/// `T` of a `Result<T, String>`.
fn result_value(ty: &Type) -> Option<Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    let PathArguments::AngleBracketed(arguments) = &last.arguments else {
        return None;
    };
    match (last.ident == "Result", arguments.args.first()) {
        (true, Some(GenericArgument::Type(value))) if arguments.args.len() == 2 => {
            Some(value.clone())
        }
        _ => None,
    }
}

/// The part an `impl` is: `Default for B`, `impl B` (the setters), `TryFrom<B> for super::B`
/// or `From<super::B> for B`.
fn impl_part(item: &ItemImpl) -> Option<(String, Part)> {
    let self_name = last_ident(&item.self_ty)?;
    let Some((trait_path, _)) = &item.trait_ else {
        let setters = item.items.iter().all(
            |member| matches!(member, syn::ImplItem::Fn(method) if method.sig.inputs.len() == 2),
        );
        return setters.then(|| (self_name, Part::Setters(item.items.len())));
    };
    let trait_name = trait_path.segments.last()?.ident.to_string();
    match trait_name.as_str() {
        "Default" => Some((self_name, Part::Default(starts(item)?))),
        "TryFrom" | "From" => Some((self_name, Part::Conversion)),
        _ => None,
    }
}

/// The last identifier of a path type (`B` of `B` and of `super::B`).
fn last_ident(ty: &Type) -> Option<String> {
    let Type::Path(path) = ty else { return None };
    Some(path.path.segments.last()?.ident.to_string())
}

/// Each field's start in `Default::default()`: `Ok(value)` a default, `Err(…)` none.
fn starts(item: &ItemImpl) -> Option<BTreeMap<String, Option<Expr>>> {
    let [syn::ImplItem::Fn(default)] = item.items.as_slice() else {
        return None;
    };
    let [syn::Stmt::Expr(Expr::Struct(init), None)] = default.block.stmts.as_slice() else {
        return None;
    };
    let mut starts = BTreeMap::new();
    for field in &init.fields {
        let syn::Member::Named(name) = &field.member else {
            return None;
        };
        let Expr::Call(call) = &field.expr else {
            return None;
        };
        let constructor = match &*call.func {
            Expr::Path(path) => path.path.segments.last()?.ident.to_string(),
            _ => return None,
        };
        let start = match (constructor.as_str(), call.args.first()) {
            ("Ok", Some(value)) if call.args.len() == 1 => Some(value.clone()),
            ("Err", _) => None,
            _ => return None,
        };
        starts.insert(name.to_string(), start);
    }
    Some(starts)
}

/// `builder! { B { field: T, other: U = start } }` for builder `name`, when every part of it
/// was found and agrees with the others.
fn invocation(name: &str, parts: &Parts) -> Option<Item> {
    let (Some(fields), Some(starts), Some(setters)) = (&parts.fields, &parts.starts, parts.setters)
    else {
        return None;
    };
    if setters != fields.len() || starts.len() != fields.len() || parts.conversions != 2 {
        return None;
    }
    let name = syn::parse_str::<Ident>(name).ok()?;
    let fields = fields
        .iter()
        .map(|(field, ty)| {
            let start = starts.get(&field.to_string())?;
            Some(match start {
                Some(start) => quote! { #field: #ty = #start },
                None => quote! { #field: #ty },
            })
        })
        .collect::<Option<Vec<TokenStream>>>()?;
    Some(syn::parse_quote! {
        ::warren_runtime::codegen::builder! { #name { #( #fields ),* } }
    })
}

/// The path of the runtime's builder macro as prettyplease writes an invocation's first line.
const INVOCATION: &str = "::warren_runtime::codegen::builder! {";

/// `text` (prettyplease's, which writes a macro's tokens as a run of words: `Option <
/// String >`) with the body of every `builder!` invocation laid out as the struct it builds
/// reads: one field a line, each type and start as prettyplease writes them in code.
pub(super) fn lay_out(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        if line.trim_start() != INVOCATION {
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
        match syn::parse_str::<Body>(&body) {
            Ok(parsed) => out.push_str(&parsed.lay_out(indent)),
            // Not the shape written above: as prettyplease wrote it.
            Err(_) => out.push_str(&format!("{indent}    {}\n", body.trim_end())),
        }
        out.push_str(&close);
        out.push('\n');
    }
    out
}

/// What a `builder!` invocation holds: `Name { field: Type = start, … }`.
struct Body {
    name: Ident,
    fields: syn::punctuated::Punctuated<FieldSpec, syn::Token![,]>,
}

/// One field of a [`Body`]: its name, type, and start when it has one.
struct FieldSpec {
    name: Ident,
    ty: Type,
    start: Option<Expr>,
}

impl syn::parse::Parse for Body {
    fn parse(input: syn::parse::ParseStream<'_>) -> syn::Result<Self> {
        let name = input.parse()?;
        let fields;
        syn::braced!(fields in input);
        let fields = fields.parse_terminated(FieldSpec::parse, syn::Token![,])?;
        Ok(Self { name, fields })
    }
}

impl syn::parse::Parse for FieldSpec {
    fn parse(input: syn::parse::ParseStream<'_>) -> syn::Result<Self> {
        let name = input.parse()?;
        input.parse::<syn::Token![:]>()?;
        let ty = input.parse()?;
        let start = if input.parse::<Option<syn::Token![=]>>()?.is_some() {
            Some(input.parse()?)
        } else {
            None
        };
        Ok(Self { name, ty, start })
    }
}

impl Body {
    /// The body's lines, under an invocation indented by `indent`.
    fn lay_out(&self, indent: &str) -> String {
        let mut text = format!("{indent}    {} {{\n", self.name);
        for field in &self.fields {
            let (name, ty) = (&field.name, &field.ty);
            let ty = written(quote! { type T = #ty; }, "type T = ");
            let line = match &field.start {
                Some(start) => {
                    let start = written(quote! { const C: () = #start; }, "const C: () = ");
                    format!("{name}: {ty} = {start},")
                }
                None => format!("{name}: {ty},"),
            };
            // A line prettyplease broke keeps its own indentation under the field's.
            for part in line.lines() {
                text.push_str(&format!("{indent}        {part}\n"));
            }
        }
        text.push_str(&format!("{indent}    }}\n"));
        text
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
