//! How contract names become Rust identifiers.
//!
//! Names in a contract are free text (`order.placed`, `fulfil-order`); generated code needs
//! identifiers. The rules live here, in one place, so the checks that reject colliding names
//! and the emitter that writes them agree by construction:
//! - words are split by `heck` and joined in `UpperCamelCase` (types, traits) or `snake_case`
//!   (methods, fields);
//! - only ASCII letters, digits and `_` survive; a name with other letters is refused rather
//!   than silently shortened, so two names can never meet by losing characters;
//! - a Rust keyword stays usable as a raw identifier (`r#type`), except the few that cannot
//!   be raw (`self`, `Self`, `super`, `crate`), which get a trailing `_`;
//! - so does a name the generated code already takes in the same place ([`Role`]): a
//!   publisher `new` becomes the method `new_`, since `Publishers::new` exists.
//!
//! A trailing `_` is free for this: words are joined by `heck`, which never ends an
//! identifier with `_`, so an escaped identifier meets no other contract name's, and two
//! names that escape alike (`new`, `New`) meet each other, which the checks report.
//! The generator's own names in places contract names reach (the adapters' generic `__H`,
//! the module `__adapters`) start with `_`, which derived identifiers never do. `Handlers`'
//! type parameters, which a user reads, are named after their traits instead
//! ([`handler_param`]).

use heck::{ToSnakeCase, ToUpperCamelCase};

/// The case of a derived identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Case {
    /// `UpperCamelCase`, for types and traits.
    Type,
    /// `snake_case`, for functions, methods and fields.
    Value,
}

/// A Rust identifier derived from a contract name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Ident {
    /// The identifier without any `r#` prefix.
    pub text: String,
    /// True when the identifier is a keyword and must be written `r#text`.
    pub raw: bool,
}

/// Why a name cannot become an identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NameError {
    /// Nothing usable is left once punctuation is dropped.
    #[error("it has no letters or digits")]
    Empty(String),
    /// The identifier would start with a digit.
    #[error("it starts with a digit")]
    LeadingDigit(String),
    /// Letters outside ASCII.
    #[error("it contains `{ch}`, and warren keeps identifiers ASCII")]
    NonAscii {
        /// The name.
        name: String,
        /// The first offending character.
        ch: char,
    },
}

/// Keywords that are valid as raw identifiers (`r#type`).
const RAW_KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "do", "dyn",
    "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in", "let",
    "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref", "return",
    "static", "struct", "trait", "true", "try", "type", "typeof", "unsafe", "unsized", "use",
    "virtual", "where", "while", "yield",
];

/// Keywords that cannot be raw identifiers.
const RESERVED: &[&str] = &["self", "Self", "super", "crate", "_"];

/// Where a contract name becomes an identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A message's marker type in `messages`.
    Message,
    /// A publisher's method on `Publishers`.
    Publisher,
    /// A consumer's handler trait in `consumers`, which also names its adapter (and, through
    /// [`handler_param`], its type parameter of `Handlers`).
    ConsumerTrait,
    /// A consumer's field of `Handlers`.
    ConsumerField,
    /// A routing key placeholder: a parameter of its publisher's method.
    Placeholder,
    /// An rpc's marker type in `rpcs` (its declared errors' enum is the same name followed
    /// by `Error`).
    Rpc,
    /// An rpc's method on `RpcClients`.
    RpcMethod,
    /// A placeholder of an rpc's routing key: a parameter of its client method.
    RpcPlaceholder,
    /// An error code of an rpc: a variant of its errors' enum.
    ErrorVariant,
}

impl Role {
    /// The case of identifiers in this place.
    pub(crate) fn case(self) -> Case {
        match self {
            Self::Message | Self::ConsumerTrait | Self::Rpc | Self::ErrorVariant => Case::Type,
            Self::Publisher
            | Self::ConsumerField
            | Self::Placeholder
            | Self::RpcMethod
            | Self::RpcPlaceholder => Case::Value,
        }
    }

    /// Names the generated code itself gives in this place.
    pub(crate) fn taken(self) -> &'static [&'static str] {
        match self {
            // `Publishers`' own methods, and those of the traits it derives (a `clone`
            // publisher would hide `Clone::clone` from method calls).
            Self::Publisher => &["new", "with", "through", "clone", "clone_from", "fmt"],
            // So are `RpcClients`', which has one more.
            Self::RpcMethod => &["new", "with", "client", "clone", "clone_from", "fmt"],
            // The publish method's other parameters.
            Self::Placeholder => &["payload", "headers"],
            // The client method's other parameters.
            Self::RpcPlaceholder => &["request", "headers"],
            Self::Message
            | Self::ConsumerTrait
            | Self::ConsumerField
            | Self::Rpc
            | Self::ErrorVariant => &[],
        }
    }

    /// What the identifier is, for messages: `type`, `method`, `trait`…
    pub(crate) fn noun(self) -> &'static str {
        match self {
            Self::Message | Self::Rpc => "type",
            Self::Publisher | Self::RpcMethod => "method",
            Self::ConsumerTrait => "trait",
            Self::ConsumerField => "field",
            Self::Placeholder | Self::RpcPlaceholder => "parameter",
            Self::ErrorVariant => "variant",
        }
    }
}

/// Derives the identifier of `name` in `role`: [`ident`] in the role's case, with a trailing
/// `_` when the generated code already takes that identifier there.
pub(crate) fn role_ident(name: &str, role: Role) -> Result<Ident, NameError> {
    let mut id = ident(name, role.case())?;
    if role.taken().contains(&id.text.as_str()) {
        id.text.push('_');
        id.raw = false;
    }
    Ok(id)
}

/// The type parameter of `Handlers` for the consumer whose trait is `handler_trait`: the
/// trait's name with `Impl` after it (`FulfilOrder` → `FulfilOrderImpl`), so the struct reads
/// `fulfil_order: FulfilOrderImpl` where `FulfilOrderImpl: consumers::FulfilOrder`, and no
/// parameter reads as the trait it is bound by.
///
/// No parameter can meet a name the struct or its impl uses: they name traits and types by
/// path (`consumers::…`, `::warren_runtime::…`), except `Handlers` itself, and a parameter
/// always ends in `Impl`. Two consumers' traits differ, so their parameters do: the suffix
/// follows the trait's identifier, whose trailing `_` (only `Self_`, since a type is never
/// named `Self`) is dropped to keep the parameter `UpperCamelCase`.
pub(crate) fn handler_param(handler_trait: &Ident) -> Ident {
    Ident {
        text: format!("{}Impl", handler_trait.text.trim_end_matches('_')),
        raw: false,
    }
}

/// Derives the identifier for `name` in `case`.
pub(crate) fn ident(name: &str, case: Case) -> Result<Ident, NameError> {
    if let Some(ch) = name.chars().find(|c| !c.is_ascii() && c.is_alphanumeric()) {
        return Err(NameError::NonAscii {
            name: name.to_owned(),
            ch,
        });
    }
    let words = match case {
        Case::Type => name.to_upper_camel_case(),
        Case::Value => name.to_snake_case(),
    };
    let mut text: String = words
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if text.trim_matches('_').is_empty() {
        return Err(NameError::Empty(name.to_owned()));
    }
    if text.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(NameError::LeadingDigit(name.to_owned()));
    }
    if RESERVED.contains(&text.as_str()) {
        text.push('_');
    }
    let raw = RAW_KEYWORDS.contains(&text.as_str());
    Ok(Ident { text, raw })
}

impl std::fmt::Display for Ident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.raw {
            f.write_str("r#")?;
        }
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::{Case, NameError, Role, handler_param, ident, role_ident};

    #[test]
    fn derives_cased_identifiers() {
        let cases = [
            ("order.placed", Case::Type, "OrderPlaced"),
            ("order-placed", Case::Value, "order_placed"),
            ("OrderPlaced", Case::Value, "order_placed"),
            ("type", Case::Value, "r#type"),
            ("self", Case::Value, "self_"),
            ("self", Case::Type, "Self_"),
            ("it's \"quoted\"", Case::Type, "ItSQuoted"),
            ("a*/b", Case::Value, "a_b"),
        ];
        for (name, case, expected) in cases {
            assert_eq!(ident(name, case).unwrap().to_string(), expected, "{name}");
        }
    }

    #[test]
    fn escapes_names_the_generated_code_takes() {
        let cases = [
            ("new", Role::Publisher, "new_"),
            ("New", Role::Publisher, "new_"),
            ("with", Role::Publisher, "with_"),
            ("through", Role::Publisher, "through_"),
            ("client", Role::RpcMethod, "client_"),
            ("client", Role::Publisher, "client"),
            ("new", Role::Message, "New"),
            ("new", Role::ConsumerField, "new"),
            ("payload", Role::Placeholder, "payload_"),
            ("payload", Role::Publisher, "payload"),
            ("type", Role::Placeholder, "r#type"),
        ];
        for (name, role, expected) in cases {
            assert_eq!(
                role_ident(name, role).unwrap().to_string(),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn handler_params_end_in_impl_and_stay_distinct() {
        let names = [
            "fulfil_order",
            "self",
            "Self",
            "handlers",
            "h",
            "fulfil_order_impl",
            "impl",
        ];
        let mut params = std::collections::BTreeSet::new();
        for name in names {
            let Ok(handler_trait) = role_ident(name, Role::ConsumerTrait) else {
                continue;
            };
            let param = handler_param(&handler_trait);
            assert!(
                param.text.ends_with("Impl") && !param.raw,
                "{name} → {param}"
            );
            assert!(!param.text.contains('_'), "{name} → {param}");
            params.insert((handler_trait, param.text));
        }
        let texts: std::collections::BTreeSet<_> = params.iter().map(|(_, p)| p).collect();
        assert_eq!(texts.len(), params.len(), "{params:?}");
        assert_eq!(
            handler_param(&role_ident("fulfil_order", Role::ConsumerTrait).unwrap()).text,
            "FulfilOrderImpl"
        );
    }

    /// The escape is collision-free only because derived identifiers never end (or start)
    /// with `_` by themselves.
    #[test]
    fn derived_identifiers_neither_start_nor_end_with_an_underscore() {
        for name in crate::__fuzz::HOSTILE_NAMES
            .iter()
            .chain(["_x_", "__", "x__", "a _", "_ a"].iter())
        {
            for case in [Case::Type, Case::Value] {
                let Ok(id) = ident(name, case) else { continue };
                let escaped = matches!(id.text.as_str(), "self_" | "Self_" | "super_" | "crate_");
                assert!(
                    escaped || !(id.text.starts_with('_') || id.text.ends_with('_')),
                    "{name:?} → {id}"
                );
            }
        }
    }

    #[test]
    fn refuses_names_without_an_identifier() {
        assert_eq!(
            ident("...", Case::Type),
            Err(NameError::Empty("...".into()))
        );
        assert_eq!(
            ident("9lives", Case::Value),
            Err(NameError::LeadingDigit("9lives".into()))
        );
        assert!(matches!(
            ident("café", Case::Type),
            Err(NameError::NonAscii { ch: 'é', .. })
        ));
    }
}
