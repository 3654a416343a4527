//! [`Compat`]: the poll-based I/O traits of `futures-io`, tokio and hyper
//! over the completion-based streams of this crate.
//!
//! The contract is documented on [`Compat`], for its users. The adapter
//! is a read side ([`Reader`]) and a write side ([`Writer`]) over one
//! object; [`Compat`] holds both, and its split halves one each, with the
//! object shared, so each rule is written once.

use std::sync::Arc;

mod object;
mod sides;
mod traits;

pub use object::CompatIo;
pub(crate) use object::{EngineOf, FileLike, ReadOutput, Sealed, Start, Unsent, WriteOutput};
use sides::{Reader, Writer, give_back};

/// A [`TcpStream`](crate::net::TcpStream) or [`AsyncIo`](super::AsyncIo)
/// as a `futures_io` `AsyncRead`/`AsyncWrite`/`AsyncBufRead` (feature
/// `futures-io`), a `tokio::io` `AsyncRead`/`AsyncWrite`/`AsyncBufRead`
/// (feature `tokio`), so `tokio::io::copy`, `BufReader`, `read_to_end`,
/// `write_all` and codecs work on it, and hyper 1.x's `rt::Read`/`rt::Write`
/// (feature `hyper`; module `hyper` has hyper's executor and timer),
/// so hyper's HTTP/1 and HTTP/2 connections, server and client, run over
/// it. The three front ends share one core: what follows holds for each.
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
/// with any buffered writer. A read cancelled after its data had arrived
/// loses that data with it; over a `TcpStream` the read of a buffer is
/// issued only once data is there (or right after a read that filled the
/// buffer), and the zero-byte wait that comes before it takes nothing.
///
/// A write with none in flight is issued at once, as a `TcpStream`'s
/// would be (so a request written without a flush still goes out). Bytes
/// written while one is in flight (the peer reads slower than the writer
/// writes) are accepted into a second buffer of 64 KiB, without waiting,
/// and issued as one write when the one before is done: 8 KiB writes of
/// `tokio::io::copy` then cost one operation per 64 KiB. A vectored
/// write (hyper's head and body) is one operation of every slice that
/// fits. A write that completes at once (a socket with room) is one
/// operation, as each of tokio's is: under Wine, where one send costs
/// about 100 µs, `tokio::io::copy` from a reader that is always ready ran
/// at about a quarter of the stream's own 64 KiB writes (`cargo xtask
/// bench`, row N2c), as tokio's own copy over its own stream did;
/// `tokio::io::copy_buf` from a `BufReader::with_capacity(64 * 1024, ..)`
/// writes 64 KiB at a time.
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
///
/// # Waiting for data
/// The zero-byte receive is what keeps an idle connection's memory low,
/// and on Windows it costs one more receive call per read. Under Wine,
/// where every receive is several round trips to Wine's server, it costs
/// more: an HTTP/1.1 request took 9 of them with the wait and 6 without.
/// With [`set_wait_for_data(false)`](Self::set_wait_for_data) a read of the
/// whole buffer stays in flight instead, as over an
/// [`AsyncIo`](super::AsyncIo): one operation per read, and 64 KiB held (on
/// Windows, pinned) by every connection, idle or not; data that arrived in
/// it is lost if the adapter is dropped before reading it.
/// `examples/https_server --buffered-reads` serves this way, and
/// `docs/benchmarks.md` measures both.
///
/// # Split halves
/// A stream's reads and writes are independent operations, so the adapter
/// is two independent parts: its read side (the read buffer, the zero-byte
/// wait, the read in flight) and its write side (the write in flight, the
/// poisoning). [`into_split`](Self::into_split) gives each to a half of its
/// own, [`ReadHalf`] and [`WriteHalf`], which share the object (an `Arc`:
/// its operations take `&self`) and nothing else, so one task reads while
/// another writes, with no lock between them (`tokio::io::split` would take
/// a lock for each call). Each half does for its direction what the
/// adapter does, under the same rules, and what was in flight or buffered
/// goes with it. [`ReadHalf::reunite`] puts the halves of one adapter back
/// together.
///
/// ```
/// # #[cfg(feature = "tokio")] {
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
/// use windows_threadpool::io::Compat;
/// use windows_threadpool::net::{TcpListener, TcpStream};
/// use windows_threadpool::task;
///
/// let listener = TcpListener::bind("127.0.0.1:0")?;
/// let addr = listener.local_addr()?;
/// // An echo server: its read half copied into its write half.
/// let server = task::spawn(async move {
///     let (stream, _) = listener.accept().await?;
///     let (mut reader, mut writer) = Compat::new(stream).into_split();
///     tokio::io::copy(&mut reader, &mut writer).await?;
///     writer.shutdown().await
/// });
/// task::block_on(async {
///     let (mut reader, mut writer) = Compat::new(TcpStream::connect(addr).await?).into_split();
///     let data = vec![7u8; 256 * 1024];
///     // A writer task and a reader task on the one connection, at once.
///     let sent = data.clone();
///     let writing = task::spawn(async move {
///         writer.write_all(&sent).await?;
///         writer.shutdown().await?; // flushed, then the server reads end of file
///         Ok::<_, std::io::Error>(writer)
///     });
///     let reading = task::spawn(async move {
///         let mut back = Vec::new();
///         reader.read_to_end(&mut back).await?;
///         Ok::<_, std::io::Error>((reader, back))
///     });
///     let (reader, back) = reading.await.unwrap()?;
///     let writer = writing.await.unwrap()?;
///     assert!(back == data);
///     let mut stream = reader.reunite(writer).expect("the halves of one adapter");
///     assert_eq!(stream.read(&mut [0u8; 8]).await?, 0); // the echo's end of file, still
///     server.await.unwrap()
/// })?;
/// # }
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Taking it apart
/// [`get_ref`](Self::get_ref) and [`get_mut`](Self::get_mut) reach the
/// object with the adapter in place: reading or writing through them
/// bypasses its buffers. An object put in the old one's place through
/// `get_mut` inherits what the adapter holds: its buffered bytes and the
/// outputs of operations it had in flight on the old one are served as
/// the new one's (two streams mixed, though nothing unsound: those
/// operations end on the old object's engine, and a cancellation sent to
/// the new one's is refused).
/// [`into_inner`](Self::into_inner) gives the object back, as the drop
/// would leave it: a read or write in flight is cancelled as the drop
/// cancels it, bytes read and not yet served are discarded (as tokio's
/// `BufReader::into_inner` discards its buffer), and bytes accepted and not
/// flushed are lost, or partly written, with their cancelled write. Flush
/// first. The object may still count the cancelled operations as
/// outstanding until their completions arrive; it is usable at once.
pub struct Compat<T: CompatIo> {
    inner: T,
    reader: Reader,
    writer: Writer,
}

/// The read half of a [`Compat`], from [`Compat::into_split`]: its
/// `AsyncRead` and `AsyncBufRead` (futures-io, tokio) and hyper's
/// `rt::Read`, with the adapter's read buffer and what it had in flight to
/// read. Dropping it cancels a read in flight, as dropping the adapter
/// does; the object is dropped with the last half.
pub struct ReadHalf<T: CompatIo> {
    inner: Arc<T>,
    reader: Reader,
}

/// The write half of a [`Compat`], from [`Compat::into_split`]: its
/// `AsyncWrite` (futures-io, tokio) and hyper's `rt::Write`, with what the
/// adapter had in flight to write and its poisoning.
///
/// Dropping it cancels a write in flight, as dropping the adapter does,
/// and does not shut the writing side down (tokio's `OwnedWriteHalf`
/// does): after a cancelled write, the peer would read a cut-off stream
/// ending in an orderly end of file, as if it were whole. Shut it down
/// first (`poll_shutdown`, `poll_close`), which flushes.
pub struct WriteHalf<T: CompatIo> {
    inner: Arc<T>,
    writer: Writer,
}

/// The halves given to [`ReadHalf::reunite`] or [`WriteHalf::reunite`]
/// came from two different [`Compat`]s: here they are, as they were.
pub struct ReuniteError<T: CompatIo>(pub ReadHalf<T>, pub WriteHalf<T>);

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Compat<super::AsyncIo>>();
    send_sync::<ReadHalf<super::AsyncIo>>();
    send_sync::<WriteHalf<super::AsyncIo>>();
    send_sync::<ReuniteError<super::AsyncIo>>();
};

impl<T: CompatIo + core::fmt::Debug> core::fmt::Debug for Compat<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut d = f.debug_struct("Compat");
        d.field("inner", &self.inner);
        self.reader.fields(&mut d);
        d.field("writing", &self.writer.writing.is_some()).finish()
    }
}

impl<T: CompatIo + core::fmt::Debug> core::fmt::Debug for ReadHalf<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut d = f.debug_struct("ReadHalf");
        d.field("inner", &self.inner);
        self.reader.fields(&mut d);
        d.finish()
    }
}

impl<T: CompatIo + core::fmt::Debug> core::fmt::Debug for WriteHalf<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WriteHalf")
            .field("inner", &self.inner)
            .field("writing", &self.writer.writing.is_some())
            .field("poisoned", &self.writer.poisoned.is_some())
            .finish()
    }
}

impl<T: CompatIo> core::fmt::Debug for ReuniteError<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("ReuniteError").finish_non_exhaustive()
    }
}

impl<T: CompatIo> core::fmt::Display for ReuniteError<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("tried to reunite the halves of two different Compat adapters")
    }
}

impl<T: CompatIo> std::error::Error for ReuniteError<T> {}

impl<T: CompatIo> Compat<T> {
    /// Adapts `inner`. Nothing is allocated or issued until the first read
    /// or write.
    pub fn new(inner: T) -> Self {
        Self { inner, reader: Reader::default(), writer: Writer::default() }
    }

    /// The adapted object, for its other methods (`peer_addr`,
    /// `set_nodelay`, ...). Reading or writing through it bypasses the
    /// adapter's buffers.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The adapted object, mutably. As [`get_ref`](Self::get_ref); see
    /// [Taking it apart](Self#taking-it-apart) for an object replaced
    /// through it.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// The adapted object, with the adapter's reads and writes in flight
    /// cancelled and its unread bytes discarded (see [Taking it
    /// apart](Self#taking-it-apart)).
    pub fn into_inner(mut self) -> T {
        self.cancel();
        let (inner, reader, _) = self.into_parts();
        if let Some(buf) = reader.rbuf {
            give_back(buf);
        }
        inner
    }

    /// Whether a read with no bytes buffered first waits for data with a
    /// zero-byte receive, holding no buffer (the default over a
    /// [`TcpStream`](crate::net::TcpStream)), or keeps a read of its 64 KiB
    /// buffer in flight until data comes. See [Waiting for
    /// data](Self#waiting-for-data). Always `false` over an
    /// [`AsyncIo`](super::AsyncIo), which has no such wait.
    pub fn waits_for_data(&self) -> bool {
        self.reader.waits_for_data(&self.inner)
    }

    /// Sets [`waits_for_data`](Self::waits_for_data), from the next read
    /// on (a wait already in flight is finished first). Kestrel's
    /// `WaitForDataBeforeAllocatingBuffer`. Changes nothing over an
    /// [`AsyncIo`](super::AsyncIo).
    pub fn set_wait_for_data(&mut self, wait: bool) {
        self.reader.set_wait_for_data(wait);
    }

    /// The adapter as a [`ReadHalf`] and a [`WriteHalf`] that work from two
    /// tasks at once, without a lock (see [Split halves](Self#split-halves)).
    /// Nothing is cancelled or lost: buffered bytes and operations in flight
    /// go to their half.
    pub fn into_split(self) -> (ReadHalf<T>, WriteHalf<T>) {
        let (inner, reader, writer) = self.into_parts();
        let inner = Arc::new(inner);
        (ReadHalf { inner: Arc::clone(&inner), reader }, WriteHalf { inner, writer })
    }

    /// The buffers the adapter holds now: a read buffer (with unread bytes,
    /// or lent to a read in flight) and a write buffer (lent to a write in
    /// flight). A test hook, not API.
    #[cfg(any(test, feature = "test-hooks"))]
    #[doc(hidden)]
    pub fn buffers_held(&self) -> usize {
        self.reader.held() + self.writer.held()
    }

    fn read_side(&mut self) -> (&T, &mut Reader) {
        (&self.inner, &mut self.reader)
    }

    fn write_side(&mut self) -> (&T, &mut Writer) {
        (&self.inner, &mut self.writer)
    }

    /// Cancels what is in flight, as the drop does.
    fn cancel(&mut self) {
        let EngineOf(engine) = self.inner.engine();
        self.reader.cancel(engine);
        self.writer.cancel(engine);
    }

    /// The fields, moved out without the drop (which would cancel what is
    /// in flight).
    fn into_parts(self) -> (T, Reader, Writer) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used again and never dropped, so each
        // field is moved out of it exactly once.
        unsafe { (core::ptr::read(&this.inner), core::ptr::read(&this.reader), core::ptr::read(&this.writer)) }
    }
}

impl<T: CompatIo> Drop for Compat<T> {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl<T: CompatIo> ReadHalf<T> {
    /// The adapted object, shared with the [`WriteHalf`] (see
    /// [`Compat::get_ref`]).
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// Whether `other` is the other half of the same [`Compat`].
    pub fn is_pair_of(&self, other: &WriteHalf<T>) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The [`Compat`] again, from this half and the other half of the same
    /// adapter, with whatever each had buffered or in flight; halves of two
    /// different adapters are refused and given back in the error.
    #[expect(clippy::result_large_err, reason = "the halves come back by value, as tokio's ReuniteError gives them")]
    pub fn reunite(self, other: WriteHalf<T>) -> Result<Compat<T>, ReuniteError<T>> {
        reunite(self, other)
    }

    /// As [`Compat::waits_for_data`], for this half.
    pub fn waits_for_data(&self) -> bool {
        self.reader.waits_for_data(&*self.inner)
    }

    /// As [`Compat::set_wait_for_data`], for this half.
    pub fn set_wait_for_data(&mut self, wait: bool) {
        self.reader.set_wait_for_data(wait);
    }

    /// As [`Compat::buffers_held`], for this half. A test hook, not API.
    #[cfg(any(test, feature = "test-hooks"))]
    #[doc(hidden)]
    pub fn buffers_held(&self) -> usize {
        self.reader.held()
    }

    fn read_side(&mut self) -> (&T, &mut Reader) {
        (&*self.inner, &mut self.reader)
    }
}

impl<T: CompatIo> WriteHalf<T> {
    /// The adapted object, shared with the [`ReadHalf`] (see
    /// [`Compat::get_ref`]).
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// Whether `other` is the other half of the same [`Compat`].
    pub fn is_pair_of(&self, other: &ReadHalf<T>) -> bool {
        other.is_pair_of(self)
    }

    /// [`ReadHalf::reunite`], from this side.
    #[expect(clippy::result_large_err, reason = "the halves come back by value, as tokio's ReuniteError gives them")]
    pub fn reunite(self, other: ReadHalf<T>) -> Result<Compat<T>, ReuniteError<T>> {
        reunite(other, self)
    }

    /// As [`Compat::buffers_held`], for this half. A test hook, not API.
    #[cfg(any(test, feature = "test-hooks"))]
    #[doc(hidden)]
    pub fn buffers_held(&self) -> usize {
        self.writer.held()
    }

    fn write_side(&mut self) -> (&T, &mut Writer) {
        (&*self.inner, &mut self.writer)
    }
}

#[expect(clippy::result_large_err, reason = "as `ReadHalf::reunite`")]
fn reunite<T: CompatIo>(mut read: ReadHalf<T>, mut write: WriteHalf<T>) -> Result<Compat<T>, ReuniteError<T>> {
    if !read.is_pair_of(&write) {
        return Err(ReuniteError(read, write));
    }
    let inner = Arc::clone(&read.inner);
    let (reader, writer) = (core::mem::take(&mut read.reader), core::mem::take(&mut write.writer));
    // Left with nothing in flight, their drops cancel nothing.
    drop((read, write));
    let inner = Arc::into_inner(inner).expect("the two halves held the only references to the object");
    Ok(Compat { inner, reader, writer })
}

impl<T: CompatIo> Drop for ReadHalf<T> {
    fn drop(&mut self) {
        let EngineOf(engine) = self.inner.engine();
        self.reader.cancel(engine);
    }
}

impl<T: CompatIo> Drop for WriteHalf<T> {
    fn drop(&mut self) {
        let EngineOf(engine) = self.inner.engine();
        self.writer.cancel(engine);
    }
}
