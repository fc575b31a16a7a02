//! The reply on the wire: the properties a server gives it, and how a caller reads one. Both
//! sides are here so that they cannot drift apart.

use std::borrow::Cow;

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};

use crate::amqp::header_str;
use crate::model::limits::MAX_SHORT_STRING;
use crate::model::rpc::ReplyStatus;
use crate::model::{FailureReason, headers};
use crate::text::{MAX_ERROR_BYTES, truncate};

/// The content type of a `failed` reply's body: a short text, not a message of the contract.
pub(crate) const FAILED_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// What a server answers, for the reply's properties.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Answer<'a> {
    /// The response, a message of this name and content type.
    Ok {
        message: &'static str,
        content_type: &'static str,
    },
    /// A declared error: its code, and the name and content type of its message where the
    /// generated code gives them.
    Error {
        code: &'a str,
        message: Option<&'static str>,
        content_type: Option<&'static str>,
    },
    /// No answer, for this reason; the body is a short text.
    Failed { reason: FailureReason },
}

impl Answer<'_> {
    /// The status it is sent with.
    pub(crate) fn status(&self) -> ReplyStatus {
        match self {
            Self::Ok { .. } => ReplyStatus::Ok,
            Self::Error { .. } => ReplyStatus::Error,
            Self::Failed { .. } => ReplyStatus::Failed,
        }
    }
}

/// The properties of the reply to the request whose correlation id is `correlation_id`.
///
/// Transient (delivery mode 1): a reply goes to a caller's channel (direct reply-to) or a
/// queue it waits on; a caller that is gone has nothing left to receive it with, and a
/// persisted reply would outlive its purpose on disk.
pub(crate) fn properties(correlation_id: &ShortString, answer: Answer<'_>) -> BasicProperties {
    let mut table = FieldTable::default();
    let mut set = |key: &str, value: &str| {
        table.insert(
            ShortString::from(key),
            AMQPValue::LongString(LongString::from(value)),
        );
    };
    set(headers::RPC_STATUS, answer.status().as_str());
    let (message, content_type) = match answer {
        Answer::Ok {
            message,
            content_type,
        } => (Some(message), Some(content_type)),
        Answer::Error {
            code,
            message,
            content_type,
        } => {
            set(headers::RPC_ERROR, code);
            (message, content_type)
        }
        Answer::Failed { reason } => {
            set(headers::RPC_FAILURE, reason.as_str());
            (None, Some(FAILED_CONTENT_TYPE))
        }
    };
    let mut properties = BasicProperties::default()
        .with_correlation_id(correlation_id.clone())
        .with_delivery_mode(1)
        .with_timestamp(crate::clock::unix_seconds())
        .with_headers(table);
    if let Some(message) = message {
        properties = properties.with_type(ShortString::from(message));
    }
    if let Some(content_type) = content_type {
        properties = properties.with_content_type(ShortString::from(content_type));
    }
    properties
}

/// A reply as a caller reads it, before its body is typed.
#[derive(Debug)]
pub(crate) enum Received<'a> {
    /// The body is the response.
    Ok(Cow<'a, [u8]>),
    /// The body is the declared error of this code.
    Error { code: String, body: Cow<'a, [u8]> },
    /// The server could not answer.
    Failed {
        reason: FailureReason,
        detail: String,
    },
}

/// Reads a reply whose body is `body` and whose properties are `properties`: hostile input,
/// so the body is bounded by `max_body_bytes` (as sent and inflated) and every header is
/// checked. The error says why it is no valid reply.
pub(crate) fn read<'a>(
    body: &'a [u8],
    properties: &BasicProperties,
    max_body_bytes: usize,
) -> Result<Received<'a>, String> {
    let table = properties.headers().as_ref();
    let status = header_str(table, headers::RPC_STATUS)
        .ok_or_else(|| format!("no `{}` header", headers::RPC_STATUS))?;
    let status: ReplyStatus = status.parse().map_err(|_| {
        format!(
            "`{}` is `{}`, not a reply status",
            headers::RPC_STATUS,
            truncate(&status, MAX_SHORT_STRING)
        )
    })?;
    if body.len() > max_body_bytes {
        return Err(format!(
            "a body of {} bytes, above the {max_body_bytes}-byte cap",
            body.len()
        ));
    }
    let encoding = properties
        .content_encoding()
        .as_ref()
        .map(ShortString::as_str);
    let body =
        crate::codec::decompress(body, encoding, max_body_bytes).map_err(|poison| poison.detail)?;
    Ok(match status {
        ReplyStatus::Ok => Received::Ok(body),
        ReplyStatus::Error => {
            let code = header_str(table, headers::RPC_ERROR).ok_or_else(|| {
                format!(
                    "an `error` reply without an `{}` header",
                    headers::RPC_ERROR
                )
            })?;
            Received::Error {
                code: truncate(&code, MAX_SHORT_STRING),
                body,
            }
        }
        ReplyStatus::Failed => {
            // A reason this warren does not know (a later one's, or a forged one) is still a
            // failure, the server's own.
            let reason = header_str(table, headers::RPC_FAILURE)
                .and_then(|reason| reason.parse().ok())
                .unwrap_or(FailureReason::InternalError);
            Received::Failed {
                reason,
                detail: truncate(&String::from_utf8_lossy(&body), MAX_ERROR_BYTES),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use lapin::types::ShortString;

    use super::{Answer, Received, properties, read};
    use crate::model::FailureReason;

    fn id() -> ShortString {
        ShortString::from("c-1")
    }

    #[test]
    fn what_a_server_sends_a_caller_reads() {
        let ok = properties(
            &id(),
            Answer::Ok {
                message: "price_quote",
                content_type: "application/json",
            },
        );
        assert_eq!(
            ok.correlation_id().as_ref().map(|s| s.as_str()),
            Some("c-1")
        );
        assert_eq!(ok.kind().as_ref().map(|s| s.as_str()), Some("price_quote"));
        assert!(matches!(read(b"{}", &ok, 10), Ok(Received::Ok(body)) if &*body == b"{}"));

        let error = properties(
            &id(),
            Answer::Error {
                code: "unknown_sku",
                message: None,
                content_type: None,
            },
        );
        match read(b"{}", &error, 10) {
            Ok(Received::Error { code, .. }) => assert_eq!(code, "unknown_sku"),
            other => panic!("{other:?}"),
        }

        let failed = properties(
            &id(),
            Answer::Failed {
                reason: FailureReason::Validation,
            },
        );
        match read("é".repeat(2000).as_bytes(), &failed, 1 << 20) {
            Ok(Received::Failed { reason, detail }) => {
                assert_eq!(reason, FailureReason::Validation);
                assert!(detail.len() <= 1024 && detail.ends_with("..."));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hostile_replies_are_refused_with_a_reason() {
        let bare = lapin::BasicProperties::default();
        assert!(read(b"{}", &bare, 10).unwrap_err().contains("x-rpc-status"));
        let ok = properties(
            &id(),
            Answer::Ok {
                message: "m",
                content_type: "application/json",
            },
        );
        assert!(read(&[b' '; 11], &ok, 10).unwrap_err().contains("cap"));
        let zipped = ok.clone().with_content_encoding(ShortString::from("gzip"));
        assert!(read(b"not gzip", &zipped, 100).is_err());
        let error = properties(
            &id(),
            Answer::Error {
                code: "x",
                message: None,
                content_type: None,
            },
        );
        let mut table = error
            .headers()
            .as_ref()
            .map(|t| t.inner().clone())
            .unwrap_or_default();
        table.remove(crate::model::headers::RPC_ERROR);
        let no_code = error.with_headers(table.into());
        assert!(
            read(b"{}", &no_code, 10)
                .unwrap_err()
                .contains("x-rpc-error")
        );
    }
}
