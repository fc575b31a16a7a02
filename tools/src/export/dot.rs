//! The topology [`graph`](super::graph) as a Graphviz DOT digraph (`dot -Tsvg`).
//!
//! Node IDs are the graph's generated ones, quoted. Labels are quoted strings: hidden
//! characters are made visible first (a newline shows as `\n`), then `\`, `"` and `&` are
//! escaped, so a name can neither end the string, start an escape sequence Graphviz would
//! expand (`\N`, `\l`), nor an HTML entity.

use std::fmt::Write as _;

use warren_codegen::contract::Contract;
use warren_codegen::diagnostics::escape;

use super::graph::{EdgeStyle, NodeKind, graph};

/// The Graphviz DOT digraph of `contract`'s topology.
pub fn dot(contract: &Contract) -> String {
    let graph = graph(contract);
    let mut out = String::from(
        "digraph warren {\n    rankdir=LR;\n    node [fontname=\"Helvetica\", fontsize=11];\n    edge [fontname=\"Helvetica\", fontsize=10];\n",
    );
    for node in &graph.nodes {
        let label = node
            .lines
            .iter()
            .map(|line| text(line))
            .collect::<Vec<_>>()
            .join("\\n");
        let shape = match node.kind {
            NodeKind::Publisher => "shape=parallelogram",
            NodeKind::Exchange => "shape=hexagon",
            NodeKind::Queue => "shape=cylinder",
            NodeKind::Consumer => "shape=box, style=rounded",
            NodeKind::Retry => "shape=note, style=filled, fillcolor=\"#fff8e1\"",
        };
        let external = if node.external { ", style=dashed" } else { "" };
        let _ = writeln!(
            out,
            "    \"{}\" [{shape}{external}, label=\"{label}\"];",
            node.id
        );
    }
    for edge in &graph.edges {
        let mut attributes = Vec::new();
        if let Some(label) = &edge.label {
            attributes.push(format!("label=\"{}\"", text(label)));
        }
        match edge.style {
            EdgeStyle::Flow => {}
            EdgeStyle::DeadLetter => attributes.push("style=dashed".to_owned()),
            EdgeStyle::Note => {
                attributes.push("style=dotted".to_owned());
                attributes.push("arrowhead=none".to_owned());
            }
        }
        let attributes = if attributes.is_empty() {
            String::new()
        } else {
            format!(" [{}]", attributes.join(", "))
        };
        let _ = writeln!(out, "    \"{}\" -> \"{}\"{attributes};", edge.from, edge.to);
    }
    out.push_str("}\n");
    out
}

/// `text` for inside a quoted DOT string.
fn text(text: &str) -> String {
    let visible = escape(text);
    let mut out = String::with_capacity(visible.len());
    for c in visible.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '&' => out.push_str("&amp;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::text;

    #[test]
    fn names_cannot_break_out_of_a_string() {
        assert_eq!(text("a\"]; b -> c"), "a\\\"]; b -> c");
        assert_eq!(text("x\ny \\N"), "x\\\\ny \\\\N");
        assert_eq!(text("&lt;"), "&amp;lt;");
    }
}
