//! `$ref` strings and JSON pointers.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// A schema node somewhere on disk: a canonical file and a JSON pointer in it (`""` is the
/// whole file).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct NodeKey {
    /// Canonical path of the file.
    pub file: PathBuf,
    /// JSON pointer inside the file, `""` for its root.
    pub pointer: String,
}

impl fmt::Display for NodeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.file.display(), self.pointer)
    }
}

/// A `$ref` split into its file part and its fragment, percent-decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reference {
    /// Relative file path; empty for the same file.
    pub file: String,
    /// JSON pointer (`/$defs/Money`), or `""` for the file's root.
    pub pointer: String,
}

/// Why a `$ref` string is not one warren follows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReferenceError {
    /// `http:` or `https:`.
    #[error("remote `$ref` `{0}` is refused: warren never fetches schemas at build time")]
    Remote(String),
    /// Any other URI scheme (`urn:`, `file:`…).
    #[error("`$ref` `{0}` is a URI; warren follows relative file paths and `#/…` pointers only")]
    Uri(String),
    /// A fragment that is not a JSON pointer (`#Money` names an anchor).
    #[error("`$ref` `{0}` names an anchor; warren follows JSON pointers such as `#/$defs/Money`")]
    Anchor(String),
}

impl ReferenceError {
    /// How to fix it.
    pub(crate) fn help(&self) -> &'static str {
        match self {
            Self::Remote(_) => {
                "copy the schema into a schema root (the contract's folder or a folder listed in \
                 `schema_roots`) and refer to it by relative path"
            }
            Self::Uri(_) => "refer to the file by a path relative to the schema that uses it",
            Self::Anchor(_) => "point at the definition with a JSON pointer, e.g. `#/$defs/Money`",
        }
    }
}

/// Splits a `$ref` value.
pub(crate) fn parse(reference: &str) -> Result<Reference, ReferenceError> {
    let (file, fragment) = reference.split_once('#').unwrap_or((reference, ""));
    if let Some((scheme, _)) = file.split_once(':') {
        // A one-letter "scheme" is a Windows drive, which is still a (non-portable) path.
        if scheme.len() > 1
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+')
        {
            let lower = scheme.to_ascii_lowercase();
            return Err(if lower == "http" || lower == "https" {
                ReferenceError::Remote(reference.to_owned())
            } else {
                ReferenceError::Uri(reference.to_owned())
            });
        }
    }
    if !fragment.is_empty() && !fragment.starts_with('/') {
        return Err(ReferenceError::Anchor(reference.to_owned()));
    }
    Ok(Reference {
        file: percent_decode(file),
        pointer: percent_decode(fragment),
    })
}

/// The node at the (decoded) JSON `pointer` in `root`, following RFC 6901 escapes.
pub(crate) fn lookup<'v>(root: &'v Value, pointer: &str) -> Option<&'v Value> {
    root.pointer(pointer)
}

/// The last segment of `pointer`, unescaped: the name a definition is known by.
pub(crate) fn last_segment(pointer: &str) -> String {
    unescape_segment(pointer.rsplit('/').next().unwrap_or_default())
}

/// Joins `pointer` and a child key, escaping the key.
pub fn child(pointer: &str, key: &str) -> String {
    format!("{pointer}/{}", escape_segment(key))
}

/// `key` as one segment of a JSON pointer (RFC 6901: `~` as `~0`, `/` as `~1`).
pub fn escape_segment(key: &str) -> std::borrow::Cow<'_, str> {
    if key.contains(['~', '/']) {
        key.replace('~', "~0").replace('/', "~1").into()
    } else {
        key.into()
    }
}

/// The key one segment of a JSON pointer names (`~1` is `/`, then `~0` is `~`).
pub fn unescape_segment(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// The file a reference points into, resolved against the folder of the referring file.
pub(crate) fn target_file(from: &Path, reference: &Reference) -> PathBuf {
    if reference.file.is_empty() {
        return from.to_owned();
    }
    let dir = from.parent().unwrap_or(Path::new(""));
    dir.join(&reference.file)
}

fn percent_decode(text: &str) -> String {
    if !text.contains('%') {
        return text.to_owned();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let value = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(value as u8);
                i += 3;
            }
            (b, ..) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Reference, ReferenceError, last_segment, lookup, parse};

    #[test]
    fn splits_files_and_pointers() {
        assert_eq!(
            parse("../common/money.json#/$defs/Money"),
            Ok(Reference {
                file: "../common/money.json".into(),
                pointer: "/$defs/Money".into()
            })
        );
        assert_eq!(
            parse("money.json"),
            Ok(Reference {
                file: "money.json".into(),
                pointer: String::new()
            })
        );
        assert_eq!(
            parse("#"),
            Ok(Reference {
                file: String::new(),
                pointer: String::new()
            })
        );
    }

    #[test]
    fn refuses_remote_uris_and_anchors() {
        assert!(matches!(
            parse("https://example.com/s.json"),
            Err(ReferenceError::Remote(_))
        ));
        assert!(matches!(parse("HTTP://x"), Err(ReferenceError::Remote(_))));
        assert!(matches!(parse("urn:x:y"), Err(ReferenceError::Uri(_))));
        assert!(matches!(parse("#Money"), Err(ReferenceError::Anchor(_))));
    }

    #[test]
    fn pointers_unescape() {
        let doc = json!({"$defs": {"a/b": 1, "c~d": 2, "e f": 3}});
        assert_eq!(lookup(&doc, "/$defs/a~1b"), Some(&json!(1)));
        assert_eq!(lookup(&doc, "/$defs/c~0d"), Some(&json!(2)));
        assert_eq!(parse("#/$defs/e%20f").unwrap().pointer, "/$defs/e f");
        assert_eq!(lookup(&doc, "/$defs/e f"), Some(&json!(3)));
        assert_eq!(last_segment("/$defs/a~1b"), "a/b");
    }
}
