//! A delivery built from fuzz input through the worker's decode path: the content type, the
//! body cap (before and after decompression), gzip and deflate (well formed, cut short, or
//! under another name), JSON parsing, JSON Schema validation of payload and headers, and
//! typed deserialization. Refusing a delivery as poison is fine; a panic is a crash.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use warren_runtime::lapin::BasicProperties;
use warren_runtime::lapin::types::{
    AMQPValue, DecimalValue, FieldArray, FieldTable, LongString, ShortString,
};
use warren_runtime::codegen::Compression;
use warren_runtime::{__fuzz, DEFAULT_MAX_BODY_BYTES};

#[derive(Debug, Arbitrary)]
struct Input {
    content_type: Option<ContentType>,
    /// Compresses the body before it is sent, so valid compressed bodies are common.
    compress: Option<Codec>,
    /// The `content-encoding` property, independent of `compress` so they can disagree.
    encoding: Encoding,
    /// Keeps only this many bytes of the wire body: a truncated stream.
    cut: Option<u16>,
    headers: Option<Vec<(Name, Header)>>,
    message_id: Option<String>,
    /// The worker's body cap; `None` is the default cap.
    cap: Option<u16>,
    redelivered: bool,
    body: Body,
}

#[derive(Debug, Arbitrary)]
enum ContentType {
    Json,
    Other(String),
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum Codec {
    Gzip,
    Deflate,
}

impl From<Codec> for Compression {
    fn from(codec: Codec) -> Self {
        match codec {
            Codec::Gzip => Compression::Gzip,
            Codec::Deflate => Compression::Deflate,
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Encoding {
    Absent,
    /// The name of `compress` when there is one: the well-behaved publisher.
    Matching,
    Other(String),
}

#[derive(Debug, Arbitrary)]
enum Body {
    /// A payload that is valid apart from these fields, so validation and deserialization
    /// are reached without the fuzzer having to invent a UUID and a timestamp.
    Sample {
        count: Option<i64>,
        tags: Vec<String>,
        note: Option<String>,
    },
    Raw(Vec<u8>),
}

/// Header names the decode path reads, and any other.
#[derive(Debug, Arbitrary)]
enum Name {
    Tenant,
    Priority,
    RetryCount,
    DeliveryCount,
    FirstFailure,
    OriginalExchange,
    OriginalRoutingKey,
    Other(String),
}

/// `text` as an AMQP short string, cut to its 255 bytes: a broker never delivers a longer
/// one, and lapin's `ShortString::from` panics on it.
fn short(mut text: String) -> ShortString {
    let mut end = text.len().min(255);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    ShortString::from(text)
}

impl Name {
    fn into_short_string(self) -> ShortString {
        short(match self {
            Name::Tenant => "tenant".to_owned(),
            Name::Priority => "priority".to_owned(),
            Name::RetryCount => "x-retry-count".to_owned(),
            Name::DeliveryCount => "x-delivery-count".to_owned(),
            Name::FirstFailure => "x-first-failure-timestamp".to_owned(),
            Name::OriginalExchange => "x-original-exchange".to_owned(),
            Name::OriginalRoutingKey => "x-original-routing-key".to_owned(),
            Name::Other(name) => name,
        })
    }
}

/// Every AMQP field value type.
#[derive(Debug, Arbitrary)]
enum Header {
    Boolean(bool),
    ShortShortInt(i8),
    ShortShortUInt(u8),
    ShortInt(i16),
    ShortUInt(u16),
    LongInt(i32),
    LongUInt(u32),
    LongLongInt(i64),
    Float(f32),
    Double(f64),
    Decimal(u8, u32),
    ShortString(String),
    LongString(Vec<u8>),
    Timestamp(u64),
    ByteArray(Vec<u8>),
    Void,
    Array(Vec<Header>),
    Table(Vec<(Name, Header)>),
}

impl From<Header> for AMQPValue {
    fn from(header: Header) -> Self {
        match header {
            Header::Boolean(b) => AMQPValue::Boolean(b),
            Header::ShortShortInt(i) => AMQPValue::ShortShortInt(i),
            Header::ShortShortUInt(i) => AMQPValue::ShortShortUInt(i),
            Header::ShortInt(i) => AMQPValue::ShortInt(i),
            Header::ShortUInt(i) => AMQPValue::ShortUInt(i),
            Header::LongInt(i) => AMQPValue::LongInt(i),
            Header::LongUInt(i) => AMQPValue::LongUInt(i),
            Header::LongLongInt(i) => AMQPValue::LongLongInt(i),
            Header::Float(f) => AMQPValue::Float(f),
            Header::Double(f) => AMQPValue::Double(f),
            Header::Decimal(scale, value) => AMQPValue::DecimalValue(DecimalValue { scale, value }),
            Header::ShortString(s) => AMQPValue::ShortString(short(s)),
            Header::LongString(b) => AMQPValue::LongString(LongString::from(b)),
            Header::Timestamp(t) => AMQPValue::Timestamp(t),
            Header::ByteArray(b) => AMQPValue::ByteArray(b.into()),
            Header::Void => AMQPValue::Void,
            Header::Array(items) => {
                let mut array = FieldArray::default();
                for item in items {
                    array.push(item.into());
                }
                AMQPValue::FieldArray(array)
            }
            Header::Table(entries) => AMQPValue::FieldTable(table(entries)),
        }
    }
}

fn table(entries: Vec<(Name, Header)>) -> FieldTable {
    let mut table = FieldTable::default();
    for (name, value) in entries {
        table.insert(name.into_short_string(), value.into());
    }
    table
}

fuzz_target!(|input: Input| {
    let body = match input.body {
        Body::Sample { count, tags, note } => __fuzz::sample_body(count, &tags, note.as_deref()),
        Body::Raw(bytes) => bytes,
    };
    let mut wire = match input.compress {
        Some(codec) => __fuzz::compress(codec.into(), &body),
        None => body,
    };
    if let Some(cut) = input.cut {
        wire.truncate(usize::from(cut));
    }
    let mut properties = BasicProperties::default();
    properties = match input.content_type {
        Some(ContentType::Json) => {
            properties.with_content_type(ShortString::from("application/json"))
        }
        Some(ContentType::Other(name)) => properties.with_content_type(short(name)),
        None => properties,
    };
    let encoding = match (input.encoding, input.compress) {
        (Encoding::Absent, _) | (Encoding::Matching, None) => None,
        (Encoding::Matching, Some(codec)) => Some(Compression::from(codec).encoding().to_owned()),
        (Encoding::Other(name), _) => Some(name),
    };
    if let Some(encoding) = encoding {
        properties = properties.with_content_encoding(short(encoding));
    }
    if let Some(headers) = input.headers {
        properties = properties.with_headers(table(headers));
    }
    if let Some(id) = input.message_id {
        properties = properties.with_message_id(short(id));
    }
    let cap = input.cap.map_or(DEFAULT_MAX_BODY_BYTES, usize::from);
    let _ = __fuzz::decode(wire, properties, cap, input.redelivered);
});
