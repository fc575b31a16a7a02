//! Waiting for what happens on a broker: until a condition holds, or a timeout says what did
//! not happen. A test never sleeps "long enough".

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

/// How often a polled condition is checked again.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// Waits until `condition` holds, checking it every few milliseconds.
///
/// # Panics
///
/// When it still does not hold after `timeout`, with `what` in the message: name what you
/// wait for ("the handler saw 3 orders").
pub async fn wait_until(what: &str, timeout: Duration, condition: impl FnMut() -> bool) {
    if !try_wait_until(timeout, condition).await {
        panic!("timed out after {timeout:?} waiting until {what}");
    }
}

/// Waits until `condition` holds, checking it every few milliseconds, or `timeout` passes;
/// says whether it held. For a test that asserts on what it finds itself.
pub async fn try_wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until the asynchronous `condition` holds (it may ask the broker), checking it every
/// few milliseconds.
///
/// # Panics
///
/// When it still does not hold after `timeout`, with `what` in the message.
pub async fn wait_until_async<F, Fut>(what: &str, timeout: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while !condition().await {
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting until {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A signal that something a test watches changed: handlers call [`Changes::notify`] after
/// recording what they saw, and a test waits with [`Changes::wait_until`], waking on each
/// change rather than polling.
#[derive(Debug, Clone, Default)]
pub struct Changes(Arc<Notify>);

impl Changes {
    /// Wakes every waiter to check its condition again.
    pub fn notify(&self) {
        self.0.notify_waiters();
    }

    /// Waits until `done` holds, checking it on every change, or `timeout` passes; says
    /// whether it held.
    pub async fn wait_until(&self, timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            // Registered before checking, so a change between the check and the wait wakes it.
            let changed = self.0.notified();
            if done() {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return done();
            }
        }
    }
}

/// What a test's handlers saw, in order, shared between the handlers (clone it into each)
/// and the test, which waits for it with [`Seen::wait_for`].
///
/// ```
/// # async fn run() {
/// use std::time::Duration;
/// use warren_testkit::Seen;
///
/// let seen: Seen<String> = Seen::default();
/// let handler_side = seen.clone();
/// tokio::spawn(async move { handler_side.record("order-1".to_owned()) });
/// let orders = seen.wait_for(1, Duration::from_secs(5)).await;
/// assert_eq!(orders, ["order-1"]);
/// # }
/// ```
#[derive(Debug)]
pub struct Seen<T> {
    items: Arc<Mutex<Vec<T>>>,
    changes: Changes,
}

impl<T> Default for Seen<T> {
    fn default() -> Self {
        Self {
            items: Arc::default(),
            changes: Changes::default(),
        }
    }
}

impl<T> Clone for Seen<T> {
    fn clone(&self) -> Self {
        Self {
            items: self.items.clone(),
            changes: self.changes.clone(),
        }
    }
}

impl<T: Clone> Seen<T> {
    /// Records `item` and wakes whoever waits.
    pub fn record(&self, item: T) {
        self.items
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(item);
        self.changes.notify();
    }

    /// Everything recorded so far.
    pub fn all(&self) -> Vec<T> {
        self.items.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How many were recorded.
    pub fn len(&self) -> usize {
        self.items.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until at least `n` were recorded, and returns them all.
    ///
    /// # Panics
    ///
    /// When fewer than `n` were within `timeout`, saying how many were.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<T> {
        if !self.changes.wait_until(timeout, || self.len() >= n).await {
            panic!(
                "timed out after {timeout:?} waiting for {n} to be seen: {} were",
                self.len()
            );
        }
        self.all()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Seen, try_wait_until};

    #[tokio::test]
    async fn seen_wakes_its_waiter_and_says_how_many_came() {
        let seen: Seen<u32> = Seen::default();
        let handler = seen.clone();
        tokio::spawn(async move {
            for n in 0..3 {
                tokio::time::sleep(Duration::from_millis(5)).await;
                handler.record(n);
            }
        });
        assert_eq!(seen.wait_for(3, Duration::from_secs(10)).await, [0, 1, 2]);
        let missing =
            tokio::spawn(async move { seen.wait_for(4, Duration::from_millis(50)).await });
        let panic = missing
            .await
            .expect_err("a fourth never comes")
            .into_panic();
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            message.contains("waiting for 4 to be seen: 3 were"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn try_wait_until_says_whether_it_held() {
        assert!(try_wait_until(Duration::from_millis(50), || true).await);
        assert!(!try_wait_until(Duration::from_millis(50), || false).await);
    }
}
