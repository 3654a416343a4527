//! UDP: [`UdpSocket`].

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::windows::io::{AsRawSocket, RawSocket};

use windows_sys::Win32::Networking::WinSock::{IPPROTO_UDP, SOCK_DGRAM, SOCKADDR_STORAGE, SOCKET, getsockname};

use super::bind;
use super::futures::{IntoStdError, RecvFromFuture, SendToFuture, first_ok, resolve};
use super::tcp::{set_ttl, ttl};
use crate::callback_env::CallbackEnviron;
use crate::io::engine::{OpFuture, Unblocking};
use crate::io::op::socket::{RecvFrom, SendTo, Transmit};
use crate::sys::winsock as sys;

/// A UDP socket whose sends and receives are futures that complete on the
/// pool, with owned buffers.
///
/// ```
/// use windows_threadpool::net::UdpSocket;
///
/// let (a, b) = (UdpSocket::bind("127.0.0.1:0")?, UdpSocket::bind("127.0.0.1:0")?);
/// let to = b.local_addr()?;
/// futures::executor::block_on(async {
///     let (sent, _) = a.send_to(b"ping".to_vec(), to).await;
///     assert_eq!(sent?, 4);
///     let (got, buf) = b.recv_from(vec![0u8; 1500]).await;
///     let (n, from) = got?;
///     assert_eq!((&buf[..n], from), (&b"ping"[..], a.local_addr()?));
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct UdpSocket {
    engine: Unblocking,
    inline: bool,
    family: u16,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<UdpSocket>();
};

impl UdpSocket {
    /// Binds to `addr` (each resolved address in turn, until one binds), on
    /// the process default pool.
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<Self> {
        Self::bind_with(addr, None)
    }

    /// [`bind`](Self::bind), on the pool of `env`, with its settings.
    pub fn bind_in(addr: impl ToSocketAddrs, env: &CallbackEnviron) -> io::Result<Self> {
        Self::bind_with(addr, Some(env))
    }

    fn bind_with(addr: impl ToSocketAddrs, env: Option<&CallbackEnviron>) -> io::Result<Self> {
        sys::winsock()?;
        let addrs = resolve(addr)?;
        first_ok(&addrs, |a| {
            let socket = sys::new_socket(sys::family(a), SOCK_DGRAM, IPPROTO_UDP)?;
            sys::bind_to(socket.as_raw_socket() as SOCKET, a)?;
            let (engine, inline) = bind::bind_socket(socket, bind::Transport::Datagram, env)?;
            Ok(Self { engine, inline, family: sys::family(a) })
        })
    }

    /// Takes a bound `std` socket; see the [module docs](super#from-std)
    /// for why binding it is sound.
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<Self> {
        let family = sys::family(&socket.local_addr()?);
        let socket = socket.into();
        bind::require_overlapped(&socket)?;
        let (engine, inline) = bind::bind_socket(socket, bind::Transport::Datagram, None)?;
        Ok(Self { engine, inline, family })
    }

    /// Gives the socket back as a `std` one (see [Into
    /// std](super#into-std)); on failure, the socket and the error.
    pub fn into_std(self) -> Result<std::net::UdpSocket, IntoStdError<Self>> {
        let Self { engine, inline, family } = self;
        super::futures::into_std(engine, |engine| Self { engine, inline, family })
    }

    fn raw(&self) -> SOCKET {
        use std::os::windows::io::AsRawHandle;
        self.engine.io.as_raw_handle() as SOCKET
    }

    /// Sends `buf` as one datagram to `addr` (its first resolved address);
    /// resolves to the bytes sent and the buffer. An address of the other
    /// family than the socket's, or none, is `InvalidInput` (the first
    /// poll's output).
    pub fn send_to<B>(&self, buf: B, addr: impl ToSocketAddrs) -> SendToFuture<'_, B>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        // The first address only: nothing is collected (no allocation).
        let to = addr.to_socket_addrs().and_then(|mut addrs| {
            let to = addrs.next().ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "send_to: the destination resolved to no address")
            })?;
            if sys::family(&to) != self.family {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "send_to: an address of the other family"));
            }
            Ok(sys::to_raw(&to))
        });
        let (to, to_len, refused) = match to {
            Ok((to, len)) => (to, len, None),
            Err(e) => (SOCKADDR_STORAGE::default(), 0, Some(e)),
        };
        SendToFuture(OpFuture::new(
            &self.engine,
            SendTo { send: Transmit::new(buf, 0, self.inline), to, to_len, refused },
        ))
    }

    /// Receives one datagram into `buf`; resolves to its length and sender,
    /// and the buffer. A datagram longer than `buf` is `WSAEMSGSIZE` (an
    /// error whose `raw_os_error` is 10040), with `buf` holding its start.
    pub fn recv_from<B>(&self, buf: B) -> RecvFromFuture<'_, B>
    where
        B: AsMut<[u8]> + Send + 'static,
    {
        RecvFromFuture(OpFuture::new(&self.engine, RecvFrom::new(buf, self.inline)))
    }

    /// The address the socket is bound to (`getsockname`).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        sys::name_of(self.raw(), getsockname)
    }

    /// Sets the IP time-to-live of outgoing datagrams (`IP_TTL`).
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        set_ttl(self.raw(), ttl)
    }

    /// The IP time-to-live of outgoing datagrams.
    pub fn ttl(&self) -> io::Result<u32> {
        ttl(self.raw())
    }
}

/// The socket's value; deliberately no `AsSocket`.
impl AsRawSocket for UdpSocket {
    fn as_raw_socket(&self) -> RawSocket {
        self.raw() as RawSocket
    }
}
