//! What AMQP cannot tell, read from RabbitMQ's management API (the `rabbitmq_management`
//! plugin): a queue's bindings, every one (those of exchanges no contract knows, made by
//! hand or by another stack, included), and the queues of a virtual host with their
//! dead-letter targets. `warren plan` needs both before it deletes and declares a queue
//! again: a binding it does not know of would be gone afterwards, and what it routed (a
//! foreign retry exchange's expired retries, a tap) dropped by the broker.
//!
//! A small HTTP/1.1 client of its own over tokio (plain `http://`; `https://` is refused with
//! a reason): one request per connection, every answer bounded in size and time, so a
//! management endpoint that stalls or answers without end cannot hold a plan up.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::model::{ArgValue, Arguments, Binding, Destination};

/// The management API's default port.
pub const DEFAULT_PORT: u16 = 15672;
/// How long one request may take, connecting and reading included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read: the queues of a large virtual host fit many times over.
const MAX_RESPONSE_BYTES: usize = 64 << 20;
/// How much of an error answer's body an error quotes.
const MAX_QUOTED: usize = 200;

/// Why the management API could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManagementError {
    /// The management URL cannot be used.
    #[error("management URL `{url}`: {reason}")]
    Url {
        /// The URL, its password hidden.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The request could not be made or answered (connection refused, timed out, cut).
    #[error("the management API at {endpoint} did not answer: {reason}")]
    Unreachable {
        /// Host and port.
        endpoint: String,
        /// Why.
        reason: String,
    },
    /// The API answered with an error status.
    #[error("the management API answered {status} to {what}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// What was asked.
        what: String,
        /// The start of its answer.
        body: String,
    },
    /// The answer is not what the API answers.
    #[error("the management API's answer to {what} cannot be read: {reason}")]
    Invalid {
        /// What was asked.
        what: String,
        /// Why.
        reason: String,
    },
}

/// A binding as the broker has it: from exchange `source` to a queue.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveBinding {
    /// The binding as the model writes bindings (the queue as its destination).
    pub binding: Binding,
}

/// A queue of the virtual host and where it dead-letters, policies applied.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LiveQueue {
    /// Its name.
    pub name: String,
    /// Messages in it (ready and unacknowledged), as the API last counted them.
    pub messages: u64,
    /// Of those, delivered and not yet acknowledged.
    pub unacknowledged: u64,
    /// Messages published into it per second, over the API's last sample (`None` before
    /// the broker has sampled any).
    pub publish_rate: Option<f64>,
    /// Messages delivered from it (or fetched with `basic.get`) per second.
    pub deliver_rate: Option<f64>,
    /// Its dead-letter exchange (`""`: the default exchange), from its arguments or its
    /// policy; `None` when it has none.
    pub dead_letter_exchange: Option<String>,
    /// Its dead-letter routing key, when set.
    pub dead_letter_routing_key: Option<String>,
    /// Its declaration arguments, as the API shows them.
    pub arguments: BTreeMap<String, serde_json::Value>,
}

/// RabbitMQ's management API for one virtual host.
#[derive(Clone)]
pub struct Management {
    host: String,
    port: u16,
    /// The path before `/api`, without a trailing `/` (a reverse proxy's prefix).
    prefix: String,
    authorization: String,
    vhost: String,
}

impl std::fmt::Debug for Management {
    /// Without the credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Management")
            .field("endpoint", &self.endpoint())
            .field("prefix", &self.prefix)
            .field("vhost", &self.vhost)
            .finish_non_exhaustive()
    }
}

impl Management {
    /// The API at `url` (`http://user:password@host:port[/prefix]`; user and password
    /// default to `guest`, the port to 15672) for virtual host `vhost`.
    pub fn new(url: &str, vhost: &str) -> Result<Self, ManagementError> {
        let parts = UrlParts::parse(url, "http")?;
        Ok(Self::of(parts, DEFAULT_PORT, vhost.to_owned()))
    }

    /// The API on the host of AMQP URL `amqp_url`, on port `port`, with that URL's
    /// credentials and virtual host: how a broker is usually set up.
    pub fn for_amqp_url(amqp_url: &str, port: u16) -> Result<Self, ManagementError> {
        // Read as lapin reads it to connect: credentials and virtual host percent-decoded,
        // guest/guest and `/` by default.
        let uri: lapin::uri::AMQPUri = amqp_url.parse().map_err(|reason| ManagementError::Url {
            url: crate::connection::redact(amqp_url),
            reason,
        })?;
        let parts = UrlParts {
            user: uri.authority.userinfo.username,
            password: uri.authority.userinfo.password,
            host: uri.authority.host,
            port: None,
            path: String::new(),
        };
        Ok(Self::of(parts, port, uri.vhost))
    }

    fn of(parts: UrlParts, default_port: u16, vhost: String) -> Self {
        let credentials = format!("{}:{}", parts.user, parts.password);
        Self {
            host: parts.host,
            port: parts.port.unwrap_or(default_port),
            prefix: parts.path.trim_end_matches('/').to_owned(),
            authorization: format!("Basic {}", crate::base64::encode(credentials.as_bytes())),
            vhost,
        }
    }

    /// Host and port, for messages.
    pub fn endpoint(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The virtual host it reads.
    pub fn vhost(&self) -> &str {
        &self.vhost
    }

    /// Every binding to `queue` from a named exchange (the default exchange's implicit
    /// binding left out), as the broker has them now.
    pub async fn queue_bindings(&self, queue: &str) -> Result<Vec<LiveBinding>, ManagementError> {
        let what = format!("the bindings of queue `{queue}`");
        let path = format!(
            "/api/queues/{}/{}/bindings",
            percent_encode(&self.vhost),
            percent_encode(queue)
        );
        let listed: Vec<ApiBinding> = self.get_json(&path, &what).await?;
        let mut bindings = Vec::new();
        for api in listed {
            if api.source.is_empty() || api.destination_type != "queue" {
                continue;
            }
            let arguments =
                arguments(&api.arguments).map_err(|reason| ManagementError::Invalid {
                    what: what.clone(),
                    reason: format!("the binding from `{}`: {reason}", api.source),
                })?;
            bindings.push(LiveBinding {
                binding: Binding {
                    exchange: api.source,
                    destination: Destination::Queue(api.destination),
                    routing_key: api.routing_key,
                    arguments,
                },
            });
        }
        Ok(bindings)
    }

    /// Every queue of the virtual host, with where it dead-letters and its message counts and
    /// rates as the API last sampled them (every 5 s by default: behind what a passive
    /// declare says).
    pub async fn queues(&self) -> Result<Vec<LiveQueue>, ManagementError> {
        let what = "the queues of the virtual host".to_owned();
        let path = format!(
            "/api/queues/{}?columns=name,messages,messages_unacknowledged,\
             message_stats.publish_details.rate,message_stats.deliver_get_details.rate,\
             arguments,effective_policy_definition",
            percent_encode(&self.vhost)
        );
        let listed: Vec<ApiQueue> = self.get_json(&path, &what).await?;
        Ok(listed.into_iter().map(ApiQueue::into_live).collect())
    }

    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        what: &str,
    ) -> Result<T, ManagementError> {
        let (status, body) = self.request("GET", path).await?;
        if status != 200 {
            let text = String::from_utf8_lossy(&body);
            return Err(ManagementError::Status {
                status,
                what: what.to_owned(),
                body: crate::text::truncate(&text, MAX_QUOTED),
            });
        }
        serde_json::from_slice(&body).map_err(|error| ManagementError::Invalid {
            what: what.to_owned(),
            reason: error.to_string(),
        })
    }

    /// One request on a connection of its own; the status and the body.
    async fn request(&self, method: &str, path: &str) -> Result<(u16, Vec<u8>), ManagementError> {
        let unreachable = |reason: String| ManagementError::Unreachable {
            endpoint: self.endpoint(),
            reason,
        };
        let exchange = async {
            let mut stream = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            let request = format!(
                "{method} {}{path} HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
                self.prefix,
                self.endpoint(),
                self.authorization
            );
            stream
                .write_all(request.as_bytes())
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            let mut response = Vec::new();
            let mut limited = (&mut stream).take(MAX_RESPONSE_BYTES as u64 + 1);
            limited
                .read_to_end(&mut response)
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            if response.len() > MAX_RESPONSE_BYTES {
                return Err(unreachable(format!(
                    "its answer is larger than {MAX_RESPONSE_BYTES} bytes"
                )));
            }
            parse_response(&response).map_err(unreachable)
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| Err(unreachable(format!("no answer within {REQUEST_TIMEOUT:?}"))))
    }
}

/// The status and body of an HTTP/1.1 response read to its end.
fn parse_response(response: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = find(response, b"\r\n\r\n").ok_or("the answer has no end of headers")?;
    let head = std::str::from_utf8(&response[..end]).map_err(|_| "its headers are not text")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .filter(|_| status_line.starts_with("HTTP/1."))
        .ok_or_else(|| {
            format!(
                "not an HTTP answer: `{}`",
                crate::text::truncate(status_line, MAX_QUOTED)
            )
        })?;
    let header = |name: &str| {
        lines
            .clone()
            .filter_map(|line| line.split_once(':'))
            .find(|(key, _)| key.trim().eq_ignore_ascii_case(name))
            .map(|(_, value)| value.trim().to_owned())
    };
    let body = &response[end + 4..];
    let chunked = header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(body)?
    } else if let Some(length) = header("content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| "a content-length that is not a number")?;
        body.get(..length)
            .ok_or("the answer ended before its content-length")?
            .to_vec()
    } else {
        body.to_vec()
    };
    Ok((status, body))
}

/// A chunked body, its chunks joined.
fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut joined = Vec::new();
    loop {
        let line_end = find(body, b"\r\n").ok_or("a chunk without its size line")?;
        let size_text =
            std::str::from_utf8(&body[..line_end]).map_err(|_| "a chunk size that is not text")?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size =
            usize::from_str_radix(size_text, 16).map_err(|_| "a chunk size that is not hex")?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(joined);
        }
        let chunk = body.get(..size).ok_or("the answer ended inside a chunk")?;
        joined.extend_from_slice(chunk);
        body = body
            .get(size + 2..)
            .ok_or("the answer ended after a chunk")?;
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Binding arguments as the model has them: strings, integers, floats and booleans; a
/// table, array or null cannot be declared again through the model.
fn arguments(json: &serde_json::Map<String, serde_json::Value>) -> Result<Arguments, String> {
    let mut arguments = Arguments::new();
    for (key, value) in json {
        let value = match value {
            serde_json::Value::Bool(b) => ArgValue::Bool(*b),
            serde_json::Value::String(s) => ArgValue::String(s.clone()),
            serde_json::Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => ArgValue::Int(i),
                (None, Some(f)) => ArgValue::Float(f),
                (None, None) => return Err(format!("argument `{key}` is a number out of range")),
            },
            other => {
                let kind = match other {
                    serde_json::Value::Null => "null",
                    serde_json::Value::Array(_) => "an array",
                    _ => "a table",
                };
                return Err(format!(
                    "argument `{key}` is {kind}, which warren cannot declare again"
                ));
            }
        };
        arguments.insert(key.clone(), value);
    }
    Ok(arguments)
}

#[derive(Deserialize)]
struct ApiBinding {
    source: String,
    destination: String,
    destination_type: String,
    #[serde(default)]
    routing_key: String,
    #[serde(default)]
    arguments: serde_json::Map<String, serde_json::Value>,
}

#[derive(Deserialize)]
struct ApiQueue {
    name: String,
    #[serde(default)]
    messages: Option<u64>,
    #[serde(default)]
    messages_unacknowledged: Option<u64>,
    #[serde(default)]
    message_stats: Option<ApiMessageStats>,
    #[serde(default)]
    arguments: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    effective_policy_definition: Option<BTreeMap<String, serde_json::Value>>,
}

/// A queue's message rates, as the API samples them.
#[derive(Deserialize, Default)]
struct ApiMessageStats {
    #[serde(default)]
    publish_details: Option<ApiRate>,
    #[serde(default)]
    deliver_get_details: Option<ApiRate>,
}

#[derive(Deserialize)]
struct ApiRate {
    rate: f64,
}

impl ApiQueue {
    /// Where it dead-letters: its own arguments win over its policy, as in RabbitMQ.
    fn into_live(self) -> LiveQueue {
        let text =
            |value: Option<&serde_json::Value>| value.and_then(|v| v.as_str()).map(str::to_owned);
        let policy = self.effective_policy_definition.unwrap_or_default();
        let stats = self.message_stats.unwrap_or_default();
        LiveQueue {
            name: self.name,
            messages: self.messages.unwrap_or_default(),
            unacknowledged: self.messages_unacknowledged.unwrap_or_default(),
            publish_rate: stats.publish_details.map(|d| d.rate),
            deliver_rate: stats.deliver_get_details.map(|d| d.rate),
            dead_letter_exchange: text(self.arguments.get("x-dead-letter-exchange"))
                .or_else(|| text(policy.get("dead-letter-exchange"))),
            dead_letter_routing_key: text(self.arguments.get("x-dead-letter-routing-key"))
                .or_else(|| text(policy.get("dead-letter-routing-key"))),
            arguments: self.arguments,
        }
    }
}

/// The parts of a URL warren reads: `scheme://[user[:password]@]host[:port][path]`.
struct UrlParts {
    user: String,
    password: String,
    host: String,
    port: Option<u16>,
    path: String,
}

impl UrlParts {
    fn parse(url: &str, scheme: &str) -> Result<Self, ManagementError> {
        let invalid = |reason: &str| ManagementError::Url {
            url: crate::connection::redact(url),
            reason: reason.to_owned(),
        };
        let Some(rest) = url.strip_prefix(&format!("{scheme}://")) else {
            return Err(invalid(&format!(
                "only `{scheme}://` URLs are read (an https management API needs a plain http listener or a tunnel)"
            )));
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (user_info, host_port) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let (user, password) = match user_info {
            Some(info) => match info.split_once(':') {
                Some((user, password)) => (percent_decode(user), percent_decode(password)),
                None => (percent_decode(info), String::new()),
            },
            None => ("guest".to_owned(), "guest".to_owned()),
        };
        let (host, port) = match host_port.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => {
                let port = port
                    .parse()
                    .map_err(|_| invalid("its port is not a number"))?;
                (host, Some(port))
            }
            _ => (host_port, None),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(invalid("it names no host"));
        }
        Ok(Self {
            user,
            password,
            host: host.to_owned(),
            port,
            path: path.to_owned(),
        })
    }
}

/// Every byte but RFC 3986's unreserved ones as `%XX`: names may hold `/`, `%`, `?`, `#`.
fn percent_encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// `%XX` escapes decoded (a malformed one kept as it is).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                i += 3;
            }
            None => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_amqp_url_gives_host_credentials_and_vhost() {
        let api = Management::for_amqp_url("amqp://ops:s%40cret@rabbit-1:5672/%2fteam", 15672)
            .expect("a valid URL");
        assert_eq!(api.endpoint(), "rabbit-1:15672");
        assert_eq!(api.vhost(), "/team");
        assert_eq!(
            api.authorization,
            format!("Basic {}", crate::base64::encode(b"ops:s@cret"))
        );
        let default = Management::for_amqp_url("amqp://localhost", 15672).expect("valid");
        assert_eq!(default.vhost(), "/");
        assert_eq!(default.authorization, "Basic Z3Vlc3Q6Z3Vlc3Q=");
        let api = Management::new("http://a:b@[::1]:8080/rabbit/", "v").expect("valid");
        assert_eq!(
            (api.endpoint().as_str(), api.prefix.as_str()),
            ("::1:8080", "/rabbit")
        );
        for bad in ["https://host", "ftp://host", "http://", "http://host:port"] {
            assert!(Management::new(bad, "/").is_err(), "{bad}");
        }
        let error = Management::new("https://u:secret@host", "/")
            .unwrap_err()
            .to_string();
        assert!(!error.contains("secret"), "{error}");
    }

    #[test]
    fn names_are_escaped_in_paths() {
        assert_eq!(percent_encode("/"), "%2F");
        assert_eq!(percent_encode("a b/c?d#e%"), "a%20b%2Fc%3Fd%23e%25");
        assert_eq!(percent_decode("%2f%zz%4"), "/%zz%4");
    }

    #[test]
    fn responses_are_read_by_length_or_chunks() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n[]extra";
        assert_eq!(parse_response(plain), Ok((200, b"[]".to_vec())));
        let chunked =
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked), Ok((404, b"abcde".to_vec())));
        for broken in [
            &b"HTTP/1.1 200 OK\r\n"[..],
            b"SMTP 200\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n[]",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n10\r\nabc",
        ] {
            assert!(
                parse_response(broken).is_err(),
                "{:?}",
                String::from_utf8_lossy(broken)
            );
        }
    }

    #[test]
    fn binding_arguments_are_what_the_model_declares() {
        let json: serde_json::Map<String, serde_json::Value> = serde_json::from_str(
            r#"{"x-match": "all", "x-retry-queue": "orders", "n": 3, "f": 1.5, "b": true}"#,
        )
        .expect("JSON");
        let read = arguments(&json).expect("representable");
        assert_eq!(read["n"], ArgValue::Int(3));
        assert_eq!(read["x-match"], ArgValue::String("all".into()));
        for table in [r#"{"t": {"a": 1}}"#, r#"{"a": [1]}"#, r#"{"n": null}"#] {
            let json = serde_json::from_str(table).expect("JSON");
            assert!(arguments(&json).is_err(), "{table}");
        }
    }
}
