//! Generator settings (`warren_codegen::Settings`), one snapshot per setting on a small
//! fixture, and every bad setting reported at once. `tests/compile-fixtures` compiles the
//! fixture generated with all of them, and the orders example generated for a choice of its
//! consumers and publishers.

use std::path::Path;

use warren_codegen::{Error, RenderStyle, Settings, check_contract};

const FIXTURE: &str = "fixtures/settings/warren.yaml";

/// The `types` module generated from the fixture with `settings`: settings shape nothing else.
fn types(settings: &Settings) -> String {
    let generated = check_contract(FIXTURE)
        .and_then(|checked| checked.generate(settings))
        .unwrap_or_else(|error| panic!("the settings fixture should generate:\n{error}"));
    types_module(&generated.code)
}

/// From the start of the file to the line closing `pub mod types`.
fn types_module(code: &str) -> String {
    let start = code.find("pub mod types {").expect("a types module");
    let end = code[start..]
        .find("\n}\n")
        .map(|at| start + at + 3)
        .expect("the module closes");
    code[..end].to_owned()
}

/// What the settings change, as a diff from the default output: the snapshot shows the
/// setting's effect and nothing else.
fn changes(settings: &Settings) -> String {
    let default = types(&Settings::new());
    let changed = types(settings);
    let diff = similar::TextDiff::from_lines(&default, &changed);
    diff.unified_diff().context_radius(2).to_string()
}

#[test]
fn extra_derives_join_every_type() {
    let mut settings = Settings::new();
    settings.derive("Eq").derive("Hash");
    insta::assert_snapshot!(changes(&settings));
}

/// A derive of the standard library or serde written as a path is the derive typify writes
/// by its bare name: the fixture's string enum derives `Eq` and `Hash` already, and
/// deriving them twice would not compile.
#[test]
fn a_derive_written_as_a_path_is_merged_with_the_types_own() {
    let mut bare = Settings::new();
    bare.derive("Eq").derive("Hash");
    let mut paths = Settings::new();
    paths
        .derive("std::cmp::Eq")
        .derive("::core::hash::Hash")
        .derive("serde::Serialize");
    let code = types(&paths);
    assert_eq!(code, types(&bare));
    assert!(code.contains("pub enum InvoiceIssuedStatus"), "{code}");
}

#[test]
fn extra_attributes_join_every_type() {
    let mut settings = Settings::new();
    settings.attribute("#[must_use]");
    insta::assert_snapshot!(changes(&settings));
}

#[test]
fn builders_give_every_struct_a_builder() {
    let mut settings = Settings::new();
    settings.builders(true);
    insta::assert_snapshot!(changes(&settings));
}

#[test]
fn a_replaced_type_is_not_generated_and_keeps_its_name() {
    let mut settings = Settings::new();
    settings.replace("Money", "crate::Money");
    insta::assert_snapshot!(changes(&settings));
}

/// The whole file with every setting at once, as `tests/compile-fixtures` compiles it.
#[test]
fn every_setting_at_once() {
    let mut settings = Settings::new();
    settings
        .derive("Eq")
        .derive("Hash")
        .attribute("#[must_use]")
        .builders(true)
        .replace("Money", "crate::Money");
    let generated = check_contract(FIXTURE)
        .and_then(|checked| checked.generate(&settings))
        .unwrap_or_else(|error| panic!("the settings fixture should generate:\n{error}"));
    insta::assert_snapshot!(generated.code);
}

/// Setting nothing generates exactly what `generate` does.
#[test]
fn default_settings_generate_what_generate_does() {
    let plain = warren_codegen::generate(FIXTURE).expect("generates").code;
    let with_defaults = check_contract(FIXTURE)
        .and_then(|checked| checked.generate(&Settings::new()))
        .expect("generates")
        .code;
    assert_eq!(plain, with_defaults);
}

/// Every bad setting at once, each saying what is wrong and how to fix it; never a panic
/// (typify unwraps its own parse of derives, attributes and paths).
#[test]
fn bad_settings_are_reported_all_at_once() {
    let mut settings = Settings::new();
    settings
        .derive("Ha sh")
        .derive("Hash")
        .attribute("must_use")
        .attribute("#![inner]")
        .attribute("")
        // Not a type of the contract, and not a type path either: both are reported.
        .replace("Mony", "fn()")
        // Types the generator makes for a field, not schema definitions.
        .replace("MoneyCurrency", "crate::Currency")
        .replace("InvoiceIssuedStatus", "Vec<")
        // Each the alias the replacement leaves, which would stand for itself.
        .replace("InvoiceIssued", "InvoiceIssued")
        .replace("Money", "self::Money");
    let report = match check_contract(FIXTURE).and_then(|checked| checked.generate(&settings)) {
        Err(Error::Invalid(problems)) => {
            assert_eq!(problems.error_count(), 11);
            assert!(
                problems
                    .iter()
                    .all(|d| d.code == warren_codegen::Code::BadSetting)
            );
            problems.render(RenderStyle::Plain)
        }
        other => panic!("the settings are bad: {other:?}"),
    };
    insta::assert_snapshot!(report);
}

/// Settings are the generating crate's choice (`warren_build::Config`, the CLI's flags,
/// tested in `codegen/tests/cli.rs`), never the contract's.
#[test]
fn settings_are_not_read_from_the_contract() {
    // A contract cannot carry settings: the format refuses unknown fields.
    let text = std::fs::read_to_string(FIXTURE).expect("the fixture");
    let mut sources =
        warren_codegen::Sources::new("warren.yaml", format!("{text}derives: [Hash]\n"));
    sources.file(
        "invoice.json",
        std::fs::read_to_string(Path::new(FIXTURE).with_file_name("invoice.json"))
            .expect("the schema"),
    );
    let error = warren_codegen::check_sources(&sources).expect_err("unknown field");
    assert!(
        error.to_string().contains("unknown field `derives`"),
        "{error}"
    );
}

const ORDERS: &str = "../examples/orders/warren.yaml";

/// The whole file generated from `contract` with `settings`.
fn code(contract: &str, settings: &Settings) -> String {
    check_contract(contract)
        .and_then(|checked| checked.generate(settings))
        .unwrap_or_else(|error| panic!("{contract} should generate:\n{error}"))
        .code
}

/// What `settings` change in the whole file, as a diff from the default output.
fn file_changes(contract: &str, settings: &Settings) -> String {
    let default = code(contract, &Settings::new());
    let changed = code(contract, settings);
    let diff = similar::TextDiff::from_lines(&default, &changed);
    diff.unified_diff().context_radius(2).to_string()
}

/// A service running two of the orders example's three consumers, publishing with one of its
/// two publishers: the others have no trait, field, register function, adapter or method,
/// and nothing else changes (types, markers and `topology()` are the whole contract's).
/// `tests/compile-fixtures` compiles this choice.
#[test]
fn chosen_consumers_and_publishers_leave_the_others_out() {
    let mut settings = Settings::new();
    settings
        .consumer("fulfil_order")
        .consumer("bill_orders")
        .publisher("place_order");
    insta::assert_snapshot!(file_changes(ORDERS, &settings));
}

/// Choosing none leaves `Publishers`, `consumers` and `Handlers` out, rather than generate
/// them empty with fields nothing reads.
#[test]
fn choosing_none_leaves_publishers_consumers_and_handlers_out() {
    let mut settings = Settings::new();
    settings.no_consumers().no_publishers();
    insta::assert_snapshot!(file_changes(FIXTURE, &settings));
}

/// A choice is built up call by call: a consumer chosen after `no_consumers` is chosen, and
/// `no_consumers` after a consumer chooses none; naming one twice chooses it once.
#[test]
fn a_choice_follows_the_order_of_the_calls() {
    let mut some = Settings::new();
    some.no_consumers().consumer("book").consumer("book");
    let mut all = Settings::new();
    all.consumer("book");
    assert_eq!(code(FIXTURE, &some), code(FIXTURE, &all));
    let mut none = Settings::new();
    none.consumer("book").no_consumers();
    assert!(!code(FIXTURE, &none).contains("pub struct Handlers"));
    // Choosing every consumer by name generates what taking them all does, but for the
    // docs, which say a choice was made.
    let chosen = code(FIXTURE, &all).replace("\n/// ", " ");
    assert!(
        chosen.contains("1 of the contract's 1 (chosen by the generator settings)"),
        "{chosen}"
    );
}

/// Every unknown name at once, each with what to do: a near name, the kind it is instead, or
/// the list to choose from.
#[test]
fn unknown_consumers_and_publishers_are_reported_all_at_once() {
    let mut settings = Settings::new();
    settings
        .consumer("fulfil_orders")
        .consumer("cancel_order")
        .consumer("shipping\u{1b}[2J")
        .publisher("place_orders")
        .publisher("bill_orders")
        .derive("Ha sh");
    let report = match check_contract(ORDERS).and_then(|checked| checked.generate(&settings)) {
        Err(Error::Invalid(problems)) => {
            assert_eq!(problems.error_count(), 6);
            problems.render(RenderStyle::Plain)
        }
        other => panic!("the settings are bad: {other:?}"),
    };
    insta::assert_snapshot!(report);
}

/// An rpc is a consumer (its server) and a publisher (its client method): a service serving
/// `quote_price` alone generates its server trait, `Handlers` field and register function and
/// no `RpcClients`; one calling it alone generates `RpcClients` with its method and no
/// server. Its marker and errors are generated either way, like message markers.
#[test]
fn an_rpc_is_chosen_as_a_consumer_for_its_server_and_a_publisher_for_its_client() {
    let mut server = Settings::new();
    server.consumer("quote_price").no_publishers();
    let code_of_server = code(ORDERS, &server);
    assert!(code_of_server.contains("pub trait QuotePrice"));
    assert!(code_of_server.contains("pub quote_price: QuotePriceImpl"));
    assert!(!code_of_server.contains("pub struct RpcClients"));
    assert!(!code_of_server.contains("pub trait FulfilOrder"));
    let mut client = Settings::new();
    client.no_consumers().publisher("quote_price");
    let code_of_client = code(ORDERS, &client);
    assert!(code_of_client.contains("pub async fn quote_price("));
    assert!(!code_of_client.contains("pub struct Publishers"));
    assert!(!code_of_client.contains("pub trait QuotePrice"));
    for code in [&code_of_server, &code_of_client] {
        assert!(code.contains("pub struct QuotePrice;"));
        assert!(code.contains("pub enum QuotePriceError"));
    }
    // A misspelt rpc gets the same help as a misspelt consumer.
    let mut typo = Settings::new();
    typo.consumer("quote_prices");
    match check_contract(ORDERS).and_then(|checked| checked.generate(&typo)) {
        Err(Error::Invalid(problems)) => {
            let report = problems.render(RenderStyle::Plain);
            assert!(report.contains("did you mean `quote_price`?"), "{report}");
        }
        other => panic!("the setting is bad: {other:?}"),
    }
}
