//! Text that goes into headers, logs and health: cut to a bound whatever its source says.

/// Longest `x-last-error` kept, in bytes: diagnostic headers stay far below the frame size
/// whatever an error says.
pub(crate) const MAX_ERROR_BYTES: usize = 1024;

/// `text` cut to at most `max` bytes on a character boundary, marked when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn truncation_respects_the_bound_and_characters() {
        assert_eq!(truncate("short", 10), "short");
        let long = "é".repeat(1000);
        let cut = truncate(&long, 1024);
        assert!(cut.len() <= 1024);
        assert!(cut.ends_with("..."));
    }
}
