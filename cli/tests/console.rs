//! `warren console` against the real broker: spoken to over HTTP as the page speaks to it.

mod common;

use common::browser::Browser;
use common::{Broker, Console, Failure};
use std::time::Duration;

use serde_json::Value;
use warren_runtime::model::QueueRole;

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
    // test.sh enables the management plugin: the rates and unacknowledged counts are its.
    let source = queues["source"].as_str().unwrap_or_default();
    assert!(source.contains("the management API at"), "{source}");
    assert!(of(&dead)["unacknowledged"].is_u64(), "{:?}", of(&dead));
    let of_dead = read_only.dead_letters_of(&dead);
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
    // The broker's URL and its credentials reach no page and no answer.
    let (_, page) = read_only.request("GET", "/", &[], "");
    let mut seen = page;
    for path in [
        "/api/queues",
        "/api/dead-letters",
        "/api/workers",
        "/api/diagrams",
    ] {
        seen.push_str(&read_only.json(path).to_string());
    }
    let url = common::url();
    let credentials = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('@').next())
        .unwrap_or_default();
    assert!(
        !seen.contains(credentials) && !seen.contains("amqp://"),
        "credentials shown"
    );
    let (status, _) = read_only.request("GET", "/api/dead-letters", &[], "");
    assert_eq!(
        status, 403,
        "an API request without the token: another site's page"
    );
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
    // A DNS name an attacker rebound to 127.0.0.1, on the console's own port: neither the
    // page (which carries the token) nor the API answers it.
    let port = console
        .address
        .rsplit(':')
        .next()
        .expect("a port")
        .to_owned();
    for path in ["/", "/api/queues"] {
        let answer = console.raw(&format!(
            "GET {path} HTTP/1.1\r\nhost: rebound.example:{port}\r\n\r\n"
        ));
        assert!(
            answer.starts_with("HTTP/1.1 421"),
            "a rebound name, {path}: {answer}"
        );
    }
    // Requests the guards could misread are refused, not guessed at.
    let host = &console.address;
    for (request, status) in [
        (
            format!("GET / HTTP/1.1\r\nhost: {host}\r\nhost: rebound.example\r\n\r\n"),
            "400",
        ),
        (
            format!("GET / HTTP/1.1\r\nx-a: b\r\n host: {host}\r\n\r\n"),
            "400",
        ),
        (
            format!(
                "POST /api/peek HTTP/1.1\r\nhost: {host}\r\ntransfer-encoding: chunked\r\n\r\n"
            ),
            "501",
        ),
        (
            format!("POST /api/peek HTTP/1.1\r\nhost: {host}\r\ncontent-length: +5\r\n\r\n"),
            "400",
        ),
    ] {
        let answer = console.raw(&request);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{request:?}: {answer}"
        );
    }
    assert_eq!(broker.settle("dead", 3).await, 3, "nothing moved");

    // The redrive runs in the background; its progress is followed until it is done.
    let (status, body) =
        console.request("POST", "/api/redrive", &[("x-warren-token", &token)], &ask);
    assert_eq!(status, 200, "{body}");
    let started: Value = serde_json::from_str(&body).expect("JSON");
    let number = started["redrive"]
        .as_u64()
        .expect("a redrive number")
        .to_string();
    let mut summary = Value::Null;
    for _ in 0..6000 {
        summary = console.json("/api/redrives")["redrives"][&number].clone();
        if summary["done"] == true {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(summary["done"], true, "{summary}");
    assert_eq!(
        (summary["moved"].as_u64(), summary["skipped"].as_u64()),
        (Some(2), Some(1)),
        "{summary}"
    );
    assert_eq!(broker.settle("dead", 1).await, 1);
    let back = broker.drained_ids("none").await;
    assert_eq!(back, ["p-1", "p-2"], "exactly the group went back");

    // A purge deletes the queue's messages only when the count confirmed is the count there.
    let purge = |depth: u32| format!(r#"{{"queue":"{dead}","depth":{depth}}}"#);
    let (status, body) = console.request(
        "POST",
        "/api/purge",
        &[("x-warren-token", &token)],
        &purge(5),
    );
    assert_eq!(status, 409, "{body}");
    assert_eq!(broker.settle("dead", 1).await, 1, "nothing purged");
    let (status, body) = console.request(
        "POST",
        "/api/purge",
        &[("x-warren-token", &token)],
        &purge(1),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(broker.settle("dead", 0).await, 0, "purged");
    drop(console);
    broker.stop().await;
}

/// In a real browser (headless Chromium): the page shows the dead-letter queue's depth, in
/// the list and on the contract's diagram, and
/// the poisoned queue's dead letters as one group of the right count; a hostile consumer name
/// and error show as text, running nothing; the group's redrive asks first, naming the count,
/// and moves exactly its messages back to their queue, which the list then marks as growing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_browser_the_page_shows_the_groups_and_redrives_one() {
    let broker = Broker::start("browser").await;
    let none = broker.name("none");
    for (id, error) in [
        ("b-1", "order 12 not found"),
        ("b-2", "order 345 not found"),
    ] {
        broker
            .dead_letter(id, &Failure::exhausted(&none, error))
            .await;
    }
    let hostile = Failure {
        consumer: "<img src=x onerror=\"window.owned=1\">",
        error: "<img src=x onerror=\"window.owned=2\"> failed",
        ..Failure::exhausted(&none, "")
    };
    let hostile_body = r#"{"id":"<script>window.owned=3</script>"}"#;
    broker.dead_letter_of("b-3", &hostile, hostile_body).await;
    assert_eq!(broker.settle("dead", 3).await, 3);
    let console = Console::start(&broker, &["--allow-changes"]);
    let dead = broker.name("dead");
    let group = console.dead_letters_of(&dead)["groups"][0]["id"]
        .as_str()
        .expect("a group")
        .to_owned();

    let address = console.address.clone();
    let group_for_page = group.clone();
    let dead_for_page = dead.clone();
    let none_for_page = none.clone();
    let (asked, shown) = tokio::task::spawn_blocking(move || {
        let browser = Browser::start();
        browser.open(&format!("http://{address}/"));
        browser.wait(
            "the dead-letter queue's depth is shown",
            &format!(
                "const row = document.querySelector('#queues tr[data-queue=\"{dead_for_page}\"]');\
                 return row && row.cells[3].textContent === '3'"
            ),
        );
        browser.wait(
            "the diagram shows the dead-letter queue's depth",
            &format!(
                "const live = document.querySelector('#diagrams g.node[data-queue=\"{dead_for_page}\"] text.live');\
                 return live && live.textContent.startsWith('ready 3')"
            ),
        );
        // Nothing consumes the work queue in this test: marked so.
        browser.wait(
            "a work queue without a consumer is marked",
            &format!(
                "const row = document.querySelector('#queues tr[data-queue=\"{none_for_page}\"]');\
                 return row && row.cells[9].textContent.includes('no consumer')"
            ),
        );
        let row = format!("document.querySelector('tr[data-group=\"{group_for_page}\"]')");
        browser.wait(
            "the group of two is shown",
            &format!("const row = {row}; return row && row.cells[1].textContent === '2'"),
        );
        // The hostile dead letter's group, peeked at: its fields as text.
        browser.run(
            "const rows = [...document.querySelectorAll('#dead-letters tr[data-group]')];\
             rows.find(row => row.cells[1].textContent === '1').querySelector('button.peek').click();\
             return true",
        );
        browser.wait(
            "the peeked dead letter is shown",
            "const block = document.querySelector('#peeked pre');\
             return block && block.textContent.includes('message id b-3')",
        );
        let shown = browser.run(
            "return { images: document.querySelectorAll('img').length, \
                      owned: window.owned || 0, \
                      text: document.querySelector('#dead-letters').innerText, \
                      peeked: document.querySelector('#peeked').innerText }",
        );
        browser.run(&format!(
            "window.confirm = question => {{ window.asked = question; return true; }};\
             {row}.querySelector('button.redrive').click(); return true"
        ));
        browser.wait(
            "the redrive is reported",
            "return document.querySelector('#result').textContent.startsWith('moved 2')",
        );
        // The work queue, unconsumed, holds the two it was given and keeps them: growing.
        browser.wait(
            "the work queue the redrive filled is marked growing",
            &format!(
                "const row = document.querySelector('#queues tr[data-queue=\"{none_for_page}\"]');\
                 return row && row.cells[9].textContent.includes('grew by 2 in')"
            ),
        );
        let asked = browser.run("return window.asked");
        (asked, shown)
    })
    .await
    .expect("the browser ran");

    assert_eq!(shown["images"], 0, "no markup from the broker: {shown}");
    assert_eq!(shown["owned"], 0, "no script from the broker ran");
    let text = shown["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("<img src=x onerror=\"window.owned=<n>\"> failed"),
        "the hostile error shows as text: {text}"
    );
    assert!(
        text.contains("<img src=x onerror=\"window.owned=1\">"),
        "the hostile consumer shows as text: {text}"
    );
    let peeked = shown["peeked"].as_str().unwrap_or_default();
    assert!(
        peeked.contains("error: <img src=x onerror=\"window.owned=2\"> failed"),
        "the peeked error shows as text: {peeked}"
    );
    assert!(
        peeked.contains(hostile_body),
        "the peeked body shows as text: {peeked}"
    );
    let asked = asked.as_str().unwrap_or_default();
    assert!(
        asked.contains("the 2 dead letters of group"),
        "the confirmation names the count: {asked}"
    );
    assert_eq!(broker.settle("dead", 1).await, 1);
    assert_eq!(broker.drained_ids("none").await, ["b-1", "b-2"]);
    drop(console);
    broker.stop().await;
}

/// A worker's health, read from its endpoint, shows beside the queue each of its consumers
/// reads, in the API and on the page; a wait queue it reports holding overdue retries is
/// marked, in the list and on its queue's retry note in the diagram.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_s_health_shows_beside_the_queues_it_consumes() {
    let harness = warren_broker_tests::Harness::start("console-health").await;
    let worker = harness.worker();
    warren_testkit::wait_until("the worker is ready", Duration::from_secs(120), || {
        worker.health().ready
    })
    .await;
    // The worker's health endpoint, as a service serves it; with a wait queue of `backoff`
    // reported holding overdue retries, as a worker reports one that stopped dead-lettering.
    let backoff = harness.deployed.name("backoff");
    let wait_queue = harness
        .topology
        .queues
        .iter()
        .find(|q| matches!(&q.role, QueueRole::Wait { queue, .. } if *queue == backoff))
        .expect("a wait queue of backoff")
        .name
        .clone();
    let mut health = serde_json::to_value(worker.health()).expect("JSON");
    for consumer in health["consumers"].as_array_mut().expect("consumers") {
        if consumer["queue"] == backoff.as_str() {
            consumer["overdue_retries"] = serde_json::json!([{ "wait_queue": wait_queue, "messages": 4, "overdue_ms": 90_000 }]);
        }
    }
    let health = serde_json::to_vec(&health).expect("JSON");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let endpoint = listener.local_addr().expect("bound");
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = [0_u8; 1024];
            let _ = stream.read(&mut request).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                health.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(&health).await;
        }
    });
    let flag = format!("w=http://{endpoint}/health");
    let console = Console::start_in(harness.deployed.namespace(), &["--health", &flag]);

    let workers = console.json("/api/workers");
    let reported = &workers["workers"][0];
    assert_eq!(reported["name"], "w");
    assert_eq!(reported["ready"], true, "{reported}");
    let none = harness.deployed.name("none");
    let consumers = reported["consumers"].as_array().expect("consumers");
    assert!(
        consumers.iter().any(|c| c["name"] == "run_none"
            && c["queue"] == none.as_str()
            && c["subscribed"] == true),
        "{consumers:?}"
    );

    let address = console.address.clone();
    let (beside, marked) = tokio::task::spawn_blocking(move || {
        let browser = Browser::start();
        browser.open(&format!("http://{address}/"));
        let cell = |queue: &str, index: usize| {
            format!(
                "const row = document.querySelector('#queues tr[data-queue=\"{queue}\"]');\
                 return row && row.cells[{index}].textContent"
            )
        };
        let beside = browser.wait("the consumer shows beside its queue", &cell(&none, 8));
        let marked = browser.wait("the wait queue is marked", &cell(&wait_queue, 9));
        browser.wait(
            "the queue's retry note on the diagram says a wait queue is overdue",
            "return [...document.querySelectorAll('#diagrams text.live')]\
                 .some(live => /^\\d+ wait queues: (empty|[\\d.]+ (ms|s|min|h): \\d+( · [\\d.]+ (ms|s|min|h): \\d+)*) · 1 overdue$/.test(live.textContent))",
        );
        (beside, marked)
    })
    .await
    .expect("the browser ran");
    assert!(
        beside.as_str().unwrap_or_default().contains("w/run_none"),
        "{beside}"
    );
    assert!(
        marked
            .as_str()
            .unwrap_or_default()
            .contains("4 retries overdue by 90 s"),
        "{marked}"
    );
    drop(console);
    harness.stop().await.expect("the worker stops");
}

/// The operator's whole round, in a browser: a downstream outage dead-letters three jobs; the
/// page shows them as one group of three; once the downstream is back, the group's redrive
/// from the page sends them back, and the worker handles each one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_redriven_from_the_page_is_handled_once_its_cause_is_fixed() {
    use warren_broker_tests::{job, types};
    let harness = warren_broker_tests::Harness::start("console-outage").await;
    let recorder = &harness.recorder;
    recorder.set_outage(true);
    let ids = ["o-1", "o-2", "o-3"];
    for id in ids {
        harness
            .submit("outage", job(id, types::JobBehaviour::Ok))
            .await;
    }
    let long = Duration::from_secs(120);
    assert_eq!(harness.deployed.wait_until_ready("dead", 3, long).await, 3);
    recorder.set_outage(false);

    let console = Console::start_in(harness.deployed.namespace(), &["--allow-changes"]);
    let address = console.address.clone();
    let asked = tokio::task::spawn_blocking(move || {
        let browser = Browser::start();
        browser.open(&format!("http://{address}/"));
        browser.wait(
            "the outage's dead letters show as one group of three",
            "return [...document.querySelectorAll('#dead-letters tr[data-group]')]\
                 .some(row => row.cells[1].textContent === '3' \
                      && row.cells[4].textContent === 'the downstream service is down')",
        );
        browser.run(
            "window.confirm = question => { window.asked = question; return true; };\
             [...document.querySelectorAll('#dead-letters tr[data-group]')]\
                 .find(row => row.cells[1].textContent === '3')\
                 .querySelector('button.redrive').click();\
             return true",
        );
        browser.wait(
            "the redrive is reported",
            "return document.querySelector('#result').textContent.startsWith('moved 3')",
        );
        browser.run("return window.asked")
    })
    .await
    .expect("the browser ran");
    assert!(
        asked
            .as_str()
            .unwrap_or_default()
            .contains("Send the 3 dead letters"),
        "{asked}"
    );
    for id in ids {
        let attempts = recorder.wait_attempts(id, 2, long).await;
        assert_eq!(attempts.len(), 2, "{id}: failed once, then handled");
        let redriven = attempts[1].failure.as_ref().map_or(0, |f| f.redrive_count);
        assert_eq!(redriven, 1, "{id}: the second attempt is the redriven copy");
    }
    assert_eq!(harness.deployed.wait_until_ready("dead", 0, long).await, 0);
    drop(console);
    harness.stop().await.expect("the worker stops");
}

/// Without the management API the console says so and shows what passive declares give: the
/// depths, and no rates.
#[tokio::test]
async fn without_the_management_api_the_depths_come_from_passive_declares() {
    let broker = Broker::start("console-no-api").await;
    let none = broker.name("none");
    broker
        .dead_letter("n-1", &Failure::exhausted(&none, "order 1 not found"))
        .await;
    assert_eq!(broker.settle("dead", 1).await, 1);
    // Nothing listens on port 9 of this machine.
    let console = Console::start(&broker, &["--management", "http://127.0.0.1:9"]);
    let queues = console.json("/api/queues");
    let source = queues["source"].as_str().unwrap_or_default();
    assert!(source.contains("passive declares (no rates:"), "{source}");
    let dead = broker.name("dead");
    let listed = queues["queues"].as_array().expect("queues");
    let entry = listed
        .iter()
        .find(|q| q["name"] == dead.as_str())
        .expect("listed");
    assert_eq!(entry["depth"], 1);
    assert!(entry.get("publish_rate").is_none(), "{entry}");
    drop(console);
    broker.stop().await;
}
