//! An HTTP `Retry-After` header read as a delay (RFC 9110, section 10.2.3): what a handler
//! hands [`crate::HandlerError::retry_after`] when a service answered 429 or 503.

use std::time::{Duration, SystemTime};

use chrono::NaiveDateTime;

/// The longest delay a header is believed for: a day. A server (broken, or hostile) asking for
/// years gets this; a ttl-backoff queue caps it at its longest wait tier anyway.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(86_400);

/// The longest header read: an HTTP-date is 29 characters, a day in seconds 5.
const MAX_LEN: usize = 64;

/// The HTTP-date forms a recipient must accept: IMF-fixdate, then the obsolete RFC 850 and
/// asctime forms.
const DATE_FORMATS: [&str; 3] = [
    "%a, %d %b %Y %H:%M:%S GMT",
    "%A, %d-%b-%y %H:%M:%S GMT",
    "%a %b %e %H:%M:%S %Y",
];

/// How long an HTTP `Retry-After` header `value` says to wait from now: a number of seconds
/// (`120`) or an HTTP-date (`Wed, 21 Oct 2015 07:28:00 GMT`), a date already past meaning no
/// wait; at most [`MAX_RETRY_AFTER`]. `None` when it is neither.
///
/// ```
/// use std::time::Duration;
/// use warren_runtime::{HandlerError, parse_retry_after};
///
/// let header = "120"; // from the 429 response
/// let delay = parse_retry_after(header).unwrap_or(Duration::from_secs(30));
/// let error = HandlerError::retry_after(delay, "the mail service is rate limiting us");
/// assert_eq!(error.retry_delay(), Some(Duration::from_secs(120)));
/// ```
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    retry_after_at(value, SystemTime::now())
}

/// [`parse_retry_after`] at time `now`.
fn retry_after_at(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() || value.len() > MAX_LEN {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        // Digits only: too many of them is still a number of seconds, just a large one.
        let seconds = value.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER));
    }
    let date = DATE_FORMATS
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(value, format).ok())?;
    let at = SystemTime::from(date.and_utc());
    Some(
        at.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(MAX_RETRY_AFTER),
    )
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::{MAX_RETRY_AFTER, retry_after_at};

    /// 2015-10-21 07:28:00 UTC, the RFC's example date.
    fn rfc_example() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480)
    }

    #[test]
    fn seconds_are_read_as_they_are_and_capped() {
        let now = rfc_example();
        assert_eq!(retry_after_at("120", now), Some(Duration::from_secs(120)));
        assert_eq!(retry_after_at(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(retry_after_at("31536000", now), Some(MAX_RETRY_AFTER));
        assert_eq!(
            retry_after_at("99999999999999999999999999", now),
            Some(MAX_RETRY_AFTER)
        );
    }

    #[test]
    fn each_http_date_form_is_a_delay_from_now() {
        let now = rfc_example() - Duration::from_secs(90);
        for date in [
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "Wednesday, 21-Oct-15 07:28:00 GMT",
            "Wed Oct 21 07:28:00 2015",
        ] {
            assert_eq!(
                retry_after_at(date, now),
                Some(Duration::from_secs(90)),
                "{date}"
            );
        }
        // Already past: no wait.
        let later = rfc_example() + Duration::from_secs(5);
        assert_eq!(
            retry_after_at("Wed, 21 Oct 2015 07:28:00 GMT", later),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn anything_else_is_not_a_delay() {
        let now = rfc_example();
        for value in [
            "",
            "-1",
            "1.5",
            "soon",
            "Wed, 32 Oct 2015 07:28:00 GMT",
            &"9 ".repeat(100),
        ] {
            assert_eq!(retry_after_at(value, now), None, "{value:?}");
        }
    }
}
