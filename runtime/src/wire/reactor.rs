//! lapin connections whose socket reads through [`GuardedStream`]: lapin takes its transport
//! from a reactor's `TcpStream` type, so the guard comes as a reactor of its own around
//! tokio's, with the TLS session (if any) inside the guard.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use async_rs::traits::Reactor;
use async_rs::util::RuntimeParts;
use async_rs::{Runtime, Tokio};
use futures_lite::io::{AsyncRead, AsyncWrite};
use lapin::tcp::{AMQPUriTcpExt, AsyncTcpStream, OwnedTLSConfig};
use lapin::uri::AMQPUri;

use super::{GuardedStream, Severance};

/// A plain or TLS connection on tokio, as lapin opens it.
type Socket = AsyncTcpStream<<Tokio as Reactor>::TcpStream>;

/// Tokio's reactor, its streams guarded and ended by one severance.
#[derive(Clone)]
struct GuardedReactor(Tokio, Severance);

impl std::fmt::Debug for GuardedReactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("GuardedReactor")
            .field(&self.0)
            .finish_non_exhaustive()
    }
}

impl Reactor for GuardedReactor {
    type TcpStream = GuardedStream<Socket>;
    type Sleep = <Tokio as Reactor>::Sleep;

    fn register<H: Read + Write + AsFd + AsRawFd + Send + 'static>(
        &self,
        socket: H,
    ) -> io::Result<impl AsyncRead + AsyncWrite + Send + Unpin + 'static> {
        self.0.register(socket)
    }

    fn sleep(&self, dur: Duration) -> Self::Sleep {
        self.0.sleep(dur)
    }

    fn interval(
        &self,
        dur: Duration,
    ) -> impl futures_lite::Stream<Item = Instant> + Send + 'static {
        self.0.interval(dur)
    }

    fn tcp_connect_addr(
        &self,
        addr: SocketAddr,
    ) -> impl Future<Output = io::Result<Self::TcpStream>> + Send + 'static {
        let connecting = self.0.tcp_connect_addr(addr);
        let severance = self.1.clone();
        async move {
            Ok(GuardedStream::new(
                AsyncTcpStream::Plain(connecting.await?),
                0,
                severance,
            ))
        }
    }
}

/// Opens a lapin connection to `url` whose inbound frames are guarded, with `tls` for an
/// `amqps://` URL, and whose socket `severance` ends. Must be called within a tokio runtime,
/// which the connection then runs on.
pub(crate) async fn connect(
    url: &str,
    properties: lapin::ConnectionProperties,
    tls: OwnedTLSConfig,
    severance: &Severance,
) -> Result<lapin::Connection, lapin::Error> {
    let uri: AMQPUri = url
        .parse()
        .map_err(|e: String| lapin::Error::from(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
    let plain = Runtime::new(Tokio::current());
    let guarded = Runtime::new(RuntimeParts::new(
        Tokio::current(),
        GuardedReactor(Tokio::current(), severance.clone()),
    ));
    let severance = severance.clone();
    lapin::Connection::connector(
        uri,
        guarded,
        async move |uri: AMQPUri, _| {
            let socket = uri
                .connect_with_config_async(tls.as_ref(), &plain)
                .await
                .map_err(lapin::Error::from)?;
            let frame_max = uri.query.frame_max.unwrap_or(0);
            Ok(AsyncTcpStream::Plain(GuardedStream::new(
                socket,
                frame_max,
                severance.clone(),
            )))
        },
        properties,
    )
    .await
}
