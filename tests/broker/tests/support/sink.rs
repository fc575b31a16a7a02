//! A `metrics` recorder of the tests' own, keeping every value: the metrics test installs it
//! for its whole binary, the inbox tests hand it to one consumer's counters
//! (`metrics::with_local_recorder`). Each test binary uses part of it.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata,
    SharedString, Unit,
};

/// One metric's values: a counter's total, a gauge's every value in turn, a histogram's
/// samples.
#[derive(Default)]
pub struct Cell {
    pub counter: AtomicU64,
    pub gauge: Mutex<Vec<f64>>,
    pub samples: Mutex<Vec<f64>>,
}

impl Cell {
    fn gauge_to(&self, change: impl FnOnce(f64) -> f64) {
        let mut history = self.gauge.lock().unwrap_or_else(|e| e.into_inner());
        let now = change(history.last().copied().unwrap_or(0.0));
        history.push(now);
    }
}

impl CounterFn for Cell {
    fn increment(&self, value: u64) {
        self.counter.fetch_add(value, Ordering::SeqCst);
    }
    fn absolute(&self, value: u64) {
        self.counter.fetch_max(value, Ordering::SeqCst);
    }
}

impl GaugeFn for Cell {
    fn increment(&self, value: f64) {
        self.gauge_to(|now| now + value);
    }
    fn decrement(&self, value: f64) {
        self.gauge_to(|now| now - value);
    }
    fn set(&self, value: f64) {
        self.gauge_to(|_| value);
    }
}

impl HistogramFn for Cell {
    fn record(&self, value: f64) {
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(value);
    }
}

/// A metric's unit and description.
pub type Description = (Option<Unit>, String);

/// Label keys and values.
pub type Labels = Vec<(&'static str, String)>;

/// A metric's name and its labels, sorted.
pub type Series = (String, BTreeMap<String, String>);

/// A recorder keeping every value, never resetting (unlike a snapshotting one, whose reads
/// would reset the in-flight gauge under the worker's feet).
#[derive(Clone, Default)]
pub struct Sink {
    pub cells: Arc<Mutex<HashMap<Series, Arc<Cell>>>>,
    pub described: Arc<Mutex<HashMap<String, Description>>>,
}

impl Sink {
    fn cell(&self, key: &Key) -> Arc<Cell> {
        let labels = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        let mut cells = self.cells.lock().unwrap_or_else(|e| e.into_inner());
        cells
            .entry((key.name().to_owned(), labels))
            .or_default()
            .clone()
    }

    fn describe(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.described
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.as_str().to_owned(), (unit, description.into_owned()));
    }

    /// The series named `name` whose labels include every one of `labels`.
    pub fn find(
        &self,
        name: &str,
        labels: &[(&str, &str)],
    ) -> Vec<(BTreeMap<String, String>, Arc<Cell>)> {
        let cells = self.cells.lock().unwrap_or_else(|e| e.into_inner());
        cells
            .iter()
            .filter(|((n, l), _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|((_, l), cell)| (l.clone(), cell.clone()))
            .collect()
    }

    /// The total of the counters named `name` with `labels`.
    pub fn count(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.find(name, labels)
            .iter()
            .map(|(_, cell)| cell.counter.load(Ordering::SeqCst))
            .sum()
    }

    /// The one series named `name` with `labels`.
    pub fn one(&self, name: &str, labels: &[(&str, &str)]) -> Arc<Cell> {
        let mut found = self.find(name, labels);
        assert_eq!(found.len(), 1, "one series {name} {labels:?}");
        found.remove(0).1
    }
}

impl metrics::Recorder for Sink {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(key, unit, description);
    }
    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(key, unit, description);
    }
    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(key, unit, description);
    }
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.cell(key))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.cell(key))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.cell(key))
    }
}
