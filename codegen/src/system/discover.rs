//! Which contracts a system is made of: the files named, and every `warren.yaml` under the
//! folders named.
//!
//! A folder is walked breadth first, in name order, so the result is the same on every
//! machine. The walk is bounded whatever the tree holds: at most [`MAX_DEPTH`] levels,
//! [`MAX_FOLDERS`] folders and [`MAX_CONTRACTS`] contracts, hidden folders and `target/`
//! skipped, and every folder and contract visited once by its canonical path, so a symlink
//! loop ends at the folder it came from.

use std::collections::{BTreeSet, VecDeque};
use std::io;
use std::path::{Path, PathBuf};

use crate::Error;

/// The file name of a contract found in a folder.
pub(crate) const CONTRACT_FILE: &str = "warren.yaml";

/// How many folder levels below a named folder are searched.
pub(crate) const MAX_DEPTH: usize = 16;

/// The most folders one walk reads: a tree bigger than this is not a contract repository.
const MAX_FOLDERS: usize = 100_000;

/// The most contracts one system holds.
const MAX_CONTRACTS: usize = 10_000;

/// The contracts `paths` name, each once (by canonical path), as the user would write their
/// paths: a file as given, the contracts under a folder as the folder's path joined with
/// theirs. Files keep the order given; a folder's contracts come in path order.
pub(crate) fn contracts(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for path in paths {
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        if std::fs::metadata(path).map_err(io)?.is_dir() {
            let under = walk(path).map_err(io)?;
            if under.is_empty() {
                return Err(io(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "no `{CONTRACT_FILE}` in this folder or its subfolders (hidden folders \
                         and `target/` are skipped, {MAX_DEPTH} levels deep at most)"
                    ),
                )));
            }
            for (canonical, shown) in under {
                if seen.insert(canonical) {
                    found.push(shown);
                }
            }
        } else if seen.insert(std::fs::canonicalize(path).map_err(io)?) {
            found.push(path.clone());
        }
        if found.len() > MAX_CONTRACTS {
            return Err(io(too_many(format!("more than {MAX_CONTRACTS} contracts"))));
        }
    }
    Ok(found)
}

fn too_many(what: String) -> io::Error {
    io::Error::other(format!(
        "{what}: name the folders of one system rather than a whole disk"
    ))
}

/// Every `warren.yaml` under `root`: (canonical path, path as shown), in path order.
fn walk(root: &Path) -> io::Result<Vec<(PathBuf, PathBuf)>> {
    let mut visited = BTreeSet::new();
    let mut found = Vec::new();
    let mut queue = VecDeque::from([(root.to_path_buf(), 0usize)]);
    while let Some((folder, depth)) = queue.pop_front() {
        // An error names the folder that failed, not only the one the user named.
        let at = |e: io::Error| io::Error::new(e.kind(), format!("`{}`: {e}", folder.display()));
        // A folder reached twice (a symlink back up the tree) is read once.
        if !visited.insert(std::fs::canonicalize(&folder).map_err(at)?) {
            continue;
        }
        if visited.len() > MAX_FOLDERS {
            return Err(too_many(format!("more than {MAX_FOLDERS} folders")));
        }
        let mut entries: Vec<(std::ffi::OsString, PathBuf)> = std::fs::read_dir(&folder)
            .map_err(at)?
            .map(|entry| entry.map(|e| (e.file_name(), e.path())))
            .collect::<io::Result<_>>()
            .map_err(at)?;
        entries.sort();
        for (name, path) in entries {
            // Following links: a contract repository may link a shared folder in.
            let Ok(metadata) = std::fs::metadata(&path) else {
                // A dangling link, or one that loops on itself: nothing to read there.
                continue;
            };
            if metadata.is_dir() {
                let hidden = name.to_string_lossy().starts_with('.');
                if !hidden && name != "target" && depth < MAX_DEPTH {
                    queue.push_back((path, depth + 1));
                }
            } else if name == CONTRACT_FILE && metadata.is_file() {
                found.push((std::fs::canonicalize(&path).map_err(at)?, path));
                if found.len() > MAX_CONTRACTS {
                    return Err(too_many(format!("more than {MAX_CONTRACTS} contracts")));
                }
            }
        }
    }
    // Breadth first reads shallow folders first; the contracts are listed in path order, as
    // a reader of the output expects.
    found.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(found)
}
