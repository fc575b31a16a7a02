//! A producer that speaks AMQP 0-9-1 over a plain socket and sends whatever bytes it is given
//! as a message's properties: what a hostile producer can send and lapin cannot build (headers
//! nested 20,000 levels deep would overflow lapin's own stack; an unknown field type has no
//! value to build it from).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One connection with one channel in confirm mode.
pub struct RawProducer {
    stream: TcpStream,
    frame_max: usize,
}

fn short(out: &mut Vec<u8>, text: &[u8]) {
    out.push(u8::try_from(text.len()).expect("a short string"));
    out.extend_from_slice(text);
}

fn method(class: u16, method: u16, arguments: &[u8]) -> Vec<u8> {
    let mut payload = class.to_be_bytes().to_vec();
    payload.extend_from_slice(&method.to_be_bytes());
    payload.extend_from_slice(arguments);
    payload
}

impl RawProducer {
    /// Connects to `url` (`amqp://user:pass@host:port/vhost`) and opens channel 1 in confirm
    /// mode.
    pub fn connect(url: &str) -> io::Result<Self> {
        let uri: lapin::uri::AMQPUri = url.parse().map_err(io::Error::other)?;
        let stream = TcpStream::connect((uri.authority.host.as_str(), uri.authority.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut producer = Self {
            stream,
            frame_max: 4096,
        };
        producer.stream.write_all(b"AMQP\x00\x00\x09\x01")?;
        producer.expect(0, 10, 10)?;
        let mut start_ok = vec![0, 0, 0, 0];
        short(&mut start_ok, b"PLAIN");
        let user = &uri.authority.userinfo;
        let response = format!("\0{}\0{}", user.username, user.password);
        start_ok.extend_from_slice(&u32::try_from(response.len()).expect("short").to_be_bytes());
        start_ok.extend_from_slice(response.as_bytes());
        short(&mut start_ok, b"en_US");
        producer.send(1, 0, &method(10, 11, &start_ok))?;
        let tune = producer.expect(0, 10, 30)?;
        let frame_max = u32::from_be_bytes(tune[2..6].try_into().expect("four bytes"));
        producer.frame_max = usize::try_from(frame_max).expect("fits");
        let mut tune_ok = tune[..6].to_vec();
        tune_ok.extend_from_slice(&[0, 0]);
        producer.send(1, 0, &method(10, 31, &tune_ok))?;
        let mut open = Vec::new();
        short(&mut open, uri.vhost.as_bytes());
        open.extend_from_slice(&[0, 0]);
        producer.send(1, 0, &method(10, 40, &open))?;
        producer.expect(0, 10, 41)?;
        producer.send(1, 1, &method(20, 10, &[0]))?;
        producer.expect(1, 20, 11)?;
        producer.send(1, 1, &method(85, 10, &[0]))?;
        producer.expect(1, 85, 11)?;
        Ok(producer)
    }

    /// The broker's `frame_max`.
    pub fn frame_max(&self) -> usize {
        self.frame_max
    }

    /// Publishes `body` to `exchange` with `routing_key` and `properties` (the property flags
    /// and list, exactly as sent), and waits for the broker's confirm.
    pub fn publish(
        &mut self,
        exchange: &str,
        routing_key: &[u8],
        properties: &[u8],
        body: &[u8],
    ) -> io::Result<()> {
        let mut publish = vec![0, 0];
        short(&mut publish, exchange.as_bytes());
        short(&mut publish, routing_key);
        publish.push(0);
        self.send(1, 1, &method(60, 40, &publish))?;
        let mut header = vec![0, 60, 0, 0];
        header.extend_from_slice(&u64::try_from(body.len()).expect("fits").to_be_bytes());
        header.extend_from_slice(properties);
        self.send(2, 1, &header)?;
        for chunk in body.chunks(self.frame_max - 8) {
            self.send(3, 1, chunk)?;
        }
        loop {
            let (kind, channel, payload) = self.receive()?;
            match (kind, channel, payload.get(..4)) {
                (1, 1, Some([0, 60, 0, 80])) => return Ok(()),
                (1, 1, Some([0, 60, 0, 120])) => return Err(io::Error::other("nacked")),
                (1, _, Some([0, 20, 0, 40] | [0, 10, 0, 50])) => {
                    return Err(io::Error::other(format!(
                        "closed by the broker: {}",
                        String::from_utf8_lossy(&payload)
                    )));
                }
                _ => {}
            }
        }
    }

    fn send(&mut self, kind: u8, channel: u16, payload: &[u8]) -> io::Result<()> {
        let mut frame = vec![kind];
        frame.extend_from_slice(&channel.to_be_bytes());
        frame.extend_from_slice(&u32::try_from(payload.len()).expect("fits").to_be_bytes());
        frame.extend_from_slice(payload);
        frame.push(0xCE);
        self.stream.write_all(&frame)
    }

    fn receive(&mut self) -> io::Result<(u8, u16, Vec<u8>)> {
        let mut head = [0; 7];
        self.stream.read_exact(&mut head)?;
        let size = u32::from_be_bytes(head[3..7].try_into().expect("four bytes"));
        let mut payload = vec![0; usize::try_from(size).expect("fits") + 1];
        self.stream.read_exact(&mut payload)?;
        payload.pop();
        Ok((head[0], u16::from_be_bytes([head[1], head[2]]), payload))
    }

    /// Reads frames until the method `class.method` on `channel`; its arguments.
    fn expect(&mut self, channel: u16, class: u16, id: u16) -> io::Result<Vec<u8>> {
        loop {
            let (kind, on, payload) = self.receive()?;
            if kind == 1 && on == channel && payload.get(..4) == Some(&method(class, id, &[])[..]) {
                return Ok(payload[4..].to_vec());
            }
            if kind == 1 && payload.get(..4) == Some(&[0, 10, 0, 50][..]) {
                return Err(io::Error::other("the broker closed the connection"));
            }
        }
    }
}

/// Encoding of the values a hostile producer puts in its headers.
pub mod encode {
    /// A long string value.
    pub fn text(value: &str) -> Vec<u8> {
        prefixed(b'S', value.as_bytes())
    }

    /// A value with a type tag and a 4-byte length prefix.
    pub fn prefixed(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        out.extend_from_slice(&u32::try_from(content.len()).expect("fits").to_be_bytes());
        out.extend_from_slice(content);
        out
    }

    /// Arrays nested `depth` levels deep around an integer.
    pub fn nested(depth: usize) -> Vec<u8> {
        let mut value = vec![b'I', 0, 0, 0, 1];
        for _ in 0..depth {
            value = prefixed(b'A', &value);
        }
        value
    }

    /// Properties with content type `application/json`, delivery mode 2 and the headers
    /// `pairs` (key, encoded value), as the flags and property list of a content header.
    pub fn properties(pairs: &[(&[u8], Vec<u8>)]) -> Vec<u8> {
        let mut table = Vec::new();
        for (key, value) in pairs {
            super::short(&mut table, key);
            table.extend_from_slice(value);
        }
        let mut out = (0x8000u16 | 0x2000 | 0x1000).to_be_bytes().to_vec();
        super::short(&mut out, b"application/json");
        out.extend_from_slice(&u32::try_from(table.len()).expect("fits").to_be_bytes());
        out.extend_from_slice(&table);
        out.push(2);
        out
    }
}
