//! The CPU time the benchmark's own process spends: what each side costs per message, apart
//! from the broker's share of the two cores (throughput alone mixes both).

use std::time::Duration;

/// Clock ticks per second of the times in `/proc` (`USER_HZ`): 100 on Linux, whatever the
/// kernel's own tick rate.
const TICKS_PER_SECOND: u64 = 100;

/// The user plus system CPU time every thread of this process has used so far, at a
/// resolution of 10 ms; `None` where `/proc` is missing (not Linux).
pub fn used() -> Option<Duration> {
    of_process("self")
}

/// The CPU time spent since `before` (a [`used`] reading), if both readings were there.
pub fn since(before: Option<Duration>) -> Option<Duration> {
    Some(used()?.saturating_sub(before?))
}

/// The CPU time every RabbitMQ node on this machine (each an Erlang VM, `beam.smp`) has used
/// so far; `None` when none runs here (a broker elsewhere). Beside [`used`], it says which
/// side of a scenario is the busier: on two cores shared with the broker, a scenario whose
/// broker spends more per message than the client is limited by the broker.
pub fn broker_used() -> Option<Duration> {
    let mut total = None;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let pid = entry.file_name();
        let Some(pid) = pid
            .to_str()
            .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() == "beam.smp"
            && let Some(cpu) = of_process(pid)
        {
            total = Some(total.unwrap_or(Duration::ZERO) + cpu);
        }
    }
    total
}

/// The broker's CPU time since `before` (a [`broker_used`] reading).
pub fn broker_since(before: Option<Duration>) -> Option<Duration> {
    Some(broker_used()?.saturating_sub(before?))
}

/// The user plus system CPU time this process's children have used, each counted once it
/// ended and was waited for, with their own waited-for children (a `cargo` run and every
/// compiler it ran); `None` where `/proc` is missing.
#[cfg(feature = "codegen")] // build-cost's alone
pub fn children_used() -> Option<Duration> {
    times("self", 2)
}

/// The user plus system CPU time of process `pid` (or `self`), from its `/proc` stat.
fn of_process(pid: &str) -> Option<Duration> {
    times(pid, 0)
}

/// A pair of times from process `pid`'s `/proc` stat: its own user and system time
/// (`skip` 0, fields 14 and 15), or its waited-for children's (`skip` 2, fields 16 and 17).
fn times(pid: &str, skip: usize) -> Option<Duration> {
    let fields = crate::procfs::stat_fields(pid)?;
    let user: u64 = fields.get(14 - 3 + skip)?.parse().ok()?;
    let system: u64 = fields.get(15 - 3 + skip)?.parse().ok()?;
    Some(Duration::from_millis(
        (user + system) * 1000 / TICKS_PER_SECOND,
    ))
}

#[cfg(test)]
mod tests {
    /// Work shows up as CPU time, and `since` never goes backwards. How much
    /// CPU a span of wall time gets is the scheduler's business (a loaded machine gave a
    /// 200 ms spin 40 ms): the spin runs until the reading moves, however long that takes.
    #[test]
    fn cpu_time_grows_with_work() {
        let before = super::used().expect("/proc/self/stat is there on Linux");
        let mut x = 0u64;
        let spent = loop {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            let spent = super::since(Some(before)).expect("a second reading");
            if spent > std::time::Duration::ZERO {
                break spent;
            }
        };
        let after = super::used().expect("a third reading");
        assert!(
            after >= before + spent,
            "{before:?} + {spent:?} > {after:?}"
        );
    }
}
