//! The `decode` fuzz target's smoke run for CI, where cargo-fuzz cannot run: random and
//! broken deliveries (bodies, compression, content types and encodings, header tables, body
//! caps) through the worker's decode path. Refusing a delivery is fine; a panic fails.

use proptest::collection::vec;
use proptest::prelude::*;
use warren_runtime::lapin::BasicProperties;
use warren_runtime::lapin::types::{
    AMQPValue, DecimalValue, FieldArray, FieldTable, LongString, ShortString,
};
use warren_runtime::model::Compression;
use warren_runtime::{__fuzz, DEFAULT_MAX_BODY_BYTES};

/// A body: random bytes, random JSON, or a valid payload with random fields.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..200),
        json().prop_map(|value| value.to_string().into_bytes()),
        (
            proptest::option::of(any::<i64>()),
            vec("[a-z0-9A-Z-]{0,6}", 0..10),
            proptest::option::of(".{0,210}"),
        )
            .prop_map(|(count, tags, note)| __fuzz::sample_body(
                count,
                &tags,
                note.as_deref()
            )),
    ]
}

fn json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(Into::into),
        any::<i64>().prop_map(Into::into),
        any::<f64>().prop_map(Into::into),
        prop_oneof![
            Just("id".to_owned()),
            Just("at".to_owned()),
            ".{0,12}".boxed()
        ]
        .prop_map(Into::into),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Into::into),
            vec(
                (
                    prop_oneof![
                        Just("id".to_owned()),
                        Just("at".to_owned()),
                        Just("tags".to_owned()),
                        "[a-z]{0,6}".boxed()
                    ],
                    inner
                ),
                0..6
            )
            .prop_map(|entries| serde_json::Value::Object(entries.into_iter().collect())),
        ]
    })
}

/// The bytes on the wire and the `content-encoding` they are sent with: as they are, well
/// compressed, cut short, or under a name the worker does not know.
fn encoded(body: Vec<u8>) -> impl Strategy<Value = (Vec<u8>, Option<String>)> {
    let codec = prop_oneof![Just(Compression::Gzip), Just(Compression::Deflate)];
    prop_oneof![
        Just((body.clone(), None)),
        Just((body.clone(), Some("identity".to_owned()))),
        (codec.clone(), any::<bool>()).prop_map({
            let body = body.clone();
            move |(codec, upper)| {
                let name = codec.as_str();
                let name = if upper {
                    name.to_ascii_uppercase()
                } else {
                    name.to_owned()
                };
                (__fuzz::compress(codec, &body), Some(name))
            }
        }),
        (codec.clone(), any::<prop::sample::Index>()).prop_map({
            let body = body.clone();
            move |(codec, cut)| {
                let mut bytes = __fuzz::compress(codec, &body);
                bytes.truncate(cut.index(bytes.len() + 1));
                (bytes, Some(codec.as_str().to_owned()))
            }
        }),
        (codec, any::<prop::sample::Index>(), any::<u8>()).prop_map({
            let body = body.clone();
            move |(codec, at, byte)| {
                let mut bytes = __fuzz::compress(codec, &body);
                let at = at.index(bytes.len());
                bytes[at] ^= byte | 1;
                (bytes, Some(codec.as_str().to_owned()))
            }
        }),
        "[a-zA-Z0-9 ,-]{0,12}".prop_map(move |name| (body.clone(), Some(name))),
    ]
}

fn content_type() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some("application/json".to_owned())),
        Just(Some(" Application/JSON ; charset=utf-8".to_owned())),
        Just(Some(";".to_owned())),
        proptest::option::of(".{0,24}"),
    ]
}

fn amqp_value() -> impl Strategy<Value = AMQPValue> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(AMQPValue::Boolean),
        any::<i8>().prop_map(AMQPValue::ShortShortInt),
        any::<u8>().prop_map(AMQPValue::ShortShortUInt),
        any::<i16>().prop_map(AMQPValue::ShortInt),
        any::<u16>().prop_map(AMQPValue::ShortUInt),
        any::<i32>().prop_map(AMQPValue::LongInt),
        any::<u32>().prop_map(AMQPValue::LongUInt),
        any::<i64>().prop_map(AMQPValue::LongLongInt),
        any::<f32>().prop_map(AMQPValue::Float),
        any::<f64>().prop_map(AMQPValue::Double),
        (any::<u8>(), any::<u32>())
            .prop_map(|(scale, value)| AMQPValue::DecimalValue(DecimalValue { scale, value })),
        ".{0,12}".prop_map(|s| AMQPValue::ShortString(ShortString::from(s))),
        // Long strings past 255 bytes too: a header the worker copies into an AMQP name must
        // not panic there.
        prop_oneof![vec(any::<u8>(), 0..16), vec(any::<u8>(), 250..300)]
            .prop_map(|b| AMQPValue::LongString(LongString::from(b))),
        any::<u64>().prop_map(AMQPValue::Timestamp),
        vec(any::<u8>(), 0..16).prop_map(|b| AMQPValue::ByteArray(b.into())),
        Just(AMQPValue::Void),
    ];
    leaf.prop_recursive(2, 16, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(|items| {
                let mut array = FieldArray::default();
                for item in items {
                    array.push(item);
                }
                AMQPValue::FieldArray(array)
            }),
            vec((header_name(), inner), 0..4)
                .prop_map(|entries| AMQPValue::FieldTable(table(entries))),
        ]
    })
}

/// Header names the decode path reads, and others.
fn header_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("tenant".to_owned()),
        Just("priority".to_owned()),
        Just("x-retry-count".to_owned()),
        Just("x-delivery-count".to_owned()),
        Just("x-first-failure-timestamp".to_owned()),
        Just("x-original-exchange".to_owned()),
        Just("x-original-routing-key".to_owned()),
        "[a-z-]{0,10}".boxed(),
    ]
}

fn table(entries: Vec<(String, AMQPValue)>) -> FieldTable {
    let mut table = FieldTable::default();
    for (key, value) in entries {
        table.insert(ShortString::from(key), value);
    }
    table
}

fn seed() -> proptest::test_runner::RngSeed {
    match std::env::var_os("PROPTEST_RNG_SEED") {
        Some(_) => ProptestConfig::default().rng_seed,
        None => proptest::test_runner::RngSeed::Fixed(0x5eed_0fde_c0de),
    }
}

proptest! {
    // Enough cases to cross every branch above a few times in a second or two of a debug
    // build; the fuzzer is where long runs happen.
    // No regressions file: proptest prints the shrunk failing input, and the fixed bug has
    // a unit test of its own (`decode.rs`).
    // A fixed seed, so CI runs the same cases every time; `PROPTEST_RNG_SEED=<n>` explores
    // others.
    #![proptest_config(ProptestConfig {
        cases: 1024,
        failure_persistence: None,
        rng_seed: seed(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn decode_never_panics(
        (bytes, encoding) in body().prop_flat_map(encoded),
        content_type in content_type(),
        headers in proptest::option::of(vec((header_name(), amqp_value()), 0..6)),
        message_id in proptest::option::of(".{0,8}"),
        cap in prop_oneof![Just(DEFAULT_MAX_BODY_BYTES), 0..300usize],
        redelivered in any::<bool>(),
    ) {
        let mut properties = BasicProperties::default();
        if let Some(content_type) = content_type {
            properties = properties.with_content_type(ShortString::from(content_type));
        }
        if let Some(encoding) = encoding {
            properties = properties.with_content_encoding(ShortString::from(encoding));
        }
        if let Some(headers) = headers {
            properties = properties.with_headers(table(headers));
        }
        if let Some(id) = message_id {
            properties = properties.with_message_id(ShortString::from(id));
        }
        // Refusals are expected; the property is that decoding returns at all.
        let _ = __fuzz::decode(bytes, properties, cap, redelivered);
    }
}

/// A valid payload behind every content type, encoding and cap the worker accepts decodes:
/// the smoke test above is not passing only because everything is refused.
#[test]
fn valid_deliveries_decode() {
    let body = __fuzz::sample_body(Some(7), &["blue".to_owned()], Some("ok"));
    let json =
        || BasicProperties::default().with_content_type(ShortString::from("application/json"));
    assert_eq!(
        __fuzz::decode(body.clone(), json(), body.len(), false),
        Ok(())
    );
    for codec in [Compression::Gzip, Compression::Deflate] {
        let properties = json().with_content_encoding(ShortString::from(codec.as_str()));
        let compressed = __fuzz::compress(codec, &body);
        // The cap applies to the bytes on the wire too, which may outgrow a short body.
        let cap = body.len().max(compressed.len());
        assert_eq!(__fuzz::decode(compressed, properties, cap, false), Ok(()));
    }
    let refused = __fuzz::decode(body.clone(), json(), body.len() - 1, false).unwrap_err();
    assert!(refused.starts_with("too-large"), "{refused}");
}
