//! Doc comments of generated items: text from the contract made safe to emit, and the lines
//! that say where an item came from.
//!
//! Contract text (names, descriptions, schema titles) is hostile: it reaches the file only
//! as the string of a `#[doc = "…"]` attribute, which no content can end, and with every
//! [hidden](crate::diagnostics::is_hidden) character written as an escape. A bare carriage
//! return in a doc comment is a compile error, and bidirectional overrides trip rustc's
//! deny-by-default `text_direction_codepoint_in_comment` lint, so neither may reach it.

use proc_macro2::TokenStream;
use quote::quote;

use crate::diagnostics::escape_source;
use warren_model::DurationLabel;

use crate::model::{Consumer, Contract, Exhausted, Retry};

/// `#[doc = "…"]` lines for `text`, one attribute per line so rustdoc keeps the layout.
///
/// rustdoc runs a code block in a public item's docs as a test of the crate that includes
/// the generated code, and a contract's description is not Rust: a doc that may hold one is
/// written `#[cfg_attr(not(doctest), doc = "…")]`, shown everywhere but never run.
pub(super) fn doc(text: &str) -> TokenStream {
    lines(text, may_hold_code_block(text))
}

/// One doc attribute per line of `text`, made safe (see the module's doc), each under
/// `cfg_attr(not(doctest))` when `hidden_from_doctests`.
fn lines(text: &str, hidden_from_doctests: bool) -> TokenStream {
    let text = escape_source(text);
    let lines = text.lines().map(|line| {
        if line.is_empty() {
            String::new()
        } else {
            format!(" {line}")
        }
    });
    if hidden_from_doctests {
        quote! { #( #[cfg_attr(not(doctest), doc = #lines)] )* }
    } else {
        quote! { #( #[doc = #lines] )* }
    }
}

/// Whether Markdown `text` may hold a code block: a fence, or a line indented as one (more
/// than it takes, since a list item's continuation is indented too).
fn may_hold_code_block(text: &str) -> bool {
    text.lines().any(|line| {
        let trimmed = line.trim_start();
        trimmed.starts_with("```")
            || trimmed.starts_with("~~~")
            || line.starts_with("    ")
            || line.starts_with('\t')
    })
}

/// `#[allow(…)]` of the rustdoc lints a contract's own Markdown may trip, for a module whose
/// docs hold descriptions from the contract: they are written for other tools too, and an
/// unclosed `<b>` or a `[note]` that links nowhere is the contract's business, not an error
/// in the crate that includes the generated code (`cargo doc` with warnings denied).
pub(super) fn allow_contract_markdown() -> TokenStream {
    quote! {
        #[allow(
            rustdoc::bare_urls,
            rustdoc::broken_intra_doc_links,
            rustdoc::invalid_html_tags,
            rustdoc::invalid_rust_codeblocks
        )]
    }
}

/// The width generated prose is wrapped at, so doc comments read in an editor.
const WIDTH: usize = 88;

/// The doc attributes of generated prose around the contract's own `description` of the
/// item: `head`, the description as written (it is Markdown, which wrapping could break),
/// then `tail`, a blank line between each. The generated parts are wrapped at [`WIDTH`];
/// empty parts are left out; only the description can be kept out of doctests ([`doc`]).
pub(super) fn compose(head: &str, description: Option<&str>, tail: &str) -> TokenStream {
    let parts = [
        (wrap(head), false),
        (description.unwrap_or_default().to_owned(), true),
        (wrap(tail), false),
    ];
    let mut docs = TokenStream::new();
    for (text, from_contract) in parts.iter().filter(|(p, _)| !p.trim().is_empty()) {
        if !docs.is_empty() {
            docs.extend(quote! { #[doc = ""] });
        }
        let text = text.trim_matches('\n');
        docs.extend(if *from_contract {
            doc(text)
        } else {
            lines(text, false)
        });
    }
    docs
}

/// `text` with each line broken at spaces to fit [`WIDTH`]; a list item's continuation lines
/// are indented under its text.
fn wrap(text: &str) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let indent = if line.starts_with("- ") { "  " } else { "" };
            let mut out = String::new();
            let mut width = 0;
            for word in line.split(' ') {
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
/// and where a message goes once its retries are spent.
pub(super) fn retry_line(contract: &Contract, consumer: &Consumer) -> String {
    let Some(queue) = contract.topology.queue(&consumer.queue) else {
        return String::new();
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
    let spent = |exhausted: Exhausted| match exhausted {
        Exhausted::DeadLetter => dead_letter.clone(),
        Exhausted::Drop => "dropped".to_owned(),
        Exhausted::Requeue => "requeued again, without end".to_owned(),
    };
    match &queue.retry {
        Retry::None => format!("on failure: no retries; {dead_letter}"),
        Retry::ImmediateRequeue {
            max_retries,
            exhausted,
        } => format!(
            "on failure: up to {max_retries} retries, requeued at once; then {}",
            spent(*exhausted)
        ),
        Retry::TtlBackoff(backoff) => format!(
            "on failure: up to {} retries, after {} growing ×{} to at most {}{} ({} wait \
             queues); then {}",
            backoff.max_retries,
            DurationLabel(backoff.initial_delay),
            backoff.multiplier,
            DurationLabel(backoff.max_delay),
            if backoff.jitter { " with jitter" } else { "" },
            backoff.tiers.len(),
            spent(backoff.exhausted)
        ),
        Retry::QuorumNative => format!(
            "on failure: redelivered by the broker, up to {} deliveries in all; then \
             {dead_letter}",
            queue.quorum_delivery_limit().unwrap_or_default()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::{code, compose, doc, wrap};

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
        ] {
            let tokens = doc(text).to_string();
            assert!(
                tokens.contains("cfg_attr (not (doctest)"),
                "{text:?}: {tokens}"
            );
        }
        assert!(
            !doc("plain\n- list\n  continued")
                .to_string()
                .contains("cfg_attr")
        );
    }

    #[test]
    fn prose_wraps_and_descriptions_stay_as_written() {
        let long = "word ".repeat(30).trim_end().to_owned();
        let head = wrap(&long);
        assert!(head.lines().all(|l| l.len() <= 88) && head.lines().count() > 1);
        let list = wrap(&format!("- {long}"));
        assert!(
            list.lines().skip(1).all(|l| l.starts_with("  word")),
            "{list}"
        );
        let docs = compose(&long, Some(&long), "").to_string();
        assert!(docs.contains(&format!("\" {long}\"")), "{docs}");
        assert_eq!(compose("a", None, "").to_string(), doc("a").to_string());
    }

    #[test]
    fn only_the_contract_description_is_kept_out_of_doctests() {
        let docs = compose("Generated.", Some("    code"), "More.").to_string();
        assert_eq!(docs.matches("cfg_attr").count(), 1, "{docs}");
    }

    #[test]
    fn inline_code_fences_outgrow_the_backticks_inside() {
        assert_eq!(code("a"), "`a`");
        assert_eq!(code("a`b"), "`` a`b ``");
        assert_eq!(code("``x`"), "``` ``x` ```");
    }
}
