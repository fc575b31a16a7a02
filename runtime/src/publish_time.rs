//! Which publish times a consumer believes.
//!
//! End-to-end latency is measured from the publish time a message carries
//! ([`headers::PUBLISHED_AT`], else the AMQP `timestamp`), and any producer can write one: 300
//! messages stamped six days ago set a consumer's median latency to six days. RabbitMQ vouches
//! for one property only, `user_id`: a publish whose `user_id` is not the user its connection
//! authenticated as is refused. So:
//!
//! - a warren connection learns, each time its link opens, whether the broker takes its URL's
//!   user as `user_id` ([`probe`]: one publish routed nowhere, on a connection of its own);
//! - every message warren sends with a publish time carries that `user_id` ([`vouched`]), and
//!   a copy warren makes of a message it read keeps the publish time only when it was believed
//!   ([`Trust::keep_in_copy`]);
//! - a consumer believes a publish time only on a message whose `user_id` is a user it trusts
//!   ([`Trust::believes`]): the users of its own connections, and those the worker names.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Confirmation};

use crate::amqp::Headers;
use crate::model::headers;
use crate::sync::lock;

/// Where the probe is published on the default exchange: a name in the `amq.` space, which
/// no client can give a queue, so the probe reaches no queue and is dropped.
const PROBE_ROUTING_KEY: &str = "amq.warren.user-id-probe";

/// How long the probe may take, opening its connection included; a broker that does not
/// answer by then is not vouching.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The user `connection`, opened with `url`, may put in `user_id`: its URL's user when the
/// broker confirmed a probe publish carrying it, else `None` (no user in the URL, another
/// authentication mechanism, a broker that names the user otherwise). The probe runs on a
/// channel of its own, which a refusal closes; the caller bounds its time.
pub(crate) async fn probe(connection: &lapin::Connection, url: &str) -> Option<Arc<str>> {
    let uri: lapin::uri::AMQPUri = url.parse().ok()?;
    let user = uri.authority.userinfo.username;
    if user.is_empty() || user.len() > usize::from(u8::MAX) {
        return None;
    }
    let channel = connection.create_channel().await.ok()?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .ok()?;
    let confirm = channel
        .basic_publish(
            ShortString::from(""),
            ShortString::from(PROBE_ROUTING_KEY),
            BasicPublishOptions::default(),
            b"",
            BasicProperties::default().with_user_id(ShortString::from(user.as_str())),
        )
        .await
        .ok()?;
    let confirmed = matches!(confirm.await, Ok(Confirmation::Ack(_)));
    let _ = channel.close(200, ShortString::from("probe done")).await;
    confirmed.then(|| Arc::from(user.as_str()))
}

/// The user a connection's broker vouches for as `user_id` on its current link: set by the
/// connection as each link opens (and cleared when it drops), read by its publishers and by
/// the consumers that trust it.
#[derive(Clone, Default)]
pub(crate) struct VouchedUser(Arc<Mutex<Option<Arc<str>>>>);

impl VouchedUser {
    /// Holding `user`, as the first link's probe found it.
    pub(crate) fn new(user: Option<Arc<str>>) -> Self {
        Self(Arc::new(Mutex::new(user)))
    }

    /// The user, while a link is up whose broker vouches for one.
    pub(crate) fn get(&self) -> Option<Arc<str>> {
        lock(&self.0).clone()
    }

    /// Whether the broker vouches for `user` on the current link: compared in place, as a
    /// consumer asks of every delivery.
    pub(crate) fn is(&self, user: &str) -> bool {
        lock(&self.0).as_deref() == Some(user)
    }

    /// What the current link's probe found (`None`: no link, or no user vouched for).
    pub(crate) fn set(&self, user: Option<Arc<str>>) {
        *lock(&self.0) = user;
    }
}

/// `properties` as warren sends them on a link whose broker vouches for `user`: with that
/// user as `user_id` when they carry a publish time, so consumers can believe it. Without a
/// publish time, or without a user, as they are.
pub(crate) fn vouched(properties: BasicProperties, user: &VouchedUser) -> BasicProperties {
    if !stamped(&properties) {
        return properties;
    }
    match user.get() {
        Some(user) => properties.with_user_id(ShortString::from(&*user)),
        None => properties,
    }
}

/// Whether `properties` carry warren's publish time.
fn stamped(properties: &BasicProperties) -> bool {
    properties
        .headers()
        .as_ref()
        .is_some_and(|table| table.contains_key(headers::PUBLISHED_AT))
}

/// The publishers a consumer believes the publish times of.
#[derive(Clone, Default)]
pub(crate) struct Trust {
    /// The users the consumer's own connections authenticated as.
    connections: Vec<VouchedUser>,
    /// The users the worker names ([`crate::Worker::trusted_publishers`]).
    users: Arc<BTreeSet<String>>,
}

impl Trust {
    /// Trusting the users of `connections` and `users`.
    pub(crate) fn new(connections: Vec<VouchedUser>, users: Arc<BTreeSet<String>>) -> Self {
        Self { connections, users }
    }

    /// Whether the publish time of a message with `properties` is believed: its `user_id`,
    /// which the broker checked, is a trusted user.
    pub(crate) fn believes(&self, properties: &BasicProperties) -> bool {
        let Some(user) = properties.user_id() else {
            return false;
        };
        let user = user.as_str();
        self.users.contains(user)
            || self
                .connections
                .iter()
                .any(|connection| connection.is(user))
    }

    /// Leaves the publish time in `copy`, the headers of a copy of a message with
    /// `properties`, only when it is believed: the copy is sent with this consumer's own
    /// `user_id`, which would vouch for a time nobody trusted.
    pub(crate) fn keep_in_copy(&self, properties: &BasicProperties, copy: &mut Headers) {
        if !self.believes(properties) {
            copy.remove(headers::PUBLISHED_AT);
        }
    }
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust")
            .field("users", &self.users)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use lapin::BasicProperties;
    use lapin::types::{AMQPValue, FieldTable, ShortString};

    use super::{Trust, VouchedUser, vouched};
    use crate::model::headers;

    fn stamped() -> BasicProperties {
        let mut table = FieldTable::default();
        table.insert(
            ShortString::from(headers::PUBLISHED_AT),
            AMQPValue::LongLongInt(1),
        );
        BasicProperties::default().with_headers(table)
    }

    #[test]
    fn only_a_trusted_user_id_is_believed_and_only_a_stamp_is_vouched_for() {
        let trust = Trust::new(Vec::new(), Arc::new(BTreeSet::from(["orders".to_owned()])));
        assert!(!trust.believes(&stamped()), "no user id: anyone's claim");
        let by = |user: &str| stamped().with_user_id(ShortString::from(user));
        assert!(trust.believes(&by("orders")));
        assert!(!trust.believes(&by("intruder")));
        let mut copy = super::Headers::new();
        copy.insert(
            ShortString::from(headers::PUBLISHED_AT),
            AMQPValue::LongLongInt(1),
        );
        trust.keep_in_copy(&by("orders"), &mut copy);
        assert_eq!(copy.len(), 1, "believed: kept");
        trust.keep_in_copy(&by("intruder"), &mut copy);
        assert!(copy.is_empty(), "not believed: not carried on");

        let user = VouchedUser::new(Some(Arc::from("orders")));
        let sent = vouched(stamped(), &user);
        assert_eq!(sent.user_id().as_ref().map(|u| u.as_str()), Some("orders"));
        let reply = vouched(BasicProperties::default(), &user);
        assert_eq!(
            reply.user_id(),
            &None,
            "no publish time: nothing to vouch for"
        );
        assert_eq!(vouched(stamped(), &VouchedUser::default()).user_id(), &None);
    }
}
