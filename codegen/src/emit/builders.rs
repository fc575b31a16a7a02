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
    let replacements = builders
        .iter()
        .filter_map(|(name, parts)| Some((parts.indices.as_slice(), invocation(name, parts)?)));
    super::invocations::replace(items, replacements)
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
