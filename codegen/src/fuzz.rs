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

/// Names that tend to break generated code: Rust keywords (raw-able and not), names the
/// generated code itself uses (its methods, types, generics, modules, parameters and the
/// prelude), single letters, lint-sensitive prefixes (`into_`, `from_`) and
/// `clippy::disallowed_names`. Each is supported on its own; [`name_cases`] puts every one
/// of them in every role.
pub const HOSTILE_NAMES: &[&str] = &[
    // Keywords, strict, reserved and weak; `self`, `Self`, `super`, `crate` cannot be raw.
    "as",
    "async",
    "await",
    "break",
    "const",
    "continue",
    "crate",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "fn",
    "for",
    "gen",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "match",
    "mod",
    "move",
    "mut",
    "pub",
    "ref",
    "return",
    "self",
    "Self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "try",
    "type",
    "unsafe",
    "use",
    "where",
    "while",
    "abstract",
    "become",
    "box",
    "do",
    "final",
    "macro",
    "override",
    "priv",
    "typeof",
    "unsized",
    "virtual",
    "yield",
    "union",
    "macro_rules",
    "raw",
    "safe",
    "auto",
    "default",
    "r#type",
    "static'",
    // What the generated code names: `Publishers` and its methods, fields and parameters…
    "new",
    "with",
    "through",
    "client",
    "clone",
    "clone_from",
    "fmt",
    "publish",
    "publish_with",
    "publisher",
    "options",
    "payload",
    "headers",
    "routing_key",
    "Publishers",
    // …the handler traits, adapters, `Handlers` and its generics…
    "handle",
    "handle_batch",
    "delivery",
    "batch",
    "register",
    "run",
    "worker",
    "H",
    "h",
    "Handlers",
    "handlers",
    "adapters",
    "__adapters",
    "__H",
    "__warren_unnamed",
    // …its modules and items, the runtime's and the prelude's names…
    "types",
    "messages",
    "consumers",
    "topology",
    "Message",
    "Delivery",
    "Handler",
    "BatchHandler",
    "Payload",
    "Headers",
    "NAME",
    "CONTENT_TYPE",
    "Topology",
    "Worker",
    "NoHeaders",
    "Event",
    "Send",
    "Sync",
    "Sized",
    "Option",
    "Some",
    "None",
    "Result",
    "Ok",
    "Err",
    "Vec",
    "String",
    "Box",
    "Future",
    "Copy",
    "Clone",
    "Debug",
    "PartialEq",
    "Eq",
    "Hash",
    "core",
    "std",
    "alloc",
    "warren_runtime",
    "main",
    "drop",
    "deref",
    "eq",
    "next",
    "add",
    "index",
    "cmp",
    // …and what rpcs generate: their module, client, markers' traits and the errors' items.
    "rpcs",
    "RpcClients",
    "RpcClient",
    "request",
    "call",
    "Target",
    "Operation",
    "DeclaredErrors",
    "NoErrors",
    "RpcHandlerError",
    "code",
    "encode",
    "decode",
    "Error",
    "error",
    // …names lints care about, and single letters.
    "into_orders",
    "from_partner",
    "to_audit",
    "as_event",
    "is_ready",
    "foo",
    "baz",
    "quux",
    "a",
    "b",
    "e",
    "f",
    "p",
    "q",
    "s",
    "t",
    "v",
    "x",
    "T",
    "E",
    "F",
    "P",
    // Punctuation, separators and escapes that leave an identifier behind.
    "a*/b",
    "it's \"quoted\"",
    "x::y",
    "line\nbreak",
    "tab\tbed",
    "end_",
    "__x",
    "a__b",
    "UPPER_CASE",
    "mixedCase",
    "with digits 2",
    "v2.1",
];

/// Names that differ as written but not once case-converted: validation must refuse each
/// pair as a clash, never emit both.
pub const CLASHING_NAMES: &[(&str, &str)] = &[
    ("order_placed", "OrderPlaced"),
    ("order-placed", "order.placed"),
    ("ORDER_PLACED", "orderPlaced"),
    ("order placed", "Order Placed"),
    ("self", "Self"),
    ("h", "H"),
    ("new", "New"),
    ("line\nbreak", "line_break"),
];

/// Names that make no identifier at all: validation must refuse them with a clear error.
pub const UNSUPPORTED_NAMES: &[&str] = &[
    "9lives", "1st", "0", "café", "日本", "🐇", "...", "_", "__", "*/", "",
];

/// What a name case checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameCaseKind {
    /// Part of a cover of [`HOSTILE_NAMES`] in every role: must validate, and compile.
    Cover,
    /// Random names from a seed: if it validates, it must compile.
    Random,
    /// Two [`CLASHING_NAMES`] in one role: must be refused as a clash.
    Clash,
    /// One of [`UNSUPPORTED_NAMES`]: must be refused.
    Unsupported,
}

impl NameCaseKind {
    /// The kind's name, for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cover => "cover",
            Self::Random => "random",
            Self::Clash => "clash",
            Self::Unsupported => "unsupported",
        }
    }
}

/// A generated contract of the name property test.
#[derive(Debug, Clone)]
pub struct NameCase {
    /// What it checks.
    pub kind: NameCaseKind,
    /// The contract as JSON (which is YAML); it names `event.json` and
    /// `schemas/headers.json` beside it (written by [`write_schema_files`]).
    pub contract: String,
}

/// The roles a contract name takes, each becoming different identifiers.
#[derive(Debug, Default, Clone)]
struct Roles {
    messages: Vec<String>,
    publishers: Vec<String>,
    consumers: Vec<String>,
    placeholders: Vec<String>,
    /// Rpcs, which share consumers' names (their servers are consumers).
    rpcs: Vec<String>,
}

/// A small deterministic generator (splitmix64), so the cases of one seed are the same on
/// every machine and need no dependency in a build script.
#[derive(Debug, Clone)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n.max(1)).unwrap_or(1)).unwrap_or(0)
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

/// Words random names are made of: pieces of hostile names in several cases.
const WORDS: &[&str] = &[
    "order", "placed", "Order", "PLACED", "h", "self", "new", "with", "type", "Handlers", "run",
    "x2",
];

/// What joins words: case changes alone, or the separators people write.
const SEPARATORS: &[&str] = &["", "_", "-", ".", " ", "::"];

/// A random name: a hostile one, or a few words joined (`new-PLACED`, `type_x2`), now and
/// then with a leading digit or a letter no identifier may hold.
fn random_name(rng: &mut SplitMix) -> String {
    if rng.below(2) == 0 {
        return rng.pick(HOSTILE_NAMES).to_owned();
    }
    let mut name = rng.pick(WORDS).to_owned();
    for _ in 0..rng.below(3) {
        name.push_str(rng.pick(SEPARATORS));
        name.push_str(rng.pick(WORDS));
    }
    match rng.below(48) {
        0 => name.insert(0, '7'),
        1 => name.push('é'),
        _ => {}
    }
    name
}

/// Whether a name can stand between the braces of a routing key placeholder.
fn placeholder_safe(name: &str) -> bool {
    !name.is_empty() && !name.contains(['.', '{', '}'])
}

/// The name property's cases: a cover that puts every [`HOSTILE_NAMES`] entry in every role
/// (message, publisher, consumer, routing key placeholder) without two names of one case
/// meeting after case conversion, one case per [`CLASHING_NAMES`] pair and role, one per
/// [`UNSUPPORTED_NAMES`] entry and role, and `random` cases drawn from `seed`.
pub fn name_cases(seed: u64, random: usize) -> Vec<NameCase> {
    let mut cases = Vec::new();
    for roles in cover() {
        cases.push(NameCase {
            kind: NameCaseKind::Cover,
            contract: name_contract(&roles),
        });
    }
    for (first, second) in CLASHING_NAMES {
        let pair = vec![(*first).to_owned(), (*second).to_owned()];
        for role in 0..ROLES {
            if role == PLACEHOLDER_ROLE && !pair.iter().all(|p| placeholder_safe(p)) {
                continue;
            }
            let mut roles = Roles::default();
            *role_mut(&mut roles, role) = pair.clone();
            cases.push(NameCase {
                kind: NameCaseKind::Clash,
                contract: name_contract(&roles),
            });
        }
    }
    for name in UNSUPPORTED_NAMES {
        for role in 0..ROLES {
            if role == PLACEHOLDER_ROLE && !placeholder_safe(name) {
                continue;
            }
            let mut roles = Roles::default();
            *role_mut(&mut roles, role) = vec![(*name).to_owned()];
            cases.push(NameCase {
                kind: NameCaseKind::Unsupported,
                contract: name_contract(&roles),
            });
        }
    }
    let mut rng = SplitMix(seed);
    for _ in 0..random {
        let mut roles = Roles::default();
        for role in 0..ROLES {
            let count = 1 + rng.below(2);
            *role_mut(&mut roles, role) = (0..count).map(|_| random_name(&mut rng)).collect();
        }
        roles.placeholders.retain(|p| placeholder_safe(p));
        cases.push(NameCase {
            kind: NameCaseKind::Random,
            contract: name_contract(&roles),
        });
    }
    cases
}

/// The roles, by number: messages, publishers, consumers, placeholders, rpcs.
const ROLES: usize = 5;
/// The role of placeholders, which only some names can take.
const PLACEHOLDER_ROLE: usize = 3;

fn role_mut(roles: &mut Roles, role: usize) -> &mut Vec<String> {
    match role {
        0 => &mut roles.messages,
        1 => &mut roles.publishers,
        2 => &mut roles.consumers,
        3 => &mut roles.placeholders,
        _ => &mut roles.rpcs,
    }
}

/// Puts each hostile name into each role of some case, spreading them so that no case holds
/// two names with the same identifier in either case convention (which would be a clash).
fn cover() -> Vec<Roles> {
    use crate::naming::{Case, ident};
    const PER_CASE: usize = 16;
    let count = HOSTILE_NAMES.len().div_ceil(PER_CASE);
    let mut cases = vec![Roles::default(); count];
    let key =
        |name: &str| [Case::Type, Case::Value].map(|case| ident(name, case).map(|id| id.text).ok());
    for role in 0..ROLES {
        for (i, name) in HOSTILE_NAMES.iter().enumerate() {
            if role == PLACEHOLDER_ROLE && !placeholder_safe(name) {
                continue;
            }
            // Rotated by role, so a case's publishers are not also its messages.
            let start = (i + role * 3) % count;
            let slot = (0..count).map(|k| (start + k) % count).find(|&c| {
                let case = &mut cases[c];
                if role_mut(case, role).len() >= PER_CASE * 2 {
                    return false;
                }
                // Consumers and rpcs share one namespace: a name must meet neither.
                let namespace: Vec<String> = match role {
                    2 | 4 => case.consumers.iter().chain(&case.rpcs).cloned().collect(),
                    _ => role_mut(case, role).clone(),
                };
                namespace.iter().all(|other| {
                    let (a, b) = (key(other), key(name));
                    // An rpc's errors' enum is its name and `error`: it must meet no rpc
                    // either.
                    let errors = |n: &str| key(&format!("{n}_error"))[0].clone();
                    let meets_enum = role == 4 && (errors(name) == a[0] || errors(other) == b[0]);
                    a[0] != b[0] && a[1] != b[1] && !meets_enum
                })
            });
            // Every name goes somewhere: into a case of its own if it meets one in each.
            let slot = slot.unwrap_or_else(|| {
                cases.push(Roles::default());
                cases.len() - 1
            });
            role_mut(&mut cases[slot], role).push((*name).to_owned());
        }
    }
    cases
}

/// A contract giving `roles` their names: one queue per message on a topic exchange, each
/// publisher sending one message with up to two of the placeholders in its key, each
/// consumer reading one message's queue (every third in batches), each rpc on a queue of its
/// own (every other through the default exchange, the others through the exchange with a
/// placeholder in the key when there is one, and with a declared error). Roles left empty
/// get a plain name, so each case has them all but rpcs.
fn name_contract(roles: &Roles) -> String {
    use serde_json::{Map, Value, json};
    let or = |names: &Vec<String>, plain: &str| {
        if names.is_empty() {
            vec![plain.to_owned()]
        } else {
            names.clone()
        }
    };
    let messages = or(&roles.messages, "plain_message");
    let publishers = or(&roles.publishers, "plain_publisher");
    let consumers = or(&roles.consumers, "plain_consumer");
    let placeholders = roles.placeholders.clone();
    let (mut queues, mut bindings, mut message_map) = (Map::new(), Vec::new(), Map::new());
    for (i, message) in messages.iter().enumerate() {
        queues.insert(format!("q{i}"), json!({ "on_poison": "drop" }));
        bindings.push(json!({ "exchange": "events", "queue": format!("q{i}"), "routing_key": format!("m{i}.#") }));
        let mut entry = json!({ "payload": "event.json" });
        if i % 2 == 1 {
            entry["headers"] = json!("schemas/headers.json");
        }
        message_map.insert(message.clone(), entry);
    }
    let mut publisher_map = Map::new();
    let mut next_placeholder = placeholders.iter();
    for (i, publisher) in publishers.iter().enumerate() {
        let m = i % messages.len();
        let mut key = format!("m{m}");
        for placeholder in next_placeholder.by_ref().take(2) {
            key.push_str(&format!(".{{{placeholder}}}"));
        }
        publisher_map.insert(
            publisher.clone(),
            json!({ "exchange": "events", "routing_key": key, "message": messages[m] }),
        );
    }
    // Placeholders left over go to extra publishers of their own.
    let rest: Vec<&String> = next_placeholder.collect();
    for (i, chunk) in rest.chunks(2).enumerate() {
        let mut key = "m0".to_owned();
        for placeholder in chunk {
            key.push_str(&format!(".{{{placeholder}}}"));
        }
        publisher_map.insert(
            format!("plain_publisher_{i}"),
            json!({ "exchange": "events", "routing_key": key, "message": messages[0] }),
        );
    }
    let mut consumer_map = Map::new();
    for (i, consumer) in consumers.iter().enumerate() {
        let m = i % messages.len();
        let mut entry = json!({ "queue": format!("q{m}"), "message": messages[m] });
        if i % 3 == 2 {
            entry["batch"] = json!({ "size": 10, "timeout": "1s" });
        }
        consumer_map.insert(consumer.clone(), entry);
    }
    let mut rpc_map = Map::new();
    for (i, rpc) in roles.rpcs.iter().enumerate() {
        let queue = format!("r{i}");
        queues.insert(queue.clone(), json!({ "on_poison": "drop" }));
        let m = i % messages.len();
        // The response has no headers: message 0 never does.
        let mut entry = json!({ "queue": queue, "request": messages[m], "response": messages[0] });
        if i % 2 == 1 {
            let mut key = format!("r{i}");
            if let Some(placeholder) = placeholders.get(i % placeholders.len().max(1)) {
                key.push_str(&format!(".{{{placeholder}}}"));
            }
            bindings.push(
                json!({ "exchange": "events", "queue": queue, "routing_key": format!("r{i}.#") }),
            );
            entry["exchange"] = json!("events");
            entry["routing_key"] = json!(key);
            entry["errors"] = json!({ "not_found": messages[0], "self": messages[0] });
        }
        rpc_map.insert(rpc.clone(), entry);
    }
    let contract = json!({
        "exchanges": { "events": { "type": "topic" } },
        "queues": Value::Object(queues),
        "bindings": bindings,
        "messages": Value::Object(message_map),
        "publishers": Value::Object(publisher_map),
        "consumers": Value::Object(consumer_map),
        "rpcs": Value::Object(rpc_map),
    });
    serde_json::to_string_pretty(&contract).unwrap_or_default()
}

/// Writes the schema files name cases refer to into `dir`.
pub fn write_schema_files(dir: &Path) -> io::Result<()> {
    for (name, text) in FIXED_FILES {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(path, text)?;
    }
    Ok(())
}
