//! What Linux's `/proc` says of a process, read in one place for the benchmark's CPU times,
//! peak memory and process tree.

/// The numbered fields of process `pid`'s (or `self`'s) `/proc/<pid>/stat`, from field 3
/// (its state) on: `stat_fields(pid)?[n - 3]` is field `n` of `proc(5)`. `None` where
/// `/proc` is missing (not Linux) or the process is gone.
pub fn stat_fields(pid: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let after = stat.get(stat.rfind(')')? + 2..)?;
    Some(after.split(' ').map(str::to_owned).collect())
}

/// The peak resident memory of process `pid` (or `self`) so far, in KiB (`VmHWM`).
#[cfg(feature = "codegen")] // build-cost's alone
pub fn high_water_kib(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let number = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB");
    number.trim().parse().ok()
}
