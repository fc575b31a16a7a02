//! How a duration is written: in a contract (`250ms`, `1s`) and in a wait queue's name.

use std::fmt;
use std::time::Duration;

/// The units a duration is written in, smallest first, with their length in milliseconds.
pub const DURATION_UNITS: [(&str, u64); 4] =
    [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)];

/// A duration written with the largest unit that divides it exactly (`1500ms`, `2s`, `5m`),
/// in whole milliseconds: how contracts print durations and how wait queues are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationLabel(pub Duration);

impl fmt::Display for DurationLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let millis = u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX);
        let (unit, scale) = DURATION_UNITS
            .iter()
            .rev()
            .find(|(_, scale)| millis > 0 && millis.is_multiple_of(*scale))
            .copied()
            .unwrap_or(("ms", 1));
        write!(f, "{}{unit}", millis / scale)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::DurationLabel;

    #[test]
    fn the_largest_exact_unit() {
        for (millis, shown) in [
            (250, "250ms"),
            (1500, "1500ms"),
            (2000, "2s"),
            (300_000, "5m"),
            (3_600_000, "1h"),
            (5_400_000, "90m"),
            (0, "0ms"),
        ] {
            let label = DurationLabel(Duration::from_millis(millis)).to_string();
            assert_eq!(label, shown);
        }
    }
}
