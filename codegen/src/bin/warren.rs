//! The `warren` command line.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use warren_codegen::{Error, RenderStyle};

/// Typed RabbitMQ messaging from a contract: JSON Schema files for payloads plus one
/// `warren.yaml` for exchanges, queues, bindings, publishers, consumers and retry policy.
#[derive(Debug, Parser)]
#[command(
    name = "warren",
    version,
    after_help = "\
Examples:
  warren validate examples/orders/warren.yaml   check a contract and its schemas
  warren schema > schemas/warren.schema.json     the format's JSON Schema, for editors

Exit status: 0 when the contract is valid (warnings are shown), 1 when it has errors,
2 when the command itself failed (bad arguments, unreadable contract)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a contract and every schema it reaches
    ///
    /// Reads the contract's YAML, every schema it reaches through `$ref`, and checks every
    /// topology rule (routability, dead-lettering, retry settings, names). All problems are
    /// reported at once, each with its file, line, YAML path or JSON pointer, and a fix.
    Validate {
        /// The contract file, usually `warren.yaml`.
        contract: PathBuf,
        /// Colour the output: auto (when stderr is a terminal), always or never.
        #[arg(long, default_value = "auto", value_parser = ["auto", "always", "never"])]
        color: String,
    },
    /// Print the JSON Schema of the contract format
    ///
    /// Point editors at it with `# yaml-language-server: $schema=<path>` on the first line of
    /// a contract for completion and validation as you type.
    Schema,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Schema => {
            print!("{}", warren_codegen::format::json_schema());
            ExitCode::SUCCESS
        }
        Command::Validate { contract, color } => {
            let style = match color.as_str() {
                "always" => RenderStyle::Color,
                "never" => RenderStyle::Plain,
                _ if std::io::stderr().is_terminal() => RenderStyle::Color,
                _ => RenderStyle::Plain,
            };
            match warren_codegen::check_contract(&contract) {
                Ok(checked) => {
                    if !checked.warnings.is_empty() {
                        eprint!("{}", checked.warnings.render(style));
                    }
                    let c = &checked.contract;
                    eprintln!(
                        "{}: valid ({} exchanges, {} queues, {} messages, {} publishers, {} consumers)",
                        contract.display(),
                        c.exchanges.len(),
                        c.queues.len(),
                        c.messages.len(),
                        c.publishers.len(),
                        c.consumers.len()
                    );
                    ExitCode::SUCCESS
                }
                Err(Error::Invalid(problems)) => {
                    eprint!("{}", problems.render(style));
                    ExitCode::from(1)
                }
                Err(error) => {
                    eprintln!("error: {error}");
                    ExitCode::from(2)
                }
            }
        }
    }
}
