//! `build.rs` support for warren: turn a `warren.yaml` contract into Rust at build time.
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), warren_build::Error> {
//!     warren_build::compile("warren.yaml")?;
//!     Ok(())
//! }
//! ```
//!
//! ```text
//! // src/lib.rs: the file warren-build wrote for `orders/warren.yaml`, `orders.rs`
//! warren_runtime::include_generated!("orders");
//! ```
//!
//! The build script checks the contract and every schema it reaches, writes the generated
//! file under `OUT_DIR` (only when its bytes changed, so nothing downstream rebuilds for
//! nothing), tells Cargo where it is (`WARREN_GENERATED_orders`, which
//! `include_generated!` reads: a name no contract generated fails with warren's message, not
//! rustc's), and tells Cargo to rerun it only when the contract or one of those schema files
//! changes. A contract with errors fails the build with the same diagnostics as
//! `warren validate`: file, line, what is wrong and how to fix it.
//!
//! [`compile`] is `Config::new().compile(..)`; a [`Config`] sets the output folder, the file
//! name and the `rerun-if-changed` lines, and how the Rust is generated ([`Settings`]): extra
//! derives and attributes on the payload and headers types, builders, schema types replaced
//! by your own, and which of the contract's consumers and publishers this crate runs.
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), warren_build::Error> {
//!     warren_build::Config::new()
//!         .derive("Hash")
//!         .derive("Eq")
//!         .builders(true)
//!         .replace("Money", "crate::money::Money")
//!         // This service runs the fulfilment consumer and places orders; the contract's
//!         // other consumers run elsewhere.
//!         .consumer("fulfil_order")
//!         .publisher("place_order")
//!         .compile("warren.yaml")?;
//!     Ok(())
//! }
//! ```
//!
//! The generated code depends on the `warren-runtime` crate alone: add it to
//! `[dependencies]` and `warren-build` to `[build-dependencies]`.

// The examples are build scripts, whose `fn main` is the point.
#![allow(clippy::needless_doctest_main)]

use std::fmt;
use std::path::{Path, PathBuf};

/// Given to [`Config::settings`].
pub use warren_codegen::Settings;
use warren_codegen::diagnostics::escape;
use warren_codegen::{ProjectRoot, RenderStyle};

/// Generates the Rust for the contract at `contract` with the default [`Config`].
///
/// ```no_run
/// // build.rs
/// fn main() -> Result<(), warren_build::Error> {
///     warren_build::compile("warren.yaml")?;
///     Ok(())
/// }
/// ```
pub fn compile(contract: impl AsRef<Path>) -> Result<PathBuf, Error> {
    Config::new().compile(contract)
}

/// Settings for generating a contract's Rust from a build script.
#[derive(Debug, Clone)]
pub struct Config {
    out_dir: Option<PathBuf>,
    file_name: Option<String>,
    emit_rerun_if_changed: bool,
    project_root: Option<PathBuf>,
    settings: Settings,
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}

impl Config {
    /// The defaults: write under `OUT_DIR`, name the file after the contract, and print
    /// `cargo:rerun-if-changed` lines.
    ///
    /// ```no_run
    /// // build.rs
    /// fn main() {
    ///     warren_build::Config::new().compile("warren.yaml").unwrap();
    /// }
    /// ```
    pub fn new() -> Self {
        Self {
            out_dir: None,
            file_name: None,
            emit_rerun_if_changed: true,
            project_root: None,
            settings: Settings::new(),
        }
    }

    /// Writes the generated file into `dir` instead of the `OUT_DIR` Cargo gives build
    /// scripts.
    ///
    /// ```no_run
    /// // build.rs
    /// fn main() {
    ///     let dir = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("contracts");
    ///     std::fs::create_dir_all(&dir).unwrap();
    ///     warren_build::Config::new()
    ///         .out_dir(dir)
    ///         .compile("warren.yaml")
    ///         .unwrap();
    /// }
    /// ```
    pub fn out_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// Names the generated file. By default it is named after the contract: `billing.yaml`
    /// gives `billing.rs`, and a contract called `warren.yaml` is named after its folder
    /// (`orders/warren.yaml` gives `orders.rs`).
    ///
    /// ```no_run
    /// // build.rs
    /// fn main() {
    ///     warren_build::Config::new()
    ///         .file_name("contract.rs")
    ///         .compile("warren.yaml")
    ///         .unwrap();
    /// }
    /// // src/lib.rs: warren_runtime::include_generated!("contract");
    /// ```
    pub fn file_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.file_name = Some(name.into());
        self
    }

    /// The folder the contract, its imports and their schemas may be read from; nothing
    /// outside it is read. By default the git work tree holding the contract, else (a build
    /// without its `.git`, as in many container builds) the Cargo workspace of the package
    /// being built. Choose it when the contract reaches files outside both, such as a
    /// contracts repository checked out beside this one.
    ///
    /// ```no_run
    /// // build.rs
    /// fn main() {
    ///     warren_build::Config::new()
    ///         .project_root("../..")
    ///         .compile("../../contracts/orders/warren.yaml")
    ///         .unwrap();
    /// }
    /// ```
    pub fn project_root(&mut self, folder: impl Into<PathBuf>) -> &mut Self {
        self.project_root = Some(folder.into());
        self
    }

    /// Whether to print `cargo:rerun-if-changed` for the contract and every schema file it
    /// reads (on by default). Turn it off when the build script decides about reruns itself;
    /// Cargo then reruns it whenever any file of the package changes.
    ///
    /// ```no_run
    /// // build.rs
    /// fn main() {
    ///     println!("cargo:rerun-if-changed=contracts");
    ///     warren_build::Config::new()
    ///         .emit_rerun_if_changed(false)
    ///         .compile("contracts/warren.yaml")
    ///         .unwrap();
    /// }
    /// ```
    pub fn emit_rerun_if_changed(&mut self, emit: bool) -> &mut Self {
        self.emit_rerun_if_changed = emit;
        self
    }

    /// Generates with `settings`, replacing every generator setting made so far. The setters
    /// below each add one setting; [`Settings`] documents them all.
    ///
    /// ```no_run
    /// // build.rs
    /// fn main() {
    ///     let mut settings = warren_build::Settings::new();
    ///     settings.derive("Eq").builders(true);
    ///     warren_build::Config::new().settings(settings).compile("warren.yaml").unwrap();
    /// }
    /// ```
    pub fn settings(&mut self, settings: Settings) -> &mut Self {
        self.settings = settings;
        self
    }

    /// [`Settings::derive`], on this config's settings.
    pub fn derive(&mut self, path: impl Into<String>) -> &mut Self {
        self.settings.derive(path);
        self
    }

    /// [`Settings::attribute`], on this config's settings.
    pub fn attribute(&mut self, attribute: impl Into<String>) -> &mut Self {
        self.settings.attribute(attribute);
        self
    }

    /// [`Settings::builders`], on this config's settings.
    pub fn builders(&mut self, builders: bool) -> &mut Self {
        self.settings.builders(builders);
        self
    }

    /// [`Settings::replace`], on this config's settings.
    pub fn replace(
        &mut self,
        type_name: impl Into<String>,
        rust_type: impl Into<String>,
    ) -> &mut Self {
        self.settings.replace(type_name, rust_type);
        self
    }

    /// [`Settings::extern_contract`], on this config's settings.
    pub fn extern_contract(
        &mut self,
        import: impl Into<String>,
        rust_module: impl Into<String>,
    ) -> &mut Self {
        self.settings.extern_contract(import, rust_module);
        self
    }

    /// [`Settings::consumer`], on this config's settings.
    pub fn consumer(&mut self, name: impl Into<String>) -> &mut Self {
        self.settings.consumer(name);
        self
    }

    /// [`Settings::no_consumers`], on this config's settings.
    pub fn no_consumers(&mut self) -> &mut Self {
        self.settings.no_consumers();
        self
    }

    /// [`Settings::publisher`], on this config's settings.
    pub fn publisher(&mut self, name: impl Into<String>) -> &mut Self {
        self.settings.publisher(name);
        self
    }

    /// [`Settings::no_publishers`], on this config's settings.
    pub fn no_publishers(&mut self) -> &mut Self {
        self.settings.no_publishers();
        self
    }

    /// Where `contract` may read files: the folder chosen, else the git work tree holding it,
    /// else the Cargo workspace of the package being built.
    fn project(&self, contract: &Path) -> ProjectRoot {
        if let Some(folder) = &self.project_root {
            return ProjectRoot::At(folder.clone());
        }
        let git = contract
            .canonicalize()
            .ok()
            .and_then(|path| path.parent().and_then(ProjectRoot::git_work_tree));
        match (git, std::env::var_os("CARGO_MANIFEST_DIR")) {
            (Some(work_tree), _) => ProjectRoot::At(work_tree),
            (None, Some(package)) => ProjectRoot::At(cargo_workspace(Path::new(&package))),
            (None, None) => ProjectRoot::Discover,
        }
    }

    /// Checks the contract at `contract`, generates its Rust, and writes it (when its bytes
    /// changed). Returns the path of the generated file.
    ///
    /// ```no_run
    /// // build.rs
    /// fn main() {
    ///     let file = warren_build::Config::new().compile("warren.yaml").unwrap();
    ///     println!("cargo:warning=generated {}", file.display());
    /// }
    /// ```
    pub fn compile(&self, contract: impl AsRef<Path>) -> Result<PathBuf, Error> {
        let contract = contract.as_ref();
        if self.emit_rerun_if_changed {
            // Printed first, so a contract that fails to check is still watched.
            rerun_if_changed(contract);
        }
        let generated = match warren_codegen::check_contract_in(contract, &self.project(contract))
            .and_then(|checked| checked.generate(&self.settings))
        {
            Ok(generated) => generated,
            Err(warren_codegen::Error::Invalid(problems)) => {
                if self.emit_rerun_if_changed {
                    // Watch every file read so far: fixing a schema must rerun the script.
                    for file in problems.files() {
                        rerun_if_changed(file);
                    }
                }
                return Err(Error::new(problems.render(RenderStyle::Plain)));
            }
            Err(other) => return Err(Error::new(format!("{}\n", escape(&other.to_string())))),
        };
        if self.emit_rerun_if_changed {
            for input in &generated.checked.contract.inputs {
                rerun_if_changed(input);
            }
        }
        for warning in generated.checked.warnings.iter() {
            println!("cargo:warning={}", warning.to_string().replace('\n', " "));
        }
        let dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or_else(|| {
                    Error::new(
                        "OUT_DIR is not set: call warren_build from a build script, or set \
                         Config::out_dir\n"
                            .to_owned(),
                    )
                })?,
        };
        let name = match &self.file_name {
            Some(name) => name.clone(),
            None => default_file_name(contract),
        };
        let path = dir.join(name);
        // The shared writer: only when the bytes change, and a symlink at the path is
        // replaced rather than written through.
        warren_codegen::write_if_changed(&path, generated.code.as_bytes()).map_err(|e| {
            Error::new(format!(
                "cannot write `{}`: {e}\n",
                escape(&path.display().to_string())
            ))
        })?;
        name_for_include(&path);
        Ok(path)
    }
}

/// Tells Cargo to set `WARREN_GENERATED_<stem>` to `path` while compiling the crate, for
/// `warren_runtime::include_generated!("<stem>")` to include the file by: a name that matches
/// no generated file then fails the build with warren's message, not rustc's `couldn't read`.
/// A name with a line break (which would end Cargo's instruction early) sets nothing.
fn name_for_include(path: &Path) {
    let Some(stem) = path.file_stem() else {
        return;
    };
    let (stem, text) = (stem.to_string_lossy(), path.display().to_string());
    if !stem.contains(['\n', '\r', '=']) && !text.contains(['\n', '\r']) {
        println!("cargo:rustc-env=WARREN_GENERATED_{stem}={text}");
    }
}

/// Tells Cargo to watch `path`. Cargo reads one instruction per line, so a file name with a
/// line break (a schema reached through a hostile `$ref`) would end the instruction early and
/// start one of the file's choosing; such a path is not watched, and a warning says so.
fn rerun_if_changed(path: &Path) {
    let text = path.display().to_string();
    if text.contains(['\n', '\r']) {
        println!(
            "cargo:warning=not watching `{}`: its name has a line break",
            escape(&text)
        );
    } else {
        println!("cargo:rerun-if-changed={text}");
    }
}

/// The Cargo workspace holding the package at `package`: the nearest folder at or above it
/// whose `Cargo.toml` has a `[workspace]` table (how Cargo finds it), else the package.
fn cargo_workspace(package: &Path) -> PathBuf {
    let is_workspace = |dir: &Path| {
        std::fs::read_to_string(dir.join("Cargo.toml"))
            .is_ok_and(|manifest| manifest.lines().any(|line| line.trim() == "[workspace]"))
    };
    package
        .ancestors()
        .find(|dir| is_workspace(dir))
        .unwrap_or(package)
        .to_owned()
}

/// `billing.yaml` → `billing.rs`; `orders/warren.yaml` → `orders.rs`.
fn default_file_name(contract: &Path) -> String {
    let stem = contract
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = if stem == "warren" {
        contract
            .canonicalize()
            .ok()
            .and_then(|p| {
                p.parent()
                    .and_then(Path::file_name)
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .unwrap_or(stem)
    } else {
        stem
    };
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("{cleaned}.rs")
}

/// Why a contract could not be turned into Rust. Both `Display` and `Debug` show the rendered
/// diagnostics, so `.unwrap()` and `fn main() -> Result<(), Error>` in a build script print
/// them readably.
pub struct Error {
    rendered: String,
}

impl Error {
    fn new(rendered: String) -> Self {
        Self { rendered }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rendered)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `unwrap()` prints Debug: make it the readable report, not a struct dump.
        write!(f, "\n{}", self.rendered)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{Config, cargo_workspace, default_file_name};

    /// Without a `.git` (a container build), a build script's contract reads files inside the
    /// Cargo workspace: found as Cargo finds it, from the package up.
    #[test]
    fn the_fallback_project_is_the_cargo_workspace() {
        let package = Path::new(env!("CARGO_MANIFEST_DIR"));
        let workspace = package.parent().expect("the repository");
        assert_eq!(cargo_workspace(package), workspace);
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            cargo_workspace(dir.path()),
            dir.path(),
            "no workspace: the package"
        );
    }

    #[test]
    fn file_names_follow_the_contract() {
        assert_eq!(default_file_name(Path::new("billing.yaml")), "billing.rs");
        assert_eq!(
            default_file_name(Path::new("Order Events.yml")),
            "order_events.rs"
        );
        let orders = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/orders/warren.yaml");
        assert_eq!(default_file_name(&orders), "orders.rs");
    }

    /// The generated file replaces a symlink at its path rather than writing through it.
    #[cfg(unix)]
    #[test]
    fn a_symlink_at_the_generated_path_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, "precious\n").unwrap();
        let out_dir = dir.path().join("out");
        std::fs::create_dir(&out_dir).unwrap();
        std::os::unix::fs::symlink(&outside, out_dir.join("orders.rs")).unwrap();
        let orders = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/orders/warren.yaml");
        let path = Config::new()
            .out_dir(&out_dir)
            .emit_rerun_if_changed(false)
            .compile(&orders)
            .unwrap();
        assert_eq!(path, out_dir.join("orders.rs"));
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious\n");
        assert!(
            std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_file()
        );
    }
}
