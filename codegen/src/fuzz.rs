//! Entry points for the fuzz targets (`fuzz/`) and the property tests that stand in for them
//! in CI. **Not a stable API**: hidden from the docs, changed whenever the fuzzers need it.
//!
//! The front end reads contracts and schemas from disk (paths in a contract resolve against
//! its folder, and canonical paths keep `$ref`s inside the schema roots), so inputs are
//! written into a scratch folder and go through the same [`crate::generate`] the CLI uses,
//! rather than through an in-memory shortcut that would skip the file handling.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

/// Schema files every scratch folder made by [`Scratch::new`] holds, so fuzzed contracts and
/// schemas can name files that exist: `payload: event.json`, `$ref: common.json#/$defs/Money`.
const FIXED_FILES: &[(&str, &str)] = &[
    (
        "event.json",
        r#"{ "title": "Event", "type": "object", "required": ["at"],
  "properties": { "at": { "type": "string", "format": "date-time" } } }"#,
    ),
    (
        "schemas/event.json",
        r#"{ "title": "Event", "type": "object", "properties": { "id": { "type": "string" } } }"#,
    ),
    (
        "schemas/headers.json",
        r#"{ "title": "Headers", "type": "object",
  "properties": { "tenant": { "type": "string" }, "region": { "type": "string" } } }"#,
    ),
    (
        "schemas/common.json",
        r##"{ "$defs": {
  "Money": { "type": "object", "required": ["amount_minor", "currency"],
    "properties": { "amount_minor": { "type": "integer", "minimum": 0 },
                    "currency": { "$ref": "#/$defs/Currency" } } },
  "Currency": { "type": "string", "pattern": "^[A-Z]{3}$" } } }"##,
    ),
];

/// The contract that [`Scratch::schema`] puts around a fuzzed payload schema: one message
/// with a fixed headers schema, published and consumed, so a schema that passes bundling
/// goes on through the checks, the model and typify.
fn schema_contract(payload: &str) -> String {
    format!(
        "queues:\n  work: {{ on_poison: drop }}\n\
         messages:\n  job: {{ payload: {payload}, headers: schemas/headers.json }}\n\
         publishers:\n  job: {{ exchange: \"\", routing_key: work, message: job }}\n\
         consumers:\n  job: {{ queue: work, message: job }}\n"
    )
}

/// Lets panics raised inside typify pass, naming each place once on stderr, and hands every
/// other panic to the hook installed before (libFuzzer's aborts, which is how it sees a
/// crash). Installed once however often it is called.
///
/// typify panics on some schemas (`not` of an object, `if`/`then`/`else`, …) instead of
/// returning errors; `emit` catches those with `catch_unwind` and reports them as errors, so
/// they are known and guarded, not crashes. A panic hook runs before unwinding, so without
/// this filter the fuzzer would stop on every one of them.
pub fn tolerate_guarded_typify_panics() {
    static ONCE: Once = Once::new();
    static SEEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // typify's code lives in `typify-impl` (`typify-impl-x.y.z/` in the registry);
            // its panics are raised there, not in warren's source.
            let place = info
                .location()
                .filter(|at| at.file().contains("typify-impl"))
                .map(|at| format!("{}:{}", at.file(), at.line()));
            let Some(place) = place else {
                previous(info);
                return;
            };
            let first = SEEN.lock().map(|mut seen| seen.insert(place.clone()));
            if first.unwrap_or(false) {
                eprintln!("typify panicked at {place} (caught by warren, reported as an error)");
            }
        }));
    });
}

/// A scratch folder that fuzzed files are written into; removed when dropped.
#[derive(Debug)]
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// A new folder under the system's temporary folder holding a few fixed schema files.
    pub fn new() -> io::Result<Self> {
        let scratch = Self::empty()?;
        for (name, text) in FIXED_FILES {
            let path = scratch.dir.join(name);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::write(path, text)?;
        }
        Ok(scratch)
    }

    /// A new folder holding a copy of `folder`, so a fixture's contract can be mutated while
    /// the schema files it names stay where it expects them.
    pub fn copy_of(folder: &Path) -> io::Result<Self> {
        let scratch = Self::empty()?;
        copy_tree(folder, &scratch.dir)?;
        Ok(scratch)
    }

    fn empty() -> io::Result<Self> {
        // One process may hold several (test threads), and runs may overlap: the process id
        // and a counter keep their folders apart.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("warren-fuzz-{}-{n}", std::process::id()));
        // A folder left by a killed run that had the same process id.
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
        }
        fs::create_dir_all(&dir)?;
        // Canonical, as the front end resolves every path it reads.
        Ok(Self {
            dir: dir.canonicalize()?,
        })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Writes `text` as the contract `relative` (to the folder) and generates its Rust:
    /// load, schema bundling, every check, the model and emission. Errors are expected; a
    /// panic is a bug.
    pub fn contract(&self, relative: &str, text: &[u8]) -> Result<(), String> {
        let path = self.dir.join(relative);
        fs::write(&path, text).map_err(|e| format!("cannot write the input: {e}"))?;
        crate::generate(&path).map(drop).map_err(|e| e.to_string())
    }

    /// Writes `text` as the payload schema of a fixed contract and generates its Rust, once
    /// as `schemas/payload.json` and once as `schemas/payload.yaml`, since the two are
    /// parsed differently. Returns the outcome of each.
    pub fn schema(&self, text: &[u8]) -> [Result<(), String>; 2] {
        ["json", "yaml"].map(|extension| {
            let relative = format!("schemas/payload.{extension}");
            let path = self.dir.join(&relative);
            fs::write(&path, text).map_err(|e| format!("cannot write the input: {e}"))?;
            let outcome = self.contract("warren.yaml", schema_contract(&relative).as_bytes());
            // Gone before the next input, which must not reach this one through a `$ref`
            // (a crash found that way would not reproduce from its own bytes).
            fs::remove_file(&path).map_err(|e| format!("cannot remove the input: {e}"))?;
            outcome
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Best effort: a leftover folder in the temporary folder harms nothing.
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}
