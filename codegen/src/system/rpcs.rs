//! Both sides of an rpc: the caller's team and the server's team each keep a contract with
//! the rpc, and each generates its own side from its own copy. A request the server cannot
//! decode, a response the caller cannot decode or an error code one side does not know fails
//! the call at run time; here it fails the check.

use std::collections::BTreeMap;

use super::rules::{MAX_RELATED, more};
use super::schemas;
use super::union::{Id, Reader, Sender, Union, entry};
use crate::check::list;
use crate::contract::{Message, Rpc};
use crate::diagnostics::{Code, Diagnostic, Diagnostics};

/// An rpc of one contract whose requests reach a queue an rpc of another contract serves,
/// where the two disagree on the request, the response or the errors. One diagnostic per
/// pair of rpcs, however many ways round it is found (two copies of one rpc each call the
/// other's server).
///
/// A queue that several contracts' copies of an rpc serve (the server's team's and every
/// caller's) is compared with its first server of another contract only, as declarations are
/// compared with the first: agreement is transitive, so every disagreement still shows, once
/// per copy that drifted rather than once per pair of copies, and the cost grows with the
/// number of copies, not with its square.
pub(super) fn mismatch(union: &Union<'_>, out: &mut Diagnostics) {
    // Each pair of rpcs (in order) → the calls between them, first found first.
    let mut pairs: BTreeMap<_, Vec<Call<'_>>> = BTreeMap::new();
    for (caller_id, sender, reach) in &union.routes {
        let Sender::Rpc(caller) = sender else {
            continue;
        };
        // Only routes known to reach the queue count, as for publishers.
        for queue in &reach.queues {
            let readers = union.readers.get(queue.as_str()).into_iter().flatten();
            // One contract's rpcs: its own checks keep a queue to one server.
            let first = readers
                .filter(|(id, _)| id != caller_id)
                .find_map(|(id, reader)| {
                    let Reader::Server(server) = reader else {
                        return None;
                    };
                    Some((id, *server))
                });
            if let Some((server_id, server)) = first {
                let ends = [
                    (*caller_id, caller.name.as_str()),
                    (*server_id, server.name.as_str()),
                ];
                let pair = (ends[0].min(ends[1]), ends[0].max(ends[1]));
                pairs.entry(pair).or_default().push(Call {
                    union,
                    caller_id: *caller_id,
                    caller,
                    server_id: *server_id,
                    server,
                });
            }
        }
    }
    for calls in pairs.values() {
        // Found both ways round, the later contract's call is reported: its contract is the
        // one that differs from the first, as for declarations.
        let Some(call) = calls.last() else {
            continue;
        };
        let mutual = calls.len() > 1;
        if let Some(diagnostic) = call.diagnostic(mutual) {
            out.push(diagnostic);
        }
    }
}

/// An rpc (`caller`) whose requests reach another contract's rpc's queue (`server`).
struct Call<'a> {
    union: &'a Union<'a>,
    caller_id: Id,
    caller: &'a Rpc,
    server_id: Id,
    server: &'a Rpc,
}

/// One thing the two sides disagree on, for the diagnostic.
struct Disagreement {
    /// What differs, in words.
    what: String,
    /// The key of both rpcs' entries where it is declared: `request`, `response`, `errors`.
    key: &'static str,
}

impl Call<'_> {
    /// The error when the two sides disagree, `None` when they agree. `mutual`: the server's
    /// rpc calls the caller's server too.
    fn diagnostic(&self, mutual: bool) -> Option<Diagnostic> {
        let differ = self.disagreements();
        let first = differ.first()?;
        let union = self.union;
        let server_file = union.file(self.server_id).display().to_string();
        let (caller, server) = (&self.caller.name, &self.server.name);
        let shown: Vec<&str> = differ.iter().map(|d| d.what.as_str()).collect();
        let queue = &self.server.server.spec.queue;
        let own_queue = &self.caller.server.spec.queue;
        // Typically two copies of one rpc (the caller's team's and the server's) serving one
        // queue, each calling the other's server: neither is the caller alone. Else two rpcs
        // whose bindings cross, one way or both.
        let call = if own_queue == queue {
            format!(
                "rpc `{caller}` here and rpc `{server}` of `{server_file}` are two sides of one call (requests to queue `{queue}`)"
            )
        } else if mutual {
            format!(
                "rpc `{caller}` here and rpc `{server}` of `{server_file}` each send their requests to the other's server (queues `{own_queue}` and `{queue}`)"
            )
        } else {
            format!(
                "rpc `{caller}` sends its requests to queue `{queue}`, which rpc `{server}` of `{server_file}` serves"
            )
        };
        let mut diagnostic = Diagnostic::error(
            Code::RpcMismatch,
            union.file(self.caller_id),
            format!(
                "{call}, and they disagree (here vs there): {}",
                shown.join("; ")
            ),
        )
        .with_help("the caller's and the server's contracts must declare one rpc alike: the same request and response schemas (share the schema files) and the same `errors`, code for code, each with the same message type; evolve a schema compatibly and deploy the side that reads it first (the server for requests, the callers for responses and errors)")
        .at(union.place(self.caller_id, &entry("rpcs", caller).key(first.key)));
        let mut keys: Vec<&str> = differ.iter().map(|d| d.key).collect();
        keys.dedup();
        for key in keys {
            diagnostic = diagnostic.also_at(
                union.file(self.server_id),
                union.place(self.server_id, &entry("rpcs", server).key(key)),
                format!("rpc `{server}` declares its {key} here"),
            );
        }
        Some(diagnostic)
    }

    /// What the two sides disagree on: the request (as the caller sends it vs as the server
    /// expects it), the response (as the caller expects it vs as the server sends it), the
    /// error codes each declares alone, and the message of each code both declare.
    fn disagreements(&self) -> Vec<Disagreement> {
        let mut out = Vec::new();
        let (caller, server) = (self.caller, self.server);
        let mut message = |key: &'static str, what: String, here: &str, there: &str| {
            let (Some(here), Some(there)) = (
                self.message(self.caller_id, here),
                self.message(self.server_id, there),
            ) else {
                return;
            };
            let parts = schemas::differences(here, there);
            if parts.is_empty() {
                return;
            }
            let names = if here.name == there.name {
                format!("`{}`", here.name)
            } else {
                format!("`{}` vs `{}`", here.name, there.name)
            };
            out.push(Disagreement {
                what: format!("{what} ({names}) differs in its {}", parts.join(" and ")),
                key,
            });
        };
        message(
            "request",
            "the request".to_owned(),
            &caller.request,
            &server.request,
        );
        message(
            "response",
            "the response".to_owned(),
            &caller.response,
            &server.response,
        );
        for (code, here) in &caller.errors {
            if let Some(there) = server.errors.get(code) {
                message("errors", format!("error `{code}`"), here, there);
            }
        }
        for (side, codes) in [
            ("here", alone(caller, server)),
            ("there", alone(server, caller)),
        ] {
            if !codes.is_empty() {
                out.push(Disagreement {
                    what: format!(
                        "error code{} {}{} declared only {side}",
                        if codes.len() == 1 { "" } else { "s" },
                        list(codes.iter().copied().take(MAX_RELATED)),
                        more(codes.len())
                    ),
                    key: "errors",
                });
            }
        }
        out
    }

    /// Message `name` of contract `id` (its own or imported).
    fn message(&self, id: Id, name: &str) -> Option<&Message> {
        self.union.members[id].checked.contract.messages.get(name)
    }
}

/// The error codes `one` declares and `other` does not.
fn alone<'a>(one: &'a Rpc, other: &Rpc) -> Vec<&'a str> {
    let codes = one.errors.keys().filter(|c| !other.errors.contains_key(*c));
    codes.map(String::as_str).collect()
}
