//! What the socket types share: the futures of their operations, the
//! failure of leaving the pool, and address resolution.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

use crate::io::engine::{OpFuture, Unblocking};
use crate::io::op::socket as ops;

/// The failure of an `into_std` conversion: the error, and the socket,
/// still bound to the pool and usable (its operations run down).
///
/// As [`std::io::IntoInnerError`], it converts into the `io::Error` for `?`.
pub struct IntoStdError<T> {
    error: io::Error,
    socket: T,
}

impl<T> IntoStdError<T> {
    /// Why the conversion failed.
    pub fn error(&self) -> &io::Error {
        &self.error
    }

    /// The socket, usable as before.
    pub fn into_inner(self) -> T {
        self.socket
    }

    /// The error and the socket.
    pub fn into_parts(self) -> (io::Error, T) {
        (self.error, self.socket)
    }
}

impl<T> core::fmt::Debug for IntoStdError<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("IntoStdError").field("error", &self.error).finish_non_exhaustive()
    }
}

impl<T> core::fmt::Display for IntoStdError<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "the socket cannot leave the pool: {}", self.error)
    }
}

impl<T> std::error::Error for IntoStdError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl<T> From<IntoStdError<T>> for io::Error {
    fn from(e: IntoStdError<T>) -> Self {
        e.error
    }
}

/// Unbinds the socket of `engine` from the pool for an `into_std`; `rebuild`
/// makes the socket type again from the engine on failure.
pub(super) fn into_std<S, T: From<std::os::windows::io::OwnedSocket>>(
    engine: Unblocking,
    rebuild: impl FnOnce(Unblocking) -> S,
) -> Result<T, IntoStdError<S>> {
    match engine.into_socket() {
        Ok(socket) => Ok(T::from(socket)),
        Err((engine, error)) => Err(IntoStdError { error, socket: rebuild(engine) }),
    }
}

/// Tries `each` on every address in turn, as std's `bind` does; the last
/// error if none works.
pub(super) fn first_ok<T>(addrs: &[SocketAddr], mut each: impl FnMut(&SocketAddr) -> io::Result<T>) -> io::Result<T> {
    let mut last = None;
    for a in addrs {
        match each(a) {
            Ok(t) => return Ok(t),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to use")))
}

/// Every address `addr` resolves to.
pub(super) fn resolve(addr: impl ToSocketAddrs) -> io::Result<Vec<SocketAddr>> {
    Ok(addr.to_socket_addrs()?.collect())
}

/// A public future over one operation of the engine.
macro_rules! op_future {
    ($(#[$doc:meta])* $name:ident<'a $(, $b:ident: $bound:path)?> = $op:ty => $out:ty) => {
        $(#[$doc])*
        #[must_use = "futures do nothing unless polled"]
        pub struct $name<'a $(, $b)?>(pub(super) OpFuture<'a, $op, $out>);

        impl<'a $(, $b: $bound + Send + 'static)?> Future for $name<'a $(, $b)?> {
            type Output = $out;

            fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<$out> {
                Pin::new(&mut self.0).poll(cx)
            }
        }

        impl<'a $(, $b)?> core::fmt::Debug for $name<'a $(, $b)?> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_struct(stringify!($name)).field("issued", &self.0.id()).finish()
            }
        }
    };
}

op_future! {
    /// The future of [`TcpStream::read`](super::TcpStream::read) and [`TcpStream::peek`](super::TcpStream::peek): the bytes
    /// read (or peeked) and the buffer.
    TcpReadFuture<'a, B: AsMut<[u8]>> = ops::Recv<B> => (io::Result<usize>, B)
}
op_future! {
    /// The future of [`TcpStream::readable`](super::TcpStream::readable).
    TcpReadableFuture<'a> = ops::Readable => io::Result<()>
}
op_future! {
    /// The future of [`TcpStream::write`](super::TcpStream::write): the bytes written and the buffer.
    TcpWriteFuture<'a, B: AsRef<[u8]>> = ops::Transmit<B> => (io::Result<usize>, B)
}
op_future! {
    /// The future of [`UdpSocket::send_to`](super::UdpSocket::send_to): the bytes sent and the buffer.
    SendToFuture<'a, B: AsRef<[u8]>> = ops::SendTo<B> => (io::Result<usize>, B)
}
op_future! {
    /// The future of [`UdpSocket::recv_from`](super::UdpSocket::recv_from): the datagram's length and
    /// sender, and the buffer.
    RecvFromFuture<'a, B: AsMut<[u8]>> = ops::RecvFrom<B> => (io::Result<(usize, SocketAddr)>, B)
}

const _: () = {
    const fn send<T: Send>() {}
    send::<TcpReadFuture<'static, Vec<u8>>>();
    send::<TcpWriteFuture<'static, &'static [u8]>>();
    send::<TcpReadableFuture<'static>>();
    send::<SendToFuture<'static, Vec<u8>>>();
    send::<RecvFromFuture<'static, Vec<u8>>>();
};
