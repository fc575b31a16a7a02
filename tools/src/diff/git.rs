//! A contract as it was at a git revision: the repository's whole tree at that revision is
//! written to a folder, so `schema_roots` and relative `$ref`s resolve there as they did then.
//!
//! The tree is read through a temporary index (`git read-tree` into a file of our own, then
//! `git checkout-index --prefix`): the repository's own index, work tree and worktree list
//! are never touched, nothing is fetched, and unlike `git archive` no `export-ignore`
//! attribute can leave a schema out.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why a revision could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// `git` could not be run.
    #[error("cannot run `git` ({0}); install git, or compare two paths: `warren diff OLD NEW`")]
    Missing(std::io::Error),
    /// The contract's folder is not in a git work tree.
    #[error("`{}` is not inside a git work tree: {stderr}", folder.display())]
    NotARepository {
        /// The contract's folder.
        folder: PathBuf,
        /// What git said.
        stderr: String,
    },
    /// The revision names no commit.
    #[error("unknown revision `{rev}`: {stderr} (fetch it first, e.g. `git fetch origin main`)")]
    UnknownRevision {
        /// The revision as given.
        rev: String,
        /// What git said.
        stderr: String,
    },
    /// A git command failed.
    #[error("`git {command}` failed: {stderr}")]
    Failed {
        /// The command, without `git`.
        command: String,
        /// What git said.
        stderr: String,
    },
    /// The contract path cannot be used.
    #[error("cannot use contract path `{}`: {reason}", path.display())]
    BadPath {
        /// The path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// A git revision's copy of a contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// The contract inside the exported tree, or `None` when it did not exist at the
    /// revision.
    pub contract: Option<PathBuf>,
    /// The contract's path in the repository, as `REV:path` shows it.
    pub shown: String,
    /// The folder the repository's tree at the revision is written to: the old version's
    /// project folder ([`warren_codegen::ProjectRoot::At`]).
    pub tree: PathBuf,
}

/// Runs git in `folder` with `args`, returning its standard output.
fn git(
    folder: &Path,
    args: &[&str],
    index: Option<&Path>,
) -> Result<Result<String, String>, GitError> {
    let mut command = Command::new("git");
    command.current_dir(folder).args(args);
    // The user's configured pager, editor or language must not change what we read.
    command.env("GIT_PAGER", "cat").env("LC_ALL", "C");
    if let Some(index) = index {
        command.env("GIT_INDEX_FILE", index);
    }
    let output = command.output().map_err(GitError::Missing)?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    Ok(if output.status.success() {
        Ok(stdout)
    } else {
        Err(stderr)
    })
}

/// Writes the tree of the repository holding `contract` at revision `rev` into `into` (an
/// empty folder), and returns where the contract is in it: at the same path relative to the
/// repository's root.
pub fn export(contract: &Path, rev: &str, into: &Path) -> Result<Exported, GitError> {
    let bad = |reason: &str| GitError::BadPath {
        path: contract.to_owned(),
        reason: reason.to_owned(),
    };
    let file_name = contract
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| bad("it names no file"))?;
    let folder = match contract.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    if !folder.is_dir() {
        return Err(bad("its folder does not exist"));
    }
    let prefix = git(&folder, &["rev-parse", "--show-prefix"], None)?.map_err(|stderr| {
        GitError::NotARepository {
            folder: folder.clone(),
            stderr,
        }
    })?;
    let relative = format!("{}{file_name}", prefix.trim_end_matches('\n'));
    if rev.starts_with('-') {
        return Err(GitError::UnknownRevision {
            rev: rev.to_owned(),
            stderr: "a revision cannot start with `-`".to_owned(),
        });
    }
    let commit = format!("{rev}^{{commit}}");
    git(
        &folder,
        &["rev-parse", "--verify", "--quiet", &commit],
        None,
    )?
    .map_err(|stderr| GitError::UnknownRevision {
        rev: rev.to_owned(),
        stderr: if stderr.is_empty() {
            "no such commit".to_owned()
        } else {
            stderr
        },
    })?;
    let shown = format!("{rev}:{relative}");
    let exists = git(
        &folder,
        &["cat-file", "-e", &format!("{rev}:{relative}")],
        None,
    )?
    .is_ok();
    let tree = into.join("tree");
    if !exists {
        return Ok(Exported {
            contract: None,
            shown,
            tree,
        });
    }
    let index = into.join(".warren-diff-index");
    let failed = |command: &str| {
        let command = command.to_owned();
        move |stderr| GitError::Failed { command, stderr }
    };
    git(&folder, &["read-tree", &commit], Some(&index))?.map_err(failed("read-tree"))?;
    let target = format!("{}/", tree.display());
    git(
        &folder,
        &[
            "checkout-index",
            "--all",
            "--force",
            &format!("--prefix={target}"),
        ],
        Some(&index),
    )?
    .map_err(failed("checkout-index"))?;
    Ok(Exported {
        contract: Some(tree.join(&relative)),
        shown,
        tree,
    })
}
