//! The guard judged against lapin's own parser: whatever bytes come in, what is handed on
//! parses, and what was sound is handed on unchanged.

use amq_protocol::frame::{AMQPFrame, parse_frame};
use futures_lite::io::{AsyncRead, AsyncReadExt};
use lapin::types::{AMQPValue, FieldTable};
use proptest::prelude::*;

use super::header::{HEADERS_CUT, headers_cut, judge};
use super::{GuardedStream, Severance, method};
use crate::amqp::MAX_DEPTH;
use crate::model::FailureReason;

fn short(text: &[u8]) -> Vec<u8> {
    let mut out = vec![u8::try_from(text.len()).unwrap()];
    out.extend_from_slice(text);
    out
}

fn long(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&u32::try_from(content.len()).unwrap().to_be_bytes());
    out.extend_from_slice(content);
    out
}

fn text(value: &str) -> Vec<u8> {
    long(b'S', value.as_bytes())
}

/// A table's content: key-value pairs.
fn entries(pairs: &[(&[u8], Vec<u8>)]) -> Vec<u8> {
    pairs
        .iter()
        .flat_map(|(key, value)| [short(key), value.clone()].concat())
        .collect()
}

/// Arrays nested `depth` levels deep around an integer, built without recursion.
fn nested(depth: usize) -> Vec<u8> {
    let mut value = vec![b'I', 0, 0, 0, 1];
    for _ in 0..depth {
        value = long(b'A', &value);
    }
    value
}

/// A content header frame on channel 1 with `flags` and the encoded `properties`.
fn header_frame(flags: u16, properties: &[u8]) -> Vec<u8> {
    let mut payload = vec![0, 60, 0, 0];
    payload.extend_from_slice(&42u64.to_be_bytes());
    payload.extend_from_slice(&flags.to_be_bytes());
    payload.extend_from_slice(properties);
    let mut frame = vec![2, 0, 1];
    frame.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
    frame.extend_from_slice(&payload);
    frame.push(0xCE);
    frame
}

/// A frame with a content type and the headers `pairs`.
fn with_headers(pairs: &[(&[u8], Vec<u8>)]) -> Vec<u8> {
    let properties = [
        short(b"application/json"),
        long(b'F', &entries(pairs))[1..].to_vec(),
    ]
    .concat();
    header_frame(0x8000 | 0x2000, &properties)
}

/// The headers lapin parses out of `frame`, which must be one whole content header frame.
fn parsed_headers(frame: &[u8]) -> FieldTable {
    match parse_frame(frame) {
        Ok(([], AMQPFrame::Header(1, header))) => {
            assert_eq!(header.body_size, 42);
            header.properties.headers().clone().unwrap_or_default()
        }
        other => panic!("lapin does not parse it: {other:?}"),
    }
}

#[test]
fn sound_headers_pass_untouched() {
    let death = long(
        b'F',
        &entries(&[
            (b"queue", text("work.wait.100ms")),
            (b"count", vec![b'l', 0, 0, 0, 0, 0, 0, 0, 1]),
            (b"routing-keys", long(b'A', &text("work"))),
        ]),
    );
    let frame = with_headers(&[
        (b"x-death", long(b'A', &death)),
        (b"tenant", text("acme")),
        (b"deep-enough", nested(MAX_DEPTH - 1)),
    ]);
    assert_eq!(judge(&frame, 131_072), None);
    assert_eq!(parsed_headers(&frame).inner().len(), 3);
}

#[test]
fn headers_nested_past_the_bound_are_cut_and_the_rest_kept() {
    // 20,000 levels: lapin's recursive parser overflows its thread's stack on a few hundred.
    let frame = with_headers(&[
        (b"tenant", text("acme")),
        (b"trace", nested(20_000)),
        (b"just-too-deep", nested(MAX_DEPTH)),
    ]);
    let rebuilt = judge(&frame, 131_072).expect("rebuilt");
    let headers = parsed_headers(&rebuilt);
    assert!(headers.inner().contains_key("tenant"));
    assert!(!headers.inner().contains_key("trace"));
    assert!(!headers.inner().contains_key("just-too-deep"));
    let (reason, detail) = headers_cut(Some(&headers)).expect("marked");
    assert_eq!(reason.as_str(), FailureReason::MalformedHeaders.as_str());
    assert!(
        detail.contains("`trace`") && detail.contains("deeper"),
        "{detail}"
    );
}

#[test]
fn a_frame_over_frame_max_loses_its_largest_foreign_headers_first() {
    let frame_max = 131_072;
    let frame = with_headers(&[
        (b"blob", text(&"b".repeat(130_600))),
        (b"small", text("kept")),
        (b"x-last-error", text(&"e".repeat(1000))),
        (
            b"x-death",
            long(b'A', &long(b'F', &entries(&[(b"queue", text("work"))]))),
        ),
    ]);
    assert!(frame.len() > frame_max);
    let rebuilt = judge(&frame, frame_max).expect("rebuilt");
    assert!(rebuilt.len() <= frame_max, "{} bytes", rebuilt.len());
    let headers = parsed_headers(&rebuilt);
    for kept in ["small", "x-last-error", "x-death"] {
        assert!(headers.inner().contains_key(kept), "{kept} kept");
    }
    assert!(!headers.inner().contains_key("blob"));
    let (reason, detail) = headers_cut(Some(&headers)).expect("marked");
    assert_eq!(reason.as_str(), FailureReason::TooLarge.as_str());
    assert!(detail.contains("`blob` (130605 bytes)"), "{detail}");
}

#[test]
fn values_lapin_cannot_parse_are_cut() {
    let unknown = with_headers(&[(b"ok", text("kept")), (b"odd", vec![b'Z', 1, 2])]);
    let not_utf8_key = with_headers(&[(b"\xff\xfe", text("x")), (b"ok", text("kept"))]);
    let not_utf8_type = header_frame(0x8000, &short(b"\xc3\x28"));
    let trailing = header_frame(0x8000, &[short(b"application/json"), vec![7, 7]].concat());
    for frame in [unknown, not_utf8_key, not_utf8_type, trailing] {
        assert!(
            parse_frame(&frame[..]).is_err(),
            "lapin refuses the original"
        );
        let rebuilt = judge(&frame, 131_072).expect("rebuilt");
        let headers = parsed_headers(&rebuilt);
        assert_eq!(
            headers_cut(Some(&headers)).expect("marked").0.as_str(),
            FailureReason::MalformedHeaders.as_str()
        );
    }
}

/// A method frame on channel 1.
fn method_frame(payload: &[u8]) -> Vec<u8> {
    [vec![1, 0, 1], long(0, payload)[1..].to_vec(), vec![0xCE]].concat()
}

#[test]
fn a_routing_key_that_is_not_utf8_is_made_lossy() {
    // basic.deliver: consumer tag, delivery tag, redelivered, exchange, routing key.
    let mut payload = vec![0, 60, 0, 60];
    payload.extend(short(b"ctag"));
    payload.extend(7u64.to_be_bytes());
    payload.push(0);
    payload.extend(short(b"orders"));
    payload.extend(short(b"order.\xff"));
    let frame = method_frame(&payload);
    assert!(parse_frame(&frame[..]).is_err());
    let rebuilt = method::judge(&frame).expect("rebuilt");
    let (_, parsed) = parse_frame(&rebuilt[..]).expect("parses");
    assert!(
        format!("{parsed:?}").contains("order.\u{fffd}"),
        "{parsed:?}"
    );
}

#[test]
fn a_close_whose_reply_text_was_cut_inside_a_character_is_made_lossy() {
    // RabbitMQ cuts a reply text naming a long non-ASCII queue at 255 bytes, byte-wise.
    let mut text = b"NOT_FOUND - no queue '".to_vec();
    text.extend("é".repeat(120).as_bytes());
    text.truncate(255);
    let mut payload = vec![0, 20, 0, 40, 1, 148];
    payload.extend(short(&text));
    payload.extend([0, 50, 0, 10]);
    let frame = method_frame(&payload);
    assert!(parse_frame(&frame[..]).is_err());
    let rebuilt = method::judge(&frame).expect("rebuilt");
    let (_, parsed) = parse_frame(&rebuilt[..]).expect("parses");
    assert!(format!("{parsed:?}").contains("NOT_FOUND"), "{parsed:?}");
}

/// A reader handing out its bytes at most `step` at a time.
struct Trickle {
    data: Vec<u8>,
    at: usize,
    step: usize,
}

impl AsyncRead for Trickle {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        out: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let n = self.step.min(out.len()).min(self.data.len() - self.at);
        out[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        std::task::Poll::Ready(Ok(n))
    }
}

/// What the guard hands on for `data` read `step` bytes at a time into `read`-byte buffers.
fn through_guard(data: &[u8], step: usize, read: usize) -> Vec<u8> {
    let mut guarded = GuardedStream::new(
        Trickle {
            data: data.to_vec(),
            at: 0,
            step,
        },
        0,
        Severance::default(),
    );
    let mut out = Vec::new();
    let mut buf = vec![0; read];
    futures_lite::future::block_on(async {
        loop {
            let n = guarded.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
    });
    out
}

fn body_frame(data: &[u8]) -> Vec<u8> {
    [
        vec![3, 0, 1],
        u32::try_from(data.len()).unwrap().to_be_bytes().to_vec(),
        data.to_vec(),
        vec![0xCE],
    ]
    .concat()
}

/// Every frame lapin is handed parses, in order.
fn frames(mut data: &[u8]) -> Vec<AMQPFrame> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let (rest, frame) = parse_frame(data).expect("parses");
        out.push(frame);
        data = rest;
    }
    out
}

#[test]
fn the_stream_replaces_only_what_lapin_cannot_take_however_the_bytes_arrive() {
    let good = with_headers(&[(b"tenant", text("acme"))]);
    let bad = with_headers(&[(b"tenant", text("acme")), (b"trace", nested(5_000))]);
    let body = body_frame(&[b'x'; 300]);
    let input = [
        good.clone(),
        body.clone(),
        bad.clone(),
        body.clone(),
        good.clone(),
    ]
    .concat();
    let expected = [
        good.clone(),
        body.clone(),
        judge(&bad, usize::MAX).unwrap(),
        body,
        good,
    ]
    .concat();
    for (step, read) in [
        (1, 1),
        (1, 4096),
        (7, 3),
        (64, 100),
        (100_000, 100_000),
        (13, 65_536),
    ] {
        assert_eq!(
            through_guard(&input, step, read),
            expected,
            "step {step}, read {read}"
        );
    }
    assert_eq!(frames(&expected).len(), 5);
}

fn mutated_frame() -> impl Strategy<Value = Vec<u8>> {
    let frame = with_headers(&[
        (b"tenant", text("acme")),
        (b"n", vec![b'l', 0, 0, 0, 0, 0, 0, 0, 1]),
        (
            b"list",
            long(b'A', &[text("a"), nested(3), vec![b't', 1]].concat()),
        ),
        (b"table", long(b'F', &entries(&[(b"k", vec![b'V'])]))),
    ]);
    let len = frame.len();
    // The flags and the properties are the producer's bytes; the rest is the broker's.
    proptest::collection::vec((19..len - 1, any::<u8>()), 1..6).prop_map(move |edits| {
        let mut frame = frame.clone();
        for (at, byte) in edits {
            frame[at] = byte;
        }
        frame
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, rng_seed: proptest::test_runner::RngSeed::Fixed(10), ..ProptestConfig::default() })]

    /// Bytes flipped anywhere in the properties: the guard hands on a frame lapin parses.
    #[test]
    fn whatever_a_producer_sends_lapin_can_parse_what_is_handed_on(frame in mutated_frame()) {
        let handed = judge(&frame, 131_072).unwrap_or_else(|| frame.clone());
        let headers = parsed_headers(&handed);
        if handed != frame {
            prop_assert!(headers.inner().contains_key(HEADERS_CUT));
        }
        let _: Option<&AMQPValue> = headers.inner().get("tenant");
    }
}
