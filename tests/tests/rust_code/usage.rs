//! The code a user writes against a generated file, written mechanically from that file:
//! every use of a message's Rust types that the README shows, spelled with the types the
//! file gives (never inferred), so that it stops compiling against another version of the
//! file exactly when that version breaks such code.
//!
//! For each payload and headers type: built with its `new` (arguments of the declared
//! types), every field read as its declared type, every enum matched exhaustively, every
//! other type named; each message marker named; every method of `RpcClients` called with
//! arguments of its declared types and its result kept as its declared type (not yet
//! `Publishers`', generic over their sink and written by the runtime's `publisher!`); every consumer and rpc server trait implemented with `async fn`, as the
//! README writes handlers; every rpc's error enum matched. `Handlers` is left out: it has a
//! field per consumer by design, so every consumer added to a contract changes it.

use proc_macro2::{Ident, Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote};
use syn::{
    Fields, FnArg, GenericArgument, ImplItem, Item, ItemEnum, ItemImpl, ItemStruct, ItemTrait,
    PathArguments, ReturnType, TraitItem, Type, TypeParamBound,
};

/// The usage code of `generated` (a whole generated file), as items to put beside it at the
/// root of a crate that `include!`s it.
pub fn of(generated: &syn::File) -> String {
    let mut out = vec![quote! {
        /// A value of any type, for code that is only compiled.
        fn any<T>() -> T {
            ::core::unimplemented!()
        }
    }];
    for item in &generated.items {
        match item {
            Item::Mod(module) if module.ident == "types" => {
                let items = module.content.as_ref().map_or(&[][..], |(_, i)| i);
                let uses = types(items);
                out.push(
                    quote! { mod use_types { use super::any; use super::types::*; #(#uses)* } },
                );
            }
            Item::Mod(module) if module.ident == "messages" || module.ident == "rpcs" => {
                let items = module.content.as_ref().map_or(&[][..], |(_, i)| i);
                let (name, uses) = (&module.ident, markers(items));
                let inner = format_ident!("use_{name}");
                out.push(quote! { mod #inner { use super::#name::*; #(#uses)* } });
            }
            Item::Mod(module) if module.ident == "consumers" => {
                let items = module.content.as_ref().map_or(&[][..], |(_, i)| i);
                let uses = items.iter().filter_map(|item| match item {
                    Item::Trait(t) => Some(handler(t)),
                    _ => None,
                });
                out.push(quote! { mod use_consumers { use super::any; #(#uses)* } });
            }
            Item::Impl(block) if is_client(block) => out.push(calls(block)),
            _ => {}
        }
    }
    let file: syn::File = syn::parse2(quote! { #(#out)* }).expect("the usage code parses");
    prettyplease::unparse(&file)
}

/// Building, reading and matching each type of the `types` module.
fn types(items: &[Item]) -> Vec<TokenStream> {
    let mut uses = Vec::new();
    for item in items {
        match item {
            Item::Struct(s) => uses.push(structure(s, items)),
            Item::Enum(e) => uses.push(matched(e)),
            Item::Type(alias) => uses.push(named(&alias.ident)),
            _ => {}
        }
    }
    uses
}

/// Item `name` named as a type.
fn named(name: &Ident) -> TokenStream {
    let function = format_ident!("name_{name}");
    quote! { fn #function(_: &#name) {} }
}

/// Struct `s` built with its `new` (when `items` give it one) and every named field read.
fn structure(s: &ItemStruct, items: &[Item]) -> TokenStream {
    let name = &s.ident;
    let Fields::Named(fields) = &s.fields else {
        return named(name);
    };
    let reads = fields.named.iter().map(|field| {
        let (ident, ty) = (&field.ident, &field.ty);
        quote! { let _: &#ty = &value.#ident; }
    });
    let read = format_ident!("read_{name}");
    let build = constructor(name, items).map(|arguments| {
        let build = format_ident!("build_{name}");
        quote! { fn #build() -> #name { #name::new(#( any::<#arguments>() ),*) } }
    });
    quote! {
        fn #read(value: &#name) { #(#reads)* }
        #build
    }
}

/// The argument types of `name::new` among `items`: an `impl`'s, or the constructor the
/// runtime's `serde_struct!` writes for `name` (`new(field: Type, …)` after the fields).
fn constructor(name: &Ident, items: &[Item]) -> Option<Vec<Type>> {
    items.iter().find_map(|item| match item {
        Item::Impl(block) if self_ident(block).is_some_and(|i| i == name) => {
            block.items.iter().find_map(|item| match item {
                ImplItem::Fn(f) if f.sig.ident == "new" => Some(argument_types(&f.sig.inputs)),
                _ => None,
            })
        }
        Item::Macro(invocation) if invocation.mac.path.is_ident("serde_struct") => {
            serde_struct_constructor(name, invocation.mac.tokens.clone())
        }
        _ => None,
    })
}

/// The argument types of the `new(…)` a `serde_struct!` invocation holds, when it is `name`'s.
fn serde_struct_constructor(name: &Ident, tokens: TokenStream) -> Option<Vec<Type>> {
    let mut trees = tokens.into_iter();
    match trees.next() {
        Some(TokenTree::Ident(first)) if first == *name => {}
        _ => return None,
    }
    let mut trees = trees.skip_while(|tree| !matches!(tree, TokenTree::Ident(i) if i == "new"));
    trees.next()?;
    let Some(TokenTree::Group(arguments)) = trees.next() else {
        return None;
    };
    let parser = syn::punctuated::Punctuated::<syn::Field, syn::Token![,]>::parse_terminated_with;
    let fields = syn::parse::Parser::parse2(
        |input: syn::parse::ParseStream<'_>| parser(input, syn::Field::parse_named),
        arguments.stream(),
    )
    .expect("a constructor's arguments parse");
    Some(fields.into_iter().map(|field| field.ty).collect())
}

/// The types of `inputs`, the receiver left out.
fn argument_types<'a>(inputs: impl IntoIterator<Item = &'a FnArg>) -> Vec<Type> {
    inputs
        .into_iter()
        .filter_map(|input| match input {
            FnArg::Typed(typed) => Some((*typed.ty).clone()),
            FnArg::Receiver(_) => None,
        })
        .collect()
}

/// Enum `e` matched, one arm per variant and no wildcard.
fn matched(e: &ItemEnum) -> TokenStream {
    let name = &e.ident;
    let arms = e.variants.iter().map(|variant| {
        let ident = &variant.ident;
        match variant.fields {
            Fields::Unit => quote! { #name::#ident => {} },
            Fields::Unnamed(_) => quote! { #name::#ident(..) => {} },
            Fields::Named(_) => quote! { #name::#ident { .. } => {} },
        }
    });
    let function = format_ident!("match_{name}");
    quote! { fn #function(value: &#name) { match value { #(#arms)* } } }
}

/// Each marker struct named and each enum matched, of module `messages` or `rpcs`.
fn markers(items: &[Item]) -> Vec<TokenStream> {
    items
        .iter()
        .filter_map(|item| match item {
            Item::Struct(s) => Some(named(&s.ident)),
            Item::Enum(e) => Some(matched(e)),
            _ => None,
        })
        .collect()
}

/// The type `block` implements, when it is a plain name.
fn self_ident(block: &ItemImpl) -> Option<&Ident> {
    match &*block.self_ty {
        Type::Path(path) if block.trait_.is_none() => path.path.get_ident(),
        _ => None,
    }
}

/// Whether `block` is the inherent impl of `Publishers` or `RpcClients`.
fn is_client(block: &ItemImpl) -> bool {
    self_ident(block).is_some_and(|i| i == "Publishers" || i == "RpcClients")
}

/// `mod use_<client> { … }`: every public method of the client `block` called.
fn calls(block: &ItemImpl) -> TokenStream {
    let client = self_ident(block).expect("a client's impl");
    let module = format_ident!("use_{}", client.to_string().to_lowercase());
    let functions = block.items.iter().filter_map(|item| {
        let ImplItem::Fn(f) = item else { return None };
        if !matches!(f.vis, syn::Visibility::Public(_)) {
            return None;
        }
        let method = &f.sig.ident;
        let arguments = argument_types(&f.sig.inputs).into_iter().map(|ty| {
            if matches!(ty, Type::ImplTrait(_)) {
                return quote! { any() };
            }
            let ty = replace_self(ty.into_token_stream(), client);
            quote! { any::<#ty>() }
        });
        let returned = match &f.sig.output {
            ReturnType::Default => quote! { () },
            ReturnType::Type(_, ty) => replace_self(ty.to_token_stream(), client),
        };
        let awaited = f.sig.asyncness.map(|_| quote! { .await });
        let call = if f.sig.receiver().is_some() {
            quote! { any::<&#client>().#method(#(#arguments),*) }
        } else {
            quote! { #client::#method(#(#arguments),*) }
        };
        let function = format_ident!("call_{method}");
        Some(quote! { async fn #function() { let _: #returned = #call #awaited; } })
    });
    quote! { mod #module { use super::*; #(#functions)* } }
}

/// `tokens` with `Self` spelled `name`.
fn replace_self(tokens: TokenStream, name: &Ident) -> TokenStream {
    tokens
        .into_iter()
        .map(|tree| match tree {
            TokenTree::Ident(ident) if ident == "Self" => {
                TokenTree::Ident(Ident::new(&name.to_string(), Span::call_site()))
            }
            TokenTree::Group(group) => {
                let mut replaced =
                    proc_macro2::Group::new(group.delimiter(), replace_self(group.stream(), name));
                replaced.set_span(group.span());
                TokenTree::Group(replaced)
            }
            other => other,
        })
        .collect()
}

/// Handler trait `t` implemented with `async fn`s returning each method's future's output,
/// its arguments of the types it declares (its `super::` paths read from the crate root,
/// where this module's parent is).
fn handler(t: &ItemTrait) -> TokenStream {
    let name = &t.ident;
    let implementor = format_ident!("{name}Impl");
    let methods = t.items.iter().filter_map(|item| {
        let TraitItem::Fn(f) = item else { return None };
        if f.default.is_some() {
            return None;
        }
        let mut sig = f.sig.clone();
        let output = future_output(&sig.output);
        if let Some(output) = output {
            sig.asyncness = Some(Default::default());
            sig.output = syn::parse_quote! { -> #output };
        }
        Some(quote! { #sig { any() } })
    });
    quote! {
        struct #implementor;
        impl super::consumers::#name for #implementor { #(#methods)* }
    }
}

/// `O` of a method returning `impl Future<Output = O> + …`.
fn future_output(output: &ReturnType) -> Option<Type> {
    let ReturnType::Type(_, ty) = output else {
        return None;
    };
    let Type::ImplTrait(bounds) = &**ty else {
        return None;
    };
    bounds.bounds.iter().find_map(|bound| {
        let TypeParamBound::Trait(bound) = bound else {
            return None;
        };
        let last = bound.path.segments.last()?;
        let PathArguments::AngleBracketed(arguments) = &last.arguments else {
            return None;
        };
        arguments.args.iter().find_map(|argument| match argument {
            GenericArgument::AssocType(assoc) if assoc.ident == "Output" => Some(assoc.ty.clone()),
            _ => None,
        })
    })
}
