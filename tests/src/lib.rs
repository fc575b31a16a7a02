//! Cross-crate tests of warren; everything lives under `tests/`.
