//! Tracing spans and metrics on, as `docs/operations.md` recommends for production: the runtime's
//! `INFO` spans recorded by a `tracing-opentelemetry` layer into an OpenTelemetry tracer
//! provider with a batch span processor, and a Prometheus recorder for the `metrics` facade
//! with real histograms, kept up as a service keeps it (upkeep every few seconds, a scrape
//! now and then).
//!
//! Turned on with `--observe` (anywhere among the arguments) or `WARREN_BENCH_OBSERVE=1`; off,
//! nothing is installed and warren's spans and metrics cost what they cost unobserved. The
//! only difference from production is where the data goes: the spans' exporter drops each
//! batch it is handed (no network), and the scrape renders the text and throws it away.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::Result;

/// The environment variable that turns observation on (`1`), as `--observe` does.
pub const ENV: &str = "WARREN_BENCH_OBSERVE";
/// The argument that turns observation on.
pub const ARG: &str = "--observe";

/// How often a service runs the Prometheus recorder's upkeep (the docs say every few seconds).
const UPKEEP: Duration = Duration::from_secs(5);
/// How often Prometheus scrapes, by default.
const SCRAPE: Duration = Duration::from_secs(15);

/// Whether observation is asked for, by `args` (the command line) or the environment.
pub fn wanted(args: &[String]) -> bool {
    args.iter().any(|arg| arg == ARG) || std::env::var(ENV).is_ok_and(|value| value == "1")
}

/// What the run's header says of observation.
pub fn describe(on: bool) -> &'static str {
    if on {
        "observed: INFO spans to an OpenTelemetry batch processor, metrics to a Prometheus recorder"
    } else {
        "unobserved: no tracing subscriber, no metrics recorder (`--observe` for both)"
    }
}

/// A span exporter that drops what it is handed, counting it: the spans are built, recorded,
/// batched and handed over as with a real exporter, and only the network is left out.
#[derive(Debug)]
struct Discard(Arc<AtomicUsize>);

impl SpanExporter for Discard {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.fetch_add(batch.len(), Ordering::Relaxed);
        std::hint::black_box(batch);
        Ok(())
    }
}

/// What [`install`] set up; dropping it flushes and stops the span processor, and prints how
/// many spans were exported and metric series rendered (proof the observation was on).
pub struct Observing {
    provider: SdkTracerProvider,
    prometheus: PrometheusHandle,
    exported: Arc<AtomicUsize>,
    upkeep: tokio::task::JoinHandle<()>,
}

impl Drop for Observing {
    fn drop(&mut self) {
        self.upkeep.abort();
        // A failed flush only leaves the last spans uncounted.
        let _ = self.provider.shutdown();
        let series = self
            .prometheus
            .render()
            .lines()
            .filter(|line| line.starts_with("warren_"))
            .count();
        println!(
            "\nobserved: {} spans exported, {series} warren metric series rendered",
            self.exported.load(Ordering::Relaxed)
        );
    }
}

/// Installs the tracing subscriber and the metrics recorder for the whole process; call it
/// before any publisher or worker is created (they register their metric handles at start).
pub fn install() -> Result<Observing> {
    let prometheus = PrometheusBuilder::new()
        // Real histograms, as the docs recommend, rather than the exporter's summaries.
        .set_buckets_for_metric(
            Matcher::Suffix("_seconds".into()),
            &[0.005, 0.025, 0.1, 0.5, 1.0, 5.0, 30.0],
        )?
        .install_recorder()?;
    warren_runtime::metrics::describe();
    let exported = Arc::new(AtomicUsize::new(0));
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(Discard(exported.clone()))
        .build();
    tracing_subscriber::registry()
        .with(tracing_subscriber::filter::LevelFilter::INFO)
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("warren-bench")))
        .try_init()?;
    let upkeep = tokio::spawn(keep_up(prometheus.clone()));
    Ok(Observing {
        provider,
        prometheus,
        exported,
        upkeep,
    })
}

/// The recorder's upkeep and the scrapes, as a service runs them.
async fn keep_up(prometheus: PrometheusHandle) {
    let mut upkeep = tokio::time::interval(UPKEEP);
    let mut scraped = tokio::time::Instant::now();
    loop {
        upkeep.tick().await;
        prometheus.run_upkeep();
        if scraped.elapsed() >= SCRAPE {
            std::hint::black_box(prometheus.render());
            scraped = tokio::time::Instant::now();
        }
    }
}
