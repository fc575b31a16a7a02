//! Ending a connection's socket from outside lapin.
//!
//! lapin ends a connection by sending `connection.close` and waiting for `close-ok`, and it
//! gives no way to drop the socket otherwise. A broker that blocked the connection (a
//! resource alarm: RabbitMQ stops reading from a connection once it publishes) never reads
//! that close, and a connection whose handshake stalls never gets that far: such a
//! connection keeps its socket and its I/O thread for as long as the broker stays silent,
//! and each reconnect attempt would leave one more. A [`Severance`] makes the guarded stream
//! fail its reads and writes from then on; lapin's I/O loop takes that as a lost connection,
//! ends, and drops the socket.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::sync::lock;

/// A hold on one connection's socket that can end it; cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Severance(Arc<Shared>);

#[derive(Default)]
struct Shared {
    severed: AtomicBool,
    /// The tasks waiting on the socket: woken when it is severed, so that lapin's loop,
    /// asleep until the broker sends or takes bytes, sees it at once.
    waiting: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    reader: Option<Waker>,
    writer: Option<Waker>,
}

/// Which side of the socket a task waits on.
#[derive(Clone, Copy)]
pub(super) enum Side {
    Read,
    Write,
}

impl Severance {
    /// Ends the socket: every read and write on it fails from now on.
    pub(crate) fn sever(&self) {
        self.0.severed.store(true, Ordering::SeqCst);
        let waiting = std::mem::take(&mut *lock(&self.0.waiting));
        for waker in [waiting.reader, waiting.writer].into_iter().flatten() {
            waker.wake();
        }
    }

    /// The error a read or write on a severed socket gets, if it was severed.
    pub(super) fn check(&self) -> Option<io::Error> {
        self.0.severed.load(Ordering::SeqCst).then(|| {
            io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "warren ended the connection: the broker did not answer in time",
            )
        })
    }

    /// What a read or write the socket left pending returns: pending, with the task woken by a
    /// later [`Severance::sever`].
    pub(super) fn park<T>(&self, side: Side, cx: &Context<'_>) -> Poll<io::Result<T>> {
        {
            let mut waiting = lock(&self.0.waiting);
            let slot = match side {
                Side::Read => &mut waiting.reader,
                Side::Write => &mut waiting.writer,
            };
            if !slot
                .as_ref()
                .is_some_and(|waker| waker.will_wake(cx.waker()))
            {
                *slot = Some(cx.waker().clone());
            }
        }
        // Severed between the poll and the waker being stored: that sever woke nobody.
        match self.check() {
            Some(error) => Poll::Ready(Err(error)),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll, Wake, Waker};

    use futures_lite::io::{AsyncRead, AsyncWrite};

    use super::super::GuardedStream;
    use super::Severance;

    /// A socket on which nothing ever happens: the broker says nothing and reads nothing.
    struct Silent;

    impl AsyncRead for Silent {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &mut [u8],
        ) -> Poll<io::Result<usize>> {
            Poll::Pending
        }
    }

    impl AsyncWrite for Silent {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &[u8],
        ) -> Poll<io::Result<usize>> {
            Poll::Pending
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Pending
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[derive(Default)]
    struct Woken(AtomicUsize);

    impl Wake for Woken {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn severing_wakes_the_waiting_reader_and_writer_and_fails_them() {
        let severance = Severance::default();
        let mut stream = GuardedStream::new(Silent, 0, severance.clone());
        let (reader, writer) = (Arc::new(Woken::default()), Arc::new(Woken::default()));
        let (read_waker, write_waker) = (Waker::from(reader.clone()), Waker::from(writer.clone()));
        let mut buf = [0; 16];
        let read = Pin::new(&mut stream).poll_read(&mut Context::from_waker(&read_waker), &mut buf);
        assert!(read.is_pending());
        let write = Pin::new(&mut stream).poll_write(&mut Context::from_waker(&write_waker), b"x");
        assert!(write.is_pending());

        severance.sever();
        assert_eq!(reader.0.load(Ordering::SeqCst), 1, "the reader is woken");
        assert_eq!(writer.0.load(Ordering::SeqCst), 1, "the writer is woken");
        let mut cx = Context::from_waker(&read_waker);
        let Poll::Ready(Err(error)) = Pin::new(&mut stream).poll_read(&mut cx, &mut buf) else {
            panic!("a severed socket fails its reads");
        };
        assert_eq!(error.kind(), io::ErrorKind::ConnectionAborted);
        let flushed = Pin::new(&mut stream).poll_flush(&mut cx);
        assert!(matches!(flushed, Poll::Ready(Err(_))), "and its writes");
    }
}
