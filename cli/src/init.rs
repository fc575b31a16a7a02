//! `warren init`: a new service, written from the starter crate (`examples/starter/`). The
//! starter is a member of warren's own workspace, built and tested with it, so what `init`
//! writes is known to compile, validate and pass its tests; `init` changes only its name and
//! where its warren dependencies come from.

use std::path::{Path, PathBuf};

use clap::Args;
use warren_codegen::diagnostics::escape;

use crate::{Failure, shown};

/// `warren init`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    /// The folder of the new crate: created, or an empty one.
    folder: PathBuf,
    /// The crate's name (default: the folder's name).
    #[arg(long)]
    name: Option<String>,
    /// A checkout of warren's repository the crate depends on by path (relative to the new
    /// crate, or absolute); by default the one this `warren` was built from, when it is still
    /// there, else the crates.io versions.
    #[arg(long, value_name = "PATH")]
    warren: Option<PathBuf>,
}

/// The starter's name, replaced by the new crate's (and its `_` form, by the crate's).
const STARTER: &str = "warren-starter";
/// How the starter names warren's crates, from two folders below the repository's root.
const STARTER_ROOT: &str = "../../";

/// Each file of the starter: its path in the crate, and its text.
const FILES: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../../examples/starter/Cargo.toml"),
    ),
    (
        ".gitignore",
        include_str!("../../examples/starter/.gitignore"),
    ),
    ("build.rs", include_str!("../../examples/starter/build.rs")),
    (
        "warren.yaml",
        include_str!("../../examples/starter/warren.yaml"),
    ),
    (
        "schemas/task_created.json",
        include_str!("../../examples/starter/schemas/task_created.json"),
    ),
    (
        "src/lib.rs",
        include_str!("../../examples/starter/src/lib.rs"),
    ),
    (
        "src/main.rs",
        include_str!("../../examples/starter/src/main.rs"),
    ),
    (
        "tests/run_tasks.rs",
        include_str!("../../examples/starter/tests/run_tasks.rs"),
    ),
];

/// Where the new crate's warren dependencies come from.
enum Source {
    /// A checkout of the repository, as the manifest writes its path.
    Checkout(String),
    /// crates.io.
    Registry,
}

/// Runs `warren init`.
pub(crate) fn run(args: InitArgs) -> Result<(), Failure> {
    let name = match &args.name {
        Some(name) => name.clone(),
        None => folder_name(&args.folder)?,
    };
    if let Some(problem) = name_problem(&name) {
        return Err(Failure::usage(format!(
            "error: `{}` cannot name a crate: {problem} (pass --name)\n",
            escape(&name)
        )));
    }
    refuse_non_empty(&args.folder)?;
    let source = match &args.warren {
        Some(path) => Source::Checkout(path.display().to_string()),
        None => built_from().map_or(Source::Registry, Source::Checkout),
    };
    for (path, text) in FILES {
        let text = adapted(text, &name, &source);
        write(&args.folder.join(path), &text)?;
    }
    println!("{}", next_steps(&args.folder, &name, &source));
    Ok(())
}

/// The starter's `text` for crate `name`, its warren dependencies from `source`.
fn adapted(text: &str, name: &str, source: &Source) -> String {
    let text = text
        .replace(STARTER, name)
        .replace(&STARTER.replace('-', "_"), &name.replace('-', "_"));
    match source {
        Source::Checkout(root) => {
            let root = root.trim_end_matches('/');
            text.replace(
                &format!("path = \"{STARTER_ROOT}"),
                &format!("path = \"{root}/"),
            )
        }
        Source::Registry => {
            let version = format!("version = \"{}\"", env!("CARGO_PKG_VERSION"));
            let text = ["runtime", "dylib", "build-support", "testkit"]
                .iter()
                .fold(text, |text, folder| {
                    text.replace(&format!("path = \"{STARTER_ROOT}{folder}\""), &version)
                });
            // A dependency given by its version alone is written as the version.
            text.replace(
                &format!("{{ {version} }}"),
                &format!("\"{}\"", env!("CARGO_PKG_VERSION")),
            )
        }
    }
}

/// The checkout this binary was built from, when it is still there.
fn built_from() -> Option<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    let root = root.canonicalize().ok()?;
    root.join("runtime/Cargo.toml")
        .is_file()
        .then(|| root.display().to_string())
}

/// The name of `folder`, as the crate's default name.
fn folder_name(folder: &Path) -> Result<String, Failure> {
    let absolute = std::path::absolute(folder).unwrap_or_else(|_| folder.to_owned());
    let name = absolute.file_name().and_then(|name| name.to_str());
    name.map(str::to_owned).ok_or_else(|| {
        Failure::usage(format!(
            "error: {} has no name to give the crate; pass --name\n",
            shown(folder)
        ))
    })
}

/// What makes `name` unfit for a crate's name, as cargo's rules have it.
fn name_problem(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    match chars.next() {
        None => Some("it is empty"),
        Some(first) if !first.is_ascii_alphabetic() => Some("it must start with a letter"),
        _ if name.len() > 64 => Some("it is longer than 64 characters"),
        _ if !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_')) => {
            Some("only ASCII letters, digits, `-` and `_` may follow")
        }
        _ => None,
    }
}

/// Refuses a `folder` that exists and holds anything: nothing of the user's is overwritten.
fn refuse_non_empty(folder: &Path) -> Result<(), Failure> {
    let Ok(mut entries) = std::fs::read_dir(folder) else {
        return match folder.exists() {
            true => Err(Failure::usage(format!(
                "error: {} exists and is not a readable folder\n",
                shown(folder)
            ))),
            false => Ok(()),
        };
    };
    match entries.next() {
        None => Ok(()),
        Some(_) => Err(Failure::usage(format!(
            "error: {} is not empty; `warren init` writes only into a new or empty folder\n",
            shown(folder)
        ))),
    }
}

fn write(path: &Path, text: &str) -> Result<(), Failure> {
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(path, text));
    written.map_err(|error| {
        Failure::usage(format!(
            "error: cannot write {}: {}\n",
            shown(path),
            escape(&error.to_string())
        ))
    })
}

/// What to do next, said once the crate is written.
fn next_steps(folder: &Path, name: &str, source: &Source) -> String {
    let dependencies = match source {
        Source::Checkout(root) => format!("warren's crates from {}", escape(root)),
        Source::Registry => "warren's crates from crates.io (before they are published there, \
                             pass --warren PATH to a checkout)"
            .to_owned(),
    };
    format!(
        "created {name} in {folder}, with {dependencies}:
  warren.yaml, schemas/   the contract: `warren validate warren.yaml`, `warren diagram warren.yaml`
  build.rs                turns it into Rust on each build (src/lib.rs includes it)
  src/lib.rs              the handler of consumer `run_tasks`
  src/main.rs             runs it: `cargo run`, with a RabbitMQ at AMQP_URL (while you
                          edit handlers, `--features dynamic-linking` relinks in a fraction
                          of the time)
  tests/run_tasks.rs      the handler's tests, without a broker: `cargo test`",
        name = escape(name),
        folder = shown(folder),
    )
}

#[cfg(test)]
mod tests {
    use super::{Source, adapted, name_problem};

    #[test]
    fn names_follow_cargo_s_rules() {
        assert_eq!(name_problem("orders-service"), None);
        assert_eq!(name_problem("a_1"), None);
        assert!(name_problem("").is_some());
        assert!(name_problem("1st").is_some());
        assert!(name_problem("my service").is_some());
        assert!(name_problem(&"a".repeat(65)).is_some());
    }

    /// The crate's name replaces the starter's, in both spellings; the dependencies come from
    /// the checkout given, or crates.io.
    #[test]
    fn the_starter_is_renamed_and_pointed_at_its_dependencies() {
        let manifest = "name = \"warren-starter\"\nwarren-runtime = { path = \"../../runtime\" }\n\
                        warren-dylib = { path = \"../../dylib\", optional = true }\n";
        let checkout = adapted(
            manifest,
            "billing",
            &Source::Checkout("/src/warren/".into()),
        );
        assert_eq!(
            checkout,
            "name = \"billing\"\nwarren-runtime = { path = \"/src/warren/runtime\" }\n\
             warren-dylib = { path = \"/src/warren/dylib\", optional = true }\n"
        );
        let registry = adapted(manifest, "billing", &Source::Registry);
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            registry,
            format!(
                "name = \"billing\"\nwarren-runtime = \"{version}\"\n\
                 warren-dylib = {{ version = \"{version}\", optional = true }}\n"
            )
        );
        assert_eq!(
            adapted("use warren_starter::Tasks;", "my-svc", &Source::Registry),
            "use my_svc::Tasks;"
        );
    }
}
