//! Closing a queue to publishers before it is deleted.
//!
//! RabbitMQ 3.10 refuses `queue.delete` with `if-empty` on a quorum queue, so a plan checks
//! that the queue is empty and then deletes it; a message published to it in between (by
//! name, through the default exchange, which no unbinding stops: RPC calls, redrives, another
//! stack) was confirmed to its publisher and deleted with the queue (4 of 16 migrations under
//! a 20 msg/s producer). So before it deletes a queue that is not classic, the plan closes it:
//! a policy of its own (`max-length` 0, `overflow: reject-publish`, at a priority no
//! operator's policy reaches) makes the broker refuse (nack) every publish, which a publisher
//! that must not lose a message sends again, later, to the queue declared anew. The policy
//! applies asynchronously; a probe published to the queue tells when it does (refused), and
//! probes it accepted before are dropped as the queue is emptied one last time.
//!
//! A quorum queue refuses a publish only once a message is *ready* in it (`length > max`,
//! measured on 3.10.8: an empty closed queue takes one message, and a message read and not
//! yet acknowledged does not count). So once it is emptied, a probe is left in it: accepted,
//! it is the queue's one message and nothing joins it until the delete; refused, a publish
//! came first, and the queue is emptied again. Once the queue is deleted the policy is
//! deleted too, before the queue is declared again (a run killed in between leaves it: the
//! next apply deletes leftover policies first). A classic queue is never closed this way: it
//! drops the messages it holds when a length policy applies, whatever its overflow.

use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Confirmation};

use super::PlanError;
use super::probe::channel;
use crate::management::{LiveQueue, Management};
use crate::model::headers;
use crate::{Connection, ErrorChain};

/// The priority of a closing policy: above any an operator sets (only the highest applies).
const PRIORITY: i64 = 1_000_000;
/// How long closing may take before the plan gives up (the queue stays open, nothing lost).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(60);
/// The pause between two probes while the policy is not yet applied.
const PROBE_PAUSE: Duration = Duration::from_millis(50);

/// Whether a queue was closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Closed {
    /// The broker refuses publishes to it now.
    Yes,
    /// It is gone already.
    Gone,
    /// It cannot be closed this way: why (the plan says so in its steps).
    No(String),
}

/// What the broker did with a probe.
enum Probe {
    /// Taken into the queue.
    Accepted,
    /// Refused (nacked): the queue is closed, and holds a message.
    Refused,
    /// Routed nowhere: the queue is gone.
    Unroutable,
}

/// Closes queues of one run of a plan to publishers, through the management API.
pub(super) struct Closer<'a> {
    api: &'a Management,
    /// What this run's probes carry in [`headers::PLAN_PROBE`].
    token: String,
}

/// The name of the policy that closes `queue`.
pub(super) fn policy_name(queue: &str) -> String {
    format!("warren-closing:{queue}")
}

/// A regular expression matching `queue` alone: every ASCII character but letters, digits
/// and `_` escaped (PCRE reads an escaped punctuation character as itself), anchored at both
/// ends (`\z`: `$` would also match before a final newline).
fn pattern(queue: &str) -> String {
    let mut pattern = String::from("^");
    for c in queue.chars() {
        if c.is_ascii() && !c.is_ascii_alphanumeric() && c != '_' {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push_str("\\z");
    pattern
}

impl<'a> Closer<'a> {
    /// A closer of this run, through `api`.
    pub(super) fn new(api: &'a Management) -> Self {
        Self {
            api,
            token: uuid::Uuid::now_v7().simple().to_string(),
        }
    }

    /// What this run's probes carry: a message with it is dropped when moved.
    pub(super) fn token(&self) -> &str {
        &self.token
    }

    /// Closes `queue` to publishers, and waits until the broker refuses a probe.
    pub(super) async fn close(
        &self,
        connection: &Connection,
        queue: &str,
    ) -> Result<Closed, PlanError> {
        let Some(live) = self.api.queue(queue).await.map_err(policy_error(queue))? else {
            return Ok(Closed::Gone);
        };
        if let Some(why) = cannot_close(&live) {
            return Ok(Closed::No(why));
        }
        let definition = serde_json::json!({"max-length": 0, "overflow": "reject-publish"});
        self.api
            .put_policy(&policy_name(queue), &pattern(queue), definition, PRIORITY)
            .await
            .map_err(policy_error(queue))?;
        let probed =
            tokio::time::timeout(CLOSE_TIMEOUT, self.probe_until_refused(connection, queue)).await;
        let closed = match probed {
            Ok(closed) => closed,
            Err(_) => Err(PlanError::Closing {
                queue: queue.to_owned(),
                reason: format!(
                    "the broker still accepted publishes {CLOSE_TIMEOUT:?} after the policy was \
                     set (a policy or argument of its own overrides it?)"
                ),
            }),
        };
        if closed.is_err() {
            // Nothing was deleted: the queue is opened again.
            let _ = self.open(queue).await;
        }
        closed
    }

    /// Publishes probes to `queue` until the broker refuses one (or says the queue is gone).
    async fn probe_until_refused(
        &self,
        connection: &Connection,
        queue: &str,
    ) -> Result<Closed, PlanError> {
        let out = self.probe_channel(connection, queue).await?;
        let closed = loop {
            match self.probe(&out, queue).await? {
                Probe::Refused => break Closed::Yes,
                Probe::Unroutable => break Closed::Gone,
                Probe::Accepted => tokio::time::sleep(PROBE_PAUSE).await,
            }
        };
        let _ = out.close(200, ShortString::from("probed")).await;
        Ok(closed)
    }

    /// Leaves one probe in `queue` (closed, just emptied): `true` when the broker accepted
    /// it, so it is the queue's one message and, a quorum queue refusing publishes only once
    /// a message is ready in it, nothing can join it until the queue is deleted; `false`
    /// when refused, because a publish reached the queue since it was emptied: empty it
    /// again, and leave the probe then.
    pub(super) async fn leave_sentinel(
        &self,
        connection: &Connection,
        queue: &str,
    ) -> Result<bool, PlanError> {
        let out = self.probe_channel(connection, queue).await?;
        let probe = self.probe(&out, queue).await;
        let _ = out.close(200, ShortString::from("probed")).await;
        Ok(!matches!(probe?, Probe::Refused))
    }

    async fn probe_channel(
        &self,
        connection: &Connection,
        queue: &str,
    ) -> Result<lapin::Channel, PlanError> {
        let out = channel(connection).await?;
        out.confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(broker(queue))?;
        Ok(out)
    }

    /// Publishes one probe of this run to `queue` and says what the broker did with it.
    async fn probe(&self, out: &lapin::Channel, queue: &str) -> Result<Probe, PlanError> {
        let mut marked = FieldTable::default();
        marked.insert(
            ShortString::from(headers::PLAN_PROBE),
            AMQPValue::LongString(LongString::from(self.token.as_str())),
        );
        let mandatory = BasicPublishOptions {
            mandatory: true,
            ..BasicPublishOptions::default()
        };
        let confirmation = out
            .basic_publish(
                ShortString::from(""),
                ShortString::from(queue),
                mandatory,
                b"",
                BasicProperties::default().with_headers(marked),
            )
            .await
            .map_err(broker(queue))?
            .await
            .map_err(broker(queue))?;
        Ok(match confirmation {
            Confirmation::Nack(_) => Probe::Refused,
            Confirmation::Ack(Some(_)) => Probe::Unroutable,
            Confirmation::Ack(None) | Confirmation::NotRequested => Probe::Accepted,
        })
    }

    /// Deletes the policy closing `queue` (one already gone is fine), tried a few times: a
    /// queue declared again under it would refuse every publish.
    pub(super) async fn open(&self, queue: &str) -> Result<(), PlanError> {
        let mut last = None;
        for attempt in 0..3 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            match self.api.delete_policy(&policy_name(queue)).await {
                Ok(()) => return Ok(()),
                Err(error) => last = Some(error),
            }
        }
        let error = last.map(|e| ErrorChain(&e).to_string()).unwrap_or_default();
        Err(PlanError::Closing {
            queue: queue.to_owned(),
            reason: format!(
                "policy `{}` could not be deleted ({error}): delete it by hand before anything \
                 publishes to `{queue}`, which refuses every publish while it applies",
                policy_name(queue)
            ),
        })
    }
}

/// Why `queue` cannot be closed by a policy: its own `x-overflow` wins over the policy's, and
/// with `drop-head` a length of 0 would drop every message in it.
fn cannot_close(queue: &LiveQueue) -> Option<String> {
    let overflow = queue.arguments.get("x-overflow").and_then(|v| v.as_str());
    match overflow {
        None | Some("reject-publish" | "reject-publish-dlx") => None,
        Some(other) => Some(format!(
            "its `x-overflow` is `{other}`, which a policy cannot override without dropping its \
             messages: a message published to it by name while it is deleted is lost"
        )),
    }
}

fn policy_error(queue: &str) -> impl FnOnce(crate::management::ManagementError) -> PlanError {
    let queue = queue.to_owned();
    move |error| PlanError::Closing {
        queue,
        reason: format!(
            "the management API refused ({}); closing a queue needs a user with the \
             `policymaker` tag",
            ErrorChain(&error)
        ),
    }
}

fn broker(queue: &str) -> impl FnOnce(lapin::Error) -> PlanError {
    let what = format!("probing whether `{queue}` refuses publishes");
    move |source| PlanError::Broker { what, source }
}

#[cfg(test)]
mod tests {
    use super::pattern;

    #[test]
    fn a_pattern_matches_its_queue_alone() {
        assert_eq!(pattern("orders"), "^orders\\z");
        assert_eq!(pattern("a.b-c*"), "^a\\.b\\-c\\*\\z");
        assert_eq!(pattern("ns.ü"), "^ns\\.ü\\z");
    }
}
