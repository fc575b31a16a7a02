//! The contract's diagram for the console: the graph `warren diagram --format dot` draws,
//! laid out by Graphviz (`dot -Tsvg`) once at start, with which node is which queue so that
//! the page can write each queue's live numbers on it.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use warren_codegen::contract::Contract;
use warren_runtime::Topology;
use warren_tools::export::graph::{EdgeStyle, NodeKind, graph};

/// The diagram of `contract` (deployed as `topology`): its SVG, its queue nodes' ids with the
/// queue each stands for (as the broker names it), and its retry notes' ids with the queue
/// whose schedule each draws; or why there is none (no Graphviz).
pub(super) fn diagram(contract: &Contract, topology: &Topology) -> Value {
    let graph = graph(contract);
    let queues: BTreeMap<String, String> = graph
        .nodes
        .iter()
        .filter(|node| node.kind == NodeKind::Queue)
        .filter_map(|node| {
            let name = node.lines.first()?;
            Some((node.id.clone(), topology.qualified(name)))
        })
        .collect();
    // A retry schedule is one note, tied to its queue by a note edge: the page writes there
    // what the queue's wait queues hold.
    let retry_notes: BTreeMap<String, String> = graph
        .edges
        .iter()
        .filter(|edge| edge.style == EdgeStyle::Note)
        .filter_map(|edge| Some((edge.to.clone(), queues.get(&edge.from)?.clone())))
        .collect();
    match render(&warren_tools::export::dot::dot(contract)) {
        Ok(svg) => json!({ "svg": svg, "queues": queues, "retry_notes": retry_notes }),
        Err(reason) => json!({ "missing": reason }),
    }
}

/// `dot` as SVG, by Graphviz.
fn render(dot: &str) -> Result<String, String> {
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            format!(
                "Graphviz `dot` is needed to draw the diagram ({e}): install the graphviz package"
            )
        })?;
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(dot.as_bytes())
        .map_err(|e| e.to_string())?;
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(format!("Graphviz `dot` failed ({})", output.status));
    }
    String::from_utf8(output.stdout).map_err(|e| e.to_string())
}
