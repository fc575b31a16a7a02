//! What warren's generated code costs its users' builds: for synthetic contracts of 5, 200
//! and 1,000 messages (`codegen::write_contract`), a crate around the generated file (its
//! lib, and a binary running a handler for every consumer through the generated
//! `Handlers`) against a crate of the same shape without warren (typify's output alone for
//! the types, and a bare tokio binary calling as many plain async functions).
//!
//! Each crate is built and checked cold (its own units; the dependencies are built once,
//! beforehand, in a target directory every crate shares), then rebuilt after editing one
//! schema (the file regenerated) and after editing one handler. The steps that link a binary
//! are measured a third time on warren's crate linked to `warren-dylib` (warren-runtime as a
//! shared library, as a developer turns it on). Each step is one `cargo`
//! run, measured from outside: wall time, the CPU time of cargo and every compiler it ran
//! (`/proc/self/stat`'s waited-for children), and the largest resident memory any of them
//! reached (sampled from `/proc` every 50 ms: a peak shorter than that can be missed).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::codegen::{Shape, write_contract};
use crate::{Result, procfs};

/// The shapes measured by default: messages (each with a publisher) and queues (each with a
/// consumer).
pub const SHAPES: [Shape; 3] = [
    Shape {
        messages: 5,
        queues: 4,
    },
    Shape {
        messages: 200,
        queues: 60,
    },
    Shape {
        messages: 1_000,
        queues: 300,
    },
];

/// The shape of `messages` messages: one of [`SHAPES`], or as many queues as a third of
/// the messages.
pub fn shape_of(messages: usize) -> Shape {
    (SHAPES.iter().find(|shape| shape.messages == messages)).map_or(
        Shape {
            messages,
            queues: (messages / 3).max(1),
        },
        |shape| *shape,
    )
}

/// What one `cargo` run cost.
#[derive(Debug, Clone, Copy)]
struct Cost {
    wall: Duration,
    cpu: Duration,
    peak_mib: f64,
}

/// A crate of the benchmark: warren's, or the baseline without it.
struct Crate {
    dir: PathBuf,
    /// Bytes of Rust its lib includes (the generated file, or typify's output).
    bytes: usize,
}

/// Which side a crate is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Warren,
    /// Warren's crate, its lib using `warren-dylib`: every binary of it links warren-runtime
    /// and the crates below it from one shared library.
    WarrenDylib,
    Baseline,
}

impl Side {
    const ALL: [Side; 3] = [Side::Warren, Side::WarrenDylib, Side::Baseline];

    /// The crate's name, afresh each run.
    fn crate_name(self, messages: usize) -> String {
        let run = std::process::id();
        match self {
            Self::Warren => format!("warren-{messages}-{run}"),
            Self::WarrenDylib => format!("warren-dylib-{messages}-{run}"),
            Self::Baseline => format!("baseline-{messages}-{run}"),
        }
    }
}

/// Runs the benchmark for each of `shapes` in the workspace at `workspace`, printing a
/// table per shape with the ratios of warren's crate to the baseline's.
pub fn bench(workspace: &Path, shapes: &[Shape]) -> Result<()> {
    let root = workspace.join("target/build-cost");
    let target = root.join("target");
    // The crates of earlier runs go; the dependencies' builds in `target` stay, for this
    // run's warm-up to find them built.
    if root.exists() {
        for entry in std::fs::read_dir(&root)?.flatten() {
            if entry.path() != target {
                std::fs::remove_dir_all(entry.path())?;
            }
        }
    }
    println!(
        "build-cost: crates around generated code, debug profile, their dependencies built beforehand in {}",
        target.display()
    );
    warm_up(workspace, &root, &target)?;
    for shape in shapes {
        measure_shape(workspace, &root, &target, *shape)?;
    }
    Ok(())
}

/// Builds and checks the dependencies every crate shares, so that each measured step
/// compiles the crate's own units alone.
fn warm_up(workspace: &Path, root: &Path, target: &Path) -> Result<()> {
    let dir = root.join("warm");
    write_manifest(workspace, &dir, "warm", true)?;
    std::fs::write(dir.join("src/lib.rs"), "//! Nothing.\n")?;
    std::fs::write(dir.join("src/main.rs"), "fn main() {}\n")?;
    for command in ["build", "check"] {
        cargo(&dir, target, &[command, "--all-targets"])?;
    }
    Ok(())
}

/// The table of one shape.
fn measure_shape(workspace: &Path, root: &Path, target: &Path, shape: Shape) -> Result<()> {
    let contract_dir = root.join(format!("contract-{}", shape.messages));
    let contract = write_contract(&contract_dir, shape)?;
    println!(
        "\n{} messages, {} queues with a consumer each (synthetic contract):",
        shape.messages, shape.queues
    );
    println!(
        "  {:<34} {:>9} {:>9} {:>9}   {:>9} {:>9} {:>9}   ratio (wall, CPU)",
        "step", "wall s", "CPU s", "peak MiB", "base wall", "base CPU", "base MiB"
    );
    let mut crates = Vec::new();
    for side in Side::ALL {
        // Named afresh each run: nothing the shared target holds of an earlier run's crate
        // (its incremental cache) can make a cold build warm.
        let name = side.crate_name(shape.messages);
        let dir = root.join(&name);
        write_manifest(workspace, &dir, &name, side == Side::WarrenDylib)?;
        let bytes = write_lib(&dir, &contract, side)?;
        std::fs::write(dir.join("src/main.rs"), main_rs(&name, shape, side, 0))?;
        crates.push(Crate { dir, bytes });
    }
    let [warren, dylib, baseline] = &crates[..] else {
        unreachable!("a crate per side");
    };
    println!(
        "  {:<34} {:>9.2} MiB of Rust; typify alone {:.2} MiB ({:.2}x)",
        "generated",
        mib(warren.bytes),
        mib(baseline.bytes),
        warren.bytes as f64 / baseline.bytes.max(1) as f64
    );
    let lib_steps: [(&str, Step); 2] = [
        ("cargo check (lib), cold", Step::Cargo(&["check", "--lib"])),
        ("cargo build (lib), cold", Step::Cargo(&["build", "--lib"])),
    ];
    let linking_steps: [(&str, Step); 3] = [
        (
            "cargo build (binary, lib built)",
            Step::Cargo(&["build", "--bins"]),
        ),
        ("rebuild after editing a schema", Step::EditSchema),
        ("rebuild after editing a handler", Step::EditHandler),
    ];
    let run =
        |step: Step, krate: &Crate, side: Side| step.run(krate, target, &contract, shape, side);
    for (label, step) in lib_steps {
        let cost = run(step, warren, Side::Warren)?;
        row(label, cost, run(step, baseline, Side::Baseline)?);
    }
    // The lib linked dynamically is the same lib: built, not measured again.
    cargo(&dylib.dir, target, &["build", "--lib"])?;
    for (label, step) in linking_steps {
        let cost = run(step, warren, Side::Warren)?;
        let linked_dynamically = run(step, dylib, Side::WarrenDylib)?;
        let base = run(step, baseline, Side::Baseline)?;
        row(label, cost, base);
        row("  the same with warren-dylib", linked_dynamically, base);
    }
    Ok(())
}

/// A measured step.
#[derive(Clone, Copy)]
enum Step {
    /// `cargo` with these arguments.
    Cargo(&'static [&'static str]),
    /// One message's schema gains an optional property; the lib's Rust is regenerated and
    /// everything rebuilt.
    EditSchema,
    /// The body of the first handler changes; everything rebuilt.
    EditHandler,
}

impl Step {
    fn run(
        self,
        krate: &Crate,
        target: &Path,
        contract: &Path,
        shape: Shape,
        side: Side,
    ) -> Result<Cost> {
        let all: &[&str] = &["build", "--all-targets"];
        match self {
            Self::Cargo(args) => cargo(&krate.dir, target, args),
            Self::EditSchema => {
                edit_schema(contract, side)?;
                write_lib(&krate.dir, contract, side)?;
                cargo(&krate.dir, target, all)
            }
            Self::EditHandler => {
                let name = krate.dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
                std::fs::write(krate.dir.join("src/main.rs"), main_rs(name, shape, side, 1))?;
                cargo(&krate.dir, target, all)
            }
        }
    }
}

/// Adds an optional property to the first message's schema, once per side (the sides
/// share the contract: the second edit must change it again, or the baseline would rebuild
/// nothing).
fn edit_schema(contract: &Path, side: Side) -> Result<()> {
    let folder = contract.parent().ok_or("the contract has a folder")?;
    let schema = folder.join("messages/m0000.json");
    let text = std::fs::read_to_string(&schema)?;
    let property = match side {
        Side::Warren => "edited_by_warren",
        Side::WarrenDylib => "edited_by_warren_dylib",
        Side::Baseline => "edited_by_baseline",
    };
    let edited = text.replacen(
        r#""properties":{"#,
        &format!(r#""properties":{{"{property}":{{"type":"string"}},"#),
        1,
    );
    std::fs::write(schema, edited)?;
    Ok(())
}

/// A crate's manifest: every side takes the same dependencies, so they share what the
/// warm-up built (typify's output needs serde, serde_json, regress, chrono and uuid;
/// warren's code needs warren-runtime alone), and `dylib` adds `warren-dylib`.
fn write_manifest(workspace: &Path, dir: &Path, name: &str, dylib: bool) -> Result<()> {
    std::fs::create_dir_all(dir.join("src"))?;
    let runtime = workspace.join("runtime");
    let dylib = match dylib {
        true => format!(
            "warren-dylib = {{ path = \"{}\" }}\n",
            workspace.join("dylib").display()
        ),
        false => String::new(),
    };
    let manifest = format!(
        r#"[package]
name = "{name}"
version = "0.0.0"
edition = "2024"
publish = false

# Not a member of the workspace it sits in.
[workspace]

[dependencies]
warren-runtime = {{ path = "{runtime}" }}
tokio = {{ version = "1", features = ["rt-multi-thread", "macros"] }}
serde = {{ version = "1", features = ["derive"] }}
serde_json = "1"
regress = "0.12"
chrono = {{ version = "0.4", default-features = false, features = ["std", "serde"] }}
uuid = {{ version = "1", features = ["serde", "v7"] }}
{dylib}
[[bin]]
name = "run"
path = "src/main.rs"
"#,
        runtime = runtime.display()
    );
    std::fs::write(dir.join("Cargo.toml"), manifest)?;
    // The workspace's versions, already downloaded and built: nothing is fetched.
    std::fs::copy(workspace.join("Cargo.lock"), dir.join("Cargo.lock"))?;
    Ok(())
}

/// Writes the crate's lib: warren's generated file, or typify's output alone, formatted.
/// Returns its size in bytes.
fn write_lib(dir: &Path, contract: &Path, side: Side) -> Result<usize> {
    let code = match side {
        Side::Warren | Side::WarrenDylib => {
            warren_codegen::generate(contract)
                .map_err(|e| e.to_string())?
                .code
        }
        Side::Baseline => {
            let checked = warren_codegen::check_contract(contract).map_err(|e| e.to_string())?;
            let settings = warren_codegen::Settings::default();
            checked
                .__typify_alone(&settings, true)
                .map_err(|e| e.to_string())?
        }
    };
    std::fs::write(dir.join("src/generated.rs"), &code)?;
    let lib = match side {
        Side::Warren => "//! Generated by warren.\ninclude!(\"generated.rs\");\n",
        Side::WarrenDylib => {
            "//! Generated by warren, linked to warren-runtime's shared library.\ninclude!(\"generated.rs\");\n#[allow(unused_imports)]\nuse warren_dylib as _;\n"
        }
        Side::Baseline => {
            "//! typify's output alone.\n#![allow(clippy::all, dead_code)]\n/// The types.\npub mod types {\n    include!(\"generated.rs\");\n}\n"
        }
    };
    std::fs::write(dir.join("src/lib.rs"), lib)?;
    Ok(code.len())
}

/// The crate's binary: on warren's side, a handler for every consumer run by the generated
/// `Handlers`; on the baseline's, as many plain async functions awaited from a tokio main.
/// `edit` changes the first handler's body.
fn main_rs(name: &str, shape: Shape, side: Side, edit: u32) -> String {
    let krate = name.replace('-', "_");
    // What the handler's body holds: `edit` in the first, to change it.
    let work = |q: usize| if q == 0 { edit } else { 0 };
    let mut text = String::from("//! The binary.\n");
    match side {
        Side::Warren | Side::WarrenDylib => {
            let _ = writeln!(
                text,
                "use {krate}::{{Handlers, consumers, topology, types}};\nuse warren_runtime::{{Delivery, HandlerError}};\n\n/// Every consumer's handler.\nstruct Handler;\n"
            );
            for q in 0..shape.queues {
                let work = work(q);
                let _ = writeln!(
                    text,
                    "impl consumers::ConsumeQ{q:03} for Handler {{\n    async fn handle(&self, delivery: Delivery<types::Event{q:04}>) -> Result<(), HandlerError> {{\n        let _ = (delivery.payload(), {work});\n        Ok(())\n    }}\n}}\n"
                );
            }
            let fields: String = (0..shape.queues)
                .map(|q| format!("        consume_q{q:03}: Handler,\n"))
                .collect();
            let _ = writeln!(
                text,
                "#[tokio::main]\nasync fn main() -> Result<(), Box<dyn std::error::Error>> {{\n    let url = std::env::var(\"AMQP_URL\")?;\n    let connection = warren_runtime::Connection::connect(&url, \"build-cost\").await?;\n    let worker = warren_runtime::Worker::new(connection, topology());\n    Handlers {{\n{fields}    }}\n    .run(worker)\n    .await?;\n    Ok(())\n}}"
            );
        }
        Side::Baseline => {
            for q in 0..shape.queues {
                let work = work(q);
                let _ = writeln!(
                    text,
                    "async fn handle_{q:03}(payload: &str) -> Result<(), std::io::Error> {{\n    let _ = (payload, {work});\n    Ok(())\n}}\n"
                );
            }
            let calls: String = (0..shape.queues)
                .map(|q| format!("    handle_{q:03}(\"payload\").await?;\n"))
                .collect();
            let _ = writeln!(
                text,
                "#[tokio::main]\nasync fn main() -> Result<(), std::io::Error> {{\n{calls}    Ok(())\n}}"
            );
        }
    }
    text
}

/// Runs `cargo args` in `dir` with the shared `target` and measures it.
fn cargo(dir: &Path, target: &Path, args: &[&str]) -> Result<Cost> {
    let program = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let cpu_before = crate::cpu::children_used().ok_or("no /proc/self/stat")?;
    let started = Instant::now();
    let mut child = Command::new(program)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .args(args)
        .args(["--offline", "--quiet"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let sampler = PeakSampler::start(child.id());
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        use std::io::Read as _;
        pipe.read_to_string(&mut stderr)?;
    }
    let status = child.wait()?;
    let wall = started.elapsed();
    let peak_kib = sampler.stop();
    if !status.success() {
        let shown: String = stderr.chars().take(6000).collect();
        return Err(format!("cargo {args:?} in {} failed:\n{shown}", dir.display()).into());
    }
    let cpu = crate::cpu::children_used()
        .ok_or("no /proc/self/stat")?
        .saturating_sub(cpu_before);
    Ok(Cost {
        wall,
        cpu,
        peak_mib: peak_kib as f64 / 1024.0,
    })
}

/// Samples the peak resident memory (`VmHWM`) of a process and its descendants.
struct PeakSampler {
    running: Arc<AtomicBool>,
    peak_kib: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl PeakSampler {
    fn start(root: u32) -> Self {
        let running = Arc::new(AtomicBool::new(true));
        let peak_kib = Arc::new(AtomicU64::new(0));
        let thread = std::thread::spawn({
            let (running, peak_kib) = (running.clone(), peak_kib.clone());
            move || {
                while running.load(Ordering::Relaxed) {
                    peak_kib.fetch_max(descendants_peak_kib(root), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        });
        Self {
            running,
            peak_kib,
            thread,
        }
    }

    /// Stops sampling; the largest peak seen, in KiB.
    fn stop(self) -> u64 {
        self.running.store(false, Ordering::Relaxed);
        let _ = self.thread.join();
        self.peak_kib.load(Ordering::Relaxed)
    }
}

/// The largest `VmHWM` among `root` and the processes descended from it, in KiB.
fn descendants_peak_kib(root: u32) -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut parent_of = HashMap::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(parent) = parent_pid(pid) {
            parent_of.insert(pid, parent);
        }
    }
    let descends = |mut pid: u32| {
        for _ in 0..64 {
            if pid == root {
                return true;
            }
            match parent_of.get(&pid) {
                Some(parent) if *parent != 0 => pid = *parent,
                _ => return false,
            }
        }
        false
    };
    (parent_of.keys().copied())
        .filter(|pid| descends(*pid))
        .filter_map(|pid| procfs::high_water_kib(&pid.to_string()))
        .max()
        .unwrap_or(0)
}

/// The parent of process `pid` (field 4 of its `/proc` stat).
fn parent_pid(pid: u32) -> Option<u32> {
    procfs::stat_fields(&pid.to_string())?
        .get(4 - 3)?
        .parse()
        .ok()
}

/// One row: warren's cost, the baseline's, and their ratios.
fn row(label: &str, warren: Cost, base: Cost) {
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(0.001);
    println!(
        "  {label:<34} {:>9.2} {:>9.2} {:>9.0}   {:>9.2} {:>9.2} {:>9.0}   {:.2}x, {:.2}x",
        warren.wall.as_secs_f64(),
        warren.cpu.as_secs_f64(),
        warren.peak_mib,
        base.wall.as_secs_f64(),
        base.cpu.as_secs_f64(),
        base.peak_mib,
        ratio(warren.wall, base.wall),
        ratio(warren.cpu, base.cpu),
    );
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
