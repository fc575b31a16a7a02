//! The topology [`graph`](super::graph) as a Mermaid flowchart (`flowchart LR`), which
//! GitHub renders in Markdown.
//!
//! Node IDs are the graph's generated ones. Every label is quoted, and every ASCII character
//! of a name outside a small safe set is written as a Mermaid entity code (`#34;`), so no name
//! can close a label, start a link, comment or directive, or inject HTML; hidden characters
//! are made visible first (a newline shows as `\n`).

use std::fmt::Write as _;

use warren_codegen::contract::Contract;
use warren_codegen::diagnostics::escape;

use super::graph::{EdgeStyle, NodeKind, graph};

/// The Mermaid flowchart of `contract`'s topology.
pub fn mermaid(contract: &Contract) -> String {
    let graph = graph(contract);
    let mut out = String::from("flowchart LR\n");
    for node in &graph.nodes {
        let label = node
            .lines
            .iter()
            .map(|line| text(line))
            .collect::<Vec<_>>()
            .join("<br/>");
        let (open, close) = match node.kind {
            NodeKind::Publisher => ("[/", "/]"),
            NodeKind::Exchange => ("{{", "}}"),
            NodeKind::Queue => ("[(", ")]"),
            NodeKind::Consumer => ("([", "])"),
            NodeKind::Retry => (">", "]"),
        };
        let _ = writeln!(out, "    {}{open}\"{label}\"{close}", node.id);
    }
    for edge in &graph.edges {
        let arrow = match edge.style {
            EdgeStyle::Flow => "-->",
            EdgeStyle::DeadLetter => "-.->",
            EdgeStyle::Note => "-.-",
        };
        match edge.label.as_deref().filter(|label| !label.is_empty()) {
            Some(label) => {
                let _ = writeln!(
                    out,
                    "    {} {arrow}|\"{}\"| {}",
                    edge.from,
                    text(label),
                    edge.to
                );
            }
            None => {
                let _ = writeln!(out, "    {} {arrow} {}", edge.from, edge.to);
            }
        }
    }
    let external: Vec<&str> = graph
        .nodes
        .iter()
        .filter(|n| n.external)
        .map(|n| n.id.as_str())
        .collect();
    let retry: Vec<&str> = graph
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Retry)
        .map(|n| n.id.as_str())
        .collect();
    if !retry.is_empty() {
        out.push_str("    classDef retry fill:#fff8e1,stroke:#c9a227\n");
        let _ = writeln!(out, "    class {} retry", retry.join(","));
    }
    if !external.is_empty() {
        out.push_str("    classDef external stroke-dasharray:5 5\n");
        let _ = writeln!(out, "    class {} external", external.join(","));
    }
    out
}

/// `text` for inside a quoted Mermaid label: hidden characters (controls, bidi overrides…)
/// made visible, then every ASCII character but letters, digits and a few harmless
/// punctuation marks written as an entity code. Other characters (`é`, `→`) mean nothing to
/// Mermaid and stay as written, so labels read well in the source too.
fn text(text: &str) -> String {
    let visible = escape(text);
    let mut out = String::with_capacity(visible.len());
    for c in visible.chars() {
        if c.is_ascii_alphanumeric()
            || !c.is_ascii()
            || matches!(
                c,
                ' ' | '.' | ',' | ':' | '-' | '_' | '*' | '/' | '=' | '(' | ')'
            )
        {
            out.push(c);
        } else {
            let _ = write!(out, "#{};", u32::from(c));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::text;

    #[test]
    fn names_cannot_break_out_of_a_label() {
        assert_eq!(text("a\"]-->b"), "a#34;#93;--#62;b");
        assert_eq!(text("x\n%%{init}"), "x#92;n#37;#37;#123;init#125;");
        assert_eq!(text("<b>#quot;</b>"), "#60;b#62;#35;quot#59;#60;/b#62;");
        assert_eq!(text("café → ×2"), "café → ×2");
        assert_eq!(text("\u{202e}x"), "#92;u#123;202e#125;x");
    }
}
