//! The generator at scale: `warren generate` on a synthetic contract of 1,000 message types
//! and 300 queues over shared schema files, in a child process so its wall time and peak
//! memory are its own; and a no-op `cargo build` of a crate using `warren-build`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::Result;

/// Message types in the synthetic contract.
pub const MESSAGES: usize = 1_000;
/// Queues in the synthetic contract.
pub const QUEUES: usize = 300;

/// Writes the synthetic contract under `dir`: shared schemas (`common/`), one payload schema
/// per message referencing them, and `warren.yaml`. Returns the contract's path.
pub fn write_contract(dir: &Path) -> Result<PathBuf> {
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
    for q in 0..QUEUES {
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
    for q in 0..QUEUES {
        writeln!(
            yaml,
            "  - {{ exchange: events, queue: q{q:03}, routing_key: \"event.m{q:04}.#\" }}"
        )?;
    }
    yaml.push_str("messages:\n");
    for m in 0..MESSAGES {
        let schema = format!(
            r#"{{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"Event{m:04}","type":"object","additionalProperties":false,"required":["id","amount","at"],"properties":{{"id":{{"type":"string","format":"uuid"}},"amount":{{"$ref":"../common/money.json"}},"ship_to":{{"$ref":"../common/address.json"}},"at":{{"type":"string","format":"date-time"}},"note":{{"type":"string","maxLength":200}},"lines":{{"type":"array","items":{{"type":"object","required":["sku","quantity"],"properties":{{"sku":{{"type":"string"}},"quantity":{{"type":"integer","minimum":1}}}}}}}}}}}}"#
        );
        std::fs::write(dir.join(format!("messages/m{m:04}.json")), schema)?;
        writeln!(yaml, "  m{m:04}: {{ payload: messages/m{m:04}.json }}")?;
    }
    yaml.push_str("publishers:\n");
    for m in 0..MESSAGES {
        let external = if m < QUEUES {
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
    for q in 0..QUEUES {
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

/// What generating the synthetic contract cost.
pub struct Generated {
    pub wall: Duration,
    pub peak_rss_mib: f64,
    pub bytes: usize,
}

/// Runs this binary's hidden `generate-child` command on `contract` and measures it: wall
/// time from spawn to exit (process start included), and the child's peak memory.
pub fn measure(contract: &Path) -> Result<Generated> {
    let started = Instant::now();
    let output = Command::new(std::env::current_exe()?)
        .arg("generate-child")
        .arg(contract)
        .output()?;
    let wall = started.elapsed();
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let shown: String = stderr.chars().take(4000).collect();
        return Err(format!("generating the synthetic contract failed:\n{shown}").into());
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut fields = stdout.split_whitespace();
    let bytes = fields.next().ok_or("no output size")?.parse()?;
    let peak: f64 = fields.next().ok_or("no peak memory")?.parse()?;
    Ok(Generated {
        wall,
        peak_rss_mib: peak / 1024.0,
        bytes,
    })
}

/// The child: generate, print the size of the output and its own peak memory (KiB).
pub fn child(contract: &Path) -> Result<()> {
    let generated = warren_codegen::generate(contract).map_err(|e| e.to_string())?;
    println!("{} {}", generated.code.len(), peak_rss_kib()?);
    Ok(())
}

/// This process's peak resident memory in KiB (`VmHWM` in `/proc/self/status`, Linux).
fn peak_rss_kib() -> Result<f64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .ok_or("no VmHWM in /proc/self/status")?;
    let kib = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kib)
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
