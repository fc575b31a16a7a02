//! Several contracts checked as one system: what no contract can see alone.
//!
//! Each contract is first checked alone, every rule but one: whether a publisher's messages
//! reach a queue, since another contract may bind that queue. The contracts that pass are
//! then put together ([`union::Union`]: every exchange, queue, binding, sender (publisher or
//! rpc caller) and reader (consumer or rpc server) of the system, by name) and the system
//! rules run over them (`rules.rs`, `rpcs.rs`, `declarations.rs`): publishers whose messages
//! reach no queue of any contract, consumers and rpc servers nothing of the system reaches, a
//! sender and a reader of one message whose schemas differ, the two sides of an rpc (the
//! caller's team's copy and the server's) that disagree, and an exchange or queue two
//! contracts declare differently. Each diagnostic names every file involved
//! ([`crate::diagnostics::Related`]).

mod declarations;
mod discover;
mod rpcs;
mod rules;
mod schemas;
mod union;

use std::path::PathBuf;

use crate::check::Scope;
use crate::diagnostics::Diagnostics;
use crate::load::LoadedContract;
use crate::{Checked, Error, ProjectRoot, load};

/// Contracts that passed every check as one system.
#[derive(Debug, Clone)]
pub struct System {
    /// Each contract, checked, in the order found: files as given, a folder's contracts in
    /// path order.
    pub contracts: Vec<Checked>,
    /// Problems that do not fail the system but deserve a look: each contract's own
    /// warnings and the system's.
    pub warnings: Diagnostics,
}

/// A contract of the system: its model, and its loaded file for the places of diagnostics.
pub(crate) struct Member {
    pub checked: Checked,
    pub loaded: LoadedContract,
}

/// Checks the contracts at `paths` as one system. Each path is a contract file, or a folder
/// holding contracts: every `warren.yaml` under it, at most 16 levels deep, hidden folders
/// and `target/` skipped.
///
/// Each contract is checked alone first and its problems reported as [`check_contract`]
/// reports them, except that a publisher whose messages reach none of its own contract's
/// queues may reach another contract's. The contracts that pass are then checked together:
///
/// - a publisher whose messages reach no queue of any contract is an error
///   (`unroutable-publisher`); one marked `external_consumers: true` gets a warning
///   (`unconsumed-in-system`), since its consumers may live outside the system;
/// - a consumer whose queue no publisher or rpc of the system reaches gets a warning
///   (`unfed-consumer`), dead-letter flows followed; so does an rpc's server whose queue no
///   publisher or rpc but its own reaches (no other contract calls it);
/// - a publisher or rpc and a consumer or rpc server in different contracts whose schemas of
///   the message between them differ is an error (`schema-mismatch`);
/// - an rpc whose requests reach the server of an rpc of another contract (typically the
///   caller's team's copy of the rpc and the server's) is an error when the two differ in
///   their request, response or error schemas, or in their error codes (`rpc-mismatch`);
/// - an exchange or queue two contracts declare differently is an error
///   (`conflicting-declaration`), naming the fields and arguments that differ.
///
/// A single contract (one file, or a folder holding one) is checked exactly as
/// [`check_contract`] checks it. Returns [`Error::Io`] when a path cannot be read or a
/// folder holds no contract (no paths at all make an empty, valid system), and
/// [`Error::Invalid`] with every problem of every contract and
/// of the system when there is an error.
///
/// ```no_run
/// match warren_codegen::check_system(["contracts/"]) {
///     Ok(system) => {
///         eprint!("{}", system.warnings);
///         println!("{} contracts agree", system.contracts.len());
///     }
///     Err(warren_codegen::Error::Invalid(problems)) => eprint!("{problems}"),
///     Err(other) => eprintln!("{other}"),
/// }
/// ```
///
/// [`check_contract`]: crate::check_contract
pub fn check_system<P: Into<PathBuf>>(paths: impl IntoIterator<Item = P>) -> Result<System, Error> {
    check_system_in(paths, &ProjectRoot::Discover)
}

/// [`check_system`], each contract reading files only inside the folder `project` gives it
/// (see [`check_contract_in`](crate::check_contract_in)).
pub fn check_system_in<P: Into<PathBuf>>(
    paths: impl IntoIterator<Item = P>,
    project: &ProjectRoot,
) -> Result<System, Error> {
    let paths: Vec<PathBuf> = paths.into_iter().map(Into::into).collect();
    let found = discover::contracts(&paths)?;
    let scope = if found.len() == 1 {
        Scope::Alone
    } else {
        Scope::InSystem
    };
    let mut problems = Diagnostics::new();
    let mut members = Vec::new();
    let mut left_out = Vec::new();
    for path in found {
        let loaded = match load::load_from_disk(&path, project) {
            Ok(loaded) => loaded,
            Err(error) => match Error::from_load(error) {
                Error::Invalid(found) => {
                    problems.extend(found);
                    left_out.push(path);
                    continue;
                }
                other => return Err(other),
            },
        };
        match crate::check_in(&loaded, scope) {
            Ok(checked) => {
                problems.extend(checked.warnings.clone());
                members.push(Member { checked, loaded });
            }
            Err(Error::Invalid(found)) => {
                problems.extend(found);
                left_out.push(path);
            }
            Err(other) => return Err(other),
        }
    }
    if scope == Scope::InSystem {
        for member in &members {
            problems.add_source(member.loaded.path(), member.loaded.text.clone());
        }
        let union = union::Union::new(&members);
        rules::run(&union, &left_out, &mut problems);
        declarations::run(&union, &mut problems);
    }
    problems.sort();
    if problems.has_errors() {
        return Err(Error::Invalid(problems));
    }
    Ok(System {
        contracts: members.into_iter().map(|m| m.checked).collect(),
        warnings: problems,
    })
}
