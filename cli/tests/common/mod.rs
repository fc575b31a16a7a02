//! What the `warren dlq` and `warren console` tests share: the broker tests' contract declared
//! under a namespace of a test's own, dead letters written into it as warren's worker writes
//! them, and the console spoken to over HTTP.
#![allow(dead_code)] // each test binary uses a part

pub mod browser;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use warren_runtime::lapin::options::{
    BasicGetOptions, BasicPublishOptions, BasicRejectOptions, ConfirmSelectOptions,
    QueueDeclareOptions,
};
use warren_runtime::lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use warren_runtime::lapin::{BasicProperties, Channel};
use warren_runtime::model::headers;
use warren_runtime::{Connection, Topology};

pub fn url() -> String {
    std::env::var("AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

pub fn contract() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/broker/contracts/warren.yaml")
}

/// The broker tests' contract, declared under a namespace of the test's own.
pub struct Broker {
    pub connection: Connection,
    pub topology: Topology,
    pub namespace: String,
    pub channel: Channel,
}

impl Broker {
    pub async fn start(test: &str) -> Self {
        let connection = Connection::connect(&url(), test)
            .await
            .expect("the test broker answers at AMQP_URL");
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("after 1970")
            .as_nanos();
        let namespace = format!("test.dlq.{test}.{}.{nanos}.", std::process::id());
        let topology = warren_codegen::check_contract(contract())
            .expect("the test contract is valid")
            .contract
            .topology
            .namespaced(&namespace);
        warren_runtime::declare(&connection, &topology)
            .await
            .expect("the topology declares");
        let channel = connection.create_channel().await.expect("a channel");
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirm mode");
        Self {
            connection,
            topology,
            namespace,
            channel,
        }
    }

    pub fn name(&self, name: &str) -> String {
        self.topology.qualified(name)
    }

    pub async fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        props: BasicProperties,
    ) {
        self.channel
            .basic_publish(
                ShortString::from(exchange),
                ShortString::from(routing_key),
                BasicPublishOptions {
                    mandatory: true,
                    ..BasicPublishOptions::default()
                },
                body,
                props,
            )
            .await
            .expect("published")
            .await
            .expect("confirmed");
    }

    /// A dead letter as warren's worker writes it, straight into the dead-letter queue.
    pub async fn dead_letter(&self, id: &str, failure: &Failure<'_>) {
        let body = format!(r#"{{"id":"{id}"}}"#);
        self.dead_letter_of(id, failure, &body).await;
    }

    /// A dead letter as warren's worker writes it, with `body`.
    pub async fn dead_letter_of(&self, id: &str, failure: &Failure<'_>, body: &str) {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis() as i64;
        let mut table = FieldTable::default();
        let text = |s: &str| AMQPValue::LongString(LongString::from(s));
        for (key, value) in [
            (headers::FAILURE_REASON, text(failure.reason)),
            (headers::CONSUMER, text(failure.consumer)),
            (headers::FAILED_QUEUE, text(&failure.queue)),
            (headers::LAST_ERROR, text(failure.error)),
            (headers::RETRY_COUNT, AMQPValue::LongLongInt(3)),
            (headers::FIRST_FAILURE, AMQPValue::LongLongInt(now - 60_000)),
            (headers::LAST_FAILURE, AMQPValue::LongLongInt(now - 1_000)),
            (headers::ORIGINAL_EXCHANGE, text(&self.name("jobs"))),
            (headers::ORIGINAL_ROUTING_KEY, text("job.none")),
            (
                headers::REDRIVE_COUNT,
                AMQPValue::LongLongInt(failure.redrives),
            ),
            ("tenant", text("acme")),
        ] {
            table.insert(ShortString::from(key), value);
        }
        let props = BasicProperties::default()
            .with_message_id(ShortString::from(id))
            .with_content_type(ShortString::from("application/json"))
            .with_delivery_mode(2)
            .with_headers(table);
        self.publish("", &self.name("dead"), body.as_bytes(), props)
            .await;
    }

    /// A dead letter the broker writes by itself: published to `none`, rejected there
    /// without requeue by a client that is not warren.
    pub async fn rejected(&self, id: &str) {
        let props = BasicProperties::default()
            .with_message_id(ShortString::from(id))
            .with_delivery_mode(2);
        self.publish(&self.name("jobs"), "job.none", b"{}", props)
            .await;
        let got = self
            .channel
            .basic_get(
                ShortString::from(self.name("none").as_str()),
                BasicGetOptions { no_ack: false },
            )
            .await
            .expect("basic.get")
            .expect("the message is there");
        got.delivery
            .reject(BasicRejectOptions { requeue: false })
            .await
            .expect("rejected");
    }

    pub async fn ready(&self, queue: &str) -> u32 {
        self.channel
            .queue_declare(
                ShortString::from(self.name(queue).as_str()),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("the queue exists")
            .message_count()
    }

    /// Waits (bounded) until `queue` holds `n` ready messages, and returns what it holds.
    pub async fn settle(&self, queue: &str, n: u32) -> u32 {
        for _ in 0..100 {
            if self.ready(queue).await == n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.ready(queue).await
    }

    /// Takes every message of `queue`: its message id and headers.
    pub async fn drain(&self, queue: &str) -> Vec<(String, FieldTable)> {
        let mut taken = Vec::new();
        while let Some(got) = self
            .channel
            .basic_get(
                ShortString::from(self.name(queue).as_str()),
                BasicGetOptions { no_ack: true },
            )
            .await
            .expect("basic.get")
        {
            let props = &got.delivery.properties;
            taken.push((
                props
                    .message_id()
                    .as_ref()
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
                props.headers().clone().unwrap_or_default(),
            ));
        }
        taken
    }

    /// `warren dlq ARGS --url … --namespace … CONTRACT`.
    /// The message ids [`Broker::drain`] takes from `queue`, sorted.
    pub async fn drained_ids(&self, queue: &str) -> Vec<String> {
        let mut ids: Vec<String> = self
            .drain(queue)
            .await
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        ids.sort_unstable();
        ids
    }

    pub fn warren(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_warren"));
        command
            .arg("dlq")
            .args(args)
            .args(["--url", &url(), "--namespace", &self.namespace])
            .arg(contract())
            .stdin(Stdio::null());
        command
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.warren(args).output().expect("warren runs")
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "warren dlq {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("UTF-8")
    }

    pub async fn stop(self) {
        warren_runtime::delete(&self.connection, &self.topology)
            .await
            .expect("the topology is deleted");
    }
}

pub struct Failure<'a> {
    pub reason: &'a str,
    pub consumer: &'a str,
    pub queue: String,
    pub error: &'a str,
    pub redrives: i64,
}

impl<'a> Failure<'a> {
    /// Exhausted in `run_none`, failed in `queue` (the broker's name of `none`) with `error`.
    pub fn exhausted(queue: &str, error: &'a str) -> Self {
        Self {
            reason: "exhausted",
            consumer: "run_none",
            queue: queue.to_owned(),
            error,
            redrives: 0,
        }
    }
}

/// `warren console` on the broker, spoken to as a browser would: `console ARGS` started, its
/// address read from its first line.
pub struct Console {
    pub child: std::process::Child,
    pub address: String,
}

impl Console {
    pub fn start(broker: &Broker, args: &[&str]) -> Self {
        Self::start_in(&broker.namespace, args)
    }

    /// `console ARGS` on the contract deployed under `namespace`.
    pub fn start_in(namespace: &str, args: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_warren"))
            .arg("console")
            .args([
                "--bind",
                "127.0.0.1:0",
                "--url",
                &url(),
                "--namespace",
                namespace,
            ])
            .args(args)
            .arg(contract())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("warren console starts");
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut first)
            .expect("its first line");
        let address = first
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("an address in {first:?}"))
            .to_owned();
        Self { child, address }
    }

    /// `method path` with `headers` and `body`: the status and the body of the answer.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&self.address).expect("the console answers");
        let mut request = format!("{method} {path} HTTP/1.1\r\nhost: {}\r\n", self.address);
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
        stream.write_all(request.as_bytes()).expect("sent");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("answered");
        let status = answer[9..12].parse().expect("a status");
        let body = answer
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        (status, body)
    }

    /// `request` sent as it is: the whole answer.
    pub fn raw(&self, request: &str) -> String {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&self.address).expect("the console answers");
        stream.write_all(request.as_bytes()).expect("sent");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("answered");
        answer
    }

    /// The token the page carries.
    pub fn token(&self) -> String {
        let (status, page) = self.request("GET", "/", &[], "");
        assert_eq!(status, 200, "the page: {page}");
        page.split("name=\"warren-token\" content=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("the page carries its token")
            .to_owned()
    }

    /// What `/api/dead-letters` says of the dead-letter queue `queue`.
    pub fn dead_letters_of(&self, queue: &str) -> Value {
        let letters = self.json("/api/dead-letters");
        letters["queues"]
            .as_array()
            .expect("queues")
            .iter()
            .find(|q| q["queue"] == queue)
            .unwrap_or_else(|| panic!("no dead-letter queue {queue} in {letters}"))
            .clone()
    }

    /// `GET path` as the page asks it (with its token): the JSON answer.
    pub fn json(&self, path: &str) -> Value {
        let token = self.token();
        let (status, body) = self.request("GET", path, &[("x-warren-token", &token)], "");
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).expect("JSON")
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
