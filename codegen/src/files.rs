//! Where the front end reads the contract and its schema files: the file system, or files
//! held in memory ([`Sources`]) for tests and tools.
//!
//! Both answer the same four questions (what a path resolves to, whether it is a folder,
//! whether it is a file, what it holds), so loading, `$ref` resolution and the `schema_roots`
//! containment rules are one code path. Resolution on disk follows symlinks (a link cannot
//! smuggle a file out of the roots); in memory there are no links, and `..` folds lexically.

use std::collections::BTreeMap;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// A contract and its schema files held in memory, checked and generated as if they were on
/// disk: [`check_sources`](crate::check_sources) reads nothing else.
///
/// Paths are virtual. Relative ones (the usual case) are relative to one virtual working
/// folder, as paths given to the CLI are relative to the current one; the contract's
/// `payload:` paths, `schema_roots` and every `$ref` resolve against them with the same rules
/// as on disk, `schema_roots` containment included. Diagnostics, and the files the checked
/// contract lists as its inputs, name files by these paths.
///
/// ```
/// let mut sources = warren_codegen::Sources::new(
///     "orders/warren.yaml",
///     "schema_roots: [../common]\n\
///      queues:\n  pings: { on_poison: drop }\n\
///      messages:\n  ping: { payload: ping.json }\n\
///      publishers:\n  ping: { exchange: \"\", routing_key: pings, message: ping }\n\
///      consumers:\n  pong: { queue: pings, message: ping }\n",
/// );
/// sources
///     .file("orders/ping.json", r#"{ "title": "Ping", "$ref": "../common/at.json" }"#)
///     .file("common/at.json", r#"{ "type": "object", "properties": { "at": { "type": "string" } } }"#);
/// let generated = warren_codegen::check_sources(&sources)?.generate(&Default::default())?;
/// assert!(generated.code.contains("pub struct Ping"));
/// # Ok::<(), warren_codegen::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Sources {
    contract: PathBuf,
    /// Every file by its path as given, the contract included.
    files: BTreeMap<PathBuf, Arc<str>>,
}

impl Sources {
    /// Sources holding the contract `text` at the virtual path `contract`, such as
    /// `warren.yaml` or `orders/warren.yaml`.
    pub fn new(contract: impl Into<PathBuf>, text: impl Into<String>) -> Self {
        let contract = contract.into();
        let mut files = BTreeMap::new();
        files.insert(contract.clone(), Arc::from(text.into()));
        Self { contract, files }
    }

    /// Adds the file `text` at the virtual path `path`: a schema file, named as the contract
    /// names it relative to the contract's folder (`orders/schemas/order.json` beside
    /// `orders/warren.yaml`). Adding a path twice keeps the last text.
    pub fn file(&mut self, path: impl Into<PathBuf>, text: impl Into<String>) -> &mut Self {
        self.files.insert(path.into(), Arc::from(text.into()));
        self
    }

    /// The contract's path as given.
    pub(crate) fn contract(&self) -> &Path {
        &self.contract
    }
}

/// The file system the front end reads.
#[derive(Debug, Clone)]
pub(crate) enum Files {
    /// The real one.
    Disk,
    /// Files in memory, by absolute virtual path.
    Memory(Arc<Memory>),
}

/// [`Sources`] placed under one absolute virtual working folder.
#[derive(Debug)]
pub(crate) struct Memory {
    files: BTreeMap<PathBuf, Arc<str>>,
}

impl Memory {
    /// Places `sources` under a virtual working folder deep enough that every `..` in their
    /// paths stays inside the virtual root, so `../common/money.json` is a file like any
    /// other and is shown as written.
    fn new(sources: &Sources) -> (Self, PathBuf) {
        let climb = sources.files.keys().map(|p| climb(p)).max().unwrap_or(0);
        let mut cwd = PathBuf::from("/");
        for _ in 0..climb {
            // A name no relative path is likely to pass back down through.
            cwd.push("<memory>");
        }
        let files = sources
            .files
            .iter()
            .map(|(path, text)| (fold(&cwd.join(path)), text.clone()))
            .collect();
        (Self { files }, cwd)
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.parent().is_none()
            || self
                .files
                .keys()
                .any(|file| file != path && file.starts_with(path))
    }
}

impl Files {
    /// The in-memory file system of `sources`, and the absolute virtual path of its contract.
    pub(crate) fn memory(sources: &Sources) -> (Self, PathBuf) {
        let (memory, cwd) = Memory::new(sources);
        let contract = fold(&cwd.join(sources.contract()));
        (Self::Memory(Arc::new(memory)), contract)
    }

    /// The absolute path `path` names, links followed; `None` when nothing is there.
    pub(crate) fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
        match self {
            Self::Disk => path.canonicalize().ok(),
            Self::Memory(memory) => {
                let folded = fold(path);
                (memory.files.contains_key(&folded) || memory.is_dir(&folded)).then_some(folded)
            }
        }
    }

    /// Whether `path` (canonical) is a folder.
    pub(crate) fn is_dir(&self, path: &Path) -> bool {
        match self {
            Self::Disk => path.is_dir(),
            Self::Memory(memory) => memory.is_dir(path),
        }
    }

    /// The text of the regular file at `path` (canonical). Only regular files are read: a
    /// device or pipe named as a schema (`/dev/zero` under `schema_roots: ["/"]`) would be
    /// read until memory runs out, or block for ever.
    pub(crate) fn read(&self, path: &Path) -> io::Result<Arc<str>> {
        match self {
            Self::Disk if path.is_file() => std::fs::read_to_string(path).map(Arc::from),
            Self::Disk => Err(io::Error::other("not a regular file")),
            Self::Memory(memory) => match memory.files.get(path) {
                Some(text) => Ok(text.clone()),
                None if memory.is_dir(path) => Err(io::Error::other("not a regular file")),
                None => Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    "no such file in the sources",
                )),
            },
        }
    }
}

/// How many folders above its start `path` climbs at most (`../../a` climbs 2, `a/../..` 1).
fn climb(path: &Path) -> usize {
    let (mut level, mut lowest) = (0_isize, 0_isize);
    for part in path.components() {
        match part {
            Component::ParentDir => {
                level -= 1;
                lowest = lowest.min(level);
            }
            Component::Normal(_) => level += 1,
            Component::RootDir | Component::Prefix(_) => (level, lowest) = (0, 0),
            Component::CurDir => {}
        }
    }
    lowest.unsigned_abs()
}

/// Removes `.` and folds `dir/..` of an absolute path, as resolving it would with no links;
/// `..` at the root stays at the root.
fn fold(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{Files, Sources, climb, fold};

    #[test]
    fn paths_fold_and_climb() {
        assert_eq!(fold(Path::new("/a/./b/../c")), Path::new("/a/c"));
        assert_eq!(fold(Path::new("/../a")), Path::new("/a"));
        assert_eq!(climb(Path::new("../../a")), 2);
        assert_eq!(climb(Path::new("a/../..")), 1);
        assert_eq!(climb(Path::new("a/b")), 0);
    }

    #[test]
    fn memory_answers_like_a_file_system() {
        let mut sources = Sources::new("warren.yaml", "");
        sources.file("../common/money.json", "{}");
        let (files, contract) = Files::memory(&sources);
        let dir = contract.parent().expect("a folder");
        let money = files
            .canonicalize(&dir.join("schemas/../../common/money.json"))
            .expect("the file");
        assert_eq!(files.read(&money).expect("its text").as_ref(), "{}");
        let common = files
            .canonicalize(&dir.join("../common"))
            .expect("a folder");
        assert!(files.is_dir(&common));
        assert!(!files.is_dir(&money));
        assert!(files.canonicalize(&dir.join("missing.json")).is_none());
        assert!(files.read(&dir.join("missing.json")).is_err());
        let folder = files.read(&common).expect_err("a folder is not read");
        assert_eq!(folder.to_string(), "not a regular file");
    }
}
