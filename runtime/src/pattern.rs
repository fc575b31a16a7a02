//! The `pattern` of a generated constrained string, matched exactly as `regress` matches it
//! (ECMAScript's semantics), without running a regex engine where the pattern is a plain
//! anchored sequence.
//!
//! typify's output checks a `pattern` with `regress::Regex::new(…)` and `find(…)`; the
//! generated file names `regress` through `warren_runtime::codegen`, which is this module's
//! [`Regex`]. Most contract patterns are codes and identifiers (`^[A-Z]{3}-[0-9]{4}$`), and
//! `regress` spent ~50 ns on each match of one, most of a short string's typing. Such a
//! pattern is matched here byte by byte instead; anything else goes to `regress`.
//!
//! The sequences read here: `^`, then ASCII literals (escaped where they are syntax), `\d`,
//! and bracket classes of ASCII characters and ranges (not negated), each once or with `?`,
//! `*`, `+`, `{n}`, `{n,}` or `{n,m}` (not lazy), then `$`. Without the `u` flag ECMAScript
//! compares UTF-16 code units, so no character outside ASCII matches any of these, and each
//! character matched is one unit, counted as one byte here. A repeated item is read
//! greedily, which is exact only when what may follow it cannot match the same characters:
//! a pattern where it could (`^[a-z]*[a-z]$`) goes to `regress`, which backtracks.

/// A compiled pattern: a sequence matched here, or `regress`'s regex.
pub struct Regex {
    compiled: Compiled,
}

enum Compiled {
    /// The whole text must match these items, in order.
    Sequence(Vec<Item>),
    Engine(regress::Regex),
}

/// One item of a sequence: the ASCII characters it matches (bit `c` of the mask for `c`),
/// between `min` and `max` times.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Item {
    set: u128,
    min: usize,
    max: usize,
}

/// The largest count a `{n,m}` is read with here (`regress` takes the rest).
const MAX_COUNT: usize = 1_000;

impl Regex {
    /// `pattern` compiled: an error where `regress` refuses it.
    pub fn new(pattern: &str) -> Result<Self, regress::Error> {
        let compiled = match sequence(pattern) {
            Some(items) => Compiled::Sequence(items),
            None => Compiled::Engine(regress::Regex::new(pattern)?),
        };
        Ok(Self { compiled })
    }

    /// Where the pattern first matches in `text`, as `regress::Regex::find` finds it: `None`
    /// when it matches nowhere.
    pub fn find(&self, text: &str) -> Option<std::ops::Range<usize>> {
        match &self.compiled {
            Compiled::Sequence(items) => matches(items, text.as_bytes()).then_some(0..text.len()),
            Compiled::Engine(regex) => regex.find(text).map(|found| found.range),
        }
    }
}

/// Whether `items` match the whole of `text`, each greedily (exact: see the module docs).
fn matches(items: &[Item], text: &[u8]) -> bool {
    let mut at = 0;
    for item in items {
        let run = (text[at..].iter())
            .take(item.max)
            .take_while(|&&byte| holds(item.set, byte))
            .count();
        if run < item.min {
            return false;
        }
        at += run;
    }
    at == text.len()
}

/// Whether `set` holds `byte` (never a byte outside ASCII).
fn holds(set: u128, byte: u8) -> bool {
    byte < 128 && set & (1 << byte) != 0
}

/// `pattern` as a sequence, or `None` where it is not one that is matched exactly here.
fn sequence(pattern: &str) -> Option<Vec<Item>> {
    let body = pattern.strip_prefix('^')?.strip_suffix('$')?;
    let bytes = body.as_bytes();
    let mut items = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let (set, after_set) = atom(bytes, at)?;
        let (min, max, after) = quantifier(bytes, after_set)?;
        items.push(Item { set, min, max });
        at = after;
    }
    greedy_is_exact(&items).then_some(items)
}

/// The characters of the atom at `at` (a literal, `\d` or a class), and where it ends.
fn atom(bytes: &[u8], at: usize) -> Option<(u128, usize)> {
    match *bytes.get(at)? {
        b'[' => class(bytes, at + 1),
        b'\\' => Some((escape(*bytes.get(at + 1)?)?, at + 2)),
        byte if is_plain(byte) => Some((1 << byte, at + 1)),
        _ => None,
    }
}

/// The characters that are syntax in a pattern outside a class: each stands for itself only
/// escaped.
const SYNTAX: &[u8] = b"\\^$.|?*+()[]{}";

/// The set an escape `\byte` stands for outside a class: a digit, or a syntax character (or
/// `/`, `-`) taken literally.
fn escape(byte: u8) -> Option<u128> {
    match byte {
        b'd' => Some(range(b'0', b'9')),
        b'/' | b'-' => Some(1 << byte),
        byte if SYNTAX.contains(&byte) => Some(1 << byte),
        _ => None,
    }
}

/// A printable ASCII character that stands for itself in a pattern.
fn is_plain(byte: u8) -> bool {
    (b' '..=b'~').contains(&byte) && !SYNTAX.contains(&byte)
}

/// A bracket class whose items start at `at` (after its `[`): plain characters, ranges of
/// them and `\d`; not negated. Its set, and where it ends.
fn class(bytes: &[u8], mut at: usize) -> Option<(u128, usize)> {
    if bytes.get(at) == Some(&b'^') {
        return None;
    }
    let mut set = 0;
    loop {
        match *bytes.get(at)? {
            b']' if set != 0 => return Some((set, at + 1)),
            b'\\' if bytes.get(at + 1) == Some(&b'd') => {
                set |= range(b'0', b'9');
                at += 2;
            }
            low if is_class_plain(low) => match (bytes.get(at + 1), bytes.get(at + 2)) {
                (Some(b'-'), Some(&high)) if high != b']' => {
                    if !is_class_plain(high) || high < low {
                        return None;
                    }
                    set |= range(low, high);
                    at += 3;
                }
                _ => {
                    set |= 1 << low;
                    at += 1;
                }
            },
            _ => return None,
        }
    }
}

/// A printable ASCII character that stands for itself in a class.
fn is_class_plain(byte: u8) -> bool {
    (b' '..=b'~').contains(&byte) && !b"\\[]^".contains(&byte)
}

/// The characters from `low` to `high`.
fn range(low: u8, high: u8) -> u128 {
    (low..=high).fold(0, |set, byte| set | (1 << byte))
}

/// The quantifier at `at` (none: once), and where it ends. A lazy one is left to `regress`.
fn quantifier(bytes: &[u8], at: usize) -> Option<(usize, usize, usize)> {
    let (min, max, after) = match bytes.get(at) {
        Some(b'?') => (0, 1, at + 1),
        Some(b'*') => (0, usize::MAX, at + 1),
        Some(b'+') => (1, usize::MAX, at + 1),
        Some(b'{') => braces(bytes, at + 1)?,
        _ => return Some((1, 1, at)),
    };
    (bytes.get(after) != Some(&b'?')).then_some((min, max, after))
}

/// `{n}`, `{n,}` or `{n,m}` after its `{`: the counts and where it ends.
fn braces(bytes: &[u8], at: usize) -> Option<(usize, usize, usize)> {
    let close = at + bytes.get(at..)?.iter().position(|&byte| byte == b'}')?;
    let text = std::str::from_utf8(&bytes[at..close]).ok()?;
    let count = |digits: &str| {
        let all_digits = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
        all_digits.then(|| digits.parse::<usize>().ok()).flatten()
    };
    let (min, max) = match text.split_once(',') {
        None => count(text).map(|exactly| (exactly, exactly))?,
        Some((min, "")) => (count(min)?, usize::MAX),
        Some((min, max)) => (count(min)?, count(max)?),
    };
    let bounded = min <= MAX_COUNT && (max == usize::MAX || (min..=MAX_COUNT).contains(&max));
    bounded.then_some((min, max, close + 1))
}

/// Whether reading each item greedily finds every match: each repeated item's characters are
/// none of those that may come right after its run.
fn greedy_is_exact(items: &[Item]) -> bool {
    (items.iter().enumerate()).all(|(index, item)| {
        item.min == item.max
            || followers(&items[index + 1..]).all(|follower| follower.set & item.set == 0)
    })
}

/// The items that may match right after a run: those that follow it, up to the first that
/// must match at least once.
fn followers(items: &[Item]) -> impl Iterator<Item = &Item> {
    let end = (items.iter().position(|item| item.min > 0)).map_or(items.len(), |last| last + 1);
    items[..end].iter()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{Compiled, Regex, sequence};

    /// A pattern matched here says what `regress` says, on every text.
    fn agrees(pattern: &str, text: &str) {
        let ours = Regex::new(pattern).expect("compiles").find(text).is_some();
        let engine = regress::Regex::new(pattern).expect("compiles");
        assert_eq!(ours, engine.find(text).is_some(), "{pattern} on {text:?}");
    }

    #[test]
    fn contract_patterns_are_read_as_sequences() {
        for pattern in [
            "^[A-Z]{3}-[0-9]{4}$",
            r"^\d{4}-\d{2}-\d{2}$",
            "^[a-z][a-z0-9_]*$",
            r"^v\d+\.\d+$",
            "^[A-Za-z0-9-]{1,64}$",
        ] {
            assert!(sequence(pattern).is_some(), "{pattern}");
        }
        for pattern in [
            "[A-Z]{3}",
            "^[^a]$",
            "^a.b$",
            "^[a-z]*[a-z]$",
            "^[a-z]*?$",
            r"^\w+$",
            "^(ab)+$",
            "^a|b$",
            "^é$",
        ] {
            assert!(sequence(pattern).is_none(), "{pattern}");
        }
        let engine = Regex::new("^(ab)+$").expect("compiles");
        assert!(matches!(engine.compiled, Compiled::Engine(_)));
        assert!(Regex::new("^(a$").is_err());
    }

    #[test]
    fn codes_match_as_regress_matches_them() {
        let pattern = "^[A-Z]{3}-[0-9]{4}$";
        for text in [
            "TEA-0001",
            "TEA-001",
            "TEA-00011",
            "tea-0001",
            "TEA-٠٠٠١",
            "TEA-0001\n",
            "",
        ] {
            agrees(pattern, text);
        }
    }

    /// Patterns of the shapes read here, and texts over their characters and a few others
    /// (a newline, non-ASCII letters and digits).
    fn pattern() -> impl Strategy<Value = String> {
        let atom = prop::sample::select(vec![
            "a", "b", "-", "0", r"\d", r"\.", "[ab]", "[a-c]", "[0-9]", "[b-]", r"[\da]", "[-a]",
        ]);
        let quantifier =
            prop::sample::select(vec!["", "", "?", "*", "+", "{2}", "{1,3}", "{0,2}", "{2,}"]);
        prop::collection::vec((atom, quantifier), 0..5).prop_map(|items| {
            let body: String = items.iter().map(|(a, q)| format!("{a}{q}")).collect();
            format!("^{body}$")
        })
    }

    proptest! {
        #[test]
        fn sequences_match_as_regress_matches_them(
            pattern in pattern(),
            text in "[ab0c.\\-9\né١]{0,7}",
        ) {
            agrees(&pattern, &text);
        }
    }
}
