//! Failure fingerprints: dead letters that failed the same way, told apart from those that
//! failed otherwise, whatever ids and numbers their errors carry.
//!
//! A fingerprint is the failure's reason, the consumer that failed, and the first line of its
//! last error with every id and number replaced by a placeholder (`<uuid>`, `<hex>`, `<n>`):
//! "order 7f3c… not found after 3 tries" and "order 91ab… not found after 4 tries" are one
//! failure. Its [`Fingerprint::id`] is a short hash of the three, stable across processes and
//! versions, so a group counted by one command can be redriven by the next.

use crate::failure::FailureContext;
use crate::model::FailureReason;
use crate::text::truncate;

/// How much of a normalised error a fingerprint keeps, in bytes.
const PATTERN_BYTES: usize = 120;

/// Hex runs at least this long that hold a digit are ids (hashes, object ids), not words.
const MIN_HEX_ID: usize = 8;

/// What dead letters that failed the same way share.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fingerprint {
    /// Why they were dead-lettered; `None` for messages without a failure context.
    pub reason: Option<FailureReason>,
    /// The consumer that failed on them.
    pub consumer: Option<String>,
    /// The first line of their last error, its ids and numbers replaced ([`normalise`]).
    pub error: Option<String>,
}

impl Fingerprint {
    /// The fingerprint of a dead letter with this failure context (`None`: it has none).
    pub fn of(context: Option<&FailureContext>) -> Self {
        Self {
            reason: context.and_then(|c| c.reason),
            consumer: context.and_then(|c| c.consumer.clone()),
            error: context.and_then(|c| c.last_error.as_deref()).map(normalise),
        }
    }

    /// Twelve hex digits naming the fingerprint: the first 48 bits of the 64-bit FNV-1a hash
    /// of its reason, consumer and error, each followed by a zero byte (absent: a 0xff byte).
    pub fn id(&self) -> String {
        let mut hash = Fnv::default();
        hash.part(self.reason.map(|r| r.as_str()));
        hash.part(self.consumer.as_deref());
        hash.part(self.error.as_deref());
        format!("{:012x}", hash.0 >> 16)
    }
}

/// `error`'s first line with its ids and numbers replaced: a UUID by `<uuid>`, a run of at
/// least eight hex digits holding a digit by `<hex>`, any other run of digits by `<n>`;
/// whitespace runs become one space, and the result is cut to 120 bytes. Linear in the
/// error's length.
///
/// ```
/// use warren_runtime::dead_letters::normalise;
/// assert_eq!(
///     normalise("order 0f8e2a6c-3b1d-4c2e-9a7f-5d6e7f8a9b0c: 3 retries, HTTP 503"),
///     "order <uuid>: <n> retries, HTTP <n>"
/// );
/// assert_eq!(normalise("job k269375 failed\n  at line 12"), "job k<n> failed");
/// assert_eq!(normalise("commit 9fceb02d0ae598e95dc970b74767f19372d61af8"), "commit <hex>");
/// ```
pub fn normalise(error: &str) -> String {
    let line = error.lines().next().unwrap_or_default();
    let mut out = String::with_capacity(line.len().min(PATTERN_BYTES * 2));
    let mut rest = line;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() {
            rest = rest.trim_start();
            if !out.is_empty() && !rest.is_empty() {
                out.push(' ');
            }
            continue;
        }
        if !c.is_ascii_alphanumeric() {
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if is_uuid(rest) {
            out.push_str("<uuid>");
            rest = &rest[36..];
            continue;
        }
        let word_len = rest
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(rest.len());
        let (word, after) = rest.split_at(word_len);
        push_word(&mut out, word);
        rest = after;
        // Enough of the pattern is kept; the rest of a long error need not be read.
        if out.len() > PATTERN_BYTES {
            break;
        }
    }
    truncate(&out, PATTERN_BYTES)
}

/// `word` (ASCII letters and digits) with its id or numbers replaced.
fn push_word(out: &mut String, word: &str) {
    let hex_id = word.len() >= MIN_HEX_ID
        && word.bytes().all(|b| b.is_ascii_hexdigit())
        && word.bytes().any(|b| b.is_ascii_digit());
    if hex_id {
        out.push_str("<hex>");
        return;
    }
    let mut in_number = false;
    for c in word.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push_str("<n>");
            }
            in_number = true;
        } else {
            out.push(c);
            in_number = false;
        }
    }
}

/// Whether `text` starts with a UUID (`8-4-4-4-12` hex digits) that no letter or digit
/// continues.
fn is_uuid(text: &str) -> bool {
    let bytes = text.as_bytes();
    let Some(uuid) = bytes.get(..36) else {
        return false;
    };
    let shaped = uuid.iter().enumerate().all(|(i, b)| match i {
        8 | 13 | 18 | 23 => *b == b'-',
        _ => b.is_ascii_hexdigit(),
    });
    shaped && !bytes.get(36).is_some_and(u8::is_ascii_alphanumeric)
}

/// 64-bit FNV-1a: small, and the same everywhere (std's hashers are not stable).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn bytes(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn part(&mut self, part: Option<&str>) {
        match part {
            Some(text) => {
                self.bytes(text.as_bytes());
                self.bytes(&[0]);
            }
            None => self.bytes(&[0xff]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Fingerprint, normalise};
    use crate::failure::FailureContext;
    use crate::model::FailureReason;

    fn context(error: &str) -> FailureContext {
        FailureContext {
            reason: Some(FailureReason::Exhausted),
            consumer: Some("charge".to_owned()),
            last_error: Some(error.to_owned()),
            ..FailureContext::default()
        }
    }

    #[test]
    fn errors_differing_in_ids_and_numbers_share_a_fingerprint() {
        let one = Fingerprint::of(Some(&context(
            "order 0f8e2a6c-3b1d-4c2e-9a7f-5d6e7f8a9b0c not found after 3 tries",
        )));
        let two = Fingerprint::of(Some(&context(
            "order 91ab2a6c-3b1d-4c2e-9a7f-5d6e7f8a9b0c not found after 12 tries",
        )));
        assert_eq!(one, two);
        assert_eq!(one.id(), two.id());
        assert_eq!(one.id().len(), 12);
        let other = Fingerprint::of(Some(&context("card declined")));
        assert_ne!(one.id(), other.id());
        let mut elsewhere = context("card declined");
        elsewhere.consumer = Some("refund".to_owned());
        assert_ne!(other.id(), Fingerprint::of(Some(&elsewhere)).id());
        assert_eq!(
            Fingerprint::of(None).id(),
            Fingerprint::of(Some(&FailureContext::default())).id(),
            "no context is the empty context"
        );
    }

    #[test]
    fn the_id_is_stable() {
        // Pinned: a group counted by one version of warren is redriven by the next.
        assert_eq!(Fingerprint::of(None).id(), "f998341be47b");
        assert_eq!(
            Fingerprint::of(Some(&context("card declined"))).id(),
            Fingerprint::of(Some(&context("card  declined"))).id()
        );
    }

    #[test]
    fn hostile_errors_cost_their_length_and_keep_a_bounded_pattern() {
        let long = "x1 ".repeat(100_000);
        let pattern = normalise(&long);
        assert!(pattern.len() <= 120, "{}", pattern.len());
        assert!(pattern.starts_with("x<n> x<n>"), "{pattern}");
        assert_eq!(normalise("é 12 ü"), "é <n> ü");
        assert_eq!(normalise("  \t"), "");
        assert_eq!(
            normalise("deadbeef"),
            "deadbeef",
            "hex without a digit is a word"
        );
        assert!(
            !normalise("0f8e2a6c-3b1d-4c2e-9a7f-5d6e7f8a9b0cz").contains("<uuid>"),
            "a UUID is not part of a longer word"
        );
    }
}
