//! Doc comments of generated items: text from the contract made safe to emit, and the lines
//! that say where an item came from.
//!
//! Contract text (names, descriptions, schema titles) is hostile: it reaches the file only
//! as the string of a `#[doc = "…"]` attribute, which no content can end, and with every
//! [hidden](crate::diagnostics::is_hidden) character written as an escape. A bare carriage
//! return in a doc comment is a compile error, and bidirectional overrides trip rustc's
//! deny-by-default `text_direction_codepoint_in_comment` lint, so neither may reach it.

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;
use syn::{AttrStyle, Attribute, Expr, ExprLit, Lit, LitStr, Meta, MetaNameValue, parse_quote};

use crate::diagnostics::escape_source;
use warren_model::DurationLabel;

use super::GenerateError;
use crate::contract::{Consumer, Contract, Exhausted, Retry};

/// `#[doc = "…"]` lines for `text`, one attribute per line so rustdoc keeps the layout.
///
/// rustdoc runs a code block in a public item's docs as a test of the crate that includes
/// the generated code, and contract text is not Rust: a doc that may hold one is written
/// `#[cfg_attr(not(doctest), doc = "…")]` on every line, shown everywhere but never run.
/// The test is on the lines as written, so it holds for generated prose around contract
/// text too (a name in a `code` span), not only for descriptions.
pub(super) fn doc(text: &str) -> TokenStream {
    let attrs = doc_attrs(text);
    quote! { #( #attrs )* }
}

/// [`doc`]'s attributes as syntax, for an item already parsed: made, not printed and parsed
/// again (the types' docs are a large contract's most numerous items).
pub(super) fn doc_attrs(text: &str) -> Vec<Attribute> {
    let text = escape_source(text);
    let hidden_from_doctests = may_hold_code_block(&text);
    let lines = text.lines().map(|line| {
        let line = match line {
            "" => String::new(),
            line => format!(" {line}"),
        };
        LitStr::new(&line, Span::call_site())
    });
    if hidden_from_doctests {
        lines
            .map(|line| parse_quote! { #[cfg_attr(not(doctest), doc = #line)] })
            .collect()
    } else {
        lines.map(doc_line).collect()
    }
}

/// `#[doc = line]`.
fn doc_line(line: LitStr) -> Attribute {
    Attribute {
        pound_token: Default::default(),
        style: AttrStyle::Outer,
        bracket_token: Default::default(),
        meta: Meta::NameValue(MetaNameValue {
            path: Ident::new("doc", Span::call_site()).into(),
            eq_token: Default::default(),
            value: Expr::Lit(ExprLit {
                attrs: Vec::new(),
                lit: Lit::Str(line),
            }),
        }),
    }
}

/// Whether Markdown `text` may hold a code block, erring towards yes: any run of three
/// backticks or tildes (a fence may open inside a block quote or a list item, after a
/// wrapped line's break, or in a title), or a line whose leading block-quote and list
/// markers hold a tab or four spaces (an indented code block, at any nesting).
fn may_hold_code_block(text: &str) -> bool {
    text.contains("```")
        || text.contains("~~~")
        || text.lines().any(|line| {
            let markers: String = line
                .chars()
                .take_while(|c| {
                    matches!(
                        c,
                        ' ' | '\t' | '>' | '-' | '*' | '+' | '.' | ')' | '0'..='9'
                    )
                })
                .collect();
            markers.contains('\t') || markers.contains("    ")
        })
}

/// `#[allow(…)]` of the rustdoc lints, for a module whose docs hold descriptions from the
/// contract: they are written for other tools too, and an unclosed `<b>`, a `[note]` that
/// links nowhere or a `[Money](Money)` rustdoc finds redundant is the contract's business, not
/// an error in the crate that includes the generated code (`cargo doc` with warnings denied).
/// All of them: Markdown can trip nearly every one, and those rustdoc adds later.
pub(super) fn allow_contract_markdown() -> TokenStream {
    quote! { #[allow(rustdoc::all)] }
}

/// The width generated prose is wrapped at, so doc comments read in an editor.
const WIDTH: usize = 88;

/// The doc attributes of generated prose around the contract's own `description` of the
/// item: `head`, the description as written (it is Markdown, which wrapping could break),
/// then `tail`, a blank line between each. The generated parts are wrapped at [`WIDTH`];
/// empty parts are left out. The whole is one [`doc`]: a code block opened in one part
/// runs on into the next, so the parts are kept out of doctests together.
pub(super) fn compose(head: &str, description: Option<&str>, tail: &str) -> TokenStream {
    let attrs = compose_attrs(head, description, tail);
    quote! { #( #attrs )* }
}

/// [`compose`]'s attributes as syntax ([`doc_attrs`]).
pub(super) fn compose_attrs(head: &str, description: Option<&str>, tail: &str) -> Vec<Attribute> {
    let parts = [
        wrap(head),
        description.unwrap_or_default().to_owned(),
        wrap(tail),
    ];
    let parts: Vec<&str> = parts
        .iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| p.trim_matches('\n'))
        .collect();
    doc_attrs(&parts.join("\n\n"))
}

/// `text` with each line broken at spaces to fit [`WIDTH`], never inside a `code` span (a
/// name holding a space must not start a line with whatever follows it: a fence, a `>`, a
/// `-`); a list item's continuation lines are indented under its text.
fn wrap(text: &str) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let indent = if line.starts_with("- ") { "  " } else { "" };
            let mut out = String::new();
            let mut width = 0;
            for word in words(line) {
                let len = word.chars().count();
                if width > indent.len() && width + 1 + len > WIDTH {
                    out.push('\n');
                    out.push_str(indent);
                    width = indent.len();
                } else if !out.is_empty() {
                    out.push(' ');
                    width += 1;
                }
                out.push_str(word);
                width += len;
            }
            out
        })
        .collect();
    lines.join("\n")
}

/// `line` split at its spaces, except those inside a Markdown code span: a run of backticks
/// up to the next run of as many (without one, the backticks are text).
fn words(line: &str) -> Vec<&str> {
    let bytes = line.as_bytes();
    let run = |at: usize| bytes[at..].iter().take_while(|&&b| b == b'`').count();
    let (mut words, mut start, mut i) = (Vec::new(), 0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b' ' => {
                words.push(&line[start..i]);
                start = i + 1;
                i += 1;
            }
            b'`' => {
                let open = run(i);
                let mut j = i + open;
                i += open;
                while j < bytes.len() {
                    if bytes[j] == b'`' {
                        let close = run(j);
                        j += close;
                        if close == open {
                            i = j;
                            break;
                        }
                    } else {
                        j += 1;
                    }
                }
            }
            _ => i += 1,
        }
    }
    words.push(&line[start..]);
    words
}

/// `text` as rustdoc Markdown inline code: hidden characters escaped, and delimited by one
/// backtick more than the longest run of backticks inside it.
pub(super) fn code(text: &str) -> String {
    let escaped = crate::diagnostics::escape(text);
    let longest = escaped.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    if longest == 0 {
        return format!("`{escaped}`");
    }
    let fence = "`".repeat(longest + 1);
    format!("{fence} {escaped} {fence}")
}

/// What happens when `consumer`'s handler fails, in one line: the retry policy of its queue,
/// and where a message goes once its retries are spent. The checks refuse a consumer of an
/// unknown queue and a quorum-native retry without a delivery limit, so either is a bug.
pub(super) fn retry_line(
    contract: &Contract,
    consumer: &Consumer,
) -> Result<String, GenerateError> {
    let Some(queue) = contract.topology.queue(&consumer.spec.queue) else {
        return Err(GenerateError::Internal(format!(
            "consumer {} reads queue {}, which the model does not hold",
            code(&consumer.spec.name),
            code(&consumer.spec.queue)
        )));
    };
    // As the runtime decides (`runtime/src/worker/policy.rs`): a queue without a
    // dead-letter exchange has the broker discard what would be dead-lettered.
    let dead_letter = match &queue.dead_letter {
        Some(target) if target.exchange.is_empty() => {
            "dead-lettered through the default exchange".to_owned()
        }
        Some(target) => format!("dead-lettered to exchange {}", code(&target.exchange)),
        None => "discarded (the queue has no dead-letter exchange)".to_owned(),
    };
    let retries = |n: u32| match n {
        1 => "1 retry".to_owned(),
        n => format!("{n} retries"),
    };
    let spent = |exhausted: Exhausted| match exhausted {
        Exhausted::DeadLetter => dead_letter.clone(),
        Exhausted::Drop => "dropped".to_owned(),
        Exhausted::Requeue => "requeued again, without end".to_owned(),
    };
    Ok(match &queue.retry {
        Retry::None => format!("on failure: no retries; {dead_letter}"),
        Retry::ImmediateRequeue {
            max_retries,
            exhausted,
        } => format!(
            "on failure: up to {}, requeued at once; then {}",
            retries(*max_retries),
            spent(*exhausted)
        ),
        Retry::TtlBackoff(backoff) => format!(
            "on failure: up to {}, after {} growing ×{} to at most {}{} ({} wait \
             queues); then {}",
            retries(backoff.max_retries),
            DurationLabel(backoff.initial_delay),
            backoff.multiplier,
            DurationLabel(backoff.max_delay),
            if backoff.jitter { " with jitter" } else { "" },
            backoff.tiers.len(),
            spent(backoff.exhausted)
        ),
        Retry::QuorumNative => {
            let Some(limit) = queue.quorum_delivery_limit() else {
                return Err(GenerateError::Internal(format!(
                    "queue {} retries quorum-natively without a delivery limit",
                    code(&queue.name)
                )));
            };
            format!(
                "on failure: redelivered by the broker, up to {limit} deliveries in all; then \
                 {dead_letter}"
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{code, compose, doc, retry_line, wrap};
    use crate::contract::{Contract, QueueKind, Retry};
    use crate::emit::GenerateError;

    /// A checked contract with consumer `c` of queue `inbox` and publisher `p`, both of
    /// message `ping`.
    fn contract() -> Contract {
        let mut sources = crate::Sources::new(
            "warren.yaml",
            "queues:\n  inbox: { on_poison: drop }\nmessages:\n  ping: { payload: ping.json }\n\
             consumers:\n  c: { queue: inbox, message: ping }\n\
             publishers:\n  p: { exchange: \"\", routing_key: inbox, message: ping }\n",
        );
        sources.file("ping.json", r#"{ "title": "Ping", "type": "object" }"#);
        crate::check_sources(&sources)
            .expect("a valid contract")
            .contract
    }

    #[test]
    fn a_retry_line_the_model_cannot_back_is_an_internal_error() {
        let contract = contract();
        let consumer = &contract.consumers["c"];
        assert!(retry_line(&contract, consumer).is_ok());
        let mut unknown_queue = contract.clone();
        unknown_queue.topology.queues.clear();
        assert!(matches!(
            retry_line(&unknown_queue, consumer),
            Err(GenerateError::Internal(_))
        ));
        // Only a declared quorum queue has a delivery limit to speak of.
        let mut no_limit = contract.clone();
        let queue = &mut no_limit.topology.queues[0];
        (queue.kind, queue.retry) = (QueueKind::Classic, Retry::QuorumNative);
        assert!(matches!(
            retry_line(&no_limit, consumer),
            Err(GenerateError::Internal(_))
        ));
    }

    #[test]
    fn a_consumer_or_publisher_of_a_message_the_model_lacks_is_an_internal_error() {
        let generate = |contract: &Contract| {
            crate::emit::generate(contract, &crate::settings::Resolved::default())
        };
        let contract = contract();
        assert!(generate(&contract).is_ok());
        let mut lost = contract.clone();
        lost.consumers.get_mut("c").expect("consumer c").messages[0].message = "gone".to_owned();
        assert!(matches!(generate(&lost), Err(GenerateError::Internal(_))));
        let mut lost = contract;
        lost.publishers.get_mut("p").expect("publisher p").message = "gone".to_owned();
        assert!(matches!(generate(&lost), Err(GenerateError::Internal(_))));
    }

    #[test]
    fn doc_text_cannot_hold_a_bare_carriage_return_or_a_bidi_override() {
        let tokens = doc("a\rb\u{202e}c\r\nd\n\ne").to_string();
        assert!(
            !tokens.contains('\r') && !tokens.contains('\u{202e}'),
            "{tokens}"
        );
        assert!(tokens.contains(r"a\\rb\\u{202e}c"), "{tokens}");
        assert_eq!(tokens.matches("doc").count(), 4, "{tokens}");
    }

    #[test]
    fn docs_that_may_hold_code_are_never_doctests() {
        for text in [
            "a\n\n    let x = 1;",
            "```\nx\n```",
            "a\n~~~ rust\n~~~",
            "\tcode",
            // Fences and indented code inside block quotes and list items.
            "> ```rust\n> x\n> ```",
            "- ```rust\n  x\n  ```",
            "1. ```rust\n   x\n   ```",
            "1) ~~~\n   x",
            ">     indented in a quote",
            "- a\n\n      indented in an item",
            "> - >\tnested",
            // A fence in the middle of a line may start one once the line is wrapped.
            "see `a ~~~ rust b`",
        ] {
            let tokens = doc(text).to_string();
            assert!(
                tokens.contains("cfg_attr (not (doctest)") && !tokens.contains("# [doc"),
                "{text:?}: {tokens}"
            );
        }
        for text in [
            "plain\n- list\n  continued",
            "> quoted\n1. item",
            "`one` `` two ``",
        ] {
            assert!(!doc(text).to_string().contains("cfg_attr"), "{text:?}");
        }
    }

    #[test]
    fn wrapping_never_breaks_a_code_span() {
        let long = "x".repeat(84);
        for name in [
            format!("{long} ``` {long}"),
            format!("{long} ~~~ rust b"),
            format!("{long} > quoted"),
            format!("{long} - item"),
        ] {
            let text = wrap(&format!(
                "Consumer {} reads queue {}.",
                code("c"),
                code(&name)
            ));
            assert!(
                text.lines().any(|line| line.contains(&code(&name))),
                "{name:?}: {text}"
            );
        }
        // A backtick that opens no span is text, and words around it still break.
        let text = wrap(&format!("a ` {long} {long}"));
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    #[test]
    fn contract_text_in_generated_prose_is_kept_out_of_doctests_with_the_rest() {
        let long = "x".repeat(84);
        let name = format!("{long} ~~~ rust b");
        let head = format!("Consumer of queue {}.", code(&name));
        let docs = compose(&head, Some("A plain description."), "More.").to_string();
        assert!(!docs.contains("# [doc"), "{docs}");
        assert!(docs.contains(&format!("\" {}.\"", code(&name))), "{docs}");
        // A description's code block hides the generated parts around it too: an unclosed
        // fence runs on into them.
        let docs = compose("Generated.", Some("```"), "More.").to_string();
        assert!(!docs.contains("# [doc"), "{docs}");
        let docs = compose("Generated.", Some("Plain."), "More.").to_string();
        assert!(!docs.contains("cfg_attr"), "{docs}");
    }

    #[test]
    fn inline_code_fences_outgrow_the_backticks_inside() {
        assert_eq!(code("a"), "`a`");
        assert_eq!(code("a`b"), "`` a`b ``");
        assert_eq!(code("``x`"), "``` ``x` ```");
    }
}
