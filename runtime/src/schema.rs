//! JSON Schema validation of payloads and headers, compiled once per message type.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use serde_json::Value;

use crate::Message;

/// The compiled validators of one message type.
pub(crate) struct Validators {
    payload: jsonschema::Validator,
    headers: Option<jsonschema::Validator>,
}

/// Why a schema could not be compiled: a bug in the generated code or the contract.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the {what} schema of message `{message}` does not compile: {reason}")]
pub struct SchemaError {
    /// The message.
    pub message: &'static str,
    /// `payload` or `headers`.
    pub what: &'static str,
    /// What the validator said.
    pub reason: String,
}

impl Validators {
    /// The validators of `M`, compiled on first use and shared afterwards.
    pub(crate) fn of<M: Message>() -> Result<Arc<Self>, SchemaError> {
        static CACHE: OnceLock<RwLock<HashMap<TypeId, Arc<Validators>>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let key = TypeId::of::<M>();
        if let Some(found) = cache.read().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(found);
        }
        let compiled = Arc::new(Self {
            payload: compile::<M>("payload", M::PAYLOAD_SCHEMA)?,
            headers: M::HEADERS_SCHEMA
                .map(|schema| compile::<M>("headers", schema))
                .transpose()?,
        });
        if let Ok(mut cache) = cache.write() {
            cache.insert(key, compiled.clone());
        }
        Ok(compiled)
    }

    /// Every way `payload` breaks its schema, or `None` when it is valid.
    pub(crate) fn payload_errors(&self, payload: &Value) -> Option<String> {
        errors(&self.payload, payload)
    }

    /// Every way `headers` break their schema, or `None` when they are valid.
    pub(crate) fn headers_errors(&self, headers: &Value) -> Option<String> {
        self.headers.as_ref().and_then(|v| errors(v, headers))
    }
}

fn compile<M: Message>(
    what: &'static str,
    schema: &str,
) -> Result<jsonschema::Validator, SchemaError> {
    let fail = |reason: String| SchemaError {
        message: M::NAME,
        what,
        reason,
    };
    let schema: Value = serde_json::from_str(schema).map_err(|e| fail(e.to_string()))?;
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .map_err(|e| fail(e.to_string()))
}

/// At most this many errors are listed; the rest are counted.
const MAX_LISTED: usize = 5;

fn errors(validator: &jsonschema::Validator, value: &Value) -> Option<String> {
    // The common case, valid, without collecting errors: several times faster.
    if validator.is_valid(value) {
        return None;
    }
    let all: Vec<String> = validator
        .iter_errors(value)
        .map(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_owned() } else { at };
            format!("{at}: {e}")
        })
        .collect();
    if all.is_empty() {
        return None;
    }
    let mut text = all
        .iter()
        .take(MAX_LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if all.len() > MAX_LISTED {
        text.push_str(&format!("; and {} more", all.len() - MAX_LISTED));
    }
    Some(text)
}
