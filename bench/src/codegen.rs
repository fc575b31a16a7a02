//! The generator at scale: `warren generate` on a synthetic contract of 1,000 message types
//! and 300 queues over shared schema files, and the scaling rows (validate and generate on
//! contracts of 1,000 to 10,000 of each entity), each in a child process so its wall time
//! and peak memory are its own; and a no-op `cargo build` of a crate using `warren-build`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::Result;

/// The size of a synthetic contract.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Message types, each with its own schema file and publisher.
    pub messages: usize,
    /// Queues, each with a binding and a consumer; at most `messages`.
    pub queues: usize,
}

/// The classic row: 1,000 message types over 300 queues.
pub const CLASSIC: Shape = Shape {
    messages: 1_000,
    queues: 300,
};

/// The scaling rows: `n` each of queues, messages, publishers, consumers and bindings.
pub const SCALING: [usize; 3] = [1_000, 3_000, 10_000];

/// Writes the synthetic contract of `shape` under `dir`: shared schemas (`common/`), one
/// payload schema per message referencing them, and `warren.yaml`. Returns the contract's
/// path.
pub fn write_contract(dir: &Path, shape: Shape) -> Result<PathBuf> {
    let Shape { messages, queues } = shape;
    std::fs::create_dir_all(dir.join("common"))?;
    std::fs::create_dir_all(dir.join("messages"))?;
    std::fs::write(
        dir.join("common/money.json"),
        r#"{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"Money","type":"object","additionalProperties":false,"required":["amount_minor","currency"],"properties":{"amount_minor":{"type":"integer","minimum":0},"currency":{"type":"string","enum":["EUR","USD","GBP"]}}}"#,
    )?;
    std::fs::write(
        dir.join("common/address.json"),
        r#"{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"Address","type":"object","additionalProperties":false,"required":["street","city","country"],"properties":{"street":{"type":"string","minLength":1},"city":{"type":"string"},"country":{"type":"string","pattern":"^[A-Z]{2}$"},"location":{"$ref":"geo.json"}}}"#,
    )?;
    std::fs::write(
        dir.join("common/geo.json"),
        r#"{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"Geo","type":"object","required":["lat","lon"],"properties":{"lat":{"type":"number","minimum":-90,"maximum":90},"lon":{"type":"number","minimum":-180,"maximum":180}}}"#,
    )?;
    let mut yaml =
        String::from("exchanges:\n  events: { type: topic }\n  dlx: { type: topic }\nqueues:\n");
    for q in 0..queues {
        let retry = match q % 3 {
            0 => "{ mode: ttl-backoff, max_retries: 3, initial_delay: 1s }",
            1 => "{ mode: immediate-requeue, max_retries: 2 }",
            _ => "{ mode: none }",
        };
        writeln!(
            yaml,
            "  q{q:03}: {{ dead_letter: {{ exchange: dlx }}, retry: {retry} }}"
        )?;
    }
    yaml.push_str("  dead: { type: classic }\nbindings:\n  - { exchange: dlx, queue: dead, routing_key: \"#\" }\n");
    // The first `QUEUES` messages each have a queue and a consumer of this contract; the
    // others are published to consumers declared elsewhere.
    for q in 0..queues {
        writeln!(
            yaml,
            "  - {{ exchange: events, queue: q{q:03}, routing_key: \"event.m{q:04}.#\" }}"
        )?;
    }
    yaml.push_str("messages:\n");
    for m in 0..messages {
        let schema = format!(
            r#"{{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"Event{m:04}","type":"object","additionalProperties":false,"required":["id","amount","at"],"properties":{{"id":{{"type":"string","format":"uuid"}},"amount":{{"$ref":"../common/money.json"}},"ship_to":{{"$ref":"../common/address.json"}},"at":{{"type":"string","format":"date-time"}},"note":{{"type":"string","maxLength":200}},"lines":{{"type":"array","items":{{"type":"object","required":["sku","quantity"],"properties":{{"sku":{{"type":"string"}},"quantity":{{"type":"integer","minimum":1}}}}}}}}}}}}"#
        );
        std::fs::write(dir.join(format!("messages/m{m:04}.json")), schema)?;
        writeln!(yaml, "  m{m:04}: {{ payload: messages/m{m:04}.json }}")?;
    }
    yaml.push_str("publishers:\n");
    for m in 0..messages {
        let external = if m < queues {
            ""
        } else {
            ", external_consumers: true"
        };
        writeln!(
            yaml,
            "  publish_m{m:04}: {{ exchange: events, routing_key: \"event.m{m:04}.{{region}}\", message: m{m:04}{external} }}"
        )?;
    }
    yaml.push_str("consumers:\n");
    for q in 0..queues {
        // Each queue carries the messages bound to it; a consumer takes its first one.
        writeln!(
            yaml,
            "  consume_q{q:03}: {{ queue: q{q:03}, message: m{q:04} }}"
        )?;
    }
    let contract = dir.join("warren.yaml");
    std::fs::write(&contract, yaml)?;
    Ok(contract)
}

/// What a front-end stage costs on the synthetic contract.
pub struct Measured {
    /// From spawning the child to its exit.
    pub wall: Duration,
    /// The stage's own time, timed inside the child (process start and untimed preparation
    /// left out).
    pub timed: Duration,
    /// The child's peak resident memory.
    pub peak_rss_mib: f64,
    /// Bytes of Rust generated (0 for `validate`; typify's unformatted text for `Typify`).
    pub bytes: usize,
}

/// How far a child runs the front end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// `warren validate`: load, bundle the schemas, run every check, build the model.
    Validate,
    /// `warren generate`: all of validate, then emit the Rust.
    Generate,
    /// typify alone on the bundled schemas `Generate` hands it, with the same settings:
    /// the type space built and its tokens written as text. The contract is loaded, bundled
    /// and checked first, outside the timing.
    Typify,
    /// [`Stage::Typify`], its tokens then parsed and formatted by `prettyplease`, as
    /// typify's documentation prints a file.
    TypifyFormatted,
}

impl Stage {
    /// The hidden command of this binary that runs the stage in a child.
    pub fn command(self) -> &'static str {
        match self {
            Self::Validate => "validate-child",
            Self::Generate => "generate-child",
            Self::Typify => "typify-child",
            Self::TypifyFormatted => "typify-formatted-child",
        }
    }
}

/// Runs this binary's hidden child command for `stage` on `contract` and measures it: wall
/// time from spawn to exit (process start included), and the child's peak memory.
pub fn measure(contract: &Path, stage: Stage) -> Result<Measured> {
    let started = Instant::now();
    let output = Command::new(std::env::current_exe()?)
        .arg(stage.command())
        .arg(contract)
        .output()?;
    let wall = started.elapsed();
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let shown: String = stderr.chars().take(4000).collect();
        return Err(format!("{stage:?} on the synthetic contract failed:\n{shown}").into());
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut fields = stdout.split_whitespace();
    let bytes = fields.next().ok_or("no output size")?.parse()?;
    let peak: f64 = fields.next().ok_or("no peak memory")?.parse()?;
    let timed: f64 = fields.next().ok_or("no timed duration")?.parse()?;
    Ok(Measured {
        wall,
        timed: Duration::from_secs_f64(timed),
        peak_rss_mib: peak / 1024.0,
        bytes,
    })
}

/// The child: run `stage`, print the size of the output, its own peak memory (KiB) and the
/// stage's time in seconds.
pub fn child(contract: &Path, stage: Stage) -> Result<()> {
    let started = Instant::now();
    let (bytes, timed) = match stage {
        Stage::Validate => {
            warren_codegen::check_contract(contract).map_err(|e| e.to_string())?;
            (0, started.elapsed())
        }
        Stage::Generate => {
            let generated = warren_codegen::generate(contract).map_err(|e| e.to_string())?;
            (generated.code.len(), started.elapsed())
        }
        Stage::Typify | Stage::TypifyFormatted => {
            // Bundling is the generator's work, not typify's: done before the clock starts.
            let checked = warren_codegen::check_contract(contract).map_err(|e| e.to_string())?;
            let started = Instant::now();
            let text = checked
                .__typify_alone(
                    &warren_codegen::Settings::default(),
                    stage == Stage::TypifyFormatted,
                )
                .map_err(|e| e.to_string())?;
            (text.len(), started.elapsed())
        }
    };
    println!("{bytes} {} {}", peak_rss_kib()?, timed.as_secs_f64());
    Ok(())
}

/// This process's peak resident memory in KiB.
fn peak_rss_kib() -> Result<f64> {
    let kib = crate::procfs::high_water_kib("self").ok_or("no VmHWM in /proc/self/status")?;
    Ok(kib as f64)
}

/// Whether a second `cargo build` of the orders example reruns its build script (it must
/// not): builds it once, then again with `-v`, and looks for the build script running.
pub fn noop_build_reruns(workspace: &Path) -> Result<(bool, Duration)> {
    let build = |verbose: bool| -> Result<std::process::Output> {
        let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cargo
            .current_dir(workspace)
            .args(["build", "--locked", "-p", "warren-example-orders"]);
        if verbose {
            cargo.arg("-v");
        }
        Ok(cargo.output()?)
    };
    let first = build(false)?;
    if !first.status.success() {
        return Err(String::from_utf8_lossy(&first.stderr).into_owned().into());
    }
    let started = Instant::now();
    let second = build(true)?;
    let elapsed = started.elapsed();
    let log = String::from_utf8_lossy(&second.stderr);
    let reran = log.lines().any(|line| {
        line.contains("Running")
            && line.contains("warren-example-orders")
            && line.contains("build-script")
    });
    Ok((reran, elapsed))
}
