//! A plan as people read it (one line per queue or exchange, what happens to it, and why
//! when it is more than a create) and as tools read it (JSON).

use std::fmt;

use serde_json::{Value, json};

use super::migrate::deleted_unguarded;
use super::{Action, Item, Plan};
use crate::model::{ArgValue, holding_queue_name};

impl Action {
    /// The action's name, as the plan's table and JSON show it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Unchanged => "unchanged",
            Self::Migrate { .. } => "migrate",
            Self::Drain { .. } => "drain",
            Self::Gone => "gone",
            Self::Left => "left",
            Self::Blocked { .. } => "blocked",
        }
    }
}

/// What a migrated queue's lines say when it is deleted without the broker's `if-empty`.
const UNGUARDED: &str = "! stop whatever publishes to it by name (the default exchange: RPC \
     calls, `warren dlq redrive`, another stack) first: RabbitMQ 3.10 cannot delete a quorum \
     queue only if empty, and a message published to it while it is deleted is lost";

/// Whether `item` is a queue the plan deletes without the broker's `if-empty` guard, and
/// that is published to by name: a migrated queue of its own (not a wait queue, which only
/// the stopped workers publish to), not classic.
fn unguarded(plan: &Plan, item: &Item) -> bool {
    matches!(item.action, Action::Migrate { .. })
        && item.wait_queue_of.is_none()
        && deleted_unguarded(plan, &item.name)
}

/// What an item's line says after its name.
fn detail(plan: &Plan, item: &Item) -> Vec<String> {
    let counts = item
        .state
        .map(|s| format!("{} message(s), {} consumer(s)", s.messages, s.consumers));
    let mut lines = Vec::new();
    if let Some(owner) = &item.wait_queue_of {
        lines.push(format!("wait queue of `{owner}`"));
    }
    match &item.action {
        Action::Create | Action::Unchanged | Action::Gone => {}
        Action::Migrate {
            detail,
            resume,
            argument,
            foreign_bindings,
            dead_lettering,
        } => {
            if *resume {
                lines.push(format!("RESUMING: {detail}"));
            } else {
                let what = argument
                    .as_deref()
                    .map_or("its arguments".to_owned(), |a| format!("`{a}`"));
                lines.push(format!(
                    "the broker refuses to change {what} in place: {detail}"
                ));
            }
            if item.wait_queue_of.is_none() {
                lines.push(format!(
                    "→ its messages and its wait queues' move to `{}`, it is declared again, \
                     they move back",
                    holding_queue_name(&item.name)
                ));
            } else {
                lines.push(
                    "→ emptied with its queue (or into it), deleted, declared again".to_owned(),
                );
            }
            for binding in foreign_bindings {
                lines.push(format!(
                    "bound from `{}` outside the contract ({}): moved with it and bound again",
                    binding.exchange,
                    binding_text(binding)
                ));
            }
            lines.extend(dead_lettering.iter().cloned());
            if unguarded(plan, item) {
                lines.push(UNGUARDED.to_owned());
            }
        }
        Action::Drain { into } => lines.push(format!(
            "no longer in the contract → its messages move to `{into}` now (their retry comes \
             early), then it is deleted"
        )),
        Action::Left => lines.push(
            "no longer in the contract → left as it is (warren never deletes a contract's \
             queue); empty and delete it yourself"
                .to_owned(),
        ),
        Action::Blocked { reason } => lines.push(reason.clone()),
    }
    if let Some(counts) = counts {
        lines.insert(0, counts);
    }
    lines
}

impl fmt::Display for Plan {
    /// The plan as a table: one line per queue or exchange, with its details indented below,
    /// and a summary line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .items
            .iter()
            .map(|item| item.name.chars().count())
            .max()
            .unwrap_or(0);
        for item in &self.items {
            let action = match item.action {
                Action::Migrate { .. } | Action::Blocked { .. } | Action::Drain { .. } => {
                    item.action.as_str().to_uppercase()
                }
                _ => item.action.as_str().to_owned(),
            };
            let mut details = detail(self, item).into_iter();
            let first = details.next().unwrap_or_default();
            writeln!(
                f,
                "{action:<9}  {:<8}  {:<width$}  {first}",
                item.kind.to_string(),
                item.name,
            )?;
            for line in details {
                writeln!(f, "{:<9}  {:<8}  {:<width$}  {line}", "", "", "")?;
            }
        }
        let count = |name: &str| {
            self.items
                .iter()
                .filter(|item| item.action.as_str() == name)
                .count()
        };
        writeln!(
            f,
            "\n{} to create, {} unchanged, {} to migrate, {} to drain and delete, {} left \
             in place, {} blocked",
            count("create"),
            count("unchanged"),
            count("migrate"),
            count("drain"),
            count("left"),
            count("blocked"),
        )
    }
}

impl Plan {
    /// The plan as JSON, for tools: `{blocked, noop, items: [{kind, name, action,
    /// wait_queue_of, messages, consumers, argument, detail, into, resume, foreign_bindings:
    /// [{exchange, binding}], dead_lettering: [line], stop_publishers_by_name}]}` (fields
    /// that do not apply are `null`, lists empty; `stop_publishers_by_name` is true for a
    /// queue deleted without the broker's `if-empty` guard).
    pub fn json(&self) -> Value {
        let items: Vec<Value> = self
            .items
            .iter()
            .map(|item| {
                let (argument, detail, into, resume) = match &item.action {
                    Action::Migrate {
                        argument,
                        detail,
                        resume,
                        ..
                    } => (argument.clone(), Some(detail.clone()), None, Some(*resume)),
                    Action::Blocked { reason } => (None, Some(reason.clone()), None, None),
                    Action::Drain { into } => (None, None, Some(into.clone()), None),
                    _ => (None, None, None, None),
                };
                let (foreign, dead_lettering) = match &item.action {
                    Action::Migrate {
                        foreign_bindings,
                        dead_lettering,
                        ..
                    } => (
                        foreign_bindings
                            .iter()
                            .map(|b| json!({"exchange": b.exchange, "binding": binding_text(b)}))
                            .collect(),
                        dead_lettering.clone(),
                    ),
                    _ => (Vec::new(), Vec::new()),
                };
                json!({
                    "kind": item.kind.to_string(),
                    "name": item.name,
                    "action": item.action.as_str(),
                    "wait_queue_of": item.wait_queue_of,
                    "messages": item.state.map(|s| s.messages),
                    "consumers": item.state.map(|s| s.consumers),
                    "argument": argument,
                    "detail": detail,
                    "into": into,
                    "resume": resume,
                    "foreign_bindings": foreign,
                    "dead_lettering": dead_lettering,
                    "stop_publishers_by_name": unguarded(self, item),
                })
            })
            .collect();
        json!({
            "noop": self.is_noop(),
            "blocked": !self.blocked().is_empty(),
            "items": items,
        })
    }
}

/// A binding's key and arguments, as a plan shows them.
fn binding_text(binding: &crate::model::Binding) -> String {
    let mut text = format!("key `{}`", binding.routing_key);
    for (key, value) in &binding.arguments {
        let value = match value {
            ArgValue::Bool(b) => b.to_string(),
            ArgValue::Int(i) => i.to_string(),
            ArgValue::Float(f) => f.to_string(),
            ArgValue::String(s) => format!("`{s}`"),
        };
        text.push_str(&format!(", {key} = {value}"));
    }
    text
}
