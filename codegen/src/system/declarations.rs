//! Exchanges and queues that several contracts declare: the broker keeps the first
//! declaration and refuses (`PRECONDITION_FAILED`) any later one that differs, so whichever
//! service deploys second fails to start.
//!
//! Declarations are compared as the model has them, defaults applied, so `durable: true`
//! written out and left to its default are the same declaration.

use super::rules::MAX_RELATED;
use super::union::{Id, Union, entry};
use crate::contract::{ArgValue, Arguments, Exchange, Queue, Retry};
use crate::diagnostics::{Code, Diagnostic, Diagnostics};

/// Every exchange and queue declared by more than one contract, each later declaration
/// compared with the first.
pub(super) fn run(union: &Union<'_>, out: &mut Diagnostics) {
    for (name, all) in &union.exchanges {
        compare(
            union,
            "exchange",
            "exchanges",
            name,
            all,
            exchange_differences,
            out,
        );
    }
    for (name, all) in &union.queues {
        compare(union, "queue", "queues", name, all, queue_differences, out);
    }
}

/// Reports each declaration of `all` that differs from the first.
fn compare<T>(
    union: &Union<'_>,
    noun: &str,
    section: &str,
    name: &str,
    all: &[(Id, &T)],
    differences: fn(&T, &T) -> Vec<String>,
    out: &mut Diagnostics,
) {
    let Some(((first_id, first), rest)) = all.split_first() else {
        return;
    };
    let first_file = union.file(*first_id).display().to_string();
    for (id, declared) in rest {
        let differ = differences(declared, first);
        if differ.is_empty() {
            continue;
        }
        let shown: Vec<&str> = differ
            .iter()
            .map(String::as_str)
            .take(MAX_RELATED * 2)
            .collect();
        out.push(
            Diagnostic::error(
                Code::ConflictingDeclaration,
                union.file(*id),
                format!(
                    "{noun} `{name}` is declared here differently from `{first_file}` (here vs there): {}",
                    shown.join("; ")
                ),
            )
            .with_help(format!(
                "the broker keeps the first declaration and refuses a different one, so the service deployed second fails to start; declare `{name}` alike in both contracts (once contracts can import each other, declare it in one and import it)"
            ))
            .at(union.place(*id, &entry(section, name)))
            .also_at(
                union.file(*first_id),
                union.place(*first_id, &entry(section, name)),
                format!("{noun} `{name}` is declared here first"),
            ),
        );
    }
}

/// What differs between two declarations of an exchange, `here` vs `there`.
fn exchange_differences(here: &Exchange, there: &Exchange) -> Vec<String> {
    let mut out = Vec::new();
    field(&mut out, "type", here.kind.as_str(), there.kind.as_str());
    field(&mut out, "durable", here.durable, there.durable);
    field(&mut out, "auto_delete", here.auto_delete, there.auto_delete);
    field(&mut out, "internal", here.internal, there.internal);
    arguments(
        &mut out,
        &here.declare_arguments(),
        &there.declare_arguments(),
    );
    out
}

/// What differs between two declarations of a queue, `here` vs `there`: what the broker is
/// told, then what warren does with it (retries, poison messages), which two services
/// reading one queue must agree on too.
fn queue_differences(here: &Queue, there: &Queue) -> Vec<String> {
    let mut out = Vec::new();
    field(&mut out, "durable", here.durable, there.durable);
    field(&mut out, "exclusive", here.exclusive, there.exclusive);
    field(&mut out, "auto_delete", here.auto_delete, there.auto_delete);
    arguments(
        &mut out,
        &here.declare_arguments(),
        &there.declare_arguments(),
    );
    if here.retry != there.retry {
        let (a, b) = (retry(&here.retry), retry(&there.retry));
        if a == b {
            out.push(format!("retry {a}, with different settings"));
        } else {
            out.push(format!("retry {a} vs {b}"));
        }
    }
    field(
        &mut out,
        "on_poison",
        here.on_poison.as_str(),
        there.on_poison.as_str(),
    );
    out
}

/// `name a vs b` when the values differ.
fn field<T: PartialEq + std::fmt::Display>(out: &mut Vec<String>, name: &str, here: T, there: T) {
    if here != there {
        out.push(format!("{name} {here} vs {there}"));
    }
}

/// Each argument whose value differs, or that one side sets and the other not.
fn arguments(out: &mut Vec<String>, here: &Arguments, there: &Arguments) {
    let keys: std::collections::BTreeSet<&String> = here.keys().chain(there.keys()).collect();
    for key in keys {
        let (a, b) = (here.get(key), there.get(key));
        if a != b {
            out.push(format!("{key} {} vs {}", value(a), value(b)));
        }
    }
}

fn value(value: Option<&ArgValue>) -> String {
    match value {
        None => "unset".to_owned(),
        Some(ArgValue::Bool(b)) => b.to_string(),
        Some(ArgValue::Int(n)) => n.to_string(),
        Some(ArgValue::Float(x)) => x.to_string(),
        Some(ArgValue::String(s)) => s.clone(),
    }
}

/// A retry policy in a few words.
fn retry(retry: &Retry) -> String {
    match retry {
        Retry::None => "none".to_owned(),
        Retry::ImmediateRequeue { max_retries, .. } => {
            format!("immediate-requeue ({max_retries} retries)")
        }
        Retry::TtlBackoff(backoff) => format!(
            "ttl-backoff ({} retries, {} wait queues)",
            backoff.max_retries,
            backoff.tiers.len()
        ),
        Retry::QuorumNative => "quorum-native".to_owned(),
    }
}
