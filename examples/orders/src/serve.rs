//! The demo's `/metrics` (Prometheus text format), `/health` (the worker's health as JSON,
//! 200 when ready, 503 when not: a readiness probe) and `/live` (200 while the worker is
//! alive: a liveness probe), on a tiny HTTP/1.1 responder of its own: one request per
//! connection, `GET` only. A service would use its web framework; the runtime needs none.

use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use warren_runtime::HealthHandle;

/// The longest request head read: a probe's or a scraper's is a few hundred bytes.
const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

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

/// Serves `/metrics` and `/health` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, metrics: PrometheusHandle, health: HealthHandle) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        let health = health.clone();
        tokio::spawn(async move {
            let _ = respond(stream, &metrics, &health).await;
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
    // size and time.
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < MAX_REQUEST_BYTES {
        let read = tokio::time::timeout(READ_TIMEOUT, stream.read(&mut buffer)).await;
        match read {
            Ok(Ok(0)) | Err(_) => break,
            Ok(Ok(n)) => request.extend_from_slice(&buffer[..n]),
            Ok(Err(error)) => return Err(error),
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
