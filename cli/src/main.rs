//! The `warren` command line.

mod import;
mod init;
mod outbox;
mod plan;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use warren_codegen::diagnostics::{escape, escape_source};
use warren_codegen::{
    Checked, Diagnostics, Error, Generated, ProjectRoot, RenderStyle, Settings, Written,
};
use warren_tools::export::{self, asyncapi};

mod console;
mod dlq;

/// Typed RabbitMQ messaging from a contract: JSON Schema files for payloads plus one
/// `warren.yaml` for exchanges, queues, bindings, publishers, consumers and retry policy.
#[derive(Debug, Parser)]
#[command(
    name = "warren",
    version,
    after_help = "\
Examples:
  warren validate examples/orders/warren.yaml              check a contract and its schemas
  warren validate orders/warren.yaml billing/warren.yaml   check contracts as one system
  warren validate contracts/                               every warren.yaml under contracts/
  warren generate examples/orders/warren.yaml -o orders.rs  write the Rust for a contract
  warren generate warren.yaml --derive Hash --builder --replace Money=crate::money::Money
                                                            with derives, builders, your own types
  warren generate warren.yaml --consumer fulfil_order --no-publishers -o fulfilment.rs
                                                            for a service running one consumer
  warren check examples/orders/warren.yaml --against src/orders.rs
                                                            in CI: fail when orders.rs is stale
  warren schema > schemas/warren.schema.json                the format's JSON Schema, for editors
  warren diff --against origin/main contracts/orders/warren.yaml
                                                            in CI: fail when a change breaks someone
  warren asyncapi examples/orders/warren.yaml --format yaml -o asyncapi.yaml
                                                            an AsyncAPI 3.0 document of the contract
  warren diagram examples/orders/warren.yaml > topology.mmd the topology as a Mermaid flowchart
  warren diagram warren.yaml --format dot | dot -Tsvg > topology.svg
                                                            or drawn by Graphviz

Exit status: 0 on success (warnings are shown), 1 when the contract has errors, a checked
file is stale or `diff` finds a change that breaks someone, 2 when the command itself failed
(bad arguments, unreadable files, an invalid contract given to `diff`)."
)]
struct Cli {
    /// Colour diagnostics: auto (when stderr is a terminal), always or never.
    #[arg(long, global = true, default_value = "auto", value_parser = ["auto", "always", "never"])]
    color: String,
    /// The folder contracts may read files from (imports, schema roots, schemas); by
    /// default the git work tree holding each contract, else the contract's own folder.
    #[arg(long, global = true, value_name = "DIR")]
    project_root: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a contract and every schema it reaches, or several contracts as one system
    ///
    /// Reads the contract's YAML, every schema it reaches through `$ref`, and checks every
    /// topology rule (routability, dead-lettering, retry settings, names). All problems are
    /// reported at once, each with its file, line, YAML path or JSON pointer, and a fix.
    ///
    /// Given several contracts, or a folder (every `warren.yaml` under it, 16 levels deep at
    /// most, hidden folders and `target/` skipped), each is checked alone, then those that
    /// pass are checked together: a publisher whose messages reach no queue of any contract
    /// (an error; a warning when it is marked `external_consumers: true`), a consumer or rpc
    /// server no publisher or rpc of the system reaches (a warning), a publisher or rpc and a
    /// consumer or rpc server in different contracts whose schemas of their message differ,
    /// the caller's and the server's copies of an rpc that differ in request, response or
    /// errors, and an exchange or queue two contracts declare differently. A publisher may then reach a queue of another contract
    /// without `external_consumers: true`.
    #[command(after_help = "\
Examples:
  warren validate warren.yaml
  warren validate orders/warren.yaml billing/warren.yaml
  warren validate contracts/

Exit status: 0 when every contract and the system are valid (warnings are shown), 1 on any
error, 2 when a path cannot be read or a folder holds no warren.yaml.")]
    Validate {
        /// Contract files (usually `warren.yaml`) or folders holding them.
        #[arg(required = true, value_name = "CONTRACT")]
        contracts: Vec<PathBuf>,
    },
    /// Generate the Rust for a contract
    ///
    /// Writes one file: payload and headers types, a marker type per message, typed
    /// publishers, one handler trait per consumer, and `topology()`. The file names only the
    /// `warren-runtime` crate. A file whose bytes would not change is not rewritten; otherwise
    /// the file is written beside OUTPUT and renamed over it, so a symlink at OUTPUT is
    /// replaced, never written through.
    Generate {
        /// The contract file, usually `warren.yaml`.
        contract: PathBuf,
        /// Where to write the Rust file; `-` (the default) writes to standard output.
        #[arg(short, long, default_value = "-")]
        output: PathBuf,
        #[command(flatten)]
        settings: SettingsArgs,
    },
    /// Fail when a checked-in generated file is stale
    ///
    /// Generates the contract's Rust in memory and compares it with FILE. Exits 0 when they
    /// are identical, and 1 with a unified diff when they differ. Writes nothing: run
    /// `warren generate` to update the file. Pass the settings the file was generated with.
    Check {
        /// The contract file, usually `warren.yaml`.
        contract: PathBuf,
        /// The checked-in generated file to compare with.
        #[arg(long, value_name = "FILE")]
        against: PathBuf,
        #[command(flatten)]
        settings: SettingsArgs,
    },
    /// List every change between two versions of a contract, and who each breaks
    ///
    /// Compares two versions of a contract and its schemas: two paths (`OLD NEW`), or one
    /// path and the same path at a git revision (`--against REV CONTRACT`, read from the
    /// repository without touching its work tree; a contract that did not exist then is
    /// all new). Each change says who it breaks: consumers that read with the old schema
    /// what new publishers send, or with the new schema what their queues and dead-letter
    /// queues still hold; code using the generated types; the next deploy, when the broker
    /// refuses to redeclare a queue or exchange; messages left in a queue that goes away.
    /// Exits 1 when any change breaks someone, 0 otherwise, 2 when a version is invalid or
    /// cannot be read.
    #[command(after_help = "\
Examples:
  warren diff old/warren.yaml warren.yaml                   two copies of a contract
  warren diff --against origin/main contracts/orders/warren.yaml
                                                            against a git revision (CI)
  warren diff --against HEAD~1 warren.yaml --format json    for tools (schemas/diff-report.schema.json)")]
    Diff {
        /// `OLD NEW`, or with `--against` only the contract.
        #[arg(value_name = "CONTRACT", num_args = 1..=2, required = true)]
        contracts: Vec<PathBuf>,
        /// Compare CONTRACT with itself at this git revision (a branch, tag or commit).
        #[arg(long, value_name = "REV")]
        against: Option<String>,
        /// `table` for people, `json` for tools.
        #[arg(long, default_value = "table", value_parser = ["table", "json"])]
        format: String,
    },
    /// Print the JSON Schema of the contract format
    ///
    /// Point editors at it with `# yaml-language-server: $schema=<path>` on the first line of
    /// a contract for completion and validation as you type.
    Schema,
    /// Write an AsyncAPI 3.0.0 document of a contract
    ///
    /// Channels for exchanges (AMQP binding `is: routingKey`, one per publisher routing key,
    /// its `{placeholders}` as channel parameters) and for queues (`is: queue`), a `send`
    /// operation per publisher and a `receive` operation per consumer, and every message
    /// with its payload and headers schemas (JSON Schema 2020-12, as a multi-format schema).
    /// What the AMQP binding cannot say is kept in `x-warren-` extensions: a queue's retry
    /// policy (`x-warren-retry`, with its delays and wait queues) and dead-lettering
    /// (`x-warren-dead-letter`), an exchange's bindings (`x-warren-bindings`), a consumer's
    /// settings (`x-warren-consumer`). The same contract always gives the same bytes.
    #[command(after_help = "\
Examples:
  warren asyncapi examples/orders/warren.yaml > asyncapi.json
  warren asyncapi warren.yaml --format yaml --title Orders --api-version 2.1.0 -o asyncapi.yaml")]
    Asyncapi {
        /// The contract file, usually `warren.yaml`.
        contract: PathBuf,
        /// Where to write the document; `-` (the default) writes to standard output.
        #[arg(short, long, default_value = "-")]
        output: PathBuf,
        /// json or yaml.
        #[arg(long, default_value = "json", value_parser = ["json", "yaml"])]
        format: String,
        /// `info.title`; by default the contract's `info.title`, else the name of its folder.
        #[arg(long)]
        title: Option<String>,
        /// `info.version`, the version of your API; by default the contract's
        /// `info.version`, else 1.0.0.
        #[arg(long)]
        api_version: Option<String>,
        /// `info.description`; by default the contract's `info.description`.
        #[arg(long)]
        description: Option<String>,
    },
    /// Draw a contract's topology as Mermaid or Graphviz DOT
    ///
    /// Publishers, exchanges, bindings labelled with their routing keys or header matches,
    /// queues, consumers, dead-letter flows (dashed), and each retrying queue's schedule as
    /// one note (`ttl-backoff: 5 retries, 500ms → 8s (×2, jitter), 11 wait queues, then
    /// dead-letter`) rather than one node per wait queue. Exchanges declared by another
    /// contract are drawn dashed, marked external. Mermaid (`flowchart LR`) renders in
    /// GitHub Markdown inside a ```mermaid block; DOT renders with Graphviz.
    #[command(after_help = "\
Examples:
  warren diagram examples/orders/warren.yaml
  warren diagram warren.yaml --format dot | dot -Tsvg -o topology.svg")]
    Diagram {
        /// The contract file, usually `warren.yaml`.
        contract: PathBuf,
        /// mermaid or dot.
        #[arg(long, default_value = "mermaid", value_parser = ["mermaid", "dot"])]
        format: String,
        /// Where to write the diagram; `-` (the default) writes to standard output.
        #[arg(short, long, default_value = "-")]
        output: PathBuf,
    },
    /// Count, peek at, redrive or purge dead letters on a live broker
    ///
    /// Works on the dead-letter queues of a contract (every queue a queue's dead-lettering
    /// reaches), or one named with `--queue`, in the namespace given with `--namespace`.
    /// Talks AMQP only: the management plugin is not needed.
    Dlq(dlq::Dlq),
    /// Serve a local web page on the contracts' live queues and dead letters
    ///
    /// Each queue's depth and consumers, refreshed every few seconds, and the dead letters of
    /// every dead-letter queue grouped by failure (as `warren dlq count --groups`). Bound to
    /// 127.0.0.1 and read-only by default; `--allow-changes` lets the page redrive a group.
    #[command(after_help = "\
Examples:
  warren console warren.yaml                          http://127.0.0.1:7890/, read-only
  warren console --allow-changes --namespace prod. --url amqp://ops@rabbit/%2f warren.yaml")]
    Console(console::ConsoleArgs),
    /// Compare a live broker with a contract, and migrate what the broker cannot change
    ///
    /// Probes the broker over AMQP for every exchange and queue of CONTRACT (wait queues
    /// included) and prints what a deploy does to each: create it; nothing; migrate it,
    /// when the broker refuses its new arguments (a changed retry policy changes a quorum
    /// queue's `x-delivery-limit`, which RabbitMQ never changes in place); drain and delete
    /// the wait queues the previous version had and this one has not. Changes nothing
    /// unless `--apply`: then a queue to migrate is emptied (its wait queues too) into a
    /// holding queue with confirmed publishes, declared again with its new arguments, and
    /// refilled. Stop the old workers first; a run killed half way is finished by running
    /// it again. Exits 0 when done (or nothing to do), 1 when the plan is blocked, 2 when
    /// the command failed.
    #[command(after_help = "\
Examples:
  warren plan --url amqp://localhost warren.yaml --against origin/main
                                                            what deploying warren.yaml does
  warren plan --url amqp://localhost warren.yaml --from deployed/warren.yaml --apply
                                                            do it (old workers stopped)
  warren plan --url amqp://localhost warren.yaml --against v1.4.0 --namespace staging. --format json")]
    Plan(plan::PlanArgs),
    /// Relay an outbox: publish what services' transactions wrote into it
    ///
    /// `warren outbox relay --database-url URL`: the relay of `warren_runtime::outbox` as a
    /// process of its own, beside the services that write the rows.
    Outbox(outbox::OutboxArgs),
    /// Write a contract from a document another tool wrote
    ///
    /// `warren import asyncapi DOC -o DIR`: an AsyncAPI 3.0 document (FastStream's, another
    /// library's, or `warren asyncapi`'s) as DIR/warren.yaml and its schema files.
    #[command(subcommand)]
    Import(import::Import),
    /// Start a service: a contract, its build script, a handler, a binary and tests
    ///
    /// Writes a crate into FOLDER (new, or empty): `warren.yaml` and a schema (an exchange, a
    /// work queue retried with backoff, a dead-letter queue), `build.rs` generating the Rust,
    /// a handler in `src/lib.rs`, `src/main.rs` running it until Ctrl-C, and tests that need
    /// no broker. It is warren's `examples/starter/`, renamed: built and tested with warren.
    #[command(after_help = "\
Examples:
  warren init billing                         ./billing, crate `billing`
  warren init services/billing --warren ../../warren
                                              warren's crates from a checkout, by path

Exit status: 0 when written, 2 when the folder is not empty or cannot be written.")]
    Init(init::InitArgs),
}

/// How the payload and headers types are generated, and which consumers and publishers
/// (`warren_codegen::Settings`). Settings are the generating crate's choice, so they are
/// flags, never part of the contract.
#[derive(Debug, Args)]
#[command(next_help_heading = "Generator settings")]
struct SettingsArgs {
    /// Add a derive to every payload and headers type, such as `Hash` (repeatable)
    #[arg(long = "derive", value_name = "PATH")]
    derives: Vec<String>,
    /// Add an attribute, written in full as `#[…]`, to every payload and headers type
    /// (repeatable)
    #[arg(long = "attr", value_name = "ATTRIBUTE")]
    attributes: Vec<String>,
    /// Give every generated struct a builder: `T::builder().field(…).try_into()`
    #[arg(long)]
    builder: bool,
    /// Use your own type for a contract type, which is then not generated, such as
    /// `Money=crate::money::Money` (repeatable)
    #[arg(long = "replace", value_name = "TYPE=PATH", value_parser = replacement)]
    replacements: Vec<(String, String)>,
    /// Take an imported contract's types from the module that holds its generated code,
    /// such as `orders=crate::orders`, instead of generating copies (repeatable)
    #[arg(long = "extern", value_name = "IMPORT=MODULE", value_parser = extern_contract)]
    externs: Vec<(String, String)>,
    /// Generate this consumer of the contract, and only the consumers named so (repeatable);
    /// without it, every consumer. `Handlers` then needs a handler for these alone
    #[arg(long = "consumer", value_name = "NAME")]
    consumers: Vec<String>,
    /// Generate no consumer: no `consumers` module and no `Handlers`, for a service that only
    /// publishes
    #[arg(long, conflicts_with = "consumers")]
    no_consumers: bool,
    /// Generate this publisher of the contract, and only the publishers named so
    /// (repeatable); without it, every publisher
    #[arg(long = "publisher", value_name = "NAME")]
    publishers: Vec<String>,
    /// Generate no publisher: no `Publishers`, for a service that only consumes
    #[arg(long, conflicts_with = "publishers")]
    no_publishers: bool,
}

impl SettingsArgs {
    fn settings(&self) -> Settings {
        let mut settings = Settings::new();
        for derive in &self.derives {
            settings.derive(derive);
        }
        for attribute in &self.attributes {
            settings.attribute(attribute);
        }
        for (name, rust_type) in &self.replacements {
            settings.replace(name, rust_type);
        }
        for (import, module) in &self.externs {
            settings.extern_contract(import, module);
        }
        settings.builders(self.builder);
        if self.no_consumers {
            settings.no_consumers();
        }
        for consumer in &self.consumers {
            settings.consumer(consumer);
        }
        if self.no_publishers {
            settings.no_publishers();
        }
        for publisher in &self.publishers {
            settings.publisher(publisher);
        }
        settings
    }

    /// The flags again, as a shell would take them back: for the command a stale file's
    /// report suggests.
    fn flags(&self) -> String {
        let mut flags = String::new();
        let mut add = |flag: &str, value: Option<&str>| {
            flags.push(' ');
            flags.push_str(flag);
            if let Some(value) = value {
                flags.push(' ');
                flags.push_str(&shell_quoted(value));
            }
        };
        for derive in &self.derives {
            add("--derive", Some(derive));
        }
        for attribute in &self.attributes {
            add("--attr", Some(attribute));
        }
        if self.builder {
            add("--builder", None);
        }
        for (name, rust_type) in &self.replacements {
            add("--replace", Some(&format!("{name}={rust_type}")));
        }
        for (import, module) in &self.externs {
            add("--extern", Some(&format!("{import}={module}")));
        }
        if self.no_consumers {
            add("--no-consumers", None);
        }
        for consumer in &self.consumers {
            add("--consumer", Some(consumer));
        }
        if self.no_publishers {
            add("--no-publishers", None);
        }
        for publisher in &self.publishers {
            add("--publisher", Some(publisher));
        }
        flags
    }
}

/// `text` single-quoted unless it is plain, escaped for the terminal.
fn shell_quoted(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '=' | '.' | '-'));
    if plain {
        escape(text).into_owned()
    } else {
        format!("'{}'", escape(&text.replace('\'', "'\\''")))
    }
}

/// `TYPE=PATH`, split at the first `=`.
fn replacement(text: &str) -> Result<(String, String), String> {
    pair(text).ok_or_else(|| "expected TYPE=PATH, such as `Money=crate::money::Money`".to_owned())
}

/// `IMPORT=MODULE`, split at the first `=`.
fn extern_contract(text: &str) -> Result<(String, String), String> {
    pair(text).ok_or_else(|| "expected IMPORT=MODULE, such as `orders=crate::orders`".to_owned())
}

/// `NAME=VALUE`, split at the first `=`, both trimmed and not empty.
fn pair(text: &str) -> Option<(String, String)> {
    let (name, value) = text.split_once('=')?;
    let (name, value) = (name.trim(), value.trim());
    (!name.is_empty() && !value.is_empty()).then(|| (name.to_owned(), value.to_owned()))
}

/// Where `--url` and `AMQP_URL` are both missing.
const DEFAULT_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// The broker a command talks to: `url`, else `AMQP_URL`, else [`DEFAULT_URL`].
fn broker_url(url: Option<&str>) -> String {
    url.map(str::to_owned)
        .or_else(|| std::env::var("AMQP_URL").ok())
        .unwrap_or_else(|| DEFAULT_URL.to_owned())
}

/// The management API at `explicit` (`http://user:password@host:15672`), or by default the
/// one on the host of the AMQP URL `amqp_url`, port 15672, with its credentials; either way
/// for the virtual host of `amqp_url`.
fn management_api(
    amqp_url: &str,
    explicit: Option<&str>,
) -> Result<warren_runtime::management::Management, warren_runtime::management::ManagementError> {
    use warren_runtime::management::{DEFAULT_PORT, Management};
    match explicit {
        Some(url) => {
            let vhost = Management::for_amqp_url(amqp_url, DEFAULT_PORT)
                .map(|m| m.vhost().to_owned())
                .unwrap_or_else(|_| "/".to_owned());
            Management::new(url, &vhost)
        }
        None => Management::for_amqp_url(amqp_url, DEFAULT_PORT),
    }
}

/// A command's failure: its exit status and what to print.
struct Failure {
    status: u8,
    message: String,
}

impl Failure {
    fn usage(message: String) -> Self {
        Self { status: 2, message }
    }
}

/// A path as printed: the user may pass any bytes, and a file name can hold terminal
/// commands.
fn shown(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let style = match cli.color.as_str() {
        "always" => RenderStyle::Color,
        "never" => RenderStyle::Plain,
        _ if std::io::stderr().is_terminal() => RenderStyle::Color,
        _ => RenderStyle::Plain,
    };
    let project = match cli.project_root {
        Some(folder) => ProjectRoot::At(folder),
        None => ProjectRoot::Discover,
    };
    let project = &project;
    let outcome = match cli.command {
        Command::Schema => {
            print!("{}", warren_codegen::json_schema());
            Ok(())
        }
        Command::Validate { contracts } => match contracts.as_slice() {
            [contract] if !contract.is_dir() => validate(contract, project, style),
            _ => validate_system(&contracts, project, style),
        },
        Command::Generate {
            contract,
            output,
            settings,
        } => generate(&contract, project, &output, &settings.settings(), style),
        Command::Check {
            contract,
            against,
            settings,
        } => check(&contract, project, &against, &settings, style),
        Command::Diff {
            contracts,
            against,
            format,
        } => diff(
            &contracts,
            project,
            against.as_deref(),
            format == "json",
            style,
        ),
        Command::Asyncapi {
            contract,
            output,
            format,
            title,
            api_version,
            description,
        } => asyncapi(
            &contract,
            project,
            &output,
            &format,
            title,
            api_version,
            description,
            style,
        ),
        Command::Diagram {
            contract,
            format,
            output,
        } => diagram(&contract, project, &format, &output, style),
        Command::Dlq(command) => dlq::run(command, project, style),
        Command::Console(args) => console::run(args, project, style),
        Command::Plan(args) => plan::run(&args, project, style),
        Command::Outbox(args) => outbox::run(args),
        Command::Import(command) => import::run(command, project, style),
        Command::Init(args) => init::run(args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprint!("{}", failure.message);
            ExitCode::from(failure.status)
        }
    }
}

/// Maps a front-end error to its exit status and rendered text.
fn failure(error: Error, style: RenderStyle) -> Failure {
    match error {
        Error::Invalid(problems) => Failure {
            status: 1,
            message: problems.render(style),
        },
        Error::Io { .. } => Failure::usage(format!("error: {}\n", escape(&error.to_string()))),
        Error::Generate(_) | Error::Internal(_) => Failure {
            status: 1,
            message: format!("error: {}\n", escape(&error.to_string())),
        },
    }
}

fn show_warnings(warnings: &Diagnostics, style: RenderStyle) {
    if !warnings.is_empty() {
        eprint!("{}", warnings.render(style));
    }
}

/// Checks the contract at `contract`, reading files inside `project`; a failure carries the
/// contract's problems rendered in `style`.
fn checked(contract: &Path, project: &ProjectRoot, style: RenderStyle) -> Result<Checked, Failure> {
    warren_codegen::check_contract_in(contract, project).map_err(|e| failure(e, style))
}

fn validate(contract: &Path, project: &ProjectRoot, style: RenderStyle) -> Result<(), Failure> {
    let checked = checked(contract, project, style)?;
    show_warnings(&checked.warnings, style);
    eprintln!("{}", valid_line(&checked.contract));
    exit_without_freeing(checked);
    Ok(())
}

/// `PATH: valid (2 exchanges, …)`, what `validate` prints for a valid contract (its rpcs
/// counted when it has some).
fn valid_line(c: &warren_codegen::contract::Contract) -> String {
    let rpcs = match c.rpcs.len() {
        0 => String::new(),
        n => format!(", {}", counted(n, "rpc", "rpcs")),
    };
    format!(
        "{}: valid ({}, {}, {}, {}, {}{rpcs})",
        shown(&c.source),
        counted(c.topology.exchanges.len(), "exchange", "exchanges"),
        counted(c.topology.queues.len(), "queue", "queues"),
        counted(c.messages.len(), "message", "messages"),
        counted(c.publishers.len(), "publisher", "publishers"),
        counted(c.consumers.len(), "consumer", "consumers"),
    )
}

/// `n` things: `1 queue`, `2 queues`.
pub(crate) fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `validate` of several contracts, or of the contracts under folders, as one system.
fn validate_system(
    paths: &[PathBuf],
    project: &ProjectRoot,
    style: RenderStyle,
) -> Result<(), Failure> {
    let system = warren_codegen::check_system_in(paths, project).map_err(|e| failure(e, style))?;
    show_warnings(&system.warnings, style);
    for checked in &system.contracts {
        eprintln!("{}", valid_line(&checked.contract));
    }
    if system.contracts.len() > 1 {
        eprintln!("{} contracts: valid as one system", system.contracts.len());
    }
    exit_without_freeing(system);
    Ok(())
}

/// The process ends right after a command: freeing a large contract's model piece by piece
/// (every schema of every message) took a tenth of `validate`, for memory the exit returns
/// anyway.
fn exit_without_freeing<T>(value: T) {
    std::mem::forget(value);
}

/// Checks `contract` and generates its Rust with `settings`.
fn generated(
    contract: &Path,
    project: &ProjectRoot,
    settings: &Settings,
    style: RenderStyle,
) -> Result<Generated, Failure> {
    checked(contract, project, style)?
        .generate(settings)
        .map_err(|e| failure(e, style))
}

fn generate(
    contract: &Path,
    project: &ProjectRoot,
    output: &Path,
    settings: &Settings,
    style: RenderStyle,
) -> Result<(), Failure> {
    let generated = generated(contract, project, settings, style)?;
    show_warnings(&generated.checked.warnings, style);
    emit(output, &generated.code)?;
    exit_without_freeing(generated);
    Ok(())
}

fn check(
    contract: &Path,
    project: &ProjectRoot,
    against: &Path,
    settings: &SettingsArgs,
    style: RenderStyle,
) -> Result<(), Failure> {
    let generated = generated(contract, project, &settings.settings(), style)?;
    show_warnings(&generated.checked.warnings, style);
    let current = std::fs::read_to_string(against)
        .map_err(|e| Failure::usage(format!("error: cannot read `{}`: {e}\n", shown(against))))?;
    if current == generated.code {
        eprintln!("{}: up to date", shown(against));
        return Ok(());
    }
    let diff = similar::TextDiff::from_lines(&current, &generated.code)
        .unified_diff()
        .context_radius(3)
        .header(&shown(against), &format!("{} (generated)", shown(contract)))
        .to_string();
    // The checked-in file is any file the user pointed at: its lines are quoted escaped.
    let diff = escape_source(&diff);
    Err(Failure {
        status: 1,
        message: format!(
            "{diff}\n{} is stale: run `warren generate {} -o {}{}`\n",
            shown(against),
            shown(contract),
            shown(against),
            settings.flags()
        ),
    })
}

/// Checks one version of a contract for `warren diff`; an invalid one exits 2 with its
/// diagnostics, with `hide` (a temporary folder) shown as `shown_as`.
fn diff_version(
    contract: &Path,
    project: &ProjectRoot,
    style: RenderStyle,
    hide: Option<(&str, &str)>,
) -> Result<Checked, Failure> {
    checked(contract, project, style).map_err(|mut failure| {
        failure.status = 2;
        if let Some((hidden, shown_as)) = hide {
            failure.message = failure.message.replace(hidden, shown_as);
        }
        failure
    })
}

fn diff(
    contracts: &[PathBuf],
    project: &ProjectRoot,
    against: Option<&str>,
    json: bool,
    style: RenderStyle,
) -> Result<(), Failure> {
    use warren_tools::diff::{self, Version};
    let usage = || {
        Failure::usage(
            "error: give two contracts (`warren diff OLD NEW`), or one with a revision \
             (`warren diff --against REV CONTRACT`)\n"
                .to_owned(),
        )
    };
    // Kept until the report is written: the exported tree of `--against`.
    let mut _folder = None;
    let (old, old_shown, new) = match (against, contracts) {
        (None, [old, new]) => (
            Some(diff_version(old, project, style, None)?),
            shown(old),
            new,
        ),
        (Some(rev), [new]) => {
            let folder = tempfile::tempdir().map_err(|e| {
                Failure::usage(format!("error: cannot create a temporary folder: {e}\n"))
            })?;
            let exported = diff::export(new, rev, folder.path())
                .map_err(|e| Failure::usage(format!("error: {}\n", escape(&e.to_string()))))?;
            let tree = format!("{}/", exported.tree.display());
            // The repository as it was at `rev` is the old version's project.
            let then = ProjectRoot::At(exported.tree.clone());
            let old = match &exported.contract {
                Some(path) => Some(diff_version(
                    path,
                    &then,
                    style,
                    Some((&tree, &format!("{rev}:"))),
                )?),
                None => None,
            };
            _folder = Some(folder);
            (old, escape(&exported.shown).into_owned(), new)
        }
        _ => return Err(usage()),
    };
    let new_checked = diff_version(new, project, style, None)?;
    let new_shown = shown(new);
    let report = diff::diff(
        old.as_ref().map(|checked| Version {
            shown: &old_shown,
            contract: &checked.contract,
        }),
        Version {
            shown: &new_shown,
            contract: &new_checked.contract,
        },
    );
    if json {
        let text = serde_json::to_string_pretty(&report.json())
            .map_err(|e| Failure::usage(format!("error: {e}\n")))?;
        println!("{text}");
    } else {
        print!("{}", report.table());
    }
    if report.is_breaking() {
        return Err(Failure {
            status: 1,
            message: String::new(),
        });
    }
    Ok(())
}

/// Writes `text` to `output` (`-`: standard output); a file only when its bytes change.
fn emit(output: &Path, text: &str) -> Result<(), Failure> {
    if output == Path::new("-") {
        print!("{text}");
        return Ok(());
    }
    let written = warren_codegen::write_if_changed(output, text.as_bytes())
        .map_err(|e| Failure::usage(format!("error: cannot write `{}`: {e}\n", shown(output))))?;
    eprintln!(
        "{}: {}",
        shown(output),
        match written {
            Written::Unchanged => "unchanged",
            Written::Written => "written",
        }
    );
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn asyncapi(
    contract: &Path,
    project: &ProjectRoot,
    output: &Path,
    format: &str,
    title: Option<String>,
    version: Option<String>,
    description: Option<String>,
    style: RenderStyle,
) -> Result<(), Failure> {
    let checked = checked(contract, project, style)?;
    show_warnings(&checked.warnings, style);
    // The flags win over the contract's own `info:`, for a one-off document.
    let mut info = asyncapi::Info::of(&checked.contract, &default_title(contract));
    info.title = title.unwrap_or(info.title);
    info.version = version.unwrap_or(info.version);
    info.description = description.or(info.description);
    let document = asyncapi::document(&checked.contract, &info);
    let text = if format == "yaml" {
        yaml_serde::to_string(&document)
            .map_err(|e| Failure::usage(format!("error: cannot write YAML: {e}\n")))?
    } else {
        let mut text = serde_json::to_string_pretty(&document)
            .map_err(|e| Failure::usage(format!("error: cannot write JSON: {e}\n")))?;
        text.push('\n');
        text
    };
    emit(output, &text)
}

/// The folder the contract is in (`orders` for `examples/orders/warren.yaml`), or its
/// file name without the extension.
fn default_title(contract: &Path) -> String {
    let absolute = std::path::absolute(contract).unwrap_or_else(|_| contract.to_owned());
    let folder = absolute
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned());
    let stem = contract
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned());
    folder
        .filter(|_| stem.as_deref() == Some("warren"))
        .or(stem)
        .unwrap_or_else(|| "warren contract".to_owned())
}

fn diagram(
    contract: &Path,
    project: &ProjectRoot,
    format: &str,
    output: &Path,
    style: RenderStyle,
) -> Result<(), Failure> {
    let checked = checked(contract, project, style)?;
    show_warnings(&checked.warnings, style);
    let text = match format {
        "dot" => export::dot::dot(&checked.contract),
        _ => export::mermaid::mermaid(&checked.contract),
    };
    emit(output, &text)
}
