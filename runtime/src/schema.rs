//! JSON Schema validation of payloads and headers, compiled once per message type.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use jsonschema::json::Json;
use serde_json::Value;

use crate::codec::{Document, Tree};
use crate::{Message, MessagePart};

/// The compiled validators of one message type: the payload's reads a body parsed in place
/// ([`Document`]), the headers' a JSON object made of an AMQP table.
pub(crate) struct Validators {
    payload: jsonschema::Validator<Tree>,
    headers: Option<jsonschema::Validator>,
}

/// Why a schema could not be compiled: a bug in the generated code or the contract.
#[derive(Debug, thiserror::Error)]
#[error("the {part} schema of message `{message}` does not compile")]
pub struct SchemaError {
    /// The message.
    pub message: &'static str,
    /// The payload's schema or the headers'.
    pub part: MessagePart,
    /// Why: the schema is not JSON (a `serde_json` error), or not a JSON Schema the
    /// validator accepts (a `jsonschema` error). Boxed, so that neither crate's version is
    /// part of this API.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync + 'static>,
}

impl Validators {
    /// The validators of `M`, compiled on first use and shared afterwards.
    pub(crate) fn of<M: Message>() -> Result<Arc<Self>, SchemaError> {
        Self::cached(
            TypeId::of::<M>(),
            M::NAME,
            M::PAYLOAD_SCHEMA,
            M::HEADERS_SCHEMA,
        )
    }

    /// [`Validators::of`] the message of type `key`, named `message`, with its `payload` and
    /// `headers` schemas. Not generic: compiled once, not for every message of a contract.
    fn cached(
        key: TypeId,
        message: &'static str,
        payload: &str,
        headers: Option<&str>,
    ) -> Result<Arc<Self>, SchemaError> {
        static CACHE: OnceLock<RwLock<HashMap<TypeId, Arc<Validators>>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        if let Some(found) = cache.read().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(found);
        }
        let compiled = Arc::new(Self {
            payload: compile(message, MessagePart::Payload, payload)?,
            headers: headers
                .map(|schema| compile(message, MessagePart::Headers, schema))
                .transpose()?,
        });
        if let Ok(mut cache) = cache.write() {
            cache.insert(key, compiled.clone());
        }
        Ok(compiled)
    }

    /// Every way `payload` breaks its schema, or `None` when it is valid.
    pub(crate) fn payload_errors(&self, payload: &Document<'_>) -> Option<String> {
        errors(&self.payload, payload.root(), || {
            payload.values() <= COLLECT_UP_TO_VALUES
        })
    }

    /// Every way `headers` break their schema, or `None` when they are valid.
    pub(crate) fn headers_errors(&self, headers: &Value) -> Option<String> {
        (self.headers.as_ref())
            .and_then(|v| errors(v, headers, || has_at_most(headers, COLLECT_UP_TO_VALUES)))
    }
}

fn compile<F: Json>(
    message: &'static str,
    part: MessagePart,
    schema: &str,
) -> Result<jsonschema::Validator<F>, SchemaError> {
    let fail = |source: Box<dyn std::error::Error + Send + Sync + 'static>| SchemaError {
        message,
        part,
        source,
    };
    let schema: Value = serde_json::from_str(schema).map_err(|e| fail(Box::new(e)))?;
    jsonschema::options_for::<F>()
        .should_validate_formats(true)
        .build(&schema)
        .map_err(|e| fail(Box::new(e.to_owned())))
}

/// At most this many errors are listed; the rest are counted.
const MAX_LISTED: usize = 5;

/// Every error is collected (to list [`MAX_LISTED`] and count the rest) only in a document of at
/// most this many JSON values. `jsonschema` collects every error before returning any, at about
/// 350 bytes and 3 µs each (debug build), so a 7.9 KB gzip body inflating to 4 million wrong
/// items took 22–34 s and 1.5–1.9 GB to describe. A larger document is described by its first
/// error alone, which `validate` finds without looking further: describing a message then costs
/// no more than parsing it did.
const COLLECT_UP_TO_VALUES: usize = 1_000;

/// The longest description of one error, in bytes. An error's text quotes the value it is about,
/// and that value can be the whole body: the description stops here instead of printing it.
const MAX_DESCRIBED: usize = 256;

/// Every way `value` breaks the schema of `validator`, or `None`; `small` says whether the
/// document holds at most [`COLLECT_UP_TO_VALUES`] values.
fn errors<'v, F: Json>(
    validator: &'v jsonschema::Validator<F>,
    value: F::Node<'v>,
    small: impl FnOnce() -> bool,
) -> Option<String> {
    // The common case, valid, without collecting errors: several times faster.
    if validator.is_valid(value.clone()) {
        return None;
    }
    if !small() {
        let first = validator
            .validate(value)
            .err()
            .map_or_else(undecided, |error| describe(&error));
        return Some(format!(
            "{first}; further errors not looked for in a document of over {COLLECT_UP_TO_VALUES} values"
        ));
    }
    let mut listed = Vec::with_capacity(MAX_LISTED);
    let mut more = 0usize;
    for error in validator.iter_errors(value) {
        if listed.len() < MAX_LISTED {
            listed.push(describe(&error));
        } else {
            more = more.saturating_add(1);
        }
    }
    if listed.is_empty() {
        listed.push(undecided());
    }
    let mut text = listed.join("; ");
    if more > 0 {
        text.push_str(&format!("; and {more} more"));
    }
    Some(text)
}

/// What is said of a document `is_valid` refused but no error describes (a pattern whose match
/// the regex engine could not finish, decided differently by different runs).
fn undecided() -> String {
    "/: does not match its schema".to_owned()
}

/// `at: what`, cut to [`MAX_DESCRIBED`] bytes without formatting what lies beyond.
fn describe(error: &jsonschema::ValidationError<'_>) -> String {
    use std::fmt::Write as _;
    let mut text = Capped::default();
    let at = error.instance_path();
    let at: &dyn std::fmt::Display = if at.is_empty() { &"/" } else { at };
    // An error here only means the text was cut.
    if write!(text, "{at}: {error}").is_err() {
        text.0.push_str("...");
    }
    text.0
}

/// A string that refuses to grow past [`MAX_DESCRIBED`] bytes, failing the `write!` that would
/// take it there: formatting stops at once rather than running on into the void.
#[derive(Default)]
struct Capped(String);

impl std::fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = MAX_DESCRIBED.saturating_sub(self.0.len());
        if s.len() <= room {
            self.0.push_str(s);
            return Ok(());
        }
        let mut end = room;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.0.push_str(&s[..end]);
        Err(std::fmt::Error)
    }
}

/// Whether `value` holds at most `limit` JSON values (itself included), looking at no more than
/// `limit + 1` of them.
fn has_at_most(value: &Value, limit: usize) -> bool {
    // Counted as they are found, so the pending stack never holds more than `limit`.
    let mut seen = 1usize;
    let mut pending = vec![value];
    while let Some(next) = pending.pop() {
        let children = match next {
            Value::Array(items) => items.len(),
            Value::Object(fields) => fields.len(),
            _ => continue,
        };
        seen = seen.saturating_add(children);
        if seen > limit {
            return false;
        }
        match next {
            Value::Array(items) => pending.extend(items),
            Value::Object(fields) => pending.extend(fields.values()),
            _ => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{COLLECT_UP_TO_VALUES, MAX_DESCRIBED, Tree, errors, has_at_most};
    use crate::codec::Document;

    fn validator(schema: Value) -> jsonschema::Validator<Tree> {
        jsonschema::options_for::<Tree>()
            .should_validate_formats(true)
            .build(&schema)
            .expect("a valid schema")
    }

    /// What a worker says of `body` against `validator`'s schema.
    fn described(validator: &jsonschema::Validator<Tree>, body: &Value) -> Option<String> {
        let bytes = serde_json::to_vec(body).expect("JSON");
        let document = Document::parse(&bytes).expect("parses");
        errors(validator, document.root(), || {
            document.values() <= COLLECT_UP_TO_VALUES
        })
    }

    #[test]
    fn small_documents_list_five_errors_and_count_the_rest() {
        let v = validator(json!({"type": "array", "items": {"type": "string"}}));
        let text = described(&v, &json!([1, 2, 3, 4, 5, 6, 7])).expect("invalid");
        assert!(text.starts_with("/0: 1 is not of type"), "{text}");
        assert!(text.contains("/4: 5 is not"), "{text}");
        assert!(!text.contains("/5:"), "{text}");
        assert!(text.ends_with("; and 2 more"), "{text}");
        assert_eq!(described(&v, &json!(["fine"])), None);
    }

    /// A 7.9 KB gzip body of `{"tags":[1,1,…]}` with 4 million items: every error was formatted
    /// and collected before five were kept (34 s and 1.9 GB in one delivery). Now the first
    /// error alone is looked for.
    #[test]
    fn a_large_document_is_described_by_its_first_error_alone() {
        let v = validator(json!({
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string"}}}
        }));
        let bomb = json!({"tags": vec![1; 1_000_000]});
        let text = described(&v, &bomb).expect("invalid");
        assert!(text.starts_with("/tags/0: 1 is not of type"), "{text}");
        assert!(text.contains("further errors not looked for"), "{text}");
        assert!(!text.contains("/tags/1:"), "{text}");
    }

    #[test]
    fn an_error_quoting_a_huge_value_is_cut() {
        let v = validator(json!({"type": "object", "properties": {"id": {"type": "string"}}}));
        let text = described(&v, &json!({"id": vec![12345; 10]})).expect("invalid");
        assert!(text.starts_with("/id: [12345,"), "{text}");
        let huge = json!({"id": vec![12345; 100_000]});
        let text = described(&v, &huge).expect("invalid");
        assert!(text.len() < MAX_DESCRIBED + 100, "{} bytes", text.len());
        assert!(text.starts_with("/id: [12345,12345"), "{text}");
    }

    #[test]
    fn counting_values_stops_past_the_limit() {
        assert!(has_at_most(&json!([1, [2, 3], {"a": 4}]), 7));
        assert!(!has_at_most(&json!([1, [2, 3], {"a": 4}]), 6));
        assert!(!has_at_most(&json!(vec![0; 10_000]), COLLECT_UP_TO_VALUES));
        assert!(has_at_most(&json!(null), 1));
    }
}
