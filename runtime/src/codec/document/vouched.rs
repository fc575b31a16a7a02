//! Constrained strings a validated document vouches for, so that their checks run once.
//!
//! A generated constrained string (`string_newtype!`: a `pattern`, a `minLength`) checks its
//! text when it is deserialized, and a worker has by then validated the whole payload against
//! the schema the type was generated from, the same `pattern` and lengths included: the check
//! ran twice, and a `regress` match is most of a short string's typing. So a document that
//! passed its payload schema hands such a string to the type's visitor *vouched for*, and the
//! visitor skips its own check.
//!
//! Nothing a body holds can vouch: the mark is a thread-local flag, set only by a validated
//! [`Node`](super::Node) asked for a newtype of the hidden name [`CHECKED_TEXT`], around the
//! one call to the visitor it was given, and taken (cleared) by that visitor before anything
//! else runs. Any other deserializer (serde_json's, a `Value`'s, serde's buffering of an
//! untagged enum) never sets it, so the text is checked as before.

use std::cell::Cell;

/// The newtype name a constrained string's `Deserialize` asks for its text by, as serde_json's
/// `RawValue` asks by a name of its own. Deserializers that know nothing of it visit the text
/// as any newtype's (`visit_newtype_struct`).
pub(crate) const CHECKED_TEXT: &str = "$warren::private::CheckedText";

thread_local! {
    /// Set while a validated document hands a string to a [`CHECKED_TEXT`] visitor.
    static VOUCHED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `visit` (a [`CHECKED_TEXT`] visitor given a string of a validated document) with the
/// string vouched for. Cleared afterwards whatever happened, a panic included.
pub(super) fn vouching<T>(visit: impl FnOnce() -> T) -> T {
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            VOUCHED.set(false);
        }
    }
    VOUCHED.set(true);
    let _clear = Clear;
    visit()
}

/// Whether the string being visited is vouched for; clears the mark, so that nothing the
/// visitor goes on to run finds it set.
pub(crate) fn take_vouched() -> bool {
    VOUCHED.replace(false)
}
