//! TCP: [`TcpListener`] and [`TcpStream`].

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::io;
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::windows::io::{AsRawSocket, OwnedSocket, RawSocket};
use std::time::Duration;

use windows_sys::Win32::Networking::WinSock::{
    IP_TTL, IPPROTO_IP, IPPROTO_TCP, LINGER, SD_BOTH, SD_RECEIVE, SD_SEND, SIO_KEEPALIVE_VALS, SO_ERROR, SO_KEEPALIVE,
    SO_LINGER, SOCK_STREAM, SOCKET, SOL_SOCKET, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_NODELAY, getpeername, getsockname,
    listen, tcp_keepalive,
};

use super::bind;
use super::futures::{IntoStdError, TcpReadFuture, TcpReadableFuture, TcpWriteFuture, first_ok, resolve};
use crate::callback_env::CallbackEnviron;
use crate::io::engine::{OpFuture, Unblocking};
use crate::io::op::socket::{Accept, AcceptAddresses, Connect, Readable, Recv, Transmit};
use crate::sys::winsock as sys;

/// The backlog `listen` is given: Winsock's `SOMAXCONN` of version 2, "a
/// reasonable maximum" chosen by the provider.
const BACKLOG: i32 = 0x7fff_ffff;

/// A TCP socket listening for connections, whose accepts complete on the
/// pool.
///
/// Dropping it never blocks: a pending accept is cancelled, and the socket
/// closed once its completion has arrived (see
/// [`AsyncIo`](crate::io::AsyncIo#dropping), whose rule it follows).
#[derive(Debug)]
pub struct TcpListener {
    engine: Unblocking,
    inline: bool,
    family: u16,
    /// Where accepted streams are bound.
    env: Option<CallbackEnviron>,
}

/// A TCP connection whose reads and writes are futures that complete on the
/// pool, with owned buffers as [`AsyncIo`](crate::io::AsyncIo)'s.
///
/// The futures borrow the stream (`&self`), so one task can read while
/// another writes: share it as an `Arc<TcpStream>`, with no lock and no
/// split. (For the poll-based traits, `io::Compat::into_split` gives a
/// read half and a write half.) Dropping it never blocks (see the [module
/// docs](super)), unless [`set_linger`](Self::set_linger) says otherwise.
///
/// ```
/// use std::net::Shutdown;
/// use std::sync::Arc;
/// use windows_threadpool::net::{TcpListener, TcpStream};
/// use windows_threadpool::task;
///
/// let listener = TcpListener::bind("127.0.0.1:0")?;
/// let addr = listener.local_addr()?;
/// let echo = task::spawn(async move {
///     let (stream, _) = listener.accept().await?;
///     let mut buf = vec![0u8; 64 * 1024];
///     loop {
///         let (n, mut b) = stream.read(buf).await;
///         match n? {
///             0 => break stream.shutdown(Shutdown::Write),
///             n => b.truncate(n),
///         }
///         let (sent, mut b) = stream.write_all(b).await;
///         sent?;
///         b.resize(64 * 1024, 0);
///         buf = b;
///     }
/// });
/// task::block_on(async {
///     let stream = Arc::new(TcpStream::connect(addr).await?);
///     // A writer task and a reader task, on one stream at once.
///     let writer = task::spawn({
///         let stream = Arc::clone(&stream);
///         async move {
///             let (sent, _) = stream.write_all(vec![7u8; 1 << 20]).await;
///             sent?;
///             stream.shutdown(Shutdown::Write) // the echo ends
///         }
///     });
///     let reader = task::spawn({
///         let stream = Arc::clone(&stream);
///         async move {
///             let (mut total, mut buf) = (0, vec![0u8; 64 * 1024]);
///             loop {
///                 let (n, b) = stream.read(buf).await;
///                 match n? {
///                     0 => break Ok::<_, std::io::Error>(total), // the echo's end of file
///                     n => total += n,
///                 }
///                 buf = b;
///             }
///         }
///     });
///     writer.await.unwrap()?;
///     echo.await.unwrap()?;
///     assert_eq!(reader.await.unwrap()?, 1 << 20);
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct TcpStream {
    pub(super) engine: Unblocking,
    pub(super) inline: bool,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<TcpListener>();
    send_sync::<TcpStream>();
    send_sync::<Keepalive>();
    const fn send<T: Send>() {}
    send::<AcceptFuture<'static>>();
};

fn raw(engine: &Unblocking) -> SOCKET {
    use std::os::windows::io::AsRawHandle;
    engine.io.as_raw_handle() as SOCKET
}

impl TcpListener {
    /// Binds to `addr` and listens, as `std::net::TcpListener::bind` does
    /// (each resolved address in turn, until one binds); accepted streams
    /// are bound to the process default pool.
    ///
    /// ```
    /// use windows_threadpool::net::{TcpListener, TcpStream};
    ///
    /// let listener = TcpListener::bind("127.0.0.1:0")?;
    /// let addr = listener.local_addr()?;
    /// futures::executor::block_on(async {
    ///     let (client, accepted) = futures::join!(TcpStream::connect(addr), listener.accept());
    ///     let (client, (server, peer)) = (client?, accepted?);
    ///     assert_eq!(peer, client.local_addr()?);
    ///     let (sent, _) = client.write_all(b"ping".to_vec()).await;
    ///     sent?;
    ///     let (n, buf) = server.read(vec![0u8; 16]).await;
    ///     assert_eq!(&buf[..n?], b"ping");
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<Self> {
        Self::bind_with(addr, None)
    }

    /// [`bind`](Self::bind), with this listener's accepts and the streams it
    /// accepts bound to the pool of `env`, with its settings.
    pub fn bind_in(addr: impl ToSocketAddrs, env: &CallbackEnviron) -> io::Result<Self> {
        Self::bind_with(addr, Some(env))
    }

    fn bind_with(addr: impl ToSocketAddrs, env: Option<&CallbackEnviron>) -> io::Result<Self> {
        sys::winsock()?;
        let addrs = resolve(addr)?;
        first_ok(&addrs, |a| {
            let socket = sys::new_socket(sys::family(a), SOCK_STREAM, IPPROTO_TCP)?;
            let s = socket.as_raw_socket() as SOCKET;
            sys::bind_to(s, a)?;
            // SAFETY: `s` is a bound socket.
            sys::check(unsafe { listen(s, BACKLOG) })?;
            Self::from_listening(socket, sys::family(a), env)
        })
    }

    fn from_listening(socket: OwnedSocket, family: u16, env: Option<&CallbackEnviron>) -> io::Result<Self> {
        let (engine, inline) = bind::bind_socket(socket, bind::Transport::Stream, env)?;
        Ok(Self { engine, inline, family, env: env.cloned() })
    }

    /// Takes a listening `std` listener (std creates its sockets overlapped
    /// and not inheritable); see the [module docs](super#from-std) for why
    /// binding it is sound.
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<Self> {
        let family = sys::family(&listener.local_addr()?);
        let socket = listener.into();
        bind::require_overlapped(&socket)?;
        Self::from_listening(socket, family, None)
    }

    /// Gives the listener back as a `std` one (see [Into
    /// std](super#into-std)); on failure, the listener and the error.
    #[expect(
        clippy::result_large_err,
        reason = "the listener comes back by value, as std's IntoInnerError gives its writer"
    )]
    pub fn into_std(self) -> Result<std::net::TcpListener, IntoStdError<Self>> {
        let Self { engine, inline, family, env } = self;
        super::futures::into_std(engine, |engine| Self { engine, inline, family, env })
    }

    /// Accepts one connection: resolves to the connected stream and the
    /// peer's address. Lazy: the accept is issued at the first poll.
    /// Dropping the future after that cancels it; a connection that raced
    /// the cancellation is closed.
    ///
    /// A connection that died before it was accepted (its client reset it
    /// or gave up) ends no accept: it is
    /// closed and the next one is awaited, as libuv re-queues its
    /// `AcceptEx`, so no accept loop has to know Winsock's list. The errors
    /// that reach the caller are the listener's own (or the system's, such
    /// as running out of sockets), never one client's.
    pub fn accept(&self) -> AcceptFuture<'_> {
        AcceptFuture { listener: self, op: self.accept_op(), skipped: 0 }
    }

    fn accept_op(&self) -> OpFuture<'_, Accept> {
        OpFuture::new(
            &self.engine,
            Accept {
                listener: raw(&self.engine),
                family: self.family,
                accepted: None,
                addresses: AcceptAddresses([0; _]),
                inline: self.inline,
            },
        )
    }

    /// The address the listener is bound to (`getsockname`).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        sys::name_of(raw(&self.engine), getsockname)
    }

    /// The pending error of the socket (`SO_ERROR`), cleared by the call.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        take_error(raw(&self.engine))
    }
}

/// The future of [`TcpListener::accept`]: the stream and the peer's address.
#[must_use = "futures do nothing unless polled"]
pub struct AcceptFuture<'a> {
    listener: &'a TcpListener,
    op: OpFuture<'a, Accept>,
    /// Connections skipped in a row by this future since it last returned.
    skipped: u32,
}

/// Connections that left before their accept which one poll skips before it
/// yields (waking itself): a client resetting in a loop cannot keep the
/// polling thread.
const SKIPS_PER_POLL: u32 = 16;

impl Future for AcceptFuture<'_> {
    type Output = io::Result<(TcpStream, SocketAddr)>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        loop {
            let result = core::task::ready!(Pin::new(&mut this.op).poll(cx));
            match result {
                Ok((socket, peer)) => {
                    this.skipped = 0;
                    let env = this.listener.env.as_ref();
                    return Poll::Ready(TcpStream::from_connected(socket, env).map(|s| (s, peer)));
                }
                Err(e) if sys::peer_left(&e) => {
                    this.op = this.listener.accept_op();
                    this.skipped += 1;
                    if this.skipped == SKIPS_PER_POLL {
                        this.skipped = 0;
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl core::fmt::Debug for AcceptFuture<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AcceptFuture").field("issued", &self.op.id()).finish()
    }
}

fn take_error(s: SOCKET) -> io::Result<Option<io::Error>> {
    let code: i32 = sys::option(s, SOL_SOCKET, SO_ERROR)?;
    Ok((code != 0).then(|| io::Error::from_raw_os_error(code)))
}

impl TcpStream {
    /// Connects to `addr` (`ConnectEx`), trying each resolved address in
    /// turn, as `std::net::TcpStream::connect` does; a refused connection is
    /// `ConnectionRefused`. The addresses are resolved by this call (a name,
    /// unlike an address, may block while it is looked up); the connect is
    /// issued at the first poll, and the stream is bound to the process
    /// default pool.
    ///
    /// It has no timeout of its own (the system gives up after its SYN
    /// retries, about 21 s on Windows). Bound it with
    /// [`time::timeout`](crate::time::timeout): dropped at the deadline,
    /// the connect is cancelled and its socket closed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use windows_threadpool::net::{TcpListener, TcpStream};
    /// use windows_threadpool::{task, time};
    ///
    /// let listener = TcpListener::bind("127.0.0.1:0")?;
    /// let addr = listener.local_addr()?;
    /// let stream = task::block_on(async {
    ///     // `Elapsed` converts into `io::ErrorKind::TimedOut`.
    ///     time::timeout(Duration::from_secs(10), TcpStream::connect(addr)).await?
    /// })?;
    /// assert_eq!(stream.peer_addr()?, addr);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn connect(addr: impl ToSocketAddrs) -> impl Future<Output = io::Result<TcpStream>> + Send {
        Self::connect_with(resolve(addr), None)
    }

    /// [`connect`](Self::connect), with the stream bound to the pool of
    /// `env`, with its settings.
    pub fn connect_in(
        addr: impl ToSocketAddrs,
        env: &CallbackEnviron,
    ) -> impl Future<Output = io::Result<TcpStream>> + Send {
        Self::connect_with(resolve(addr), Some(env.clone()))
    }

    async fn connect_with(addrs: io::Result<Vec<SocketAddr>>, env: Option<CallbackEnviron>) -> io::Result<TcpStream> {
        let addrs = addrs?;
        let mut last = None;
        for a in &addrs {
            match Self::connect_one(a, env.as_ref()).await {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to connect to")))
    }

    async fn connect_one(addr: &SocketAddr, env: Option<&CallbackEnviron>) -> io::Result<TcpStream> {
        sys::winsock()?;
        let socket = sys::new_socket(sys::family(addr), SOCK_STREAM, IPPROTO_TCP)?;
        let s = socket.as_raw_socket() as SOCKET;
        // `ConnectEx` takes a bound socket.
        sys::bind_to(s, &sys::unspecified_like(addr))?;
        let (engine, inline) = bind::bind_socket(socket, bind::Transport::Stream, env)?;
        let stream = TcpStream { engine, inline };
        let (to, to_len) = sys::to_raw(addr);
        OpFuture::new(&stream.engine, Connect { to, to_len, socket: s, inline }).await?;
        Ok(stream)
    }

    /// A connected socket, bound to the pool.
    pub(super) fn from_connected(socket: OwnedSocket, env: Option<&CallbackEnviron>) -> io::Result<Self> {
        let (engine, inline) = bind::bind_socket(socket, bind::Transport::Stream, env)?;
        Ok(Self { engine, inline })
    }

    /// Takes a connected `std` stream (std creates its sockets overlapped
    /// and not inheritable); see the [module docs](super#from-std) for why
    /// binding it is sound.
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<Self> {
        Self::from_std_with(stream, None)
    }

    /// [`from_std`](Self::from_std), bound to the pool of `env`.
    pub fn from_std_in(stream: std::net::TcpStream, env: &CallbackEnviron) -> io::Result<Self> {
        Self::from_std_with(stream, Some(env))
    }

    fn from_std_with(stream: std::net::TcpStream, env: Option<&CallbackEnviron>) -> io::Result<Self> {
        let socket = stream.into();
        bind::require_overlapped(&socket)?;
        Self::from_connected(socket, env)
    }

    /// Gives the stream back as a `std` one (see [Into
    /// std](super#into-std)); on failure, the stream and the error.
    pub fn into_std(self) -> Result<std::net::TcpStream, IntoStdError<Self>> {
        let Self { engine, inline } = self;
        super::futures::into_std(engine, |engine| Self { engine, inline })
    }

    fn raw(&self) -> SOCKET {
        raw(&self.engine)
    }

    /// Reads into `buf`; resolves to the bytes read (0 once the peer has shut
    /// down its writing side) and the buffer. Lazy: the receive is issued at
    /// the first poll, and completes there if data is already buffered.
    pub fn read<B>(&self, buf: B) -> TcpReadFuture<'_, B>
    where
        B: AsMut<[u8]> + Send + 'static,
    {
        TcpReadFuture(OpFuture::new(&self.engine, Recv::new(buf, self.inline)))
    }

    /// Reads into `buf` as [`read`](Self::read) does, but leaves the bytes
    /// in the stream, for the next read or peek to get again (`WSARecv`
    /// with `MSG_PEEK`): resolves to the bytes copied (0 once the peer has
    /// shut down its writing side, with nothing left to read) and the
    /// buffer. It waits for data as a read does, and completes as the
    /// stream's reads do (at its first poll if data is already buffered).
    ///
    /// ```
    /// use windows_threadpool::net::{TcpListener, TcpStream};
    ///
    /// let listener = TcpListener::bind("127.0.0.1:0")?;
    /// let addr = listener.local_addr()?;
    /// futures::executor::block_on(async {
    ///     let (client, accepted) = futures::join!(TcpStream::connect(addr), listener.accept());
    ///     let (client, (server, _)) = (client?, accepted?);
    ///     let (sent, _) = client.write_all(b"GET /".to_vec()).await;
    ///     sent?;
    ///     let (n, head) = server.peek(vec![0u8; 3]).await;
    ///     assert_eq!(&head[..n?], b"GET");
    ///     let (n, buf) = server.read(vec![0u8; 16]).await; // the peeked bytes again
    ///     assert_eq!(&buf[..n?], b"GET /");
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn peek<B>(&self, buf: B) -> TcpReadFuture<'_, B>
    where
        B: AsMut<[u8]> + Send + 'static,
    {
        TcpReadFuture(OpFuture::new(&self.engine, Recv::peek(buf, self.inline)))
    }

    /// Resolves once a [`read`](Self::read) would find data or end of file
    /// (or the connection's error), by a zero-byte receive: it holds no
    /// buffer while it waits, so a loop that awaits `readable` before each
    /// read keeps no memory in flight on an idle connection (a pending
    /// receive locks its buffer's pages on Windows). Ready at its first poll
    /// if data is already buffered. A peer's reset resolves it with `Ok`
    /// too where the system reports the reset to the next read.
    ///
    /// ```
    /// use windows_threadpool::net::{TcpListener, TcpStream};
    ///
    /// let listener = TcpListener::bind("127.0.0.1:0")?;
    /// let addr = listener.local_addr()?;
    /// futures::executor::block_on(async {
    ///     let (client, accepted) = futures::join!(TcpStream::connect(addr), listener.accept());
    ///     let (client, (server, _)) = (client?, accepted?);
    ///     let (sent, _) = client.write_all(b"request".to_vec()).await;
    ///     sent?;
    ///     server.readable().await?; // no buffer held while idle
    ///     let (n, buf) = server.read(vec![0u8; 64]).await;
    ///     assert_eq!(&buf[..n?], b"request");
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn readable(&self) -> TcpReadableFuture<'_> {
        TcpReadableFuture(OpFuture::new(&self.engine, Readable::new(self.inline)))
    }

    /// Writes from `buf`; resolves to the bytes written (possibly fewer than
    /// `buf` holds: one send takes at most `u32::MAX` bytes) and the buffer.
    pub fn write<B>(&self, buf: B) -> TcpWriteFuture<'_, B>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        TcpWriteFuture(OpFuture::new(&self.engine, Transmit::new(buf, 0, self.inline)))
    }

    /// Writes all of `buf`, in as many sends as it takes; resolves to the
    /// outcome and the buffer. A send that writes nothing is `WriteZero`.
    // Not an `async fn`: the signature promises `Send`.
    #[allow(clippy::manual_async_fn)]
    pub fn write_all<B>(&self, buf: B) -> impl Future<Output = (io::Result<()>, B)> + Send + '_
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        async move {
            let (mut buf, mut start) = (buf, 0);
            while start < buf.as_ref().len() {
                let (r, b) = OpFuture::new(&self.engine, Transmit::new(buf, start, self.inline)).await;
                buf = b;
                match r {
                    Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), buf),
                    Ok(n) => start += n,
                    Err(e) => return (Err(e), buf),
                }
            }
            (Ok(()), buf)
        }
    }

    /// Shuts down the reading side, the writing side or both (`shutdown`).
    /// After `Shutdown::Write` the peer reads end of file.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        let how = match how {
            Shutdown::Read => SD_RECEIVE,
            Shutdown::Write => SD_SEND,
            Shutdown::Both => SD_BOTH,
        };
        // SAFETY: `self.raw()` is an open socket.
        sys::check(unsafe { windows_sys::Win32::Networking::WinSock::shutdown(self.raw(), how) })
    }

    /// Sets `TCP_NODELAY` (Nagle's algorithm off when `true`).
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        sys::set_option(self.raw(), IPPROTO_TCP, TCP_NODELAY, i32::from(nodelay))
    }

    /// Whether `TCP_NODELAY` is set.
    pub fn nodelay(&self) -> io::Result<bool> {
        Ok(sys::option::<i32>(self.raw(), IPPROTO_TCP, TCP_NODELAY)? != 0)
    }

    /// Sets `SO_LINGER`: what closing the socket (its drop) does with data
    /// not yet sent. `None` (the default): the close returns at once and the
    /// system goes on sending in the background. `Some(Duration::ZERO)`: the
    /// close discards it and resets the connection (the peer's reads fail
    /// with `ConnectionReset`). `Some(d)`: the close **blocks** until the
    /// data is sent and acknowledged, or `d` has passed (then it resets):
    /// the drop's thread waits (the dropping thread, or the pool thread of
    /// the last completion of a stream dropped with operations in flight),
    /// so the drop no longer keeps its promise never to block. On a socket
    /// left non-blocking (a std stream set so before
    /// [`from_std`](Self::from_std)) Winsock refuses such a close with
    /// `WSAEWOULDBLOCK` instead, which the drop cannot report: leave the
    /// socket blocking, or the linger at `None` or zero.
    ///
    /// Winsock keeps whole seconds in 16 bits: `d` is rounded *up* to the
    /// next whole second, so a nonzero duration never becomes the reset of
    /// zero, and one over `u16::MAX` seconds (about 18 hours) is that many.
    pub fn set_linger(&self, linger: Option<Duration>) -> io::Result<()> {
        let linger = match linger {
            None => LINGER { l_onoff: 0, l_linger: 0 },
            Some(d) => {
                let secs = d.as_secs().saturating_add(u64::from(d.subsec_nanos() != 0));
                LINGER { l_onoff: 1, l_linger: u16::try_from(secs).unwrap_or(u16::MAX) }
            }
        };
        sys::set_option(self.raw(), SOL_SOCKET, SO_LINGER, linger)
    }

    /// `SO_LINGER`, as [`set_linger`](Self::set_linger) takes it, in whole
    /// seconds.
    pub fn linger(&self) -> io::Result<Option<Duration>> {
        let linger: LINGER = sys::option(self.raw(), SOL_SOCKET, SO_LINGER)?;
        Ok((linger.l_onoff != 0).then(|| Duration::from_secs(linger.l_linger.into())))
    }

    /// Turns TCP keep-alive on with `keepalive`'s times, or off with `None`
    /// (`WSAIoctl` with `SIO_KEEPALIVE_VALS`): after `idle` with nothing
    /// received the system sends a probe, and another every `interval`
    /// while none is answered; after as many unanswered probes as it
    /// allows (10 on Windows Vista and later, not settable here) it resets
    /// the connection, and a pending read fails. Off by default.
    ///
    /// Winsock takes milliseconds in 32 bits: each time is rounded up to the
    /// next whole millisecond, and one over `u32::MAX` milliseconds (about
    /// 49.7 days) is that many. A zero time is `InvalidInput`.
    pub fn set_keepalive(&self, keepalive: Option<Keepalive>) -> io::Result<()> {
        let vals = match keepalive {
            None => tcp_keepalive { onoff: 0, keepalivetime: 0, keepaliveinterval: 0 },
            Some(k) => tcp_keepalive {
                onoff: 1,
                keepalivetime: keepalive_millis(k.idle)?,
                keepaliveinterval: keepalive_millis(k.interval)?,
            },
        };
        // SAFETY: the code takes a `tcp_keepalive` and gives nothing back.
        unsafe { sys::ioctl(self.raw(), SIO_KEEPALIVE_VALS, &vals, &mut ()) }.map(drop)
    }

    /// Whether keep-alive is on (`SO_KEEPALIVE`).
    pub fn keepalive(&self) -> io::Result<bool> {
        Ok(sys::option::<u32>(self.raw(), SOL_SOCKET, SO_KEEPALIVE)? != 0)
    }

    /// The keep-alive times the system uses for the stream (`TCP_KEEPIDLE`,
    /// `TCP_KEEPINTVL`), whether keep-alive is on or not, in whole seconds
    /// (a time set with a fraction of a second reads back as the system
    /// rounds it). Apart from [`keepalive`](Self::keepalive) because it
    /// is not always there: reading the times takes Windows 10 version
    /// 1709 or later, and Wine 8 does not implement them; both fail with
    /// `WSAENOPROTOOPT` (10042) where the on/off state still reads.
    pub fn keepalive_times(&self) -> io::Result<Keepalive> {
        let idle = sys::option::<u32>(self.raw(), IPPROTO_TCP, TCP_KEEPIDLE)?;
        let interval = sys::option::<u32>(self.raw(), IPPROTO_TCP, TCP_KEEPINTVL)?;
        Ok(Keepalive::new(Duration::from_secs(idle.into()), Duration::from_secs(interval.into())))
    }

    /// Sets the IP time-to-live of outgoing packets (`IP_TTL`).
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        set_ttl(self.raw(), ttl)
    }

    /// The IP time-to-live of outgoing packets.
    pub fn ttl(&self) -> io::Result<u32> {
        ttl(self.raw())
    }

    /// The peer's address (`getpeername`).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        sys::name_of(self.raw(), getpeername)
    }

    /// This end's address (`getsockname`).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        sys::name_of(self.raw(), getsockname)
    }

    /// The pending error of the socket (`SO_ERROR`), cleared by the call.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        take_error(self.raw())
    }

    /// Operations issued and not yet settled, including those of dropped
    /// futures whose cancelled completion has not arrived.
    pub fn outstanding(&self) -> usize {
        self.engine.io.outstanding()
    }
}

/// TCP keep-alive times, for [`TcpStream::set_keepalive`]: the idle time
/// before the first probe and the interval between unanswered probes.
///
/// A type of its own rather than two `Duration` arguments: the two times
/// are set together (`SIO_KEEPALIVE_VALS` takes both), read back together
/// ([`TcpStream::keepalive_times`]), and cannot be swapped unnoticed at a
/// call site; `Option` of it says on or off in one argument. Made with
/// [`new`](Self::new); its fields are public to read. Non-exhaustive, so
/// that a probe count could join them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Keepalive {
    /// Time with nothing received before the first probe.
    pub idle: Duration,
    /// Time between probes while none is answered.
    pub interval: Duration,
}

impl Keepalive {
    /// Probes after `idle` with nothing received, then every `interval`.
    pub const fn new(idle: Duration, interval: Duration) -> Self {
        Self { idle, interval }
    }
}

/// `d` in milliseconds, rounded up, at most `u32::MAX`; zero is refused.
fn keepalive_millis(d: Duration) -> io::Result<u32> {
    if d.is_zero() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a keep-alive time of zero"));
    }
    Ok(u32::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u32::MAX))
}

pub(super) fn set_ttl(s: SOCKET, ttl: u32) -> io::Result<()> {
    let ttl = i32::try_from(ttl).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a TTL above i32::MAX"))?;
    sys::set_option(s, IPPROTO_IP, IP_TTL, ttl)
}

pub(super) fn ttl(s: SOCKET) -> io::Result<u32> {
    Ok(sys::option::<i32>(s, IPPROTO_IP, IP_TTL)? as u32)
}

/// The socket's value; deliberately no `AsSocket` (see the [module docs](super#from-std)).
impl AsRawSocket for TcpStream {
    fn as_raw_socket(&self) -> RawSocket {
        self.raw() as RawSocket
    }
}

/// The socket's value; deliberately no `AsSocket`.
impl AsRawSocket for TcpListener {
    fn as_raw_socket(&self) -> RawSocket {
        raw(&self.engine) as RawSocket
    }
}
