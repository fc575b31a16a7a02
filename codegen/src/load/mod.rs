//! Stage 1: read `warren.yaml` into the typed [`ContractFile`], keeping its text and the
//! position of every node for diagnostics.

mod lines;
mod paths;
pub(crate) mod spans;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) use lines::{Column, LineIndex};
pub(crate) use paths::PathDisplay;
pub(crate) use spans::YamlSpans;

use crate::ProjectRoot;
use crate::diagnostics::{Code, Diagnostic, Diagnostics, Place, YamlPath};
use crate::files::Files;
use crate::syntax::ContractFile;

/// A contract file as read.
#[derive(Debug, Clone)]
pub(crate) struct LoadedContract {
    /// The typed contents.
    pub file: ContractFile,
    /// The file's text.
    pub text: Arc<str>,
    /// Where each node is written.
    pub spans: YamlSpans,
    /// How to show paths to the user, relative to how they named the contract.
    pub paths: PathDisplay,
    /// Where the contract and its schema files are read.
    pub files: Files,
}

impl LoadedContract {
    /// The contract's path as the user gave it.
    pub(crate) fn path(&self) -> &Path {
        self.paths.contract()
    }

    /// An error about the node at `path`, pointing at its value.
    pub(crate) fn error_at(&self, code: Code, path: &YamlPath, message: String) -> Diagnostic {
        Diagnostic::error(code, self.path(), message).at(self.place(path))
    }

    /// A warning about the node at `path`, pointing at its value.
    pub(crate) fn warning_at(&self, code: Code, path: &YamlPath, message: String) -> Diagnostic {
        Diagnostic::warning(code, self.path(), message).at(self.place(path))
    }

    /// The project folder its files are read from, as diagnostics show paths: relative to
    /// the contract as the user named it (`.` for its own folder).
    pub(crate) fn project_shown(&self) -> String {
        let shown = self
            .files
            .project()
            .map(|project| self.paths.show(project))
            .unwrap_or_default();
        match shown.as_os_str().is_empty() {
            true => ".".to_owned(),
            false => shown.display().to_string(),
        }
    }

    /// The place of the node at `path`, with its span when it is written in the file.
    pub(crate) fn place(&self, path: &YamlPath) -> Place {
        Place::Yaml {
            path: path.clone(),
            span: self.spans.find(path),
        }
    }
}

/// Why a contract could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoadError {
    /// The contract file could not be read at all.
    #[error("cannot read contract `{}`: {source}", path.display())]
    Io {
        /// The path as given.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The contract was read but has problems.
    #[error("{0}")]
    Invalid(Diagnostics),
}

/// Reads and parses the contract at `path` in `files`, whose schema files are then read
/// from `files` too: the file system, or [`Sources`](crate::Sources) held in memory. Only a
/// regular file is read (`Files::read`), so a device or a pipe named as the contract fails
/// at once rather than reading for ever.
pub(crate) fn load(files: Files, path: &Path) -> Result<LoadedContract, LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_owned(),
        source,
    };
    let canonical = files.canonicalize(path).map_err(io)?;
    let text = files.read(&canonical).map_err(io)?;
    let paths = PathDisplay::resolved(path, &canonical, &files);
    parse(text, paths, files).map_err(LoadError::Invalid)
}

/// Reads the contract at `path` on disk, inside the project folder `project` resolves to for
/// it: its imports and schemas are read from that folder and nowhere else.
pub(crate) fn load_from_disk(
    path: &Path,
    project: &ProjectRoot,
) -> Result<LoadedContract, LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_owned(),
        source,
    };
    let canonical = path.canonicalize().map_err(io)?;
    let folder = canonical.parent().unwrap_or(&canonical);
    let root = project.resolve(folder).map_err(io)?;
    load(Files::disk(root), path)
}

/// Parses contract text; `paths` says where it came from, `files` where its schemas are.
pub(crate) fn parse(
    text: Arc<str>,
    paths: PathDisplay,
    files: Files,
) -> Result<LoadedContract, Diagnostics> {
    // A byte-order mark is not YAML; editors on some systems add one.
    let text: Arc<str> = match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.into(),
        None => text,
    };
    let spans = YamlSpans::index(&text);
    if let Some(span) = spans.too_deep() {
        // Reported by position only: the offending line may be enormous.
        let mut diagnostics = Diagnostics::new();
        diagnostics.push(
            Diagnostic::error(
                Code::TooDeep,
                paths.contract(),
                format!(
                    "the contract nests more than {} levels deep",
                    spans::MAX_DEPTH
                ),
            )
            .with_help("a contract needs a handful of levels; flatten or fix this document")
            .at(Place::Position(span)),
        );
        return Err(diagnostics);
    }
    let typed = if text.trim().is_empty() {
        Ok(ContractFile::default())
    } else {
        yaml_serde::from_str::<ContractFile>(&text)
    };
    match typed {
        Ok(file) => Ok(LoadedContract {
            file,
            spans,
            text,
            paths,
            files,
        }),
        Err(error) => {
            let mut diagnostics = Diagnostics::new();
            let help =
                "fix the YAML at this position; `warren schema` prints the format's JSON Schema";
            diagnostics.push(yaml_error(paths.contract(), &text, &error, help));
            diagnostics.add_source(paths.contract(), text);
            Err(diagnostics)
        }
    }
}

/// Turns a YAML or serde error into a diagnostic at the position the parser reported;
/// `fallback_help` is the advice when the error is not one of the well-known kinds.
pub(crate) fn yaml_error(
    file: &Path,
    text: &str,
    error: &yaml_serde::Error,
    fallback_help: &str,
) -> Diagnostic {
    // The position is shown by the renderer; drop the parser's own " at line X column Y".
    let message = strip_position(&error.to_string());
    let help = if message.contains("unknown field") {
        "remove the field or fix its spelling; the fields allowed here are listed above"
    } else if message.contains("unknown variant") {
        "use one of the values listed above"
    } else if message.contains("missing field") {
        "add the field"
    } else if message.contains("while parsing") || message.contains("while scanning") {
        "check the indentation, quotes and brackets around this position"
    } else {
        fallback_help
    };
    let diagnostic = Diagnostic::error(Code::InvalidContract, file, message).with_help(help);
    match error.location() {
        Some(location) => {
            let column = location.column().saturating_sub(1);
            diagnostic.at(Place::Position(LineIndex::new(text).point(
                location.line(),
                column,
                Column::Chars,
            )))
        }
        None => diagnostic,
    }
}

/// Removes a parser's " at line N column M" from an error message: the renderer shows the
/// position. Only a complete match is removed, so a quoted value that happens to contain
/// "at line" is left alone.
pub(crate) fn strip_position(message: &str) -> String {
    const MARK: &str = " at line ";
    let mut search = 0;
    while let Some(found) = message[search..].find(MARK) {
        let start = search + found;
        let rest = &message[start + MARK.len()..];
        let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let line_digits = digits(rest);
        let after_line = &rest[line_digits..];
        if line_digits > 0
            && let Some(column) = after_line.strip_prefix(" column ")
        {
            let column_digits = digits(column);
            let tail = &column[column_digits..];
            if column_digits > 0 && (tail.is_empty() || tail.starts_with(',')) {
                return format!("{}{tail}", &message[..start]);
            }
        }
        search = start + MARK.len();
    }
    message.to_owned()
}
