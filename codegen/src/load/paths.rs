//! Showing file paths the way the user wrote them.
//!
//! Files are resolved to canonical absolute paths (so one file reached two ways is one file
//! and symlinks cannot escape the schema roots), but diagnostics show paths relative to the
//! contract path the user typed: `examples/common/money.json`, not `/home/…/money.json`.
//! Files held in memory are shown by the names the caller gave them.

use std::path::{Component, Path, PathBuf};

use crate::files::Files;

/// Maps canonical paths back to paths relative to the contract as the user named it.
#[derive(Debug, Clone)]
pub(crate) struct PathDisplay {
    contract: PathBuf,
    shown_dir: PathBuf,
    canonical_dir: PathBuf,
    /// Where the files are, for the names a caller gave files held in memory.
    files: Files,
}

impl PathDisplay {
    /// For a contract at `contract` (as given by the user), whose canonical path in `files`
    /// is `canonical`.
    pub(crate) fn resolved(contract: &Path, canonical: &Path, files: &Files) -> Self {
        let canonical_dir = canonical
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let shown_dir = contract.parent().map(Path::to_path_buf).unwrap_or_default();
        Self {
            contract: contract.to_owned(),
            shown_dir,
            canonical_dir,
            files: files.clone(),
        }
    }

    /// The contract path as given.
    pub(crate) fn contract(&self) -> &Path {
        &self.contract
    }

    /// The canonical folder of the contract, against which its relative paths resolve.
    pub(crate) fn contract_dir(&self) -> &Path {
        &self.canonical_dir
    }

    /// How to show the canonical path `path` in a diagnostic: a file held in memory by the
    /// name its caller gave it, any other path relative to the contract as the user named it.
    pub(crate) fn show(&self, path: &Path) -> PathBuf {
        match self.files.given_name(path) {
            Some(given) => given.to_owned(),
            None => normalize(&self.shown_dir.join(relative(&self.canonical_dir, path))),
        }
    }

    /// How the checked contract names the file at `path` (canonical) among its inputs: on
    /// disk the canonical path, which a build script watches wherever it runs from; in memory
    /// the name its caller gave it, since the canonical path there is made up.
    pub(crate) fn input(&self, path: &Path) -> PathBuf {
        match self.files {
            Files::Disk(_) => path.to_owned(),
            Files::Memory(_) => self.show(path),
        }
    }

    /// The canonical path `path` relative to the contract's folder, with `/` between its
    /// parts whatever the platform: how generated code names a schema file, the same
    /// wherever the contract is built from.
    pub(crate) fn in_contract_dir(&self, path: &Path) -> String {
        let parts: Vec<String> = normalize(&relative(&self.canonical_dir, path))
            .components()
            .map(|part| part.as_os_str().to_string_lossy().into_owned())
            .collect();
        parts.join("/")
    }
}

/// `path` relative to `base`; both absolute.
fn relative(base: &Path, path: &Path) -> PathBuf {
    let base: Vec<_> = base.components().collect();
    let target: Vec<_> = path.components().collect();
    let common = base.iter().zip(&target).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..base.len() {
        out.push("..");
    }
    for part in &target[common..] {
        out.push(part);
    }
    out
}

/// Removes `.` and folds `dir/..` without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out: Vec<Component<'_>> = Vec::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.last(), Some(Component::Normal(_))) => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out.iter().collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{normalize, relative};

    #[test]
    fn relative_paths_climb_and_descend() {
        assert_eq!(
            relative(Path::new("/a/b/c"), Path::new("/a/d/e.json")),
            Path::new("../../d/e.json")
        );
        assert_eq!(
            normalize(Path::new("examples/orders/../common/./m.json")),
            Path::new("examples/common/m.json")
        );
        assert_eq!(normalize(Path::new("../x/../y")), Path::new("../y"));
    }
}
