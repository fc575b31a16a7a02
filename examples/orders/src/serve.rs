//! The demo's `/metrics` (Prometheus text format), `/health` (the worker's health as JSON,
//! 200 when ready, 503 when not: a readiness probe) and `/live` (200 while the worker is
//! alive: a liveness probe), on a tiny HTTP/1.1 responder of its own: one request per
//! connection, `GET` only. A service would use its web framework; the runtime needs none.

use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use warren_runtime::HealthHandle;

/// The longest request head read: a probe's or a scraper's is a few hundred bytes.
const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// How long a client may take to send its whole request and read the answer: one deadline
/// for the connection, not one per read (a byte every few seconds held a connection for
/// ever). A probe or a scraper sends its request at once.
const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
/// Connections served at once. One past it is closed at once: idle or trickling clients
/// (700 of them exhausted a 512-descriptor process before) cost at most this many
/// descriptors, each for at most the deadline, and a probe gets through as soon as one ends.
const MAX_CONNECTIONS: usize = 128;
/// The pause after a failed `accept` (out of descriptors, say) before the next: retried at
/// once, the loop spun a whole core.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Installs the Prometheus recorder: before any publisher or worker is created, since they
/// register their metrics when they start. Durations get histogram buckets (rather than the
/// exporter's default summaries), so PromQL's `histogram_quantile` can aggregate them.
pub fn install() -> Result<PrometheusHandle, Box<dyn std::error::Error>> {
    let buckets = [
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    ];
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &buckets)?
        .install_recorder()?;
    warren_runtime::metrics::describe();
    // Histograms are drained into their buckets by upkeep.
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// Serves `/metrics` and `/health` on `listener` until the task is dropped: at most
/// [`MAX_CONNECTIONS`] at once, each within [`REQUEST_DEADLINE`].
pub async fn serve(listener: TcpListener, metrics: PrometheusHandle, health: HealthHandle) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        // Full: closed at once (dropped), so the client retries rather than waits.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let metrics = metrics.clone();
        let health = health.clone();
        tokio::spawn(async move {
            let _ =
                tokio::time::timeout(REQUEST_DEADLINE, respond(stream, &metrics, &health)).await;
            drop(slot);
        });
    }
}

async fn respond(
    mut stream: TcpStream,
    metrics: &PrometheusHandle,
    health: &HealthHandle,
) -> std::io::Result<()> {
    let mut request = Vec::with_capacity(512);
    let mut buffer = [0_u8; 1024];
    // The request line is all that is needed: read until the end of the head, bounded in
    // size (and, by the caller, in time).
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < MAX_REQUEST_BYTES {
        match stream.read(&mut buffer).await? {
            0 => break,
            n => request.extend_from_slice(&buffer[..n]),
        }
    }
    let line = request.split(|b| *b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let (method, path) = (parts.next(), parts.next());
    let (status, content_type, body) = match (method, path) {
        (Some(b"GET"), Some(b"/metrics")) => {
            ("200 OK", "text/plain; version=0.0.4", metrics.render())
        }
        (Some(b"GET"), Some(b"/health")) => {
            let snapshot = health.snapshot();
            let status = if snapshot.ready {
                "200 OK"
            } else {
                "503 Service Unavailable"
            };
            let body = serde_json::to_string_pretty(&snapshot).unwrap_or_default();
            (status, "application/json", body)
        }
        (Some(b"GET"), Some(b"/live")) => {
            let (status, body) = if health.snapshot().live {
                ("200 OK", "live\n")
            } else {
                ("503 Service Unavailable", "not live\n")
            };
            (status, "text/plain", body.to_owned())
        }
        (Some(b"GET"), _) => ("404 Not Found", "text/plain", "not found\n".into()),
        _ => ("405 Method Not Allowed", "text/plain", "GET only\n".into()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use warren_runtime::{Connection, Topology, Worker};

    /// The endpoint on a port of its own, with a worker's health (on the test broker).
    async fn endpoint() -> std::net::SocketAddr {
        let url = std::env::var("AMQP_URL")
            .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
        let connection = Connection::connect(&url, "warren-example-serve-test")
            .await
            .expect("the test broker answers at AMQP_URL");
        let topology = Topology::new(Vec::new(), Vec::new(), Vec::new());
        let health = Worker::new(connection, topology).health_handle();
        let metrics = PrometheusBuilder::new().build_recorder().handle();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let address = listener.local_addr().expect("bound");
        tokio::spawn(serve(listener, metrics, health));
        address
    }

    /// Whether `/health` answers on a fresh connection.
    async fn answers(address: std::net::SocketAddr) -> bool {
        let Ok(mut stream) = TcpStream::connect(address).await else {
            return false;
        };
        if stream
            .write_all(b"GET /health HTTP/1.1\r\n\r\n")
            .await
            .is_err()
        {
            return false;
        }
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        answer.starts_with(b"HTTP/1.1 ")
    }

    /// A client sending a byte every 100 ms held its connection for ever (a 5 s timeout per
    /// read); now the connection is closed at its deadline, long before 100 bytes.
    #[tokio::test]
    async fn a_trickling_client_is_cut_off_at_the_deadline() {
        let address = endpoint().await;
        let mut stream = TcpStream::connect(address).await.expect("connected");
        let mut sent = 0;
        while sent < 100 && stream.write_all(b"G").await.is_ok() {
            sent += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut probe = [0u8; 1];
            // A closed connection reads as its end, or fails to.
            let peek =
                tokio::time::timeout(Duration::from_millis(1), stream.peek(&mut probe)).await;
            if matches!(peek, Ok(Ok(0) | Err(_))) {
                break;
            }
        }
        assert!(sent < 100, "the connection outlived {sent} trickled bytes");
    }

    /// 300 idle connections (more than it serves at once) do not keep `/health` from
    /// answering: those past the limit are closed at once, the others at their deadline.
    #[tokio::test]
    async fn idle_clients_cannot_hold_the_health_endpoint() {
        let address = endpoint().await;
        let mut idle = Vec::new();
        for _ in 0..300 {
            idle.push(TcpStream::connect(address).await.expect("connected"));
        }
        let mut answered = false;
        for _ in 0..50 {
            if answers(address).await {
                answered = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(answered, "/health answered with 300 idle clients connected");
        drop(idle);
    }
}
