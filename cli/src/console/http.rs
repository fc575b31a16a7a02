//! The console's HTTP/1.1 server: one request per connection, bounded in size and time, a
//! bounded number of connections at once, and only the requests the console answers. Every
//! byte a client sends is hostile: a browser on another site, a port scanner, a trickler.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// The longest request head read.
const MAX_HEAD_BYTES: usize = 8 * 1024;
/// The longest request body read: a redrive request is a few dozen bytes.
const MAX_BODY_BYTES: usize = 4 * 1024;
/// How long a client may take to send its request; the answer gets as long again.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// How long an answer may take to compute (a redrive of a large group takes a while).
const ANSWER_DEADLINE: Duration = Duration::from_secs(600);
/// Connections served at once; one past it is closed at once.
const MAX_CONNECTIONS: usize = 32;
/// The pause after a failed `accept` before the next.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// One request, as far as the console reads it.
#[derive(Debug)]
pub(super) struct Request {
    pub method: String,
    /// The path, without its query.
    pub path: String,
    /// The `Host` header.
    pub host: Option<String>,
    /// The `X-Warren-Token` header.
    pub token: Option<String>,
    /// The `Origin` header, which a browser sends with a cross-site request.
    pub origin: Option<String>,
    pub body: Vec<u8>,
}

/// An answer.
pub(super) struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// The nonce the page's own script and style carry: nothing else may run or style it.
    pub nonce: Option<String>,
}

impl Response {
    /// `body` as JSON, with `status`.
    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        Self {
            status,
            content_type: "application/json",
            body: body.to_string().into_bytes(),
            nonce: None,
        }
    }

    /// An error the page shows: `{"error": message}`.
    pub fn error(status: u16, message: &str) -> Self {
        Self::json(status, &serde_json::json!({ "error": message }))
    }
}

/// What answers a request.
pub(super) type Handler =
    Arc<dyn Fn(Request) -> Pin<Box<dyn Future<Output = Response> + Send>> + Send + Sync>;

/// Serves `listener` with `handler` until the process ends.
pub(super) async fn serve(listener: TcpListener, handler: Handler) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            let _ = answer(stream, &handler).await;
            drop(slot);
        });
    }
}

async fn answer(mut stream: TcpStream, handler: &Handler) -> std::io::Result<()> {
    let read = tokio::time::timeout(REQUEST_DEADLINE, read_request(&mut stream)).await;
    let response = match read {
        Err(_) => return Ok(()),
        Ok(Err(status)) => Response::error(status, "bad request"),
        Ok(Ok(request)) => match tokio::time::timeout(ANSWER_DEADLINE, handler(request)).await {
            Ok(response) => response,
            Err(_) => Response::error(504, "the answer took too long"),
        },
    };
    // The page runs its own script and style only (by nonce: no script a value could smuggle
    // in runs), fetches from this server only, and is framed by nobody; an answer of data runs
    // nothing at all.
    let policy = match &response.nonce {
        Some(nonce) => format!(
            "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
             connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'"
        ),
        None => "default-src 'none'; frame-ancestors 'none'".to_owned(),
    };
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\n\
         x-content-type-options: nosniff\r\nx-frame-options: DENY\r\n\
         content-security-policy: {policy}\r\n\
         cache-control: no-store\r\nconnection: close\r\n\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(&response.body).await?;
        stream.shutdown().await
    };
    tokio::time::timeout(REQUEST_DEADLINE, write)
        .await
        .unwrap_or(Ok(()))
}

/// Reads one request: its head (bounded), then a body of its `content-length` (bounded).
/// `Err` is the status to answer with.
async fn read_request(stream: &mut TcpStream) -> Result<Request, u16> {
    let mut data = Vec::with_capacity(1024);
    let mut buffer = [0_u8; 2048];
    let mut searched = 0;
    let head_end = loop {
        // Searched from where the last search stopped: a client trickling its head a byte
        // at a time costs its length, not its square.
        if let Some(at) = data[searched..].windows(4).position(|w| w == b"\r\n\r\n") {
            break searched + at;
        }
        searched = data.len().saturating_sub(3);
        if data.len() > MAX_HEAD_BYTES {
            return Err(431);
        }
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return Err(400),
            Ok(n) => data.extend_from_slice(&buffer[..n]),
        }
    };
    let head = std::str::from_utf8(&data[..head_end]).map_err(|_| 400_u16)?;
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let (method, target) = (
        first.next().unwrap_or_default(),
        first.next().unwrap_or("/"),
    );
    let mut request = Request {
        method: method.to_owned(),
        path: target.split('?').next().unwrap_or("/").to_owned(),
        host: None,
        token: None,
        origin: None,
        body: Vec::new(),
    };
    let mut length = None;
    for line in lines {
        // A folded line, a name with spaces, a header given twice that the guards read, a
        // body framed otherwise than by its length: refused, never guessed at.
        let (name, value) = line.split_once(':').ok_or(400_u16)?;
        if name.is_empty() || name.contains(|c: char| c.is_ascii_whitespace()) {
            return Err(400);
        }
        let value = value.trim().to_owned();
        let once = |slot: &mut Option<String>, value: String| match slot {
            Some(_) => Err(400_u16),
            None => {
                *slot = Some(value);
                Ok(())
            }
        };
        match name.to_ascii_lowercase().as_str() {
            "host" => once(&mut request.host, value)?,
            "x-warren-token" => once(&mut request.token, value)?,
            "origin" => once(&mut request.origin, value)?,
            "content-length" if length.is_none() && value.bytes().all(|b| b.is_ascii_digit()) => {
                length = Some(value.parse::<usize>().map_err(|_| 413_u16)?);
            }
            "content-length" => return Err(400),
            "transfer-encoding" => return Err(501),
            _ => {}
        }
    }
    let length = length.unwrap_or(0);
    if length > MAX_BODY_BYTES {
        return Err(413);
    }
    let mut body = data[head_end + 4..].to_vec();
    while body.len() < length {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return Err(400),
            Ok(n) => body.extend_from_slice(&buffer[..n]),
        }
    }
    body.truncate(length);
    request.body = body;
    Ok(request)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        413 => "Content Too Large",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}

/// The largest answer a worker's health endpoint may give.
const MAX_ANSWER_BYTES: usize = 1 << 20;
/// How long a health endpoint may take to answer.
const GET_DEADLINE: Duration = Duration::from_secs(5);

/// `GET url` (`http://host:port/path` only): the status and body, bounded in size and time,
/// for a worker's health endpoint, which is as likely to stall or answer without end as any
/// other server.
pub(super) async fn get(url: &str) -> Result<(u16, Vec<u8>), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or("only http:// URLs are read")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let address = if authority
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
    {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let fetch = async {
        let mut stream = TcpStream::connect(&address)
            .await
            .map_err(|e| e.to_string())?;
        // HTTP/1.0: the answer comes whole, not in chunks, and the server closes after it.
        let request = format!("GET {path} HTTP/1.0\r\nhost: {authority}\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut answer = Vec::new();
        let mut limited = (&mut stream).take(MAX_ANSWER_BYTES as u64 + 1);
        limited
            .read_to_end(&mut answer)
            .await
            .map_err(|e| e.to_string())?;
        if answer.len() > MAX_ANSWER_BYTES {
            return Err(format!("the answer is over {MAX_ANSWER_BYTES} bytes"));
        }
        let at = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or("not an HTTP answer")?;
        let status = std::str::from_utf8(&answer[..at])
            .ok()
            .and_then(|head| head.split(' ').nth(1))
            .and_then(|code| code.parse().ok())
            .ok_or("not an HTTP answer")?;
        Ok((status, answer[at + 4..].to_vec()))
    };
    tokio::time::timeout(GET_DEADLINE, fetch)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {GET_DEADLINE:?}")))
}
