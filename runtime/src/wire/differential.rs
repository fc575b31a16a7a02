//! Differential tests of the guard against lapin's own parser (`amq_protocol`): random header
//! frames, hostile in every way a producer's properties can be, and random ways for the bytes
//! to arrive.

use amq_protocol::frame::{AMQPFrame, parse_frame};
use lapin::types::{AMQPValue, FieldTable};

use super::header::judge;
use super::{GuardedStream, Severance};

struct G(fastrand::Rng);

impl G {
    fn bytes(&mut self, n: usize, utf8: bool) -> Vec<u8> {
        if utf8 {
            (0..n).map(|_| self.0.u8(b'a'..=b'z')).collect()
        } else {
            let mut v: Vec<u8> = (0..n).map(|_| self.0.u8(..)).collect();
            if self.0.bool() && n > 0 {
                let i = self.0.usize(..n);
                v[i] = [0xff, 0xc3, 0xe2, 0x80][self.0.usize(..4)];
            }
            v
        }
    }
    fn short(&mut self) -> Vec<u8> {
        let n = if self.0.u8(..10) == 0 {
            self.0.usize(..256)
        } else {
            self.0.usize(..8)
        };
        let utf8 = self.0.u8(..8) != 0;
        let body = self.bytes(n, utf8);
        let mut out = vec![n as u8];
        if self.0.u8(..40) == 0 {
            out[0] = out[0].wrapping_add(1);
        }
        out.extend(body);
        out
    }
    /// How many members an array or table gets: one on the deep spine, none past depth 6,
    /// else up to 3.
    fn children(&mut self, deep: bool, depth: usize) -> usize {
        if deep {
            1
        } else if depth > 6 {
            0
        } else {
            self.0.usize(..4)
        }
    }
    fn long_prefixed(&mut self, tag: u8, content: Vec<u8>) -> Vec<u8> {
        let mut len = content.len() as u32;
        if self.0.u8(..50) == 0 {
            len = len.wrapping_add(self.0.u32(0..3)).wrapping_sub(1);
        }
        if self.0.u16(..2000) == 0 {
            len = u32::MAX - self.0.u32(..8);
        }
        let mut out = vec![tag];
        out.extend(len.to_be_bytes());
        out.extend(content);
        out
    }
    fn value(&mut self, depth: usize) -> Vec<u8> {
        const TAGS: &[u8] = b"VtbBsUuIifDLldTSxAFAFAF";
        let tag = if self.0.u8(..60) == 0 {
            [b'Z', b'_', 0, b'N', b'c'][self.0.usize(..5)]
        } else {
            TAGS[self.0.usize(..TAGS.len())]
        };
        let deep = depth < 45 && (self.0.u8(..3) == 0 || (depth > 8 && self.0.u8(..10) != 0));
        match tag {
            b'V' => vec![b'V'],
            b't' | b'b' | b'B' => vec![tag, self.0.u8(..)],
            b's' | b'U' | b'u' => vec![tag, 1, 2],
            b'I' | b'i' | b'f' => vec![tag, 1, 2, 3, 4],
            b'D' => vec![tag, 1, 2, 3, 4, 5],
            b'L' | b'l' | b'd' | b'T' => vec![tag, 1, 2, 3, 4, 5, 6, 7, 8],
            b'S' | b'x' => {
                let n = if self.0.u8(..8) == 0 {
                    self.0.usize(..3000)
                } else {
                    self.0.usize(..12)
                };
                let b = self.bytes(n, false);
                self.long_prefixed(tag, b)
            }
            b'A' => {
                let n = self.children(deep, depth);
                let mut c = Vec::new();
                for _ in 0..n {
                    c.extend(self.value(depth + 1));
                }
                self.long_prefixed(b'A', c)
            }
            b'F' => {
                let n = self.children(deep, depth);
                let mut c = Vec::new();
                for _ in 0..n {
                    c.extend(self.short());
                    c.extend(self.value(depth + 1));
                }
                self.long_prefixed(b'F', c)
            }
            other => vec![other, 0, 0, 0, 0],
        }
    }
    fn frame(&mut self) -> Vec<u8> {
        let flags: u16 = if self.0.bool() {
            self.0.u16(..)
        } else {
            self.0.u16(..) & 0xa000
        };
        let mut props = Vec::new();
        for index in 0..14 {
            if flags & (1 << (15 - index)) == 0 {
                continue;
            }
            match index {
                2 => {
                    let n = self.0.usize(..6);
                    let mut c = Vec::new();
                    for _ in 0..n {
                        c.extend(self.short());
                        c.extend(self.value(2));
                    }
                    let t = self.long_prefixed(b'F', c);
                    props.extend(&t[1..]);
                }
                3 | 4 => props.push(self.0.u8(..)),
                9 => props.extend([0; 8]),
                _ => props.extend(self.short()),
            }
        }
        if self.0.u8(..20) == 0 {
            let n = self.0.usize(..4);
            props.truncate(props.len().saturating_sub(n));
        }
        if self.0.u8(..20) == 0 {
            props.push(7);
        }
        let mut payload = vec![0, 60, 0, 0];
        payload.extend(42u64.to_be_bytes());
        payload.extend(flags.to_be_bytes());
        payload.extend(props);
        let mut frame = vec![2, 0, 1];
        frame.extend((payload.len() as u32).to_be_bytes());
        frame.extend(payload);
        frame.push(0xCE);
        frame
    }
}

fn depth_of(v: &AMQPValue) -> usize {
    match v {
        AMQPValue::FieldArray(a) => 1 + a.as_slice().iter().map(depth_of).max().unwrap_or(0),
        AMQPValue::FieldTable(t) => 1 + table_depth(t),
        _ => 0,
    }
}
fn table_depth(t: &FieldTable) -> usize {
    t.inner().values().map(depth_of).max().unwrap_or(0)
}

#[test]
fn whatever_header_frame_comes_in_lapin_parses_what_is_handed_on() {
    let mut g = G(fastrand::Rng::with_seed(7));
    let mut stats = [0usize; 3];
    for i in 0..20_000 {
        let frame = g.frame();
        let lapin_ok = parse_frame(&frame[..]).is_ok();
        for frame_max in [4096usize, 131_072] {
            let judged = std::panic::catch_unwind(|| judge(&frame, frame_max));
            let judged = match judged {
                Ok(j) => j,
                Err(_) => panic!("guard panicked on case {i}: {frame:02x?}"),
            };
            let handed = judged.clone().unwrap_or_else(|| frame.clone());
            match parse_frame(&handed[..]) {
                Ok((rest, AMQPFrame::Header(_, h))) => {
                    assert!(rest.is_empty());
                    let d = h.properties.headers().as_ref().map_or(0, table_depth);
                    assert!(d <= 33, "depth {d}");
                }
                other => panic!(
                    "case {i}: lapin rejects what is handed on ({}): {other:?}\n{frame:02x?}",
                    if judged.is_some() {
                        "rebuilt"
                    } else {
                        "passed"
                    }
                ),
            }
            assert!(handed.len() <= frame_max || judged.is_none() && frame.len() <= frame_max);
            assert!(
                handed.len() <= frame_max,
                "case {i}: {} > {frame_max}",
                handed.len()
            );
            if judged.is_none() {
                stats[0] += 1;
            } else if lapin_ok {
                stats[1] += 1;
            } else {
                stats[2] += 1;
            }
        }
    }
    assert!(
        stats[0] > 0 && stats[2] > 0,
        "frames passed and frames rebuilt: {stats:?}"
    );
}

#[test]
fn the_copy_budget_counts_the_bytes_lapin_writes() {
    use amq_protocol::frame::gen_frame;
    use lapin::BasicProperties;
    use lapin::types::{FieldArray, LongString, ShortString};
    let mut t = FieldTable::default();
    t.insert(
        ShortString::from("a"),
        AMQPValue::ShortString(ShortString::from("xyz")),
    );
    t.insert(
        ShortString::from("b"),
        AMQPValue::LongString(LongString::from("xyz")),
    );
    let mut arr = FieldArray::default();
    arr.push(AMQPValue::FieldTable(t.clone()));
    arr.push(AMQPValue::Void);
    t.insert(ShortString::from("c"), AMQPValue::FieldArray(arr));
    let props = BasicProperties::default()
        .with_content_type(ShortString::from("application/json"))
        .with_headers(t)
        .with_priority(3)
        .with_timestamp(5)
        .with_cluster_id(ShortString::from("cl"));
    let frame = AMQPFrame::Header(
        1,
        amq_protocol::frame::AMQPContentHeader {
            class_id: 60,
            body_size: 10,
            properties: props.clone(),
        },
    );
    let ctx = gen_frame(&frame)(amq_protocol::frame::WriteContext::from(Vec::new())).unwrap();
    assert_eq!(super::budget::header_frame_len(&props), ctx.write.len());
}

#[test]
fn a_protocol_header_from_the_server_passes_untouched() {
    use futures_lite::io::AsyncReadExt;
    // A heartbeat then the server's protocol header (version refused).
    let data = [
        vec![8, 0, 0, 0, 0, 0, 0, 0xCE],
        b"AMQP\x00\x00\x09\x01".to_vec(),
    ]
    .concat();
    struct R(Vec<u8>, usize);
    impl futures_lite::io::AsyncRead for R {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            out: &mut [u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = 1.min(out.len()).min(self.0.len() - self.1);
            let at = self.1;
            out[..n].copy_from_slice(&self.0[at..at + n]);
            self.1 += n;
            std::task::Poll::Ready(Ok(n))
        }
    }
    let mut s = GuardedStream::new(R(data.clone(), 0), 0, Severance::default());
    let mut out = Vec::new();
    futures_lite::future::block_on(s.read_to_end(&mut out)).unwrap();
    assert_eq!(out, data);
}

struct Chaos {
    data: Vec<u8>,
    at: usize,
    rng: fastrand::Rng,
    eof_error_after: bool,
}

impl futures_lite::io::AsyncRead for Chaos {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        out: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.rng.bool() {
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        }
        let step = if self.rng.u8(..4) == 0 {
            100_000
        } else {
            self.rng.usize(1..40)
        };
        let n = step.min(out.len()).min(self.data.len() - self.at);
        let at = self.at;
        out[..n].copy_from_slice(&self.data[at..at + n]);
        self.at += n;
        let _ = self.eof_error_after;
        std::task::Poll::Ready(Ok(n))
    }
}

fn tune(frame_max: u32) -> Vec<u8> {
    let mut payload = vec![0, 10, 0, 30, 0, 0];
    payload.extend(frame_max.to_be_bytes());
    payload.extend([0, 60]);
    let mut frame = vec![1, 0, 0];
    frame.extend((payload.len() as u32).to_be_bytes());
    frame.extend(payload);
    frame.push(0xCE);
    frame
}

#[test]
fn frames_split_anywhere_and_reads_pending_at_random_come_out_the_same() {
    use futures_lite::io::AsyncReadExt;
    let mut g = G(fastrand::Rng::with_seed(11));
    for case in 0..100 {
        let mut input = tune(4096);
        for _ in 0..g.0.usize(1..30) {
            match g.0.u8(..4) {
                0 => input.extend([8, 0, 0, 0, 0, 0, 0, 0xCE]),
                1 => {
                    let n = g.0.usize(..5000);
                    input.extend([3, 0, 1]);
                    input.extend((n as u32).to_be_bytes());
                    input.extend(vec![b'x'; n]);
                    input.push(0xCE);
                }
                _ => input.extend(g.frame()),
            }
        }
        let cut = if g.0.u8(..5) == 0 {
            g.0.usize(..input.len())
        } else {
            input.len()
        };
        let full = cut == input.len();
        let input = input[..cut].to_vec();
        let run = |seed: u64, read: usize| {
            let mut s = GuardedStream::new(
                Chaos {
                    data: input.clone(),
                    at: 0,
                    rng: fastrand::Rng::with_seed(seed),
                    eof_error_after: false,
                },
                0,
                Severance::default(),
            );
            let mut out = Vec::new();
            let mut buf = vec![0; read];
            futures_lite::future::block_on(async {
                loop {
                    let n = s.read(&mut buf).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    out.extend_from_slice(&buf[..n]);
                }
            });
            out
        };
        let reference = run(0, 1 << 20);
        for seed in 1..4 {
            let read = [1usize, 3, 7, 100, 4096][g.0.usize(..5)];
            assert_eq!(run(seed, read), reference, "case {case}");
        }
        if full {
            let mut data = &reference[..];
            while !data.is_empty() {
                let off = reference.len() - data.len();
                let (rest, f) = parse_frame(data).unwrap_or_else(|e| {
                    panic!(
                        "case {case} at {off} of {} (input {}): {e:?} {:02x?}",
                        reference.len(),
                        input.len(),
                        &data[..data.len().min(40)]
                    )
                });
                if let AMQPFrame::Header(..) = f {
                    assert!(data.len() - rest.len() <= 4096);
                }
                data = rest;
            }
        }
    }
}
