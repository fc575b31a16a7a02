//! `warren console` against the real broker: spoken to over HTTP as the page speaks to it.

mod common;

use common::{Broker, Console, Failure};
use serde_json::Value;

/// The console shows the queues with their depths and a poisoned queue's dead letters as one
/// group of the right count, a hostile error as data; it redrives a group only with its token
/// and only when allowed, and then exactly that group.
#[tokio::test]
async fn the_console_groups_dead_letters_and_redrives_a_group_only_when_allowed() {
    let broker = Broker::start("console").await;
    let none = broker.name("none");
    let hostile = "<script>alert(1)</script> order 7 not found";
    for (id, error) in [
        ("p-1", "order 12 not found"),
        ("p-2", "order 345 not found"),
        ("p-3", hostile),
    ] {
        broker
            .dead_letter(id, &Failure::exhausted(&none, error))
            .await;
    }
    assert_eq!(broker.settle("dead", 3).await, 3);

    let read_only = Console::start(&broker, &[]);
    let queues = read_only.json("/api/queues");
    let dead = broker.name("dead");
    let listed = queues["queues"].as_array().expect("queues");
    let of = |name: &str| {
        listed
            .iter()
            .find(|q| q["name"] == name)
            .expect("listed")
            .clone()
    };
    assert_eq!(of(&dead)["depth"], 3);
    assert_eq!(of(&dead)["role"], "dead-letter");
    assert_eq!(of(&none)["depth"], 0);
    assert_eq!(queues["changes_allowed"], false);
    let letters = read_only.json("/api/dead-letters");
    let of_dead = letters["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["queue"] == dead.as_str())
        .expect("the dead-letter queue")
        .clone();
    let groups = of_dead["groups"].as_array().expect("groups");
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert_eq!(groups[0]["count"], 2);
    assert_eq!(groups[0]["error"], "order <n> not found");
    assert_eq!(
        groups[1]["error"], "<script>alert(<n>)</script> order <n> not found",
        "data, as it was sent"
    );
    let group = groups[0]["id"].as_str().expect("an id").to_owned();
    let token = read_only.token();
    let ask = format!(r#"{{"queue":"{dead}","group":"{group}"}}"#);
    let (status, body) =
        read_only.request("POST", "/api/redrive", &[("x-warren-token", &token)], &ask);
    assert_eq!(status, 403, "read-only: {body}");
    drop(read_only);

    let console = Console::start(&broker, &["--allow-changes"]);
    let token = console.token();
    let (status, _) = console.request("POST", "/api/redrive", &[], &ask);
    assert_eq!(status, 403, "no token, no redrive");
    let (status, _) = console.request(
        "POST",
        "/api/redrive",
        &[
            ("x-warren-token", &token),
            ("origin", "http://evil.example"),
        ],
        &ask,
    );
    assert_eq!(status, 403, "another site's request");
    let stream_host = {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&console.address).expect("connected");
        stream
            .write_all(b"GET /api/queues HTTP/1.1\r\nhost: rebound.example:80\r\n\r\n")
            .expect("sent");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("answered");
        answer
    };
    assert!(
        stream_host.starts_with("HTTP/1.1 421"),
        "a rebound name: {stream_host}"
    );
    assert_eq!(broker.settle("dead", 3).await, 3, "nothing moved");

    let (status, body) =
        console.request("POST", "/api/redrive", &[("x-warren-token", &token)], &ask);
    assert_eq!(status, 200, "{body}");
    let summary: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(
        (summary["moved"].as_u64(), summary["skipped"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(broker.settle("dead", 1).await, 1);
    let back = broker.drained_ids("none").await;
    assert_eq!(back, ["p-1", "p-2"], "exactly the group went back");
    drop(console);
    broker.stop().await;
}
