//! Imports beyond the rules' fixture (`fixtures/checks/imports.yaml`): what an importing
//! contract's model holds, what a build script must watch, and the bounds on what a chain or
//! a diamond of imports can cost.

use std::path::{Path, PathBuf};

use warren_codegen::{Error, Sources, check_contract, check_sources};

#[test]
fn the_invoicing_example_imports_the_orders_exchange_and_message() {
    let checked = check_contract("../examples/invoicing/warren.yaml").expect("valid");
    let contract = &checked.contract;
    let topology = &contract.topology;
    // Declared: only what invoicing owns.
    let declared: Vec<&str> = topology.exchanges.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(declared, ["invoicing", "invoicing.dlx"]);
    // Imported: the one orders exchange it binds to, as the orders contract declares it.
    assert_eq!(topology.imports.len(), 1);
    assert_eq!(
        topology.imports[0].contract,
        "`orders` (../orders/warren.yaml)"
    );
    let orders = check_contract("../examples/orders/warren.yaml").expect("valid");
    assert_eq!(
        topology.imports[0].exchanges,
        [orders
            .contract
            .topology
            .exchange("orders")
            .expect("declared")
            .clone()]
    );
    // The imported message, by its qualified name, with the owner's schema.
    let message = &contract.messages["orders::order_placed"];
    assert_eq!(message.owner.as_deref(), Some("orders"));
    assert_eq!(
        message.payload.schema,
        orders.contract.messages["order_placed"].payload.schema
    );
    assert_eq!(contract.imports["orders"].source, orders.contract.source);
    // A build script reruns when the orders contract or its schemas change.
    let canonical = |p: &Path| p.canonicalize().expect("exists");
    let inputs: Vec<PathBuf> = contract.inputs.iter().map(|p| canonical(p)).collect();
    for file in [
        "../examples/orders/warren.yaml",
        "../examples/orders/schemas/order_placed.json",
        "../examples/common/address.json",
    ] {
        assert!(
            inputs.contains(&canonical(Path::new(file))),
            "{file} is not among {inputs:?}"
        );
    }
}

/// A chain of `n` contracts, each importing the next and binding a queue to its exchange.
fn chain(n: usize) -> Sources {
    let contract = |i: usize| {
        let mut text = format!("exchanges:\n  e{i}: {{}}\nqueues:\n  q{i}: {{}}\n");
        if i + 1 < n {
            text = format!(
                "imports: {{ next: c{}.yaml }}\n{text}bindings:\n  - {{ exchange: \"next::e{}\", queue: q{i}, routing_key: \"#\" }}\n",
                i + 1,
                i + 1
            );
        }
        text
    };
    let mut sources = Sources::new("c0.yaml", contract(0));
    for i in 1..n {
        sources.file(format!("c{i}.yaml"), contract(i));
    }
    sources
}

#[test]
fn a_chain_of_imports_is_bounded() {
    check_sources(&chain(16)).expect("16 contracts chain");
    let Err(Error::Invalid(problems)) = check_sources(&chain(18)) else {
        panic!("a chain of 18 is refused");
    };
    let messages: Vec<String> = problems.iter().map(|d| d.message.clone()).collect();
    assert!(
        messages
            .iter()
            .any(|m| m == "import `next`: imports chain more than 16 contracts deep"),
        "{messages:?}"
    );
}

#[test]
fn a_diamond_of_imports_is_checked_once_per_contract() {
    // 12 layers of two contracts, each importing both of the next layer: 2^12 paths, which
    // only memoizing checked contracts keeps cheap.
    let layers = 12;
    let contract = |layer: usize, side: &str| {
        if layer + 1 == layers {
            return format!("exchanges:\n  x{layer}{side}: {{}}\n");
        }
        format!(
            "imports: {{ a: l{next}a.yaml, b: l{next}b.yaml }}\nexchanges:\n  x{layer}{side}: {{}}\n",
            next = layer + 1
        )
    };
    let mut sources = Sources::new("l0a.yaml", contract(0, "a"));
    for layer in 1..layers {
        for side in ["a", "b"] {
            sources.file(format!("l{layer}{side}.yaml"), contract(layer, side));
        }
    }
    let started = std::time::Instant::now();
    let checked = check_sources(&sources).expect("valid");
    assert_eq!(checked.contract.imports.len(), 2);
    // Every contract is an input once, however many paths reach it.
    assert_eq!(checked.contract.inputs.len(), 2 * layers - 1);
    // Not a speed assertion, a guard against exponential work: 2^12 checks of even the
    // smallest contract take far longer than this.
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}
