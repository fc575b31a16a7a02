//! The wall clock as message headers carry it.

use std::time::SystemTime;

/// Now, in milliseconds since the Unix epoch (0 on a clock before it).
pub(crate) fn unix_millis() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Now, in seconds since the Unix epoch: the AMQP `timestamp` property's unit.
pub(crate) fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
