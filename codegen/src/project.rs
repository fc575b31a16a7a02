//! The folder a contract on disk may read files from.
//!
//! A contract names other files by relative path (`imports`, `schema_roots`, `payload:`,
//! `$ref`), and `..` is how a contract reaches a sibling folder (`../common`). Without a
//! bound, a contract (a pull request's, run in CI) could make warren read any file on the
//! machine: an import's YAML error quotes the file's lines into the log, and any JSON file
//! under `schema_roots: ["/"]` could be bundled into generated code and exports. Every read
//! therefore stays inside the contract's *project*: the git work tree holding it, or a folder
//! the caller chooses.

use std::io;
use std::path::{Path, PathBuf};

/// Which folder a contract on disk, its imports and their schemas may read files from.
///
/// ```no_run
/// use warren_codegen::ProjectRoot;
///
/// // The git work tree holding the contract (else its own folder), as `check_contract` does:
/// let checked = warren_codegen::check_contract_in("orders/warren.yaml", &ProjectRoot::Discover)?;
/// // A folder of the caller's choosing, such as a build without its `.git`:
/// let checked = warren_codegen::check_contract_in(
///     "orders/warren.yaml",
///     &ProjectRoot::At("/src/shop".into()),
/// )?;
/// # Ok::<(), warren_codegen::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ProjectRoot {
    /// The git work tree holding the contract (the nearest folder above it with a `.git`,
    /// a submodule's or a worktree's included), else the contract's own folder.
    #[default]
    Discover,
    /// This folder, and everything under it.
    At(PathBuf),
}

impl ProjectRoot {
    /// The canonical project folder for the contract whose canonical folder is
    /// `contract_dir`. An error when a chosen folder does not exist, or does not hold the
    /// contract.
    pub(crate) fn resolve(&self, contract_dir: &Path) -> io::Result<PathBuf> {
        let root = match self {
            Self::Discover => {
                Self::git_work_tree(contract_dir).unwrap_or_else(|| contract_dir.to_owned())
            }
            Self::At(folder) => folder.canonicalize().map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("project folder `{}`: {e}", folder.display()),
                )
            })?,
        };
        if contract_dir.starts_with(&root) {
            Ok(root)
        } else {
            Err(io::Error::other(format!(
                "the contract is outside its project folder `{}`; choose one that holds it \
                 (`warren --project-root DIR`, `Config::project_root` in build.rs)",
                root.display()
            )))
        }
    }

    /// The git work tree holding `folder`: the nearest folder at or above it with a `.git`
    /// (a folder, or the file a submodule or worktree has).
    pub fn git_work_tree(folder: &Path) -> Option<PathBuf> {
        folder
            .ancestors()
            .find(|dir| dir.join(".git").exists())
            .map(Path::to_path_buf)
    }
}

/// How a diagnostic names the project and how to widen it, for a path found outside it.
pub(crate) fn outside_help() -> &'static str {
    "a contract reads files only inside its project: the git work tree holding it, else its \
     own folder. Move the file into the project, or choose a wider project folder \
     (`warren --project-root DIR`, `Config::project_root` in build.rs)"
}

#[cfg(test)]
mod tests {
    use super::ProjectRoot;

    #[test]
    fn a_git_work_tree_is_the_project_and_a_chosen_folder_must_hold_the_contract() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let contract_dir = root.join("services/orders");
        std::fs::create_dir_all(&contract_dir).expect("folders");
        // No `.git` anywhere up to the temporary folder (none above it is assumed either
        // way: the contract's folder is at or below whatever is found).
        let alone = ProjectRoot::Discover
            .resolve(&contract_dir)
            .expect("a root");
        assert!(contract_dir.starts_with(&alone));
        std::fs::write(root.join(".git"), "gitdir: elsewhere\n").expect(".git file");
        assert_eq!(ProjectRoot::Discover.resolve(&contract_dir).unwrap(), root);
        let chosen = ProjectRoot::At(root.join("services"));
        assert_eq!(
            chosen.resolve(&contract_dir).unwrap(),
            root.join("services")
        );
        let elsewhere = ProjectRoot::At(root.join("services/orders/schemas"));
        std::fs::create_dir_all(root.join("services/orders/schemas")).expect("folder");
        let error = elsewhere
            .resolve(&contract_dir)
            .expect_err("not holding it");
        assert!(
            error.to_string().contains("outside its project folder"),
            "{error}"
        );
    }
}
