//! Locking the small shared states of the runtime.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, whether or not a holder panicked. Every mutex in the runtime guards plain
/// data that each critical section leaves consistent (a few integers, a set of tags, a
/// channel handle); a panic elsewhere must not take the connection or a worker down with it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
