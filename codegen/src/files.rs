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
/// folder, as paths given to the CLI are relative to the current one. What is above that
/// folder holds nothing but the files named with `..` (or absolutely), so a `..` that
/// climbs past them finds nothing, as it would on disk. The contract's
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

    /// Adds the file `text` at the virtual path `path`: a schema file, named like the
    /// contract's path, relative to the virtual working folder and not to the contract's
    /// folder (`orders/schemas/order.json` beside `orders/warren.yaml`, which names it
    /// `schemas/order.json`). Adding a path twice keeps the last text.
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
    /// The real one, inside the canonical project folder ([`crate::ProjectRoot`]): nothing
    /// outside it is read.
    Disk(Arc<Path>),
    /// Files in memory, by absolute virtual path.
    Memory(Arc<Memory>),
}

/// The placeholder folder names of the virtual working folder are this, or this with a number
/// when some source path already uses it (`<memory-2>`).
const PLACEHOLDER: &str = "<memory>";

/// [`Sources`] placed under one absolute virtual working folder.
#[derive(Debug)]
pub(crate) struct Memory {
    /// The virtual working folder, against which relative paths resolve.
    cwd: PathBuf,
    /// Every file by its absolute virtual path: its name as the caller gave it, and its text.
    files: BTreeMap<PathBuf, (PathBuf, Arc<str>)>,
}

impl Memory {
    /// Places `sources` under a virtual working folder one level deeper than the deepest `..`
    /// of their paths, so `../common/money.json` is a file like any other, and a `..` written
    /// in the contract that climbs further than any source path reaches nothing, as the
    /// unknown folders above a real working folder would hold nothing of the sources.
    ///
    /// The working folder's placeholder name is one no source path uses: `../<memory>/x.json`
    /// and `x.json` must stay two files, as they would be on disk beside a folder with any
    /// other name.
    fn new(sources: &Sources) -> Self {
        let climb = sources.files.keys().map(|p| climb(p)).max().unwrap_or(0);
        let used = |name: &str| {
            sources
                .files
                .keys()
                .any(|path| path.components().any(|part| part.as_os_str() == name))
        };
        let placeholder = std::iter::once(PLACEHOLDER.to_owned())
            .chain((2..).map(|n| format!("<memory-{n}>")))
            .find(|name| !used(name))
            .unwrap_or_else(|| PLACEHOLDER.to_owned());
        let mut cwd = PathBuf::from("/");
        for _ in 0..=climb {
            cwd.push(&placeholder);
        }
        // The working folder is deeper than any path climbs, so every path folds.
        let files = sources
            .files
            .iter()
            .filter_map(|(path, text)| {
                let folded = fold(&cwd.join(path))?;
                Some((folded, (path.clone(), text.clone())))
            })
            .collect();
        Self { cwd, files }
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
    /// The file system below the canonical folder `project`.
    pub(crate) fn disk(project: PathBuf) -> Self {
        Self::Disk(Arc::from(project))
    }

    /// The project folder files are read from: `None` in memory, where only the sources
    /// exist and so nothing outside them can be read.
    pub(crate) fn project(&self) -> Option<&Path> {
        match self {
            Self::Disk(project) => Some(project),
            Self::Memory(_) => None,
        }
    }

    /// Whether the canonical path `path` may be read: it lies inside the project.
    pub(crate) fn in_project(&self, path: &Path) -> bool {
        self.project()
            .is_none_or(|project| path.starts_with(project))
    }

    /// The in-memory file system of `sources`.
    pub(crate) fn memory(sources: &Sources) -> Self {
        Self::Memory(Arc::new(Memory::new(sources)))
    }

    /// The absolute path `path` names, links followed; relative paths resolve against the
    /// working folder. An error when nothing is there: in memory, also when `..` climbs above
    /// the root (on disk the root is its own parent, but the virtual root stands for folders
    /// that hold none of the sources).
    pub(crate) fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        match self {
            Self::Disk(_) => path.canonicalize(),
            Self::Memory(memory) => fold(&memory.cwd.join(path))
                .filter(|folded| memory.files.contains_key(folded) || memory.is_dir(folded))
                .ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, "no such file in the sources")
                }),
        }
    }

    /// Whether `path` (canonical) is a folder.
    pub(crate) fn is_dir(&self, path: &Path) -> bool {
        match self {
            Self::Disk(_) => path.is_dir(),
            Self::Memory(memory) => memory.is_dir(path),
        }
    }

    /// The text of the regular file at `path` (canonical). Only regular files are read: a
    /// device or pipe named as a contract or a schema (`/dev/zero` under
    /// `schema_roots: ["/"]`) would be read until memory runs out, or block for ever. Nor is
    /// a file outside the project, whoever asks: the checks name such paths first.
    pub(crate) fn read(&self, path: &Path) -> io::Result<Arc<str>> {
        match self {
            Self::Disk(_) if !self.in_project(path) => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "outside the project folder",
            )),
            Self::Disk(_) if path.is_file() => std::fs::read_to_string(path).map(Arc::from),
            Self::Disk(_) => Err(io::Error::other("not a regular file")),
            Self::Memory(memory) => match memory.files.get(path) {
                Some((_, text)) => Ok(text.clone()),
                None if memory.is_dir(path) => Err(io::Error::other("not a regular file")),
                None => Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    "no such file in the sources",
                )),
            },
        }
    }

    /// The name the caller gave the file at `path` (canonical), when the caller named files
    /// one by one: in memory, the path given to [`Sources::file`]. On disk, `None`.
    pub(crate) fn given_name(&self, path: &Path) -> Option<&Path> {
        match self {
            Self::Disk(_) => None,
            Self::Memory(memory) => memory.files.get(path).map(|(name, _)| name.as_path()),
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
/// `None` when `..` climbs above the root.
fn fold(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{Files, Sources, climb, fold};

    #[test]
    fn paths_fold_and_climb() {
        assert_eq!(fold(Path::new("/a/./b/../c")), Some("/a/c".into()));
        assert_eq!(fold(Path::new("/../a")), None);
        assert_eq!(fold(Path::new("/a/../..")), None);
        assert_eq!(climb(Path::new("../../a")), 2);
        assert_eq!(climb(Path::new("a/../..")), 1);
        assert_eq!(climb(Path::new("a/b")), 0);
    }

    #[test]
    fn memory_answers_like_a_file_system() {
        let mut sources = Sources::new("warren.yaml", "");
        sources.file("../common/money.json", "{}");
        let files = Files::memory(&sources);
        let money = files
            .canonicalize(Path::new("schemas/../../common/money.json"))
            .expect("the file");
        assert_eq!(files.read(&money).expect("its text").as_ref(), "{}");
        assert_eq!(
            files.given_name(&money),
            Some(Path::new("../common/money.json"))
        );
        let common = files
            .canonicalize(Path::new("../common"))
            .expect("a folder");
        assert!(files.is_dir(&common));
        assert!(!files.is_dir(&money));
        assert!(files.canonicalize(Path::new("missing.json")).is_err());
        // The working folder is one level deeper than the deepest climb: above it, nothing.
        assert!(files.canonicalize(Path::new("../../money.json")).is_err());
        assert!(files.canonicalize(Path::new("../../../../x")).is_err());
        let folder = files.read(&common).expect_err("a folder is not read");
        assert_eq!(folder.to_string(), "not a regular file");
    }

    /// A source path through a folder named like the placeholder is a file of its own.
    #[test]
    fn source_paths_never_collide_through_the_placeholder() {
        let mut sources = Sources::new("warren.yaml", "");
        sources
            .file("x.json", "inside")
            .file("../<memory>/x.json", "beside");
        let files = Files::memory(&sources);
        let inside = files.canonicalize(Path::new("x.json")).expect("x.json");
        let beside = files
            .canonicalize(Path::new("../<memory>/x.json"))
            .expect("../<memory>/x.json");
        assert_ne!(inside, beside);
        assert_eq!(files.read(&inside).expect("text").as_ref(), "inside");
        assert_eq!(files.read(&beside).expect("text").as_ref(), "beside");
    }
}
