//! Completion-based async I/O with owned buffers: [`AsyncIo`].

use core::future::Future;
use core::pin::Pin;

use core::task::{Context, Poll};
use std::io;
use std::os::windows::io::{AsRawHandle, RawHandle};

use super::OverlappedHandle;
use super::engine::{Engine, OpFuture, Unblocking};
use super::handles::{complete_inline_unless_message, pipe_is_message};
use super::iocore::BoundHandle;
use super::op::BufferFor;
use super::op::fs::Transfer;
use crate::callback_env::CallbackEnviron;

/// An overlapped handle bound to the pool, whose reads and writes are
/// futures that take a buffer and give it back with the result.
///
/// Built on [`Io`](super::Io); see the [module docs](crate::io#async-io) for the
/// design. The futures borrow the object, so it outlives them.
///
/// # Dropping
/// Dropping it never waits for a completion, so it may happen anywhere: in
/// a task, on an executor's thread, on a pool whose threads are all busy, in
/// the object's own completion (a buffer holding the last `Arc` of it).
/// When nothing of it is in flight, it is closed, handle and all, before
/// the drop returns (dropped inside its own completion, once that callback
/// has returned). Otherwise (the cancelled completion of a dropped future is
/// still to come, a forgotten future's operation is pending, or a resolved
/// future's completion callback is still finishing) the drop cancels what
/// is in flight and leaves the object to the completion that ends the last
/// of it, which drops it from its callback: no thread waits for a
/// completion, and the other end of a pipe sees the handle close a little
/// later. Where the close must have happened when a call returns (to bind
/// the same address again at once), use `into_std` (sockets) or
/// [`Io::run_down`](super::Io::run_down), which wait.
///
/// # Keeping a read in flight
/// Futures are lazy: an operation is issued at the first poll. To overlap
/// the next read with work on the current buffer, poll the next one before
/// working, for instance with `futures::join!` (two buffers, swapped each
/// round):
///
/// ```
/// use windows_threadpool::io::{self, AsyncIo};
///
/// # let (server, client) = io::pipe_pair()?;
/// # let (server, client) = (AsyncIo::new(server)?, AsyncIo::new(client)?);
/// # std::thread::spawn(move || futures::executor::block_on(async move {
/// #     for chunk in [&b"one "[..], b"two ", b"three"] { client.write(chunk).await.0.unwrap(); }
/// # }));
/// let mut total = 0;
/// futures::executor::block_on(async {
///     let (mut n, mut current) = server.read(vec![0u8; 4096]).await;
///     let mut spare = vec![0u8; 4096];
///     while let Ok(len @ 1..) = n {
///         // The next read is issued by join's first poll, before the work.
///         let ((next_n, next), ()) = futures::join!(server.read(spare), async {
///             total += current[..len].len(); // work on the current buffer
///         });
///         spare = std::mem::replace(&mut current, next);
///         n = next_n;
///     }
/// });
/// assert_eq!(total, 13);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # When plain reads are better
/// Each operation costs a completion hand-off to a pool thread, and each
/// object a bind and a drain: under Wine an `AsyncIo` bind and drop took
/// about 100 µs and a small read about 240 µs. For many small files read
/// once each (a hasher over a tree), plain `std::fs::read` inside
/// [`task::for_each`](crate::task::for_each) does the same work with no
/// hand-off at all (measured over 3,560 small files: `AsyncIo` took 3.3×
/// as long as one thread of `std` reads). `AsyncIo` pays off where
/// operations wait: pipes, sockets, large or uncached files, many at once.
///
/// ```
/// use windows_threadpool::io::{self, AsyncIo};
///
/// let (server, client) = io::pipe_pair()?;
/// let (server, client) = (AsyncIo::new(server)?, AsyncIo::new(client)?);
/// futures::executor::block_on(async {
///     let (sent, _) = client.write(b"ping".to_vec()).await;
///     let (n, buf) = server.read(vec![0u8; 16]).await;
///     assert_eq!((sent?, &buf[..n?]), (4, &b"ping"[..]));
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// A future cannot outlive its object:
///
/// ```compile_fail,E0505
/// use windows_threadpool::io::{AsyncIo, pipe_pair};
/// let (server, _client) = pipe_pair()?;
/// let io = AsyncIo::new(server)?;
/// let read = io.read(vec![0u8; 16]);
/// drop(io);
/// drop(read);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// and the buffer must be `Send` (the pool's thread hands it back):
///
/// ```compile_fail,E0277
/// use windows_threadpool::io::{AsyncIo, pipe_pair};
/// struct Local(std::rc::Rc<()>, [u8; 4]);
/// impl AsMut<[u8]> for Local {
///     fn as_mut(&mut self) -> &mut [u8] { &mut self.1 }
/// }
/// let (server, _client) = pipe_pair()?;
/// let io = AsyncIo::new(server)?;
/// let _read = io.read(Local(std::rc::Rc::new(()), [0; 4]));
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "dropping it cancels outstanding I/O, drains and closes the I/O object and its handle"]
#[derive(Debug)]
pub struct AsyncIo {
    pub(super) engine: Unblocking,
    /// The handle has skip-on-success: an operation that completes at once
    /// finishes at the future's first poll.
    pub(super) inline: bool,
}

const _: () = {
    const fn send<T: Send>() {}
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<AsyncIo>();
    send::<ReadFuture<'static, Vec<u8>>>();
    send::<WriteFuture<'static, Vec<u8>>>();
    send::<ReadFuture<'static, Box<[u8]>>>();
    send::<WriteFuture<'static, &'static [u8]>>();
};

impl AsyncIo {
    /// Binds `handle` to the process default pool. If creation fails the
    /// handle is closed.
    pub fn new(handle: OverlappedHandle) -> io::Result<Self> {
        Self::bind(handle, None)
    }

    /// Binds `handle` to the pool of `env`, with its settings. If creation
    /// fails the handle is closed.
    pub fn new_in(handle: OverlappedHandle, env: &CallbackEnviron) -> io::Result<Self> {
        Self::bind(handle, Some(env))
    }

    /// The handle gets skip-on-success unless it is a message-type pipe
    /// (see `io::handles::complete_inline_unless_message`).
    fn bind(handle: OverlappedHandle, env: Option<&CallbackEnviron>) -> io::Result<Self> {
        let h = handle.as_raw_handle();
        let inline = complete_inline_unless_message(h, pipe_is_message(h) == Some(true))?;
        let engine = Engine::bind(BoundHandle::File(handle.0), env)?;
        Ok(Self { engine: Unblocking::new(engine), inline })
    }

    fn transfer<B, const WRITE: bool>(&self, buf: B, offset: u64) -> OpFuture<'_, Transfer<B, WRITE>>
    where
        B: BufferFor<WRITE> + Send + 'static,
    {
        OpFuture::new(&self.engine, Transfer::new(buf, offset, self.inline))
    }

    /// Reads into `buf` from byte `offset` of a file. Resolves to the bytes
    /// read (0 at or past the end of the file) and the buffer.
    pub fn read_at<B>(&self, buf: B, offset: u64) -> ReadFuture<'_, B>
    where
        B: AsMut<[u8]> + Send + 'static,
    {
        ReadFuture(self.transfer(buf, offset))
    }

    /// Writes `buf` at byte `offset` of a file. Resolves to the bytes
    /// written and the buffer.
    pub fn write_at<B>(&self, buf: B, offset: u64) -> WriteFuture<'_, B>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        WriteFuture(self.transfer(buf, offset))
    }

    /// Reads into `buf` from a stream such as a pipe; resolves when some
    /// data arrives (0 bytes once the writer has closed its end).
    pub fn read<B>(&self, buf: B) -> ReadFuture<'_, B>
    where
        B: AsMut<[u8]> + Send + 'static,
    {
        self.read_at(buf, 0)
    }

    /// Writes `buf` to a stream such as a pipe.
    pub fn write<B>(&self, buf: B) -> WriteFuture<'_, B>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        self.write_at(buf, 0)
    }

    /// Operations issued and not yet settled, including those of dropped
    /// futures whose cancelled completion has not arrived (see
    /// [`Io::outstanding`](super::Io::outstanding)).
    pub fn outstanding(&self) -> usize {
        self.engine.io.outstanding()
    }
}

/// The bound handle's value; deliberately no `AsHandle` (see [`Io`](super::Io)'s).
impl AsRawHandle for AsyncIo {
    fn as_raw_handle(&self) -> RawHandle {
        self.engine.io.as_raw_handle()
    }
}

/// The future of [`AsyncIo::read_at`] and [`AsyncIo::read`]: resolves to the
/// bytes read and the buffer. Lazy: the read is issued at the first poll.
/// Dropping it after that cancels the read (`CancelIoEx`) without waiting;
/// the buffer is freed when the cancelled completion arrives.
#[must_use = "futures do nothing unless polled"]
pub struct ReadFuture<'a, B>(OpFuture<'a, Transfer<B, false>, (io::Result<usize>, B)>);

/// The future of [`AsyncIo::write_at`] and [`AsyncIo::write`]: resolves to
/// the bytes written and the buffer. Lazy, and cancelled by a drop, as
/// [`ReadFuture`] is.
#[must_use = "futures do nothing unless polled"]
pub struct WriteFuture<'a, B>(OpFuture<'a, Transfer<B, true>, (io::Result<usize>, B)>);

fn debug_transfer<B, O, const W: bool>(
    name: &str,
    f: &mut core::fmt::Formatter<'_>,
    fut: &OpFuture<'_, Transfer<B, W>, O>,
) -> core::fmt::Result {
    f.debug_struct(name).field("offset", &fut.op().map(|t| t.offset)).field("issued", &fut.id()).finish()
}

impl<'a, B> ReadFuture<'a, B> {
    /// The future of a read another async type issues.
    pub(crate) fn new(op: OpFuture<'a, Transfer<B, false>, (io::Result<usize>, B)>) -> Self {
        Self(op)
    }
}

impl<'a, B> WriteFuture<'a, B> {
    /// The future of a write another async type issues.
    pub(crate) fn new(op: OpFuture<'a, Transfer<B, true>, (io::Result<usize>, B)>) -> Self {
        Self(op)
    }
}

impl<B> core::fmt::Debug for ReadFuture<'_, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        debug_transfer("ReadFuture", f, &self.0)
    }
}

impl<B> core::fmt::Debug for WriteFuture<'_, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        debug_transfer("WriteFuture", f, &self.0)
    }
}

impl<B: AsMut<[u8]> + Send + 'static> Future for ReadFuture<'_, B> {
    type Output = (io::Result<usize>, B);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<B: AsRef<[u8]> + Send + 'static> Future for WriteFuture<'_, B> {
    type Output = (io::Result<usize>, B);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}
