//! Retry policies and their arithmetic: backoff delays, jitter buckets, wait tiers and the
//! names of their wait queues. The generator lays out the wait queues with it and the runtime
//! picks one with it, so the tier a retry wants is always a tier that exists.

use std::time::Duration;

use crate::QueueKind;
use crate::duration::DurationLabel;
use crate::spelled::spelled;

/// Retries after the first delivery, when a contract does not say (`immediate-requeue` and
/// `ttl-backoff`).
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// The first `ttl-backoff` delay, when a contract does not say.
pub const DEFAULT_INITIAL_DELAY: Duration = Duration::from_millis(1_000);
/// The `ttl-backoff` delay bound, when a contract does not say.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_millis(30_000);
/// The `ttl-backoff` factor between consecutive delays, when a contract does not say.
pub const DEFAULT_MULTIPLIER: f64 = 2.0;
/// Whether `ttl-backoff` retries are spread over jitter buckets, when a contract does not say.
pub const DEFAULT_JITTER: bool = true;

/// Most wait queues one ttl-backoff policy may need (jitter buckets included); the
/// generator's checks refuse policies above it. Below it, [`delay_tiers`] never stops early,
/// so every retry finds its tier.
pub const MAX_WAIT_TIERS: usize = 64;

/// The `x-delivery-limit` of a quorum queue whose retries never end (`exhausted: requeue`)
/// or that has no dead-letter exchange (where the broker would drop what passes the limit):
/// the largest limit a signed 32-bit argument carries, which every RabbitMQ version takes.
pub const QUORUM_UNLIMITED: u32 = i32::MAX as u32;

/// Jitter buckets, as fractions of a delay: with jitter on, a retry due after `d` waits `d`,
/// `5/6 d`, `2/3 d` or `1/2 d`, chosen at random, in a wait queue per bucket. Per-message
/// TTLs cannot do this: a queue only expires the message at its head, so a cohort would
/// leave together anyway.
pub const JITTER_BUCKETS: [(u64, u64); 4] = [(1, 1), (5, 6), (2, 3), (1, 2)];

/// The smallest multiplier above 1 a ttl-backoff policy may grow by; the generator's checks
/// refuse one between 1 and this. Closer to 1, a delay would take billions of retries to grow
/// by a millisecond, and laying out the wait tiers ([`delay_tiers`]) would mean computing
/// every one of them: from this factor on, a delay reaches any bound within a few thousand
/// retries.
pub const MIN_MULTIPLIER: f64 = 1.01;

/// The multiplier a policy grows by: `multiplier`; 1 where it is below 1 or NaN (a delay
/// never shrinks, so every retry's delay is one [`delay_tiers`] lays out); and
/// [`MIN_MULTIPLIER`] where it is above 1 but below that.
fn effective_multiplier(multiplier: f64) -> f64 {
    if multiplier > 1.0 {
        multiplier.max(MIN_MULTIPLIER)
    } else {
        // Below 1, and NaN, which compares false.
        1.0
    }
}

/// `base^exponent` by square-and-multiply, with IEEE 754 multiplications only. Each basic
/// operation is correctly rounded on every platform, unlike `f64::powi`, whose precision
/// Rust leaves to the platform and compiler version; the generator (on the build machine)
/// and the runtime (in the deployed binary) must agree on every bit, since a wait queue is
/// found by its exact delay. The order of operations is compiler-rt's `__powidf2`, which
/// `powi` lowered to on the platforms the wait-queue names were first generated on, so the
/// names are unchanged.
fn power(mut base: f64, mut exponent: u32) -> f64 {
    let mut result = 1.0;
    loop {
        if exponent & 1 == 1 {
            result *= base;
        }
        exponent /= 2;
        if exponent == 0 {
            return result;
        }
        base *= base;
    }
}

/// The delay before retry `attempt` (from 0) of a ttl-backoff policy, before jitter:
/// `min(initial × multiplier^attempt, max)`, in whole milliseconds (half a millisecond
/// rounds away from zero). A multiplier below 1 (or NaN) counts as 1, one between 1 and
/// [`MIN_MULTIPLIER`] as that. Deterministic: the
/// same on every platform (see the crate's tests of the arithmetic).
pub fn backoff_delay(initial: Duration, max: Duration, multiplier: f64, attempt: u32) -> Duration {
    if initial.is_zero() {
        return Duration::ZERO;
    }
    let exponent = i32::try_from(attempt).map_or(i32::MAX as u32, |e| e as u32);
    let millis = initial.as_millis() as f64 * power(effective_multiplier(multiplier), exponent);
    if !millis.is_finite() || millis >= max.as_millis() as f64 {
        max
    } else {
        Duration::from_millis(millis.round() as u64)
    }
}

/// The delay of jitter bucket `(numerator, denominator)` of `base`, in whole milliseconds
/// (rounded down). A zero denominator leaves `base` as it is.
pub fn jitter_bucket(base: Duration, (numerator, denominator): (u64, u64)) -> Duration {
    if denominator == 0 {
        return base;
    }
    let millis = base.as_millis() * u128::from(numerator) / u128::from(denominator);
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}

/// The distinct delays of a ttl-backoff policy before jitter, shortest first. Stops once the
/// delay reaches `max` (it never grows again) or once there are more than [`MAX_WAIT_TIERS`],
/// so a huge `max_retries` costs nothing.
pub fn delay_tiers(
    max_retries: u32,
    initial: Duration,
    max: Duration,
    multiplier: f64,
) -> Vec<Duration> {
    let mut tiers: Vec<Duration> = Vec::new();
    for attempt in 0..max_retries {
        let delay = backoff_delay(initial, max, multiplier, attempt);
        if tiers.last() != Some(&delay) {
            tiers.push(delay);
        }
        // A delay that reached `max`, or never grows (no multiplier, no initial delay),
        // stays where it is for every later attempt.
        let fixed = effective_multiplier(multiplier) == 1.0 || initial.is_zero();
        if delay >= max || fixed || tiers.len() > MAX_WAIT_TIERS {
            break;
        }
    }
    tiers.sort();
    tiers.dedup();
    tiers
}

/// The name of the wait queue of `queue` for `delay`: `<queue>.wait.<delay>`, the delay
/// written as [`DurationLabel`] does (`orders.wait.1s`, `orders.wait.1500ms`).
pub fn wait_queue_name(queue: &str, delay: Duration) -> String {
    format!("{queue}.wait.{}", DurationLabel(delay))
}

spelled! {
    /// What happens once retries are spent.
    #[derive(Default)]
    pub enum Exhausted {
        /// Dead-letter the message (the default).
        #[default]
        DeadLetter => "dead-letter",
        /// Acknowledge and drop it, with a log line.
        Drop => "drop",
        /// Return it to the queue, with a warning; it may loop forever.
        Requeue => "requeue",
    }
}

/// A queue's retry policy.
#[derive(Debug, Clone, PartialEq)]
pub enum Retry {
    /// No retries: a retryable failure is dead-lettered like a non-retryable one.
    None,
    /// Return failed messages to the queue at once.
    ImmediateRequeue {
        /// Retries after the first delivery.
        max_retries: u32,
        /// What happens when they are spent.
        exhausted: Exhausted,
    },
    /// Park failed messages in wait queues for growing delays.
    TtlBackoff(Backoff),
    /// The broker counts deliveries against the queue's `x-delivery-limit`
    /// ([`Queue::quorum_delivery_limit`](crate::Queue::quorum_delivery_limit)) and
    /// dead-letters past it.
    QuorumNative,
}

impl Retry {
    /// The retries a message gets, when the policy counts them itself (`None` under
    /// `quorum-native`, whose budget is the queue's delivery limit).
    pub fn budget(&self) -> Option<u32> {
        match self {
            Self::None => Some(0),
            Self::ImmediateRequeue { max_retries, .. } => Some(*max_retries),
            Self::TtlBackoff(backoff) => Some(backoff.max_retries),
            Self::QuorumNative => None,
        }
    }

    /// Whether the broker counts the retries of a queue of `kind` under this policy
    /// (`x-delivery-count`: quorum-native, and immediate requeues on a quorum queue), rather
    /// than warren (`x-retry-count` on the copies it republishes).
    pub fn counted_by_broker(&self, kind: QueueKind) -> bool {
        matches!(
            (self, kind),
            (Self::QuorumNative, _) | (Self::ImmediateRequeue { .. }, QueueKind::Quorum)
        )
    }
}

/// A ttl-backoff schedule: the delay before retry `n` (from 0) is
/// `min(initial_delay × multiplier^n, max_delay)`, then, with jitter, one of the
/// [`JITTER_BUCKETS`] of it; each distinct delay is a wait queue of its own (a [`WaitTier`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Backoff {
    /// Retries after the first delivery.
    pub max_retries: u32,
    /// Delay before the first retry.
    pub initial_delay: Duration,
    /// Upper bound of the delay.
    pub max_delay: Duration,
    /// Factor between consecutive delays.
    pub multiplier: f64,
    /// Spread the retries of messages that failed together.
    pub jitter: bool,
    /// What happens when retries are spent.
    pub exhausted: Exhausted,
    /// The wait queues, one per distinct delay (jitter buckets included), shortest first, as
    /// [`Backoff::new`] lays them out.
    pub tiers: Vec<WaitTier>,
}

impl Backoff {
    /// The schedule of `queue`, with its wait tiers laid out: one per distinct delay
    /// ([`delay_tiers`]), times each jitter bucket with jitter on, named by
    /// [`wait_queue_name`].
    ///
    /// Total: a multiplier below 1 (or NaN) counts as 1 and a zero delay stays zero, so every
    /// retry up to `max_retries` finds its tier ([`Backoff::tier`]) whatever the arguments,
    /// as long as the policy needs at most [`MAX_WAIT_TIERS`] wait queues.
    pub fn new(
        queue: &str,
        max_retries: u32,
        initial_delay: Duration,
        max_delay: Duration,
        multiplier: f64,
        jitter: bool,
        exhausted: Exhausted,
    ) -> Self {
        let mut delays = delay_tiers(max_retries, initial_delay, max_delay, multiplier);
        if jitter {
            delays = delays
                .iter()
                .flat_map(|base| JITTER_BUCKETS.map(|bucket| jitter_bucket(*base, bucket)))
                .collect();
            delays.sort();
            delays.dedup();
        }
        let tiers = delays
            .into_iter()
            .map(|delay| WaitTier {
                queue: wait_queue_name(queue, delay),
                delay,
            })
            .collect();
        Self {
            max_retries,
            initial_delay,
            max_delay,
            multiplier,
            jitter,
            exhausted,
            tiers,
        }
    }

    /// Whether the tiers are the ones [`Backoff::new`] lays out for these fields and for the
    /// queue named `queue`: what a worker checks before it consumes, so a topology edited by
    /// hand is refused at start rather than failing one retry at a time.
    pub fn is_laid_out(&self, queue: &str) -> bool {
        let expected = Self::new(
            queue,
            self.max_retries,
            self.initial_delay,
            self.max_delay,
            self.multiplier,
            self.jitter,
            self.exhausted,
        );
        expected.tiers == self.tiers
    }

    /// The delay before retry `attempt` (from 0), before jitter ([`backoff_delay`]).
    pub fn delay(&self, attempt: u32) -> Duration {
        backoff_delay(self.initial_delay, self.max_delay, self.multiplier, attempt)
    }

    /// How long retry `attempt` (from 0) waits: [`Backoff::delay`], or with jitter the
    /// bucket of it that `random` (in `[0, 1)`) picks.
    pub fn wait(&self, attempt: u32, random: f64) -> Duration {
        let base = self.delay(attempt);
        if !self.jitter {
            return base;
        }
        let index = (random.clamp(0.0, 1.0) * JITTER_BUCKETS.len() as f64) as usize;
        jitter_bucket(base, JITTER_BUCKETS[index.min(JITTER_BUCKETS.len() - 1)])
    }

    /// The wait tier of retry `attempt` (from 0): the one whose delay is exactly
    /// [`Backoff::wait`]. [`Backoff::new`] lays out a tier for every wait of every attempt
    /// up to `max_retries`, whatever its arguments, so `None` means one of two things: the
    /// tiers or fields were edited by hand after it ([`Backoff::is_laid_out`] is then
    /// false), or the policy needs more than [`MAX_WAIT_TIERS`] wait queues (which the
    /// generator refuses). A bug to report, never a tier to guess.
    pub fn tier(&self, attempt: u32, random: f64) -> Option<&WaitTier> {
        let wanted = self.wait(attempt, random);
        self.tiers.iter().find(|tier| tier.delay == wanted)
    }

    /// The wait tier of a retry that must wait at least `delay` (a handler's `retry_after`):
    /// the shortest tier at least that long, else the longest, which `max_delay` caps.
    /// `None` only without tiers.
    pub fn tier_at_least(&self, delay: Duration) -> Option<&WaitTier> {
        self.tiers
            .iter()
            .filter(|tier| tier.delay >= delay)
            .min_by_key(|tier| tier.delay)
            .or_else(|| self.tiers.iter().max_by_key(|tier| tier.delay))
    }
}

/// One delay tier of a ttl-backoff queue: a wait queue and how long messages wait in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitTier {
    /// The wait queue's name.
    pub queue: String,
    /// Its message TTL.
    pub delay: Duration,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Backoff, Exhausted, backoff_delay, delay_tiers, wait_queue_name};

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    #[test]
    fn a_delay_asked_for_waits_in_the_shortest_tier_at_least_that_long() {
        let backoff = Backoff::new(
            "work",
            3,
            ms(200),
            ms(800),
            2.0,
            false,
            Exhausted::DeadLetter,
        );
        let tier = |wanted| {
            backoff
                .tier_at_least(ms(wanted))
                .map(|t| t.delay.as_millis())
        };
        assert_eq!(tier(0), Some(200));
        assert_eq!(tier(200), Some(200));
        assert_eq!(tier(201), Some(400));
        assert_eq!(tier(700), Some(800));
        // Longer than any: the longest, `max_delay`.
        assert_eq!(tier(60_000), Some(800));
    }

    #[test]
    fn backoff_grows_then_caps() {
        let delays: Vec<u128> = (0..6)
            .map(|a| backoff_delay(ms(1000), ms(10_000), 2.0, a).as_millis())
            .collect();
        assert_eq!(delays, [1000, 2000, 4000, 8000, 10_000, 10_000]);
        let tiers: Vec<u128> = delay_tiers(6, ms(1000), ms(10_000), 2.0)
            .into_iter()
            .map(|d| d.as_millis())
            .collect();
        assert_eq!(tiers, [1000, 2000, 4000, 8000, 10_000]);
        assert_eq!(backoff_delay(ms(1), ms(5), 1e308, 1000).as_millis(), 5);
    }

    #[test]
    fn wait_queues_are_named_by_their_delay() {
        assert_eq!(wait_queue_name("orders", ms(1000)), "orders.wait.1s");
        assert_eq!(wait_queue_name("orders", ms(1500)), "orders.wait.1500ms");
        assert_eq!(wait_queue_name("orders", ms(120_000)), "orders.wait.2m");
    }

    #[test]
    fn jitter_picks_a_bucket_wait_queue() {
        let backoff = Backoff::new(
            "work",
            1,
            ms(1200),
            ms(1200),
            2.0,
            true,
            Exhausted::DeadLetter,
        );
        let names: Vec<&str> = backoff.tiers.iter().map(|t| t.queue.as_str()).collect();
        assert_eq!(
            names,
            [
                "work.wait.600ms",
                "work.wait.800ms",
                "work.wait.1s",
                "work.wait.1200ms"
            ]
        );
        let picked: Vec<u128> = [0.0, 0.3, 0.6, 0.99]
            .map(|r| backoff.tier(0, r).expect("laid out").delay.as_millis())
            .to_vec();
        assert_eq!(picked, [1200, 1000, 800, 600]);
    }

    /// The tiers and the lookup share their arithmetic: every attempt, at every jitter draw,
    /// finds the tier it wants, for many shapes of policy.
    #[test]
    fn every_retry_finds_its_tier() {
        for jitter in [false, true] {
            for (initial, max, multiplier) in [
                (1000, 30_000, 2.0),
                (1, 5, 1e308),
                (250, 250, 1.0),
                (333, 10_000, 1.7),
                (1000, 3_600_000, 3.0),
                (7, 1_000, 1.01),
            ] {
                let backoff = Backoff::new(
                    "q",
                    20,
                    ms(initial),
                    ms(max),
                    multiplier,
                    jitter,
                    Exhausted::DeadLetter,
                );
                for attempt in 0..20 {
                    for step in 0..=100 {
                        let random = f64::from(step) / 100.0;
                        assert!(
                            backoff.tier(attempt, random).is_some(),
                            "{initial}/{max}/{multiplier} jitter {jitter}: attempt {attempt} at {random}"
                        );
                    }
                }
            }
        }
    }

    /// The square-and-multiply arithmetic gives the results `f64::powi` gave on this
    /// platform, so no wait-queue name changes; the fixtures' snapshots pin the same.
    #[test]
    fn power_matches_powi_here() {
        for multiplier in [1.0, 1.01, 1.1, 1.5, 1.7, 2.0, 2.5, 3.0, 7.3, 10.0, 1e10] {
            for exponent in 0..80u32 {
                let ours = super::power(multiplier, exponent);
                let theirs = multiplier.powi(exponent as i32);
                assert_eq!(ours.to_bits(), theirs.to_bits(), "{multiplier}^{exponent}");
            }
        }
    }

    /// Arguments the generator refuses still give a schedule whose every retry has a tier:
    /// `Backoff::new` is total.
    #[test]
    fn odd_arguments_still_lay_out_every_tier() {
        for (initial, max, multiplier) in [
            (1000, 30_000, 0.5),
            (1000, 30_000, f64::NAN),
            (1000, 30_000, -2.0),
            (0, 30_000, 2.0),
            (0, 0, 2.0),
            (1000, 0, 2.0),
            (0, 5, 1e308),
            (50_000, 1_000, 2.0),
            // Barely above 1: as `MIN_MULTIPLIER`, so laying out the tiers of u32::MAX
            // retries takes a few thousand steps, not billions.
            (1000, 1500, 1.0 + 1e-15),
        ] {
            for jitter in [false, true] {
                let backoff = Backoff::new(
                    "q",
                    u32::MAX,
                    ms(initial),
                    ms(max),
                    multiplier,
                    jitter,
                    Exhausted::DeadLetter,
                );
                assert!(backoff.is_laid_out("q"));
                for attempt in [0, 1, 2, 5, 100, u32::MAX - 1] {
                    for random in [0.0, 0.3, 0.6, 0.99] {
                        assert!(
                            backoff.tier(attempt, random).is_some(),
                            "{initial}/{max}/{multiplier} jitter {jitter}: attempt {attempt}"
                        );
                    }
                }
            }
        }
        assert_eq!(super::jitter_bucket(ms(900), (1, 0)), ms(900));
    }

    /// Tiers that were not laid out by `Backoff::new` are not papered over with a tier of
    /// another delay.
    #[test]
    fn a_missing_tier_is_none() {
        let mut backoff = Backoff::new("q", 3, ms(100), ms(400), 2.0, false, Exhausted::Drop);
        backoff.tiers.remove(1);
        assert!(!backoff.is_laid_out("q"));
        assert_eq!(backoff.tier(0, 0.0).map(|t| t.delay), Some(ms(100)));
        assert_eq!(backoff.tier(1, 0.0), None);
    }
}
