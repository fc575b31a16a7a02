//! Stage 3: every contract check, all collected into one [`Diagnostics`].
//!
//! Each check reads the typed contract and reports at the YAML path of the node at fault,
//! with what is wrong and how to fix it. Checks never stop at the first problem and never
//! panic: a reference to something undeclared is reported once, and later checks simply skip
//! what they cannot follow.

mod rules;
mod schemas;

pub(crate) use schemas::{bundle_schemas, schema_roots};

use crate::diagnostics::Diagnostics;
use crate::imports::Imports;
use crate::load::LoadedContract;

/// Which checks run: a contract alone, or one of several checked as a system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every rule, as `warren validate warren.yaml` runs them.
    Alone,
    /// Every rule but whether a publisher's messages reach a queue: another contract of the
    /// system may bind that queue, so the system checks decide (`crate::system`).
    InSystem,
}

/// Runs every check of `scope` on `contract`, which uses `imports`, adding problems to `out`.
pub(crate) fn run(
    contract: &LoadedContract,
    imports: &Imports,
    scope: Scope,
    out: &mut Diagnostics,
) {
    let mut checker = rules::Checker::new(contract, imports, scope, out);
    checker.duplicates();
    checker.info();
    checker.names();
    checker.references();
    checker.exchanges();
    checker.queues();
    checker.bindings();
    checker.publishers();
    checker.consumers();
    checker.rpcs();
    checker.dead_letters();
    checker.broker_drops();
    checker.identifiers();
}

/// The closest of `candidates` to `name`, when it is close enough to be a likely typo.
pub(crate) fn suggest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a String>,
) -> Option<&'a str> {
    let length = name.chars().count();
    let limit = (length / 3).max(2);
    candidates
        .into_iter()
        // The distance is at least the difference in length: a cheap test first, so a
        // misspelt name among thousands costs one count per name, not one table each.
        .filter(|c| c.chars().count().abs_diff(length) <= limit)
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)))
        .map(|(_, c)| c.as_str())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb {
                previous
            } else {
                1 + previous.min(row[j]).min(row[j + 1])
            };
            previous = current;
        }
    }
    row[b.len()]
}

/// Lists names as `` `a`, `b` `` for messages.
pub(crate) fn list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = names.into_iter().map(|n| format!("`{n}`")).collect();
    if quoted.is_empty() {
        "none".to_owned()
    } else {
        quoted.join(", ")
    }
}

/// A name as shown in a message: [hidden](crate::diagnostics::is_hidden) characters escaped,
/// long names shortened.
pub(crate) fn shown(name: &str) -> String {
    const MAX_CHARS: usize = 48;
    let escaped = crate::diagnostics::escape(name).into_owned();
    if escaped.chars().count() <= MAX_CHARS {
        escaped
    } else {
        let head: String = escaped.chars().take(MAX_CHARS - 1).collect();
        format!("{head}…")
    }
}

#[cfg(test)]
mod tests {
    use super::suggest;

    #[test]
    fn suggests_close_names_only() {
        let names = ["orders".to_owned(), "payments".to_owned()];
        assert_eq!(suggest("order", &names), Some("orders"));
        assert_eq!(suggest("ordres", &names), Some("orders"));
        assert_eq!(suggest("shipping", &names), None);
    }
}
