//! What a delivery costs to decode, without a broker: the worker's decode path (the envelope
//! admitted, the body parsed, validated and typed, the route and history read) against
//! `serde_json::from_slice` into the same type, the least a hand-written consumer that types
//! its JSON spends. The broker scenarios mix this cost with lapin's and the broker's; here it
//! stands alone, and `valgrind --tool=callgrind` counts its instructions the same way on a
//! busy machine as on a quiet one.

use std::hint::black_box;
use std::time::{Duration, Instant};

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use warren_runtime::__fuzz::Decoder;

use crate::{Result, messages, order, types};

/// One side of the comparison, decoding `body` `n` times.
#[derive(Clone, Copy)]
enum Side {
    /// `serde_json::from_slice::<BenchOrder>`.
    Typed,
    /// The worker's decode path, validation off.
    Unvalidated,
    /// The worker's decode path with full validation (the default).
    Validated,
}

impl Side {
    const ALL: [Side; 3] = [Side::Typed, Side::Unvalidated, Side::Validated];

    fn label(self) -> &'static str {
        match self {
            Side::Typed => "serde_json::from_slice into the payload type",
            Side::Unvalidated => "warren's decode path, validation off",
            Side::Validated => "warren's decode path, full validation",
        }
    }
}

/// A delivery as warren's publisher sends the benchmark's order: its properties, the
/// publish-time header, the body.
fn delivery(body: Vec<u8>) -> lapin::message::Delivery {
    let mut headers = FieldTable::default();
    headers.insert(
        ShortString::from(warren_runtime::model::headers::PUBLISHED_AT),
        AMQPValue::LongLongInt(1_764_806_400_000),
    );
    let mut raw = lapin::message::Delivery::mock(
        1,
        ShortString::from(""),
        ShortString::from("bench"),
        false,
        body,
    );
    raw.properties = BasicProperties::default()
        .with_content_type(ShortString::from("application/json"))
        .with_delivery_mode(2)
        .with_type(ShortString::from("order"))
        .with_message_id(ShortString::from("0190b6c4-7a1e-7cc3-9f43-1d2e3f405162"))
        .with_timestamp(1_764_806_400)
        .with_headers(headers);
    raw
}

/// Decodes the benchmark's order `n` times on each side, three interleaved rounds, and
/// prints the median time per message of each and its ratio to the typed parse.
pub fn bench(n: usize) -> Result<()> {
    let body = serde_json::to_vec(&order(0))?;
    let raw = delivery(body.clone());
    let decoder = Decoder::<messages::Order>::new()?;
    println!(
        "decode: the benchmark's order ({} bytes) decoded {n} times per side and round, in process, three interleaved rounds (median)",
        body.len()
    );
    let mut rounds: [Vec<Duration>; 3] = Default::default();
    for _ in 0..3 {
        for (index, side) in Side::ALL.into_iter().enumerate() {
            rounds[index].push(round(side, n, &body, &raw, &decoder)?);
        }
    }
    let median = |times: &mut Vec<Duration>| {
        times.sort();
        times[1]
    };
    let typed = median(&mut rounds[0]);
    for (index, side) in Side::ALL.into_iter().enumerate() {
        let time = median(&mut rounds[index]);
        println!(
            "  {:<48} {:>8.0} ns per message  {:.2}x",
            side.label(),
            time.as_nanos() as f64 / n as f64,
            time.as_secs_f64() / typed.as_secs_f64()
        );
    }
    Ok(())
}

/// One round of `side`: `n` decodes, timed.
fn round(
    side: Side,
    n: usize,
    body: &[u8],
    raw: &lapin::message::Delivery,
    decoder: &Decoder<messages::Order>,
) -> Result<Duration> {
    let started = Instant::now();
    for _ in 0..n {
        match side {
            Side::Typed => {
                black_box(serde_json::from_slice::<types::BenchOrder>(black_box(
                    body,
                ))?);
            }
            Side::Unvalidated | Side::Validated => {
                let validate = matches!(side, Side::Validated);
                black_box(decoder.decode(black_box(raw), validate)?);
            }
        }
    }
    Ok(started.elapsed())
}
