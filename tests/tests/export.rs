//! `warren asyncapi` and `warren diagram`: the AsyncAPI export of every contract fixture is
//! valid against the official AsyncAPI 3.0.0 schema (vendored in `tests/asyncapi/`, no
//! network) and is read by the AsyncAPI tools themselves (the official parser and modelina,
//! `tests/js/`), the diagrams of the example are pinned, every fixture's DOT renders with
//! Graphviz, and hostile names stay inside their labels.

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::every_contract;
use warren_codegen::check_contract;
use warren_codegen::contract::Contract;
use warren_tools::export::asyncapi::{Info, document};
use warren_tools::export::{dot::dot, mermaid::mermaid};

fn contract(path: &str) -> Contract {
    match check_contract(path) {
        Ok(checked) => checked.contract,
        Err(error) => panic!("{path} should be valid:\n{error}"),
    }
}

/// The document of `contract`, its `info` the contract's own (`test` when it has no title).
fn asyncapi(contract: &Contract) -> serde_json::Value {
    document(contract, &Info::of(contract, "test"))
}

fn asyncapi_validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string("asyncapi/asyncapi-3.0.0.schema.json")
        .expect("the vendored AsyncAPI schema is readable");
    let schema: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
    // Without the `resolve-http` feature a remote `$ref` fails here: the vendored schema
    // must be self-contained, and nothing is downloaded.
    jsonschema::draft7::new(&schema).expect("the AsyncAPI schema compiles offline")
}

#[test]
fn every_asyncapi_export_is_valid_asyncapi_3() {
    let validator = asyncapi_validator();
    for path in every_contract() {
        let document = asyncapi(&contract(&path.to_string_lossy()));
        let errors: Vec<String> = validator
            .iter_errors(&document)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .take(10)
            .collect();
        assert!(
            errors.is_empty(),
            "{}:\n{}",
            path.display(),
            errors.join("\n")
        );
        assert_eq!(document["asyncapi"], "3.0.0");
    }
}

/// What `tests/js/asyncapi-check.mjs` (the official parser, then modelina) made of each
/// document, in one run of Node.js; fails (never skips) when Node.js or the packages are
/// missing, and when any document is one the tools cannot use.
fn read_by_the_asyncapi_tools(documents: &[serde_json::Value]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let files: Vec<PathBuf> = documents
        .iter()
        .enumerate()
        .map(|(i, document)| {
            let file = dir.path().join(format!("asyncapi-{i}.json"));
            std::fs::write(&file, document.to_string()).expect("the document is written");
            file
        })
        .collect();
    let output = match Command::new("node")
        .arg("js/asyncapi-check.mjs")
        .args(&files)
        .output()
    {
        Ok(output) => output,
        Err(e) => panic!(
            "cannot run Node.js `node` ({e}): install Debian's `nodejs` and `npm`, then \
             `npm ci --prefix tests/js` (build-support/scripts/test.sh does both)"
        ),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("ERR_MODULE_NOT_FOUND"),
        "the AsyncAPI tools are not installed: run `npm ci --prefix tests/js` \
         (build-support/scripts/test.sh does)\n{stderr}"
    );
    let reports: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("no report from the AsyncAPI tools ({e}):\n{stderr}"));
    let unusable: Vec<&serde_json::Value> =
        reports.iter().filter(|r| r["usable"] != true).collect();
    assert!(
        output.status.success() && unusable.is_empty(),
        "the AsyncAPI tools cannot use these documents:\n{unusable:#?}\n{stderr}"
    );
    reports
}

/// The official parser reads every export without an error, and sees each message's payload
/// as the contract's schema has it (its properties and which are required: every `$ref`
/// resolved in the document); modelina generates TypeScript models from it.
#[test]
fn every_asyncapi_export_is_read_by_the_asyncapi_tools() {
    let paths = every_contract();
    let contracts: Vec<Contract> = paths
        .iter()
        .map(|p| contract(&p.to_string_lossy()))
        .collect();
    let documents: Vec<serde_json::Value> = contracts.iter().map(asyncapi).collect();
    let reports = read_by_the_asyncapi_tools(&documents);
    for ((path, contract), (document, report)) in paths
        .iter()
        .zip(&contracts)
        .zip(documents.iter().zip(&reports))
    {
        let seen = report["messages"].as_array().expect("messages are listed");
        assert_eq!(seen.len(), contract.messages.len(), "{}", path.display());
        let ids = document["components"]["messages"]
            .as_object()
            .expect("messages");
        for (id, message) in ids {
            let name = message["name"].as_str().expect("a message's name");
            let schema = &contract.messages[name].payload;
            let seen = seen
                .iter()
                .find(|m| m["id"] == id.as_str())
                .unwrap_or_else(|| panic!("{}: message {name} not seen", path.display()));
            let definition = &contract.schemas.definitions[&schema.type_name];
            let sorted = |names: Vec<&str>| {
                let mut names = names;
                names.sort_unstable();
                serde_json::json!(names)
            };
            let properties = definition["properties"]
                .as_object()
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            let required = definition["required"]
                .as_array()
                .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
                .unwrap_or_default();
            let at = format!("{}: {name}", path.display());
            assert_eq!(seen["properties"], sorted(properties), "{at}");
            assert_eq!(seen["required"], sorted(required), "{at}");
        }
        let models = report["models"].as_object().expect("models are listed");
        assert!(!models.is_empty(), "{}: no models", path.display());
    }
}

/// The validator does reject what AsyncAPI 3.0 does not allow, so the test above proves
/// something.
#[test]
fn the_vendored_schema_rejects_a_broken_document() {
    let validator = asyncapi_validator();
    let mut document = asyncapi(&contract("../examples/orders/warren.yaml"));
    document["channels"]["queue.orders.billing"]["bindings"]["amqp"]["is"] =
        serde_json::json!("stream");
    assert!(!validator.is_valid(&document));
    let mut document =
        serde_json::json!({ "asyncapi": "2.6.0", "info": { "title": "t", "version": "1" } });
    assert!(!validator.is_valid(&document));
    document["asyncapi"] = serde_json::json!("3.0.0");
    assert!(validator.is_valid(&document));
}

#[test]
fn asyncapi_snapshots() {
    for (name, path) in [
        ("orders", "../examples/orders/warren.yaml"),
        ("routing", "fixtures/contracts/routing/warren.yaml"),
        ("retry_modes", "fixtures/contracts/retry-modes/warren.yaml"),
        (
            "hostile_names",
            "fixtures/contracts/hostile-names/warren.yaml",
        ),
    ] {
        let document = asyncapi(&contract(path));
        let again = asyncapi(&contract(path));
        assert_eq!(
            serde_json::to_string(&document).ok(),
            serde_json::to_string(&again).ok(),
            "deterministic"
        );
        insta::assert_json_snapshot!(format!("asyncapi_{name}"), document);
    }
}

#[test]
fn diagram_snapshots() {
    for (name, path) in [
        ("orders", "../examples/orders/warren.yaml"),
        ("routing", "fixtures/contracts/routing/warren.yaml"),
        (
            "hostile_names",
            "fixtures/contracts/hostile-names/warren.yaml",
        ),
    ] {
        let contract = contract(path);
        insta::assert_snapshot!(format!("mermaid_{name}"), mermaid(&contract));
        insta::assert_snapshot!(format!("dot_{name}"), dot(&contract));
    }
}

/// Renders DOT with Graphviz; fails (never skips) when `dot` is missing.
fn render_svg(source: &str, what: &Path) -> String {
    let mut child = match Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => panic!(
            "cannot run Graphviz `dot` ({e}): install Debian's `graphviz` package \
             (`sudo apt-get install -y graphviz`; build-support/scripts/test.sh does it)"
        ),
    };
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(source.as_bytes())
        .expect("dot reads its input");
    let output = child.wait_with_output().expect("dot runs");
    assert!(
        output.status.success() && output.stderr.is_empty(),
        "dot -Tsvg failed on {}:\n{}\n{source}",
        what.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn every_dot_diagram_renders_with_graphviz() {
    for path in every_contract() {
        let contract = contract(&path.to_string_lossy());
        let svg = render_svg(&dot(&contract), &path);
        assert!(svg.contains("<svg"), "{}", path.display());
        // Mermaid refuses an empty edge label (a publisher with no routing key).
        let text = mermaid(&contract);
        assert!(!text.contains("|\"\"|"), "{}:\n{text}", path.display());
    }
}

/// Hostile names show as written (hidden characters made visible) and never change the
/// diagram's structure.
#[test]
fn hostile_names_stay_inside_their_labels() {
    let path = "fixtures/contracts/hostile-names/warren.yaml";
    let contract = contract(path);

    let svg = render_svg(&dot(&contract), Path::new(path));
    // Graphviz drew the names as text: the quote, backslash and newline included.
    assert!(svg.contains(r"ev&quot;ents */ \ ${x}"), "{svg}");
    assert!(svg.contains(r"dlx\nline"), "{svg}");
    assert!(
        svg.contains("&#39;); drop") || svg.contains("'); drop"),
        "{svg}"
    );
    // One node per entity, one edge per flow: nothing a name injected.
    let graph = warren_tools::export::graph::graph(&contract);
    assert_eq!(svg.matches("class=\"node\"").count(), graph.nodes.len());
    assert_eq!(svg.matches("class=\"edge\"").count(), graph.edges.len());

    // Mermaid: each line is a generated ID, then a shape or an arrow, with every quoted
    // label made of safe characters and entity codes only.
    let text = mermaid(&contract);
    for line in text.lines().skip(1) {
        let line = line.trim_start();
        let id: String = line
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        assert!(
            line.starts_with("classDef ")
                || line.starts_with("class ")
                || (id.len() >= 2 && id[1..].chars().all(|c| c.is_ascii_digit())),
            "{line}"
        );
        for (i, part) in line.split('"').enumerate() {
            if i % 2 == 1 {
                assert!(
                    // Beyond ASCII only what `escape` leaves: no hidden character.
                    part.chars().all(|c| c.is_ascii_alphanumeric()
                        || (!c.is_ascii() && !c.is_control())
                        || " .,:-_*/=()#;<>".contains(c)),
                    "unsafe label text `{part}` in {line}"
                );
                assert!(!part.replace("<br/>", "").contains(['<', '>']), "{line}");
            }
        }
        assert_eq!(line.matches('"').count() % 2, 0, "{line}");
    }
    assert!(
        text.contains("ev#34;ents */ #92; #36;#123;x#125;"),
        "{text}"
    );
    assert!(text.contains("dlx#92;nline"), "{text}");
}

/// An exchange the contract names but does not declare (what an imported exchange will be)
/// is exported and drawn as external, by every output alike.
#[test]
fn an_exchange_declared_elsewhere_is_marked_external() {
    let mut contract = contract("../examples/orders/warren.yaml");
    contract
        .topology
        .exchanges
        .retain(|e| e.name != "orders.dlx");

    let document = asyncapi(&contract);
    let channel = &document["channels"]["exchange.orders.dlx"];
    assert_eq!(channel["x-warren-external"], true, "{channel}");
    assert!(
        channel["bindings"]["amqp"]["exchange"]
            .get("type")
            .is_none()
    );
    let errors: Vec<String> = asyncapi_validator()
        .iter_errors(&document)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");

    let text = mermaid(&contract);
    assert!(text.contains("x1{{\"orders.dlx<br/>external\"}}"), "{text}");
    assert!(text.ends_with("class x1 external\n"), "{text}");
    let dot = dot(&contract);
    assert!(
        dot.contains("\"x1\" [shape=hexagon, style=dashed, label=\"orders.dlx\\nexternal\"];"),
        "{dot}"
    );
    render_svg(&dot, Path::new("orders without orders.dlx"));
}

/// A channel lists what can reach it: a routing key's channel the bindings that key takes
/// (not every binding of its exchange), a queue's channel every message routed or
/// dead-lettered into it (not only its consumers' message).
#[test]
fn channels_list_what_can_reach_them() {
    let document = asyncapi(&contract("../examples/orders/warren.yaml"));
    let channels = document["channels"].as_object().expect("channels");
    let messages = |channel: &str| -> Vec<&str> {
        let listed = channels[channel]["messages"].as_object().expect("messages");
        let mut listed: Vec<&str> = listed.keys().map(String::as_str).collect();
        listed.sort_unstable();
        listed
    };
    let bound = |channel: &str| -> Vec<&str> {
        let bindings = channels[channel]["x-warren-bindings"].as_array();
        let bindings = bindings.expect("bindings");
        bindings
            .iter()
            .filter_map(|b| b["queue"].as_str())
            .collect()
    };
    assert_eq!(
        bound("exchange.orders_order._region_.placed"),
        ["orders.fulfilment", "orders.billing"]
    );
    assert_eq!(
        bound("exchange.orders_order._region_.cancelled"),
        ["orders.notifications"]
    );
    assert_eq!(bound("exchange.orders_quote._region_"), ["orders.quotes"]);
    // Every queue dead-letters through `orders.dlx` into `orders.dead-letters`.
    assert_eq!(
        messages("queue.orders.dead-letters"),
        ["order_cancelled", "order_placed", "quote_request"]
    );
    assert_eq!(messages("queue.orders.billing"), ["order_placed"]);
}
