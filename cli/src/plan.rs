//! `warren plan`: compare a live broker with a contract, say what a deploy creates, what the
//! broker refuses to change in place and how it is migrated, and carry it out (`--apply`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use warren_codegen::diagnostics::escape;
use warren_codegen::{ProjectRoot, RenderStyle};
use warren_runtime::management::Management;
use warren_runtime::plan::Plan;
use warren_runtime::{Connection, ErrorChain, Topology};

use crate::{Failure, checked, shown};

/// How long connecting may take before the command gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// `warren plan`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    /// The contract to deploy (the new version), usually `warren.yaml`.
    contract: PathBuf,
    /// The broker: `amqp://user:password@host:port/vhost`.
    #[arg(long)]
    url: String,
    /// The contract deployed now (the previous version): its wait queues are the ones the
    /// new version may drop, and AMQP cannot list queues. Needed to migrate a queue.
    #[arg(long, value_name = "OLD_CONTRACT", conflicts_with = "against")]
    from: Option<PathBuf>,
    /// Take the previous version from git: CONTRACT at this revision (a branch, tag or
    /// commit), read without touching the work tree.
    #[arg(long, value_name = "REV")]
    against: Option<String>,
    /// The broker's management API (`http://user:password@host:15672`), where a queue's
    /// bindings are read before it is migrated (AMQP cannot list them, and one outside the
    /// contract would be lost). By default the `--url` host on port 15672, with its
    /// credentials and virtual host.
    #[arg(long, value_name = "URL")]
    management: Option<String>,
    /// The namespace the topology is deployed under (`Topology::namespaced`), if any.
    #[arg(long, default_value = "")]
    namespace: String,
    /// Carry the plan out. Stop the workers of the old version first: a queue to migrate
    /// that still has consumers blocks the plan.
    #[arg(long)]
    apply: bool,
    /// `table` for people, `json` for tools.
    #[arg(long, default_value = "table", value_parser = ["table", "json"])]
    format: String,
}

/// The topology of the contract at `path`, namespaced.
fn topology(
    path: &Path,
    namespace: &str,
    project: &ProjectRoot,
    style: RenderStyle,
) -> Result<Topology, Failure> {
    let checked = checked(path, project, style).map_err(|mut failure| {
        failure.status = 2;
        failure
    })?;
    Ok(checked.contract.topology.namespaced(namespace))
}

fn usage(message: impl std::fmt::Display) -> Failure {
    Failure::usage(format!("error: {}\n", escape(&message.to_string())))
}

/// Runs `warren plan`.
pub(crate) fn run(
    args: &PlanArgs,
    project: &ProjectRoot,
    style: RenderStyle,
) -> Result<(), Failure> {
    let new = topology(&args.contract, &args.namespace, project, style)?;
    // Kept until the plan is computed: the exported tree of `--against`.
    let mut _folder = None;
    let old = match (&args.from, &args.against) {
        (Some(from), _) => Some(topology(from, &args.namespace, project, style)?),
        (None, Some(rev)) => {
            let folder = tempfile::tempdir()
                .map_err(|e| usage(format!("cannot create a temporary folder: {e}")))?;
            let exported =
                warren_tools::diff::export(&args.contract, rev, folder.path()).map_err(usage)?;
            // The repository as it was at `rev` is the old version's project.
            let then = ProjectRoot::At(exported.tree.clone());
            let old = match &exported.contract {
                Some(path) => Some(topology(path, &args.namespace, &then, style)?),
                None => None,
            };
            _folder = Some(folder);
            old
        }
        (None, None) => None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| usage(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(plan(args, &new, old.as_ref()))
}

async fn plan(args: &PlanArgs, new: &Topology, old: Option<&Topology>) -> Result<(), Failure> {
    let connection = tokio::time::timeout(
        CONNECT_TIMEOUT,
        Connection::connect(&args.url, "warren-plan"),
    )
    .await
    .map_err(|_| usage(format!("no broker answered within {CONNECT_TIMEOUT:?}")))?
    .map_err(|e| usage(format!("cannot connect to the broker: {e}")))?;
    let outcome = plan_on(args, &connection, new, old).await;
    let _ = connection.close().await;
    outcome
}

async fn plan_on(
    args: &PlanArgs,
    connection: &Connection,
    new: &Topology,
    old: Option<&Topology>,
) -> Result<(), Failure> {
    let json = args.format == "json";
    let management = management_of(args)?;
    let plan = Plan::compute(connection, new, old, Some(&management))
        .await
        .map_err(|e| usage(ErrorChain(&e).to_string()))?;
    let blocked = !plan.blocked().is_empty();
    if !json {
        println!(
            "warren plan: {} against the broker{}\n",
            shown(&args.contract),
            match (&args.from, &args.against) {
                (Some(from), _) => format!(", previous version {}", shown(from)),
                (None, Some(rev)) => format!(", previous version at {}", escape(rev)),
                (None, None) => " (no previous version given)".to_owned(),
            }
        );
        // Names and the broker's words are shown escaped, line by line.
        for line in plan.to_string().lines() {
            println!("{}", escape(line.trim_end()));
        }
    }
    if !args.apply {
        if json {
            println!("{}", pretty(&serde_json::json!({ "plan": plan.json() })));
        } else if blocked {
            println!(
                "\nBlocked: fix what is marked BLOCKED, then plan again. Nothing was changed."
            );
        } else if plan.is_noop() {
            println!("\nNothing to do.");
        } else {
            println!(
                "\nNothing was changed. To carry it out: stop the workers of the old version, \
                 run this again with --apply, then start the new version."
            );
        }
        return if blocked {
            Err(Failure {
                status: 1,
                message: String::new(),
            })
        } else {
            Ok(())
        };
    }
    if blocked {
        if json {
            println!("{}", pretty(&serde_json::json!({ "plan": plan.json() })));
        }
        return Err(Failure {
            status: 1,
            message: "error: the plan is blocked; nothing was changed\n".to_owned(),
        });
    }
    match plan.apply(connection).await {
        Ok(applied) => {
            if json {
                println!(
                    "{}",
                    pretty(&serde_json::json!({
                        "plan": plan.json(),
                        "applied": { "steps": applied.steps, "moved": applied.moved },
                    }))
                );
            } else {
                println!("\nApplied:");
                for step in &applied.steps {
                    println!("  {}", escape(step));
                }
                println!(
                    "\nDone: {} message(s) moved. Start the new version's workers.",
                    applied.moved
                );
            }
            Ok(())
        }
        Err(error) => Err(Failure {
            status: 2,
            message: format!(
                "error: {}\nNothing was lost: a message is acknowledged where it was only once \
                 confirmed where it goes. Run the same command again to go on.\n",
                escape(&ErrorChain(&error).to_string())
            ),
        }),
    }
}

/// The management API `--management` names, or the one beside `--url`.
fn management_of(args: &PlanArgs) -> Result<Management, Failure> {
    crate::management_api(&args.url, args.management.as_deref())
        .map_err(|e| usage(ErrorChain(&e).to_string()))
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}
