//! `info`: what the contract says about itself, as the documents written from it need it.
//!
//! AsyncAPI's schema and tools refuse a document whose `info.contact.email` is no email
//! address or whose `url` is no URL: such a contract would export a document nobody can read,
//! so it is refused here, where the author can fix it.

use super::Checker;
use crate::diagnostics::{Code, YamlPath};

impl Checker<'_> {
    /// An empty title or version, a contact email that is no address, a contact URL that is
    /// not `http(s)`.
    pub(in crate::check) fn info(&mut self) {
        let Some(info) = &self.file.info else {
            return;
        };
        let path = YamlPath::root().key("info");
        for (field, value) in [("title", &info.title), ("version", &info.version)] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                self.error(
                    Code::BadInfo,
                    &path.key(field),
                    format!("`info.{field}` is empty"),
                    format!("write the contract's {field}, or leave `{field}` out"),
                );
            }
        }
        let Some(contact) = &info.contact else {
            return;
        };
        let path = path.key("contact");
        if let Some(email) = contact.email.as_deref().filter(|e| !is_email(e)) {
            self.error(
                Code::BadInfo,
                &path.key("email"),
                format!("`{email}` is not an email address"),
                "write one address, `name@example.com`, with no spaces or display name",
            );
        }
        if let Some(url) = contact.url.as_deref().filter(|u| !is_web_url(u)) {
            self.error(
                Code::BadInfo,
                &path.key("url"),
                format!("`{url}` is not an http or https URL"),
                "write the whole URL, `https://wiki.example.com/orders`",
            );
        }
    }
}

/// Whether `text` reads as one email address: a local part, one `@`, a domain with a dot,
/// nothing blank or control, as the `email` format AsyncAPI's schema checks expects.
fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.split_once('@') else {
        return false;
    };
    let plain = |part: &str| {
        !part.is_empty()
            && !part
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || "@<>()[],;:\"\\".contains(c))
    };
    plain(local)
        && plain(domain)
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
}

/// Whether `text` is an absolute `http` or `https` URL with a host and nothing blank.
fn is_web_url(text: &str) -> bool {
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"));
    let Some(rest) = rest else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    !host.is_empty()
        && !text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "<>\"{}|\\^`".contains(c))
}

#[cfg(test)]
mod tests {
    use super::{is_email, is_web_url};

    #[test]
    fn emails_and_urls_are_told_from_what_tools_refuse() {
        for good in ["orders@example.com", "a.b+tag@mail.example.co.uk"] {
            assert!(is_email(good), "{good}");
        }
        for bad in [
            "orders",
            "orders@",
            "@example.com",
            "orders@localhost",
            "a@b@example.com",
            "Orders <orders@example.com>",
            "orders @example.com",
            "orders@example.com.",
        ] {
            assert!(!is_email(bad), "{bad}");
        }
        for good in [
            "https://wiki.example.com/orders",
            "http://example.com",
            "https://x.y/a?b#c",
        ] {
            assert!(is_web_url(good), "{good}");
        }
        for bad in [
            "wiki.example.com",
            "ftp://example.com",
            "https://",
            "https:///x",
            "https://a b.com",
            "javascript:alert(1)",
        ] {
            assert!(!is_web_url(bad), "{bad}");
        }
    }
}
