//! [`Compat`]: the poll-based I/O traits of `futures-io`, tokio and hyper
//! over the completion-based streams of this crate.
//!
//! The contract is documented on [`Compat`], for its users.

use core::pin::Pin;
use core::task::{Context, Poll, ready};
use std::io;

use super::engine::{Engine, InFlight, Started};

/// The size of each of [`Compat`]'s two buffers.
const CAPACITY: usize = 64 * 1024;

/// What a read gives back.
pub(crate) type ReadOutput = (io::Result<usize>, Box<[u8]>);
/// What a write gives back.
pub(crate) type WriteOutput = (io::Result<usize>, Unsent);

/// The write buffer with the part of it still to be written, which is what
/// a write of it sends (its `AsRef`).
#[derive(Debug)]
pub struct Unsent {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl AsRef<[u8]> for Unsent {
    fn as_ref(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }
}

/// The engine's types as [`Sealed`] names them: public in name only (this
/// module is private), so a public trait's supertrait may show them.
#[derive(Debug)]
pub struct EngineOf<'a>(pub(crate) &'a Engine);
/// As [`EngineOf`].
pub struct Start<O>(pub(crate) Started<O>);

impl<O> core::fmt::Debug for Start<O> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self.0 {
            Started::Done(_) => "Start::Done",
            Started::InFlight(_) => "Start::InFlight",
        })
    }
}

mod sealed {
    use super::{EngineOf, ReadOutput, Start, Unsent, WriteOutput};

    /// How an object issues the adapter's reads and writes.
    pub trait Sealed: Unpin {
        fn engine(&self) -> EngineOf<'_>;
        /// Issues a zero-byte wait for data (see `Compat`'s reads), or
        /// `None` where a zero-byte read means something else.
        fn start_wait(&self) -> Option<Start<std::io::Result<()>>>;
        /// Issues a read into all of `buf`.
        fn start_read(&self, buf: Box<[u8]>) -> Start<ReadOutput>;
        /// Issues a write of `buf`'s unsent part.
        fn start_write(&self, buf: Unsent) -> Start<WriteOutput>;
        /// Shuts the writing side down, once everything is written.
        fn close_write(&self) -> std::io::Result<()>;
        /// Whether [`start_wait`](Self::start_wait) waits for data.
        fn waits_for_data(&self) -> bool;
    }
}

pub(crate) use sealed::Sealed;

/// An object [`Compat`] adapts: a stream whose reads and writes complete on
/// the pool, [`TcpStream`](crate::net::TcpStream) and
/// [`AsyncIo`](super::AsyncIo). Sealed.
pub trait CompatIo: Sealed {}

/// A [`TcpStream`](crate::net::TcpStream) or [`AsyncIo`](super::AsyncIo)
/// as a `futures_io` `AsyncRead`/`AsyncWrite`/`AsyncBufRead` (feature
/// `futures-io`), a `tokio::io` `AsyncRead`/`AsyncWrite`/`AsyncBufRead`
/// (feature `tokio`), so `tokio::io::copy`, `BufReader`, `read_to_end`,
/// `write_all` and codecs work on it, and hyper 1.x's `rt::Read`/`rt::Write`
/// (feature `hyper`; module `rt` has hyper's executor and timer),
/// so hyper's HTTP/1 server and client connections run over it. The three
/// front ends share one core: what follows holds for each.
///
/// A completion-based read hands the kernel a buffer until its completion;
/// a poll-based `poll_read` lends one only for the call. The adapter bridges
/// the two with buffers of its own, one for reads and one for writes
/// (64 KiB each), taken when there are bytes to hold and given back (to a
/// small cache the process's adapters share) when there are none, so an
/// idle connection holds no buffer:
///
/// - **Reads.** `poll_read` serves bytes already in the read buffer.
///   Otherwise, over a [`TcpStream`](crate::net::TcpStream), it first waits
///   for data with a **zero-byte receive**, holding no buffer (a pending
///   receive locks its buffer's pages on Windows: 10,000 idle connections
///   each waiting in a 64 KiB read would pin 640 MB of non-paged pool),
///   then reads into a buffer, which finds the data at once (inline, with
///   no hand-off, where the socket skips the completion port on success).
///   After a read that filled the whole buffer it reads again directly, as
///   more is likely waiting. Over an [`AsyncIo`](super::AsyncIo) (a pipe or
///   file) a zero-byte read does not wait for data (it completes at once,
///   or reads a zero-length message), so it issues a read of the whole
///   buffer, which stays in flight, buffer and all, until data comes. A
///   read in flight stays in flight across `Pending`s. Bytes of a
///   completed read that the caller's buffer cannot take are kept for the
///   next call, so `AsyncBufRead` comes for free (`poll_fill_buf` is the
///   read buffer). A read of 0 bytes (end of file, or a peer's
///   `shutdown(Write)`) is passed on as end of file; the next call reads
///   again.
/// - **Writes.** `poll_write` first waits for the write in flight, if any,
///   then copies what fits into the write buffer, issues the write and
///   returns `Ready(Ok(n))`: the bytes are accepted, not yet written.
///   `poll_flush` returns `Ready(Ok(()))` only once every accepted byte has
///   been written (a short write is issued again for the rest), and the
///   buffer is given back then. `poll_shutdown` (tokio, hyper) or
///   `poll_close` (futures) flushes, then shuts the writing side down: for
///   a [`TcpStream`](crate::net::TcpStream) `shutdown(Write)`, so the peer
///   reads end of file; for an [`AsyncIo`](super::AsyncIo) nothing more
///   (a pipe's end of file is the handle's close, which is the drop).
///   A failed write poisons the writing side, as a `BufWriter` whose
///   writer failed: that `poll_write`, `poll_flush` or shutdown and every
///   later one fail with its error (its OS code, or its kind), and the
///   bytes it left unwritten are dropped. Reads go on.
///
/// Dropping the adapter cancels a read or write in flight without waiting
/// (the cancelled completion frees its buffer), as dropping one of the
/// object's futures does, and then drops the object by its own rule; bytes
/// accepted and not flushed may be lost, so flush (or shut down) first, as
/// with any buffered writer.
///
/// Each write is one operation: `tokio::io::copy` writes in 8 KiB pieces,
/// `tokio::io::copy_buf` from an `AsyncBufRead` (a `Compat` itself, or a
/// `BufReader::with_capacity(64 * 1024, ..)`) in pieces of its buffer. An
/// echo of 64 MiB over loopback under Wine ran at 29 to 41 MiB/s with
/// `copy` and 83 to 125 MiB/s with `copy_buf` and 64 KiB (the stream's own
/// futures, 64 KiB at a time: 80 to 89 MiB/s).
///
/// Named as tokio-util's and futures' adapters between I/O traits are.
///
/// ```
/// # #[cfg(feature = "tokio")] {
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
/// use windows_threadpool::io::{self, AsyncIo, Compat};
///
/// let (server, client) = io::pipe_pair()?;
/// let (mut server, mut client) = (Compat::new(AsyncIo::new(server)?), Compat::new(AsyncIo::new(client)?));
/// futures::executor::block_on(async {
///     client.write_all(b"ping").await?;
///     client.flush().await?; // written, not only accepted
///     let mut got = [0u8; 4];
///     server.read_exact(&mut got).await?;
///     assert_eq!(&got, b"ping");
///     Ok::<(), std::io::Error>(())
/// })?;
/// # }
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Compat<T: CompatIo> {
    inner: T,
    /// The read buffer while no read is in flight and it holds bytes (or,
    /// over an object with no zero-byte waits, at all).
    rbuf: Option<Box<[u8]>>,
    /// The bytes of `rbuf` not yet served: `rpos..rlen`.
    rpos: usize,
    rlen: usize,
    reading: Option<InFlight<ReadOutput>>,
    /// A zero-byte wait for data in flight.
    waiting: Option<InFlight<io::Result<()>>>,
    /// The last read filled its buffer: read again without waiting first.
    eager: bool,
    writing: Option<InFlight<WriteOutput>>,
    /// The error a write failed with: every later write, flush and
    /// shutdown fails with it.
    poisoned: Option<Poison>,
}

/// What [`Compat`] keeps of a failed write's error, to give it again.
#[derive(Debug, Clone, Copy)]
enum Poison {
    Os(i32),
    Kind(io::ErrorKind),
}

impl Poison {
    fn of(e: &io::Error) -> Self {
        match e.raw_os_error() {
            Some(code) => Self::Os(code),
            None => Self::Kind(e.kind()),
        }
    }

    fn error(self) -> io::Error {
        match self {
            Self::Os(code) => io::Error::from_raw_os_error(code),
            Self::Kind(kind) => io::Error::new(kind, "an earlier write failed"),
        }
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Compat<crate::net::TcpStream>>();
    send_sync::<Compat<super::AsyncIo>>();
};

impl<T: CompatIo + core::fmt::Debug> core::fmt::Debug for Compat<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Compat")
            .field("inner", &self.inner)
            .field("unread", &(self.rlen - self.rpos))
            .field("waiting", &self.waiting.is_some())
            .field("reading", &self.reading.is_some())
            .field("writing", &self.writing.is_some())
            .finish()
    }
}

/// Buffers given back by the process's adapters, at most
/// [`CACHED_BUFFERS`]: a busy server reuses them, and an idle one holds at
/// most that many.
static CACHE: std::sync::Mutex<Vec<Box<[u8]>>> = std::sync::Mutex::new(Vec::new());
/// 1 MiB of buffers.
const CACHED_BUFFERS: usize = 16;

/// A buffer from the cache, or a new one.
fn buffer() -> Box<[u8]> {
    let cached = CACHE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
    cached.unwrap_or_else(|| vec![0; CAPACITY].into_boxed_slice())
}

/// Gives `buf` back to the cache (or frees it, the cache being full).
fn give_back(buf: Box<[u8]>) {
    let mut cache = CACHE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if cache.len() < CACHED_BUFFERS {
        cache.push(buf);
    }
}

impl<T: CompatIo> Compat<T> {
    /// Adapts `inner`. Nothing is allocated or issued until the first read
    /// or write.
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            rbuf: None,
            rpos: 0,
            rlen: 0,
            reading: None,
            waiting: None,
            eager: false,
            writing: None,
            poisoned: None,
        }
    }

    /// The adapted object, for its other methods (`peer_addr`,
    /// `set_nodelay`, ...). Reading or writing through it bypasses the
    /// adapter's buffers.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The buffers the adapter holds now: a read buffer (with unread bytes,
    /// or lent to a read in flight) and a write buffer (lent to a write in
    /// flight). A test hook, not API.
    #[cfg(any(test, feature = "test-hooks"))]
    #[doc(hidden)]
    pub fn buffers_held(&self) -> usize {
        [self.rbuf.is_some(), self.reading.is_some(), self.writing.is_some()].iter().filter(|&&b| b).count()
    }

    /// Ready once data is there to read, by a zero-byte wait, holding no
    /// buffer; at once where the object has no such waits.
    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if let Some(wait) = &self.waiting {
                let result = ready!(wait.poll(cx));
                self.waiting = None;
                return Poll::Ready(result);
            }
            match self.inner.start_wait() {
                None => return Poll::Ready(Ok(())),
                Some(Start(Started::Done(result))) => return Poll::Ready(result),
                // Polled, so that its completion wakes us.
                Some(Start(Started::InFlight(wait))) => self.waiting = Some(wait),
            }
        }
    }

    /// The unread bytes; with none, reads more (the read stays in flight
    /// across `Pending`s). Empty at end of file. Under the task's budget
    /// (`crate::task::budget`).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        crate::task::budget::guard(cx, |cx| self.poll_fill_now(cx))
    }

    fn poll_fill_now(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        while self.rpos == self.rlen {
            let (result, buf) = match &self.reading {
                Some(read) => {
                    let output = ready!(read.poll(cx));
                    self.reading = None;
                    output
                }
                None => {
                    if !self.eager {
                        ready!(self.poll_data(cx))?;
                    }
                    match self.inner.start_read(self.rbuf.take().unwrap_or_else(buffer)).0 {
                        Started::Done(output) => output,
                        Started::InFlight(read) => {
                            self.reading = Some(read);
                            continue; // polled, so that its completion wakes us
                        }
                    }
                }
            };
            let full = buf.len();
            self.rbuf = Some(buf);
            (self.rpos, self.rlen) = (0, 0);
            let n = result.inspect_err(|_| self.release_drained())?;
            self.eager = n == full;
            if n == 0 {
                self.release_drained();
                return Poll::Ready(Ok(&[]));
            }
            self.rlen = n;
        }
        let buf = self.rbuf.as_deref().unwrap_or_default();
        Poll::Ready(Ok(&buf[self.rpos..self.rlen]))
    }

    /// Gives the read buffer back once it holds no unread bytes, where reads
    /// wait for data without one (elsewhere the next read takes it anyway).
    fn release_drained(&mut self) {
        if self.rpos == self.rlen
            && self.inner.waits_for_data()
            && let Some(buf) = self.rbuf.take()
        {
            give_back(buf);
        }
    }

    fn consume(&mut self, n: usize) {
        self.rpos = (self.rpos + n).min(self.rlen);
        self.release_drained();
    }

    /// Hands `put` what of the unread bytes fits in `room`, and consumes
    /// it: the count (0 at end of file, or for no room, with nothing read).
    fn poll_read_with(
        &mut self,
        cx: &mut Context<'_>,
        room: usize,
        put: impl FnOnce(&[u8]),
    ) -> Poll<io::Result<usize>> {
        if room == 0 {
            return Poll::Ready(Ok(0));
        }
        let src = ready!(self.poll_fill(cx))?;
        let n = src.len().min(room);
        put(&src[..n]);
        self.consume(n);
        Poll::Ready(Ok(n))
    }

    /// The error a failed write left, if any, again.
    fn check_poison(&self) -> io::Result<()> {
        self.poisoned.map_or(Ok(()), |p| Err(p.error()))
    }

    /// Takes a finished write's output: the rest of a short write is issued
    /// again; the buffer goes back once all of it is written or it failed,
    /// and a failure poisons the writing side.
    fn sent(&mut self, (mut result, mut unsent): WriteOutput) -> io::Result<()> {
        loop {
            let error = match result {
                Ok(0) => Some(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    unsent.start = (unsent.start + n).min(unsent.end);
                    None
                }
                Err(e) => Some(e),
            };
            if error.is_some() || unsent.start == unsent.end {
                give_back(unsent.buf);
                return match error {
                    None => Ok(()),
                    Some(e) => {
                        self.poisoned = Some(Poison::of(&e));
                        Err(e)
                    }
                };
            }
            match self.inner.start_write(unsent).0 {
                Started::Done(output) => (result, unsent) = output,
                Started::InFlight(write) => {
                    self.writing = Some(write);
                    return Ok(());
                }
            }
        }
    }

    /// Ready once every accepted byte is written (or a write failed).
    fn poll_sent(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check_poison()?;
        while let Some(write) = &self.writing {
            let output = ready!(write.poll(cx));
            self.writing = None;
            self.sent(output)?;
        }
        Poll::Ready(Ok(()))
    }

    /// Accepts what of `src` fits once the previous write is done, under the
    /// task's budget (`crate::task::budget`).
    fn poll_accept(&mut self, cx: &mut Context<'_>, src: &[u8]) -> Poll<io::Result<usize>> {
        crate::task::budget::guard(cx, |cx| self.poll_accept_now(cx, src))
    }

    fn poll_accept_now(&mut self, cx: &mut Context<'_>, src: &[u8]) -> Poll<io::Result<usize>> {
        ready!(self.poll_sent(cx))?;
        if src.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let mut buf = buffer();
        let n = src.len().min(buf.len());
        buf[..n].copy_from_slice(&src[..n]);
        match self.inner.start_write(Unsent { buf, start: 0, end: n }).0 {
            Started::Done(output) => self.sent(output)?,
            Started::InFlight(write) => self.writing = Some(write),
        }
        Poll::Ready(Ok(n))
    }

    fn poll_close_write(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_sent(cx))?;
        Poll::Ready(self.inner.close_write())
    }
}

impl<T: CompatIo> Drop for Compat<T> {
    fn drop(&mut self) {
        let EngineOf(engine) = self.inner.engine();
        if let Some(wait) = self.waiting.take() {
            wait.cancel(engine);
        }
        if let Some(read) = self.reading.take() {
            read.cancel(engine);
        }
        if let Some(write) = self.writing.take() {
            write.cancel(engine);
        }
    }
}

#[cfg(feature = "futures-io")]
impl<T: CompatIo> futures_io::AsyncRead for Compat<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_read_with(cx, buf.len(), |src| buf[..src.len()].copy_from_slice(src))
    }
}

#[cfg(feature = "futures-io")]
impl<T: CompatIo> futures_io::AsyncBufRead for Compat<T> {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        self.get_mut().poll_fill(cx)
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        self.get_mut().consume(amt);
    }
}

#[cfg(feature = "futures-io")]
impl<T: CompatIo> futures_io::AsyncWrite for Compat<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_accept(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_sent(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_close_write(cx)
    }
}

#[cfg(feature = "tokio")]
impl<T: CompatIo> tokio::io::AsyncRead for Compat<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<()>> {
        let room = buf.remaining();
        self.get_mut().poll_read_with(cx, room, |src| buf.put_slice(src)).map_ok(drop)
    }
}

#[cfg(feature = "tokio")]
impl<T: CompatIo> tokio::io::AsyncBufRead for Compat<T> {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        self.get_mut().poll_fill(cx)
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        self.get_mut().consume(amt);
    }
}

#[cfg(feature = "tokio")]
impl<T: CompatIo> tokio::io::AsyncWrite for Compat<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_accept(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_sent(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_close_write(cx)
    }
}

#[cfg(feature = "hyper")]
impl<T: CompatIo> hyper::rt::Read for Compat<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let room = buf.remaining();
        self.get_mut().poll_read_with(cx, room, |src| buf.put_slice(src)).map_ok(drop)
    }
}

#[cfg(feature = "hyper")]
impl<T: CompatIo> hyper::rt::Write for Compat<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_accept(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_sent(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_close_write(cx)
    }
}

impl CompatIo for super::AsyncIo {}

impl Sealed for super::AsyncIo {
    fn engine(&self) -> EngineOf<'_> {
        EngineOf(&self.engine)
    }
    /// A zero-byte `ReadFile` does not wait for data: it completes at once
    /// (a pipe in byte mode) or reads a zero-length message.
    fn start_wait(&self) -> Option<Start<io::Result<()>>> {
        None
    }
    fn waits_for_data(&self) -> bool {
        false
    }
    fn start_read(&self, buf: Box<[u8]>) -> Start<ReadOutput> {
        Start(self.engine.start(super::future::Transfer::<_, false>::new(buf, 0)))
    }
    fn start_write(&self, buf: Unsent) -> Start<WriteOutput> {
        Start(self.engine.start(super::future::Transfer::<_, true>::new(buf, 0)))
    }
    /// A pipe has no half-close: its reader sees end of file once the
    /// handle closes.
    fn close_write(&self) -> io::Result<()> {
        Ok(())
    }
}
