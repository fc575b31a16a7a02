//! The bytes the broker sends, judged before lapin parses them.
//!
//! lapin parses every frame on its I/O thread and treats a frame it cannot take as fatal to
//! the connection (or, for headers nested a few hundred levels deep, overflows that thread's
//! stack and aborts the process). Most of a frame's bytes are the broker's own, but a content
//! header carries the properties and headers exactly as a producer sent them, and a delivery
//! carries the producer's routing key: any producer could take down every consumer sharing a
//! connection with one message. So every connection warren opens reads through
//! [`GuardedStream`], which passes frames on untouched unless lapin could not survive them:
//! - a content header with headers too deep, values lapin cannot parse, or a size above the
//!   connection's `frame_max`, is rebuilt with what was sound and fits, and the cut recorded
//!   in [`HEADERS_CUT`] (the worker dead-letters such a message);
//! - a delivery whose exchange or routing key is not UTF-8 has it replaced by its lossy
//!   UTF-8 form.
//!
//! The judging costs a scan of each content header and a copy of the bytes; bodies are not
//! looked at. Connections opened with lapin directly are not guarded.

mod budget;
#[cfg(test)]
mod differential;
mod fields;
mod header;
mod method;
mod reactor;
mod severance;
#[cfg(test)]
mod tests;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_lite::io::{AsyncRead, AsyncWrite};

#[cfg(test)]
pub(crate) use budget::header_frame_len;
pub(crate) use budget::{copy_budget, fit};
use header::FRAME_OVERHEAD;
pub(crate) use header::headers_cut;
pub(crate) use reactor::connect;
pub(crate) use severance::Severance;
use severance::Side;

/// The smallest `frame_max` AMQP allows, and what lapin raises a smaller one to.
const FRAME_MIN_SIZE: u32 = 4096;
/// RabbitMQ's default `frame_max`.
pub(crate) const RABBITMQ_FRAME_MAX: usize = 131_072;
/// How much is read from the socket at a time.
const READ_CHUNK: usize = 64 * 1024;
/// The largest frame collected to be judged when `frame_max` allows less (RabbitMQ grows a
/// dead letter past `frame_max` by its `x-death`, never by more than a few KiB).
const MIN_COLLECTABLE: usize = 16 * 1024 * 1024;
/// A read buffer grown past this for one large frame is released once it is handed on.
const SHRINK_ABOVE: usize = 4 * 1024 * 1024;

const FRAME_METHOD: u8 = 1;
const FRAME_HEADER: u8 = 2;

/// A stream whose inbound frames are judged before they are read (see the module docs).
pub(crate) struct GuardedStream<S> {
    inner: S,
    inbound: Inbound,
    severance: Severance,
}

impl<S> GuardedStream<S> {
    /// Guards `inner`, a connection that asked for `frame_max` (0: the server's), to be
    /// ended by `severance`.
    pub(crate) fn new(inner: S, frame_max: u32, severance: Severance) -> Self {
        Self {
            inner,
            severance,
            inbound: Inbound {
                buf: Vec::new(),
                start: 0,
                end: 0,
                cleared: 0,
                passing: 0,
                rebuilt: Vec::new(),
                rebuilt_at: 0,
                client_frame_max: frame_max,
                frame_max: usize::MAX,
                raw: false,
            },
        }
    }
}

/// The inbound side: bytes read and not yet handed on, and where the next frame starts.
struct Inbound {
    /// Bytes read from the socket; `buf[start..end]` are not yet handed on.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Of those, how many are judged and may be handed on as they are.
    cleared: usize,
    /// Bytes of the current frame, not yet read, that are judged and may pass.
    passing: usize,
    /// A frame rebuilt in place of the one received, and how much of it was handed on.
    rebuilt: Vec<u8>,
    rebuilt_at: usize,
    /// The `frame_max` the client asked for (0: none).
    client_frame_max: u32,
    /// The negotiated `frame_max`, once the server's `connection.tune` was seen.
    frame_max: usize,
    /// The server answered with a protocol header (it refuses the version): not frames.
    raw: bool,
}

/// What to do with the bytes at a frame boundary.
enum Judged {
    /// The next `n` bytes are sound.
    Pass(usize),
    /// The frame of `n` bytes is replaced by another.
    Replace(usize, Vec<u8>),
    /// The frame is not complete: at least this many bytes are needed.
    Need(usize),
}

impl Inbound {
    /// Judges the frame at the start of `data`.
    fn judge(&mut self, data: &[u8]) -> Judged {
        if self.raw || data.first() == Some(&b'A') {
            self.raw = true;
            return Judged::Pass(data.len());
        }
        let Some(size) = data.get(3..7) else {
            return Judged::Need(7);
        };
        let size = u32::from_be_bytes([size[0], size[1], size[2], size[3]]);
        let total = usize::try_from(size)
            .unwrap_or(usize::MAX)
            .saturating_add(FRAME_OVERHEAD);
        let kind = data[0];
        // A frame is collected whole before it is judged, so the size its prefix claims is
        // bounded first: far over `frame_max` it is passed on for lapin to refuse.
        let collectable = self.frame_max.saturating_mul(4).max(MIN_COLLECTABLE);
        if (kind != FRAME_METHOD && kind != FRAME_HEADER) || total > collectable {
            return Judged::Pass(total);
        }
        let Some(frame) = data.get(..total) else {
            return Judged::Need(total);
        };
        let replaced = if kind == FRAME_HEADER {
            header::judge(frame, self.frame_max)
        } else {
            if let Some(server) = method::tune_frame_max(frame) {
                self.frame_max = negotiate(self.client_frame_max, server);
            }
            method::judge(frame)
        };
        match replaced {
            Some(frame) => Judged::Replace(total, frame),
            None => Judged::Pass(total),
        }
    }

    /// Hands judged bytes on into `out`; `Err` when more must be read first (at least so
    /// many bytes in all, from the start of the frame being judged).
    fn hand_on(&mut self, out: &mut [u8]) -> Result<usize, usize> {
        'rebuilt: loop {
            if self.rebuilt_at < self.rebuilt.len() {
                let n = copy(&self.rebuilt[self.rebuilt_at..], out);
                self.rebuilt_at += n;
                if self.rebuilt_at == self.rebuilt.len() {
                    self.rebuilt = Vec::new();
                    self.rebuilt_at = 0;
                }
                return Ok(n);
            }
            // Judge ahead over the frames already read, as far as `out` can take: one read
            // hands on many small frames, as the socket would.
            while self.cleared < out.len() {
                let judged_to = self.start + self.cleared;
                let available = self.end - judged_to;
                if available == 0 {
                    break;
                }
                if self.passing > 0 {
                    let n = self.passing.min(available);
                    self.passing -= n;
                    self.cleared += n;
                    continue;
                }
                let data = std::mem::take(&mut self.buf);
                let judged = self.judge(&data[judged_to..self.end]);
                self.buf = data;
                match judged {
                    Judged::Pass(n) => self.passing = n,
                    // What was judged before goes first; this frame is judged again then.
                    Judged::Replace(..) | Judged::Need(_) if self.cleared > 0 => break,
                    Judged::Replace(n, frame) => {
                        self.start += n;
                        self.rebuilt = frame;
                        continue 'rebuilt;
                    }
                    Judged::Need(n) => return Err(n),
                }
            }
            if self.cleared == 0 {
                return Err(0);
            }
            let n = copy(&self.buf[self.start..self.start + self.cleared], out);
            self.start += n;
            self.cleared -= n;
            return Ok(n);
        }
    }

    /// Room to read at least `need` bytes of a frame (plus a chunk) after `buf[start..end]`.
    fn room(&mut self, need: usize) -> &mut [u8] {
        if self.start == self.end && self.buf.len() > SHRINK_ABOVE {
            // One huge frame passed: do not keep its buffer for the life of the connection.
            self.buf = Vec::new();
            self.start = 0;
            self.end = 0;
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let wanted = self.end.max(need).saturating_add(READ_CHUNK);
        if self.buf.len() < wanted {
            self.buf.resize(wanted, 0);
        }
        &mut self.buf[self.end..]
    }
}

fn copy(from: &[u8], to: &mut [u8]) -> usize {
    let n = from.len().min(to.len());
    to[..n].copy_from_slice(&from[..n]);
    n
}

/// The `frame_max` lapin settles on, from the client's and the server's (0: no limit).
fn negotiate(client: u32, server: u32) -> usize {
    let mut frame_max = client;
    if server != 0 && (frame_max == 0 || server < frame_max) {
        frame_max = server;
    }
    if frame_max == 0 {
        frame_max = u32::MAX;
    }
    usize::try_from(frame_max.max(FRAME_MIN_SIZE)).unwrap_or(usize::MAX)
}

impl<S: AsyncRead + Unpin> AsyncRead for GuardedStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(severed) = this.severance.check() {
            return Poll::Ready(Err(severed));
        }
        if out.is_empty() {
            return Poll::Ready(Ok(0));
        }
        loop {
            let need = match this.inbound.hand_on(out) {
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(need) => need,
            };
            let inbound = &mut this.inbound;
            let room = inbound.room(need);
            match Pin::new(&mut this.inner).poll_read(cx, room) {
                Poll::Ready(Ok(0)) => {
                    // The end of the stream inside a frame: hand the rest on as it is, for
                    // lapin to report.
                    let left = inbound.end - inbound.start;
                    if left == 0 {
                        return Poll::Ready(Ok(0));
                    }
                    inbound.passing = 0;
                    inbound.cleared = left;
                }
                Poll::Ready(Ok(n)) => inbound.end += n,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Pending => return this.severance.park(Side::Read, cx),
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for GuardedStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.writing(cx, |inner, cx| inner.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.writing(cx, |inner, cx| inner.poll_write_vectored(cx, bufs))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.writing(cx, |inner, cx| inner.poll_flush(cx))
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_close(cx)
    }
}

impl<S: AsyncWrite + Unpin> GuardedStream<S> {
    /// `write` on the socket unless it was severed; left pending, until it is.
    fn writing<T>(
        &mut self,
        cx: &mut Context<'_>,
        write: impl FnOnce(Pin<&mut S>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if let Some(severed) = self.severance.check() {
            return Poll::Ready(Err(severed));
        }
        match write(Pin::new(&mut self.inner), cx) {
            Poll::Pending => self.severance.park(Side::Write, cx),
            ready => ready,
        }
    }
}
