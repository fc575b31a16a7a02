//! `warren import`: a contract from a document another tool wrote.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use warren_codegen::diagnostics::escape;
use warren_codegen::{ProjectRoot, RenderStyle};
use warren_tools::import::{CONTRACT_FILE, asyncapi};

use crate::{Failure, checked, shown};

/// `warren import`'s formats.
#[derive(Debug, Subcommand)]
pub(crate) enum Import {
    /// Write a contract from an AsyncAPI 3.0 document with AMQP 0.9.1 bindings
    ///
    /// Writes DIR/warren.yaml and its schema files under DIR/schemas: exchanges, queues and
    /// bindings from the channels' AMQP bindings, publishers from `send` operations,
    /// consumers from `receive` operations, rpcs from operations with a `reply`, and
    /// warren's retry and dead-letter policy from `x-warren-*` (what `warren asyncapi`
    /// writes). Everything the contract has no place for, and every guess, is listed with
    /// its JSON pointer. Then the contract is checked: its problems say what to add.
    #[command(after_help = "\
Examples:
  warren import asyncapi asyncapi.json -o contracts/billing
  faststream docs gen app:app && warren import asyncapi asyncapi.json -o billing

Exit status: 0 when the contract is written and valid, 1 when it is written and has problems
(listed), 2 when the document cannot be read or imported, or DIR already has a warren.yaml
(without --force).")]
    Asyncapi {
        /// The AsyncAPI document, JSON or YAML.
        document: PathBuf,
        /// The folder to write the contract in.
        #[arg(short, long, value_name = "DIR")]
        output: PathBuf,
        /// Replace a contract DIR already has.
        #[arg(long)]
        force: bool,
    },
}

/// Runs `warren import`.
pub(crate) fn run(
    command: Import,
    project: &ProjectRoot,
    style: RenderStyle,
) -> Result<(), Failure> {
    let Import::Asyncapi {
        document,
        output,
        force,
    } = command;
    let value = read_document(&document)?;
    let imported = asyncapi::import(&value)
        .map_err(|e| Failure::usage(format!("error: {}: {e}\n", shown(&document))))?;
    let contract = output.join(CONTRACT_FILE);
    if contract.exists() && !force {
        return Err(Failure::usage(format!(
            "error: `{}` exists; pass --force to replace it\n",
            shown(&contract)
        )));
    }
    let source = document.file_name().map_or_else(
        || document.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    );
    for (path, text) in imported.files(&source) {
        write(&output.join(path), &text)?;
    }
    for note in &imported.notes {
        eprintln!("{}{}", shown(&document), escape(&note.to_string()));
    }
    eprintln!(
        "{}: written, with {} schema file(s)",
        shown(&contract),
        imported.schemas.len()
    );
    let checked = checked(&contract, project, style)?;
    crate::show_warnings(&checked.warnings, style);
    eprintln!("{}", crate::valid_line(&checked.contract));
    Ok(())
}

/// The document at `path`, JSON or YAML.
fn read_document(path: &Path) -> Result<serde_json::Value, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::usage(format!("error: cannot read `{}`: {e}\n", shown(path))))?;
    serde_json::from_str(&text)
        .or_else(|_| yaml_serde::from_str(&text))
        .map_err(|e| {
            Failure::usage(format!(
                "error: `{}` is neither JSON nor YAML: {}\n",
                shown(path),
                escape(&e.to_string())
            ))
        })
}

/// Writes `text` at `path`, creating its folder.
fn write(path: &Path, text: &str) -> Result<(), Failure> {
    let cannot =
        |e: std::io::Error| Failure::usage(format!("error: cannot write `{}`: {e}\n", shown(path)));
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder).map_err(cannot)?;
    }
    warren_codegen::write_if_changed(path, text.as_bytes()).map_err(cannot)?;
    Ok(())
}
