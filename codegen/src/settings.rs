//! What a consumer of a contract chooses about its generated Rust, beyond what the contract
//! says: extra derives and attributes on the payload and headers types, builders for them,
//! schema types replaced by the consumer's own, and which of the contract's consumers and
//! publishers it generates (`select.rs`).
//!
//! Settings belong to the crate that generates, not to the contract: two services sharing one
//! `warren.yaml` may want different derives. So they are never read from `warren.yaml`; they
//! come from `warren_build::Config` or the `warren generate` flags, and reach typify's own
//! settings (`TypeSpaceSettings`) through [`Settings::resolve`].

use std::collections::{BTreeMap, BTreeSet};

use quote::ToTokens;
use syn::parse::Parser;

use crate::contract::Contract;
use crate::diagnostics::{Code, Diagnostic, Diagnostics};

mod select;

use select::Choice;
pub(crate) use select::Selection;

/// The name diagnostics about settings give as their file: settings come from a build script
/// or command-line flags, not from a file.
const SETTINGS: &str = "generator settings";

/// The most type names a diagnostic about an unknown replaced type lists.
const MAX_LISTED_TYPES: usize = 12;

/// How to generate a contract's Rust, beyond what the contract says: its payload and headers
/// types, and which of its consumers and publishers.
///
/// The setters follow `warren_build::Config`: each takes `&mut self` and returns it, so
/// they chain, and a later call adds to (or, for one type's replacement, overrides) an
/// earlier one; [`no_consumers`](Self::no_consumers) and
/// [`no_publishers`](Self::no_publishers) empty their choice. Nothing is checked until
/// generation, which reports every bad setting at once as
/// [`Error::Invalid`](crate::Error::Invalid).
///
/// ```no_run
/// let mut settings = warren_codegen::Settings::new();
/// settings
///     .derive("Eq")
///     .derive("Hash")
///     .attribute("#[non_exhaustive]")
///     .builders(true)
///     .replace("Money", "::my_money::Money")
///     // This service runs one consumer of the contract and publishes with one publisher.
///     .consumer("fulfil_order")
///     .publisher("place_order");
/// let generated = warren_codegen::check_contract("warren.yaml")?.generate(&settings)?;
/// # Ok::<(), warren_codegen::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    derives: Vec<String>,
    attributes: Vec<String>,
    builders: bool,
    replacements: BTreeMap<String, String>,
    externs: BTreeMap<String, String>,
    consumers: Choice,
    publishers: Choice,
}

impl Settings {
    /// No extra derives or attributes, no builders, no replacements: the generated types are
    /// what the schemas say; and every consumer and publisher of the contract.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a derive to every generated payload and headers type, such as `Eq`, `Hash` or a
    /// path like `::schemars::JsonSchema`. The derive must hold for every type: `Eq` on a
    /// type with a `number` field fails to compile.
    ///
    /// Every type already derives `Clone`, `Debug`, `PartialEq` and serde's `Serialize` and
    /// `Deserialize`; enums of plain strings also `Copy`, `Eq`, `Hash`, `Ord` and
    /// `PartialOrd`, string newtypes (a string with a pattern or a length) `Eq`, `Hash`, `Ord`
    /// and `PartialOrd`, and structs whose fields all have defaults `Default`. Deriving one of
    /// these again is harmless: a derive of the standard library or serde is merged with the
    /// type's own however its path is written (`::core::hash::Hash` is `Hash`).
    ///
    /// ```no_run
    /// let mut settings = warren_codegen::Settings::new();
    /// settings.derive("Eq").derive("Hash");
    /// ```
    pub fn derive(&mut self, path: impl Into<String>) -> &mut Self {
        let path = path.into();
        if !self.derives.contains(&path) {
            self.derives.push(path);
        }
        self
    }

    /// Adds an attribute, written in full as `#[…]`, to every generated payload and headers
    /// type. Several may be written in one string.
    ///
    /// ```no_run
    /// let mut settings = warren_codegen::Settings::new();
    /// settings.attribute("#[non_exhaustive]");
    /// ```
    pub fn attribute(&mut self, attribute: impl Into<String>) -> &mut Self {
        let attribute = attribute.into();
        if !self.attributes.contains(&attribute) {
            self.attributes.push(attribute);
        }
        self
    }

    /// Whether every generated struct gets a builder (off by default): `T::builder()` sets
    /// fields one at a time, each converted into its field's type (a pattern or length is
    /// checked then), and `try_into()` fails when a required one is missing or did not
    /// convert.
    ///
    /// ```no_run
    /// let mut settings = warren_codegen::Settings::new();
    /// settings.builders(true);
    /// // Then, in the crate that includes the generated file:
    /// // let order: types::OrderPlaced = types::OrderPlaced::builder()
    /// //     .order_id(id)
    /// //     .customer_id("c-1")
    /// //     /* … */
    /// //     .try_into()?;
    /// ```
    pub fn builders(&mut self, builders: bool) -> &mut Self {
        self.builders = builders;
        self
    }

    /// Uses the Rust type at `rust_type` wherever the contract's schemas use the type named
    /// `type_name`, which is then not generated. `type_name` is the generated type's name
    /// (such as `Money`) of one of the contract's schema definitions: a schema file's root or
    /// a definition under its `$defs`. The types generated for a part of one (`MoneyCurrency`
    /// for field `currency` of `Money`) cannot be replaced alone.
    ///
    /// The path is resolved inside the generated `types` module: name your own type from
    /// the crate root (`crate::money::Money`) or another crate (`::my_money::Money`). The
    /// type must implement what the generated types derive (`Clone`, `Debug`, `PartialEq`,
    /// serde's traits, and every extra [`derive`](Self::derive)), and serialize to JSON that
    /// meets the schema, which the runtime still validates. `types::Money` stays a name for
    /// it, so code written against the generated type keeps compiling; a replacement naming
    /// that alias (`Money`, `self::Money`, `types::Money`) is refused.
    ///
    /// ```no_run
    /// let mut settings = warren_codegen::Settings::new();
    /// settings.replace("Money", "crate::money::Money");
    /// ```
    pub fn replace(
        &mut self,
        type_name: impl Into<String>,
        rust_type: impl Into<String>,
    ) -> &mut Self {
        self.replacements.insert(type_name.into(), rust_type.into());
        self
    }

    /// Takes the types of imported contract `import` (its name under `imports`) from where
    /// its own generated code already is, `rust_module` (the module that includes it, such as
    /// `crate::orders`, or a crate another team publishes), instead of generating copies. An
    /// imported message then has one Rust type whichever contract of the crate names it:
    /// every type of this contract read from a schema file the imported contract reads too
    /// becomes `<rust_module>::types::<its name there>`. An explicit [`Settings::replace`] of
    /// the same type wins.
    ///
    /// ```
    /// let mut settings = warren_codegen::Settings::new();
    /// settings.extern_contract("orders", "crate::orders");
    /// ```
    pub fn extern_contract(
        &mut self,
        import: impl Into<String>,
        rust_module: impl Into<String>,
    ) -> &mut Self {
        self.externs.insert(import.into(), rust_module.into());
        self
    }

    /// Generates consumer `name` of the contract, and only the consumers chosen so: a
    /// service that runs some of a contract's consumers chooses them, and its generated code
    /// then has a handler trait, a `Handlers` field and a `consumers::register` function for
    /// those alone, so leaving one of *them* without a handler is still a compile error, and
    /// the others are no concern of the service. Repeat it for each consumer; without it,
    /// every consumer of the contract is generated.
    ///
    /// An rpc's server counts as a consumer: `name` may be an rpc's, and chooses its server
    /// trait, `Handlers` field and `consumers::register` function.
    ///
    /// `name` is the consumer's name in the contract; a name the contract does not have fails
    /// generation (with every other bad setting, and a "did you mean").
    ///
    /// What the choice leaves out is only code: the payload and headers types and message
    /// markers of every message are still generated, and `topology()` is still the whole
    /// contract's. Every service sharing a contract declares the same topology, so whichever
    /// starts first declares what the others need (the queues a publisher's messages must
    /// reach, the dead-letter exchanges and wait queues of every consumer), and no two
    /// services redeclare one queue differently.
    ///
    /// ```no_run
    /// let mut settings = warren_codegen::Settings::new();
    /// settings.consumer("fulfil_order").consumer("bill_orders");
    /// ```
    pub fn consumer(&mut self, name: impl Into<String>) -> &mut Self {
        self.consumers.add(name.into());
        self
    }

    /// Generates no consumer at all, for a service that only publishes: no `consumers`
    /// module, no `Handlers`. A later [`consumer`](Self::consumer) chooses one again.
    ///
    /// ```no_run
    /// let mut settings = warren_codegen::Settings::new();
    /// settings.no_consumers().publisher("place_order");
    /// ```
    pub fn no_consumers(&mut self) -> &mut Self {
        self.consumers.none();
        self
    }

    /// Generates publisher `name` of the contract, and only the publishers chosen so:
    /// `Publishers` then has a method for those alone. Repeat it for each publisher; without
    /// it, every publisher of the contract is generated. A name the contract does not have
    /// fails generation, as for [`consumer`](Self::consumer).
    ///
    /// An rpc's client method counts as a publisher: `name` may be an rpc's, and chooses its
    /// method on `RpcClients` (left out, with the others, by [`no_publishers`](Self::no_publishers)).
    ///
    /// ```no_run
    /// let mut settings = warren_codegen::Settings::new();
    /// settings.publisher("place_order");
    /// ```
    pub fn publisher(&mut self, name: impl Into<String>) -> &mut Self {
        self.publishers.add(name.into());
        self
    }

    /// Generates no publisher at all, for a service that only consumes: no `Publishers`. A
    /// later [`publisher`](Self::publisher) chooses one again.
    ///
    /// ```no_run
    /// let mut settings = warren_codegen::Settings::new();
    /// settings.consumer("fulfil_order").no_publishers();
    /// ```
    pub fn no_publishers(&mut self) -> &mut Self {
        self.publishers.none();
        self
    }

    /// Checks every setting against `contract`: each derive a path, each attribute outer
    /// attributes, each replaced type a schema definition of the contract and its replacement
    /// a type path other than the alias it leaves, each chosen consumer and publisher one of
    /// the contract's. Every problem is reported, never just the first.
    pub(crate) fn resolve(&self, contract: &Contract) -> Result<Resolved, Diagnostics> {
        let mut problems = Diagnostics::new();
        let selection =
            Selection::resolve(&self.consumers, &self.publishers, contract, &mut problems);
        let mut options = TypeOptions {
            builders: self.builders,
            ..TypeOptions::default()
        };
        for derive in &self.derives {
            match syn::parse_str::<syn::Path>(derive) {
                Ok(path) if path.segments.iter().any(|s| !s.arguments.is_none()) => problems.push(
                    bad(format!("derive `{derive}` has generic arguments"))
                        .with_help("name the derive macro alone, such as `Hash`"),
                ),
                Ok(path) => {
                    let derive = typify_derive(&path);
                    if !options.derives.contains(&derive) {
                        options.derives.push(derive);
                    }
                }
                Err(error) => problems.push(
                    bad(format!("derive `{derive}` is not a path: {error}")).with_help(
                        "name a derive macro, such as `Hash` or `::schemars::JsonSchema`",
                    ),
                ),
            }
        }
        for attribute in &self.attributes {
            match syn::Attribute::parse_outer.parse_str(attribute) {
                Ok(parsed) if !parsed.is_empty() => options
                    .attributes
                    .extend(parsed.iter().map(|a| a.to_token_stream().to_string())),
                Ok(_) => problems.push(
                    bad("an attribute setting is empty")
                        .with_help("write the attribute in full, such as `#[non_exhaustive]`"),
                ),
                Err(error) => problems.push(
                    bad(format!("attribute `{attribute}` does not parse: {error}"))
                        .with_help("write the attribute in full, such as `#[non_exhaustive]`"),
                ),
            }
        }
        // Built only when a replaced name is no definition, to say what it is instead.
        let mut made: Option<BTreeSet<String>> = None;
        for (name, rust_type) in &self.replacements {
            let known = contract.schemas.definitions.contains_key(name);
            if !known {
                let made = made.get_or_insert_with(|| crate::emit::type_names(contract));
                problems.push(unknown_type(contract, name, made));
            }
            // Checked whether or not the name is known: both problems are reported at once.
            match syn::parse_str::<syn::TypePath>(rust_type) {
                Ok(path) if names_the_alias(&path, name) => problems.push(
                    bad(format!(
                        "`{name}` is replaced by itself: `{rust_type}` names the alias \
                         `types::{name}` that stands for the replacement"
                    ))
                    .with_help(
                        "name the replacement from the crate root, such as `crate::money::Money`",
                    ),
                ),
                Ok(path) if known => {
                    options.replacements.insert(name.clone(), path);
                }
                Ok(_) => {}
                Err(error) => problems.push(
                    bad(format!(
                        "the replacement of `{name}`, `{rust_type}`, is not a type path: {error}"
                    ))
                    .with_help("name a type, such as `crate::money::Money`"),
                ),
            }
        }
        self.resolve_externs(contract, &mut options, &mut problems);
        if problems.is_empty() {
            Ok(Resolved {
                types: options,
                selection,
            })
        } else {
            Err(problems)
        }
    }

    /// Turns each [`Settings::extern_contract`] into replacements: this contract's types
    /// whose schema (file and pointer) the imported contract bundles too, by that contract's
    /// name for them.
    fn resolve_externs(
        &self,
        contract: &Contract,
        options: &mut TypeOptions,
        problems: &mut Diagnostics,
    ) {
        for (import, module) in &self.externs {
            let Some(imported) = contract.imports.get(import) else {
                let imports: Vec<&str> = contract.imports.keys().map(String::as_str).collect();
                problems.push(
                    bad(format!("`{import}` is not a contract this one imports")).with_help(
                        format!("name one of its `imports`: {}", crate::check::list(imports)),
                    ),
                );
                continue;
            };
            let theirs: BTreeMap<_, &String> = imported
                .schemas
                .origins
                .iter()
                .map(|(name, origin)| (origin, name))
                .collect();
            for (name, origin) in &contract.schemas.origins {
                let Some(their_name) = theirs.get(origin) else {
                    continue;
                };
                if self.replacements.contains_key(name) {
                    continue;
                }
                let path = format!("{module}::types::{their_name}");
                match syn::parse_str::<syn::TypePath>(&path) {
                    Ok(path) => {
                        options.replacements.insert(name.clone(), path);
                    }
                    Err(error) => {
                        problems.push(
                            bad(format!(
                                "the module of imported contract `{import}`, `{module}`, is not a path: {error}"
                            ))
                            .with_help("name the module that includes its generated code, such as `crate::orders`"),
                        );
                        break;
                    }
                }
            }
        }
    }
}

/// The derives of the standard library typify writes on some generated types, each by the
/// module that holds it: typify writes them by their bare names.
const STD_DERIVES: &[(&str, &str)] = &[
    ("clone", "Clone"),
    ("marker", "Copy"),
    ("fmt", "Debug"),
    ("default", "Default"),
    ("cmp", "Eq"),
    ("hash", "Hash"),
    ("cmp", "Ord"),
    ("cmp", "PartialEq"),
    ("cmp", "PartialOrd"),
];

/// `derive` written as typify writes it. typify merges a type's derives by their text, so a
/// derive it already writes, written another way (`::core::hash::Hash` for `Hash`, on a
/// string enum that derives `Hash` already), would be derived twice and fail to compile
/// (E0119): a derive of the standard library is its bare name, serde's is `::serde::…`, and
/// any other path is written without spaces.
fn typify_derive(derive: &syn::Path) -> String {
    let names: Vec<String> = derive
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    match names.as_slice() {
        [krate, module, name]
            if ["std", "core"].contains(krate) && STD_DERIVES.contains(&(*module, *name)) =>
        {
            (*name).to_owned()
        }
        ["serde", name @ ("Serialize" | "Deserialize")] => format!("::serde::{name}"),
        _ => {
            let joined = names.join("::");
            if derive.leading_colon.is_some() {
                format!("::{joined}")
            } else {
                joined
            }
        }
    }
}

/// Why `name`, which is no schema definition of `contract`, cannot be replaced: a type typify
/// makes for a part of a definition (`made` holds their names), or no type at all.
fn unknown_type(contract: &Contract, name: &str, made: &BTreeSet<String>) -> Diagnostic {
    let types = &contract.schemas.definitions;
    if made.contains(name) {
        // typify names a part after the definition holding it: `MoneyCurrency` in `Money`.
        let parent = types
            .keys()
            .filter(|definition| name.starts_with(definition.as_str()))
            .max_by_key(|definition| definition.len());
        let (part_of, help) = match parent {
            Some(parent) => (
                format!("a part of `{parent}` (a property, an item or a variant)"),
                format!(
                    "replace `{parent}`, or move this part of its schema into a definition of \
                     its own under `$defs`, refer to it with `$ref`, and replace that"
                ),
            ),
            None => (
                "a part of a schema (a property, an item or a variant)".to_owned(),
                "move this part of its schema into a definition of its own under `$defs`, \
                 refer to it with `$ref`, and replace that"
                    .to_owned(),
            ),
        };
        return bad(format!(
            "cannot replace `{name}`: only the contract's schema definitions can be replaced, \
             and `{name}` is a type generated for {part_of}"
        ))
        .with_help(help);
    }
    let help = match crate::check::suggest(name, types.keys()) {
        Some(close) => format!("did you mean `{close}`?"),
        // A large contract's list would bury the message.
        None if types.len() > MAX_LISTED_TYPES => format!(
            "name one of the contract's {} schema definitions as the generated `types` module \
             does",
            types.len()
        ),
        None => format!(
            "the contract's schema definitions are {}",
            crate::check::list(types.keys().map(String::as_str))
        ),
    };
    bad(format!(
        "cannot replace `{name}`: the contract has no schema definition of that name"
    ))
    .with_help(help)
}

/// Whether `path`, resolved inside the generated `types` module, names the alias `name` that
/// the replacement leaves there: `Money`, `self::Money`, `types::Money` or
/// `super::types::Money`. Such an alias would stand for itself.
fn names_the_alias(path: &syn::TypePath, name: &str) -> bool {
    if path.qself.is_some() || path.path.leading_colon.is_some() {
        return false;
    }
    let segments: Vec<String> = path
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    let Some((last, prefix)) = segments.split_last() else {
        return false;
    };
    let prefix: Vec<&str> = prefix
        .iter()
        .map(String::as_str)
        .skip_while(|segment| *segment == "self")
        .collect();
    last == name && matches!(prefix.as_slice(), [] | ["types"] | ["super", "types"])
}

/// An error about a setting.
fn bad(message: impl Into<String>) -> Diagnostic {
    Diagnostic::error(Code::BadSetting, SETTINGS, message)
}

/// Settings checked against a contract: what emit reads.
#[derive(Default)]
pub(crate) struct Resolved {
    /// How the payload and headers types are generated.
    pub types: TypeOptions,
    /// Which consumers and publishers are generated.
    pub selection: Selection,
}

/// The type settings checked against a contract; derives and attributes in the token text
/// typify reads.
#[derive(Default)]
pub(crate) struct TypeOptions {
    /// Extra derives, each a path.
    pub derives: Vec<String>,
    /// Extra attributes, one `#[…]` each.
    pub attributes: Vec<String>,
    /// Whether structs get builders.
    pub builders: bool,
    /// Replaced type name → the Rust type path replacing it.
    pub replacements: BTreeMap<String, syn::TypePath>,
}

#[cfg(test)]
mod tests {
    use super::Settings;
    use crate::{Error, Sources, check_sources};

    fn generate(settings: &Settings) -> Result<String, Error> {
        let mut sources =
            Sources::new("warren.yaml", "messages:\n  ping: { payload: ping.json }\n");
        sources.file(
            "ping.json",
            r#"{ "title": "Ping", "type": "object", "properties": { "at": { "type": "string" } } }"#,
        );
        check_sources(&sources)?.generate(settings).map(|g| g.code)
    }

    fn problems(settings: &Settings) -> Vec<String> {
        match generate(settings) {
            Err(Error::Invalid(problems)) => problems.iter().map(|d| d.message.clone()).collect(),
            other => panic!("bad settings: {other:?}"),
        }
    }

    #[test]
    fn std_and_serde_derives_are_written_as_typify_writes_them() {
        let written = |derive: &str| super::typify_derive(&syn::parse_str(derive).expect("a path"));
        assert_eq!(written("::core::hash::Hash"), "Hash");
        assert_eq!(written("std::cmp::PartialOrd"), "PartialOrd");
        assert_eq!(written("core::marker::Copy"), "Copy");
        assert_eq!(written("serde::Serialize"), "::serde::Serialize");
        assert_eq!(written(":: serde :: Deserialize"), "::serde::Deserialize");
        assert_eq!(
            written(":: schemars :: JsonSchema"),
            "::schemars::JsonSchema"
        );
        assert_eq!(written("my::hash::Hash"), "my::hash::Hash");
        assert_eq!(written("std::hash::Eq"), "std::hash::Eq");
    }

    #[test]
    fn a_replacement_naming_the_alias_it_leaves_is_refused() {
        let aliases = |path: &str| {
            super::names_the_alias(&syn::parse_str(path).expect("a type path"), "Money")
        };
        for alias in [
            "Money",
            "self::Money",
            "types::Money",
            "self::types::Money",
            "super::types::Money",
        ] {
            assert!(aliases(alias), "{alias}");
        }
        for other in [
            "crate::Money",
            "::types::Money",
            "super::Money",
            "money::Money",
        ] {
            assert!(!aliases(other), "{other}");
        }
    }

    /// A contract importing `shop`, whose `sale` payload refers to a `Money` both contracts'
    /// schemas read, beside one type of the importer's own.
    fn importing() -> Sources {
        let mut sources = Sources::new(
            "billing/warren.yaml",
            "imports: { shop: ../shop/warren.yaml }\n\
             queues:\n  sales: { on_poison: drop }\n\
             exchanges:\n  billing: {}\n\
             bindings:\n  - { exchange: \"shop::shop\", queue: sales, routing_key: \"#\" }\n\
             messages:\n  refund: { payload: refund.json }\n\
             publishers:\n  refund: { exchange: billing, routing_key: r, message: refund, external_consumers: true }\n\
             consumers:\n  bill: { queue: sales, message: \"shop::sale\" }\n",
        );
        sources
            .file(
                "shop/warren.yaml",
                "exchanges:\n  shop: {}\nmessages:\n  sale: { payload: sale.json }\n",
            )
            .file(
                "shop/sale.json",
                r#"{ "title": "Sale", "type": "object", "properties": { "total": { "$ref": "money.json" } } }"#,
            )
            .file(
                "shop/money.json",
                r#"{ "title": "Money", "type": "object", "properties": { "cents": { "type": "integer" } } }"#,
            )
            .file(
                "billing/refund.json",
                r#"{ "title": "Refund", "type": "object", "properties": { "amount": { "$ref": "../shop/money.json" } } }"#,
            );
        sources
    }

    #[test]
    fn an_extern_contract_lends_its_types_and_an_unknown_one_is_refused() {
        let checked = check_sources(&importing()).expect("a valid contract");
        let mut settings = Settings::new();
        settings.extern_contract("shop", "crate::shop");
        let code = checked.clone().generate(&settings).expect("generates").code;
        // The imported message's type, and the importer's own use of the same schema.
        assert!(
            code.contains("pub type Sale = crate::shop::types::Sale;"),
            "{code}"
        );
        assert!(
            code.contains("pub type Money = crate::shop::types::Money;"),
            "{code}"
        );
        assert!(code.contains("pub struct Refund"), "{code}");
        let mut settings = Settings::new();
        settings.extern_contract("shops", "crate::shop");
        let Err(Error::Invalid(problems)) = checked.generate(&settings) else {
            panic!("an unknown import");
        };
        assert_eq!(
            problems
                .iter()
                .map(|d| d.message.as_str())
                .collect::<Vec<_>>(),
            ["`shops` is not a contract this one imports"]
        );
    }

    #[test]
    fn settings_are_parsed_before_typify_sees_them() {
        let mut settings = Settings::new();
        settings
            .derive("Vec<u8>")
            .derive("")
            .attribute("#[doc = \"x\"] junk")
            .replace("Ping", "")
            .replace("Ping", "fn()");
        assert_eq!(
            problems(&settings),
            [
                "attribute `#[doc = \"x\"] junk` does not parse: unexpected token",
                "derive `Vec<u8>` has generic arguments",
                "derive `` is not a path: unexpected end of input, expected identifier",
                "the replacement of `Ping`, `fn()`, is not a type path: expected identifier, \
                 found keyword `fn`",
            ]
        );
    }

    #[test]
    fn good_settings_reach_the_generated_types() {
        let mut settings = Settings::new();
        settings
            .derive(" ::core::hash::Hash ")
            .attribute("#[must_use] #[doc(alias = \"pong\")]")
            .replace("Ping", "::std::boxed::Box<crate::Ping>");
        let code = generate(&settings).expect("valid settings");
        assert!(
            code.contains("pub type Ping = ::std::boxed::Box<crate::Ping>;"),
            "{code}"
        );
        let mut settings = Settings::new();
        settings
            .derive(" ::core::hash::Hash ")
            .attribute("#[must_use] #[doc(alias = \"pong\")]");
        let code = generate(&settings).expect("valid settings");
        assert!(!code.contains("::core::hash::Hash"), "{code}");
        for expected in ["Hash,", "#[must_use]", "#[doc(alias = \"pong\")]"] {
            assert!(code.contains(expected), "`{expected}` in {code}");
        }
    }
}
