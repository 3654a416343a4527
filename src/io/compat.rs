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
        /// Issues a read into all of `buf`.
        fn start_read(&self, buf: Box<[u8]>) -> Start<ReadOutput>;
        /// Issues a write of `buf`'s unsent part.
        fn start_write(&self, buf: Unsent) -> Start<WriteOutput>;
        /// Shuts the writing side down, once everything is written.
        fn close_write(&self) -> std::io::Result<()>;
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
/// (64 KiB each, allocated at their first use):
///
/// - **Reads.** `poll_read` serves bytes already in the read buffer;
///   otherwise it issues a read of the whole buffer, or polls the one in
///   flight, which stays in flight across `Pending`s. Bytes of a completed
///   read that the caller's buffer cannot take are kept for the next call,
///   so `AsyncBufRead` comes for free (`poll_fill_buf` is the read buffer).
///   A read of 0 bytes (end of file, or a peer's `shutdown(Write)`) is
///   passed on as end of file; the next call reads again.
/// - **Writes.** `poll_write` first waits for the write in flight, if any
///   (reporting its error, if it failed), then copies what fits into the
///   write buffer, issues the write and returns `Ready(Ok(n))`: the bytes
///   are accepted, not yet written. `poll_flush` returns `Ready(Ok(()))`
///   only once every accepted byte has been written (a short write is
///   issued again for the rest), and `poll_shutdown` (tokio, hyper) or
///   `poll_close` (futures) flushes, then shuts the writing side down: for
///   a [`TcpStream`](crate::net::TcpStream) `shutdown(Write)`, so the peer
///   reads end of file; for an [`AsyncIo`](super::AsyncIo) nothing more
///   (a pipe's end of file is the handle's close, which is the drop).
///   A failed write's error is reported by the next `poll_write`,
///   `poll_flush` or shutdown, and the bytes it left unwritten are dropped.
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
    /// The read buffer while no read is in flight.
    rbuf: Option<Box<[u8]>>,
    /// The bytes of `rbuf` not yet served: `rpos..rlen`.
    rpos: usize,
    rlen: usize,
    reading: Option<InFlight<ReadOutput>>,
    /// The write buffer while no write is in flight.
    wbuf: Option<Box<[u8]>>,
    writing: Option<InFlight<WriteOutput>>,
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
            .field("reading", &self.reading.is_some())
            .field("writing", &self.writing.is_some())
            .finish()
    }
}

fn buffer() -> Box<[u8]> {
    vec![0; CAPACITY].into_boxed_slice()
}

impl<T: CompatIo> Compat<T> {
    /// Adapts `inner`. Nothing is allocated or issued until the first read
    /// or write.
    pub fn new(inner: T) -> Self {
        Self { inner, rbuf: None, rpos: 0, rlen: 0, reading: None, wbuf: None, writing: None }
    }

    /// The adapted object, for its other methods (`peer_addr`,
    /// `set_nodelay`, ...). Reading or writing through it bypasses the
    /// adapter's buffers.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The unread bytes; with none, reads more (the read stays in flight
    /// across `Pending`s). Empty at end of file.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        while self.rpos == self.rlen {
            let (result, buf) = match &self.reading {
                Some(read) => {
                    let output = ready!(read.poll(cx));
                    self.reading = None;
                    output
                }
                None => match self.inner.start_read(self.rbuf.take().unwrap_or_else(buffer)).0 {
                    Started::Done(output) => output,
                    Started::InFlight(read) => {
                        self.reading = Some(read);
                        continue; // polled, so that its completion wakes us
                    }
                },
            };
            self.rbuf = Some(buf);
            (self.rpos, self.rlen) = (0, 0);
            match result? {
                0 => return Poll::Ready(Ok(&[])),
                n => self.rlen = n,
            }
        }
        let buf = self.rbuf.as_deref().unwrap_or_default();
        Poll::Ready(Ok(&buf[self.rpos..self.rlen]))
    }

    fn consume(&mut self, n: usize) {
        self.rpos = (self.rpos + n).min(self.rlen);
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

    /// Takes a finished write's output: the rest of a short write is issued
    /// again; the buffer is back once all of it is written or it failed.
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
                self.wbuf = Some(unsent.buf);
                return error.map_or(Ok(()), Err);
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
        while let Some(write) = &self.writing {
            let output = ready!(write.poll(cx));
            self.writing = None;
            self.sent(output)?;
        }
        Poll::Ready(Ok(()))
    }

    /// Accepts what of `src` fits once the previous write is done.
    fn poll_accept(&mut self, cx: &mut Context<'_>, src: &[u8]) -> Poll<io::Result<usize>> {
        ready!(self.poll_sent(cx))?;
        if src.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let mut buf = self.wbuf.take().unwrap_or_else(buffer);
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
