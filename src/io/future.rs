//! Completion-based async I/O with owned buffers: [`AsyncIo`].

use core::any::Any;
use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::task::{Context, Poll};
use std::io;
use std::mem::ManuallyDrop;
use std::os::windows::io::{AsRawHandle, RawHandle};
use std::sync::{Arc, Mutex, PoisonError};

use windows_sys::Win32::Foundation::{ERROR_BROKEN_PIPE, ERROR_HANDLE_EOF};

use super::{Io, IoCompletion, OperationId, OverlappedHandle, SubmitError};
use crate::callback_env::CallbackEnviron;
use crate::reentry;
use crate::waker_slot::WakerSlot;

/// An overlapped handle bound to the pool, whose reads and writes are
/// futures that take a buffer and give it back with the result.
///
/// Built on [`Io`]; see the [module docs](crate::io#async-io) for the
/// design. The futures borrow the object, so it outlives them.
///
/// # Dropping
/// Dropping it never waits for a completion, so it may happen anywhere: in
/// a task, on an executor's thread, on a pool whose threads are all busy, in
/// the object's own completion (a buffer holding the last `Arc` of it).
/// When every future of it has resolved (or was never polled), it is
/// closed, handle and all, before the drop returns. Otherwise (the cancelled
/// completion of a dropped future is still to come, a forgotten future's
/// operation is pending) the drop hands the teardown to a thread of the
/// process default pool, which cancels what is left, waits for the
/// completions and then closes: the other end of a pipe sees the handle
/// close a little later.
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
    /// Taken only by `drop`.
    bound: ManuallyDrop<Bound>,
}

/// The object and its count of operations whose result has not reached
/// their future yet.
#[derive(Debug)]
struct Bound {
    io: Io,
    /// Counted from before an operation is issued until its completion has
    /// published the result (or its issue failed); a completion at most
    /// finishing its callback is not counted, so an object whose futures
    /// have all resolved is dropped in place.
    in_flight: Arc<AtomicUsize>,
}

impl Drop for AsyncIo {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once, and nothing uses `self.bound` after it.
        let bound = unsafe { ManuallyDrop::take(&mut self.bound) };
        // A dropped future's cancelled completion, or a forgotten future's
        // operation, may still be in flight; waiting for it here could wait
        // for this very thread (an executor's, or the only one of a busy
        // pool), or for the callback this drop runs in.
        reentry::drop_unblocking(bound);
    }
}

impl reentry::Settle for Bound {
    fn settled(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0
    }
    fn settle(&self) {
        self.io.stop_and_drain();
    }
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

/// An operation's outcome: the result and the buffer, type-erased.
type Outcome = (io::Result<usize>, Box<dyn Any + Send>);

/// What an operation's completion and its future share.
struct OpShared {
    /// The result and the (type-erased) buffer, published once by the callback.
    done: Mutex<Option<Outcome>>,
    waker: WakerSlot,
}

impl OpShared {
    fn new() -> Arc<Self> {
        Arc::new(Self { done: Mutex::new(None), waker: WakerSlot::new() })
    }

    fn complete(&self, result: io::Result<usize>, buf: Box<dyn Any + Send>) {
        *self.lock() = Some((result, buf));
        self.waker.wake();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Outcome>> {
        self.done.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A read's buffer, type-erased so the object's one callback can take every
/// operation's payload as one type.
trait ReadBuffer: Send {
    fn bytes_mut(&mut self) -> &mut [u8];
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

impl<B: AsMut<[u8]> + Send + 'static> ReadBuffer for B {
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.as_mut()
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

/// A write's buffer, type-erased (see [`ReadBuffer`]).
trait WriteBuffer: Send {
    fn bytes(&self) -> &[u8];
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

impl<B: AsRef<[u8]> + Send + 'static> WriteBuffer for B {
    fn bytes(&self) -> &[u8] {
        self.as_ref()
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

/// The payload of a read: the buffer and where its result goes.
struct ReadOp {
    buf: Box<dyn ReadBuffer>,
    shared: Arc<OpShared>,
}

impl AsMut<[u8]> for ReadOp {
    fn as_mut(&mut self) -> &mut [u8] {
        self.buf.bytes_mut()
    }
}

/// The payload of a write.
struct WriteOp {
    buf: Box<dyn WriteBuffer>,
    shared: Arc<OpShared>,
}

impl AsRef<[u8]> for WriteOp {
    fn as_ref(&self) -> &[u8] {
        self.buf.bytes()
    }
}

/// A read's result: end of file (`ERROR_HANDLE_EOF`) and a pipe whose
/// writer has gone (`ERROR_BROKEN_PIPE`) read 0 bytes, as `std`'s reads do.
fn read_result(result: io::Result<usize>) -> io::Result<usize> {
    match result {
        Err(e) if matches!(e.raw_os_error(), Some(c) if c == ERROR_HANDLE_EOF as i32 || c == ERROR_BROKEN_PIPE as i32) => {
            Ok(0)
        }
        other => other,
    }
}

/// The object's callback: hands the result and the buffer to the future.
fn on_completion(c: &IoCompletion, in_flight: &AtomicUsize) {
    let (result, buf, shared) = if let Some(op) = c.claim::<ReadOp>() {
        let ReadOp { buf, shared } = op.into_payload();
        (read_result(c.result()), buf.into_any(), shared)
    } else if let Some(op) = c.claim::<WriteOp>() {
        let WriteOp { buf, shared } = op.into_payload();
        (c.result(), buf.into_any(), shared)
    } else {
        return;
    };
    // Before the result is published: a future that sees it sees this.
    in_flight.fetch_sub(1, Ordering::SeqCst);
    shared.complete(result, buf);
    // If the future is gone, the last `Arc` (and the buffer) drops here,
    // after the kernel is done with it.
}

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

    fn bind(handle: OverlappedHandle, env: Option<&CallbackEnviron>) -> io::Result<Self> {
        let in_flight = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&in_flight);
        let callback = move |c: &IoCompletion| on_completion(c, &counted);
        let io = match env {
            None => Io::new(handle, callback)?,
            Some(env) => Io::new_in(handle, callback, env)?,
        };
        Ok(Self { bound: ManuallyDrop::new(Bound { io, in_flight }) })
    }

    /// Reads into `buf` from byte `offset` of a file. Resolves to the bytes
    /// read (0 at or past the end of the file) and the buffer.
    pub fn read_at<B>(&self, buf: B, offset: u64) -> ReadFuture<'_, B>
    where
        B: AsMut<[u8]> + Send + 'static,
    {
        ReadFuture(Transfer::new(self, buf, offset))
    }

    /// Writes `buf` at byte `offset` of a file. Resolves to the bytes
    /// written and the buffer.
    pub fn write_at<B>(&self, buf: B, offset: u64) -> WriteFuture<'_, B>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        WriteFuture(Transfer::new(self, buf, offset))
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
    /// [`Io::outstanding`]).
    pub fn outstanding(&self) -> usize {
        self.bound.io.outstanding()
    }
}

/// The bound handle's value; deliberately no `AsHandle` (see [`Io`]'s).
impl AsRawHandle for AsyncIo {
    fn as_raw_handle(&self) -> RawHandle {
        self.bound.io.as_raw_handle()
    }
}

/// The state machine both futures share.
struct Transfer<'a, B> {
    io: &'a AsyncIo,
    offset: u64,
    /// The buffer until the operation is issued.
    buf: Option<B>,
    /// The issued operation until its result is taken.
    issued: Option<(OperationId, Arc<OpShared>)>,
}

impl<'a, B: Send + 'static> Transfer<'a, B> {
    fn new(io: &'a AsyncIo, buf: B, offset: u64) -> Self {
        Self { io, offset, buf: Some(buf), issued: None }
    }

    /// Issues the operation at the first poll (`issue` gives the buffer back
    /// with a synchronous failure), then waits for its completion.
    fn poll_with(
        &mut self,
        cx: &mut Context<'_>,
        issue: impl FnOnce(&Io, u64, B, Arc<OpShared>) -> Result<OperationId, (io::Error, B)>,
    ) -> Poll<(io::Result<usize>, B)> {
        if let Some(buf) = self.buf.take() {
            let shared = OpShared::new();
            let bound = &self.io.bound;
            bound.in_flight.fetch_add(1, Ordering::SeqCst);
            match issue(&bound.io, self.offset, buf, Arc::clone(&shared)) {
                Ok(id) => self.issued = Some((id, shared)),
                Err((e, buf)) => {
                    bound.in_flight.fetch_sub(1, Ordering::SeqCst);
                    return Poll::Ready((Err(e), buf));
                }
            }
        }
        let Some((_, shared)) = &self.issued else {
            panic!("an I/O future polled after completion");
        };
        shared.waker.register(cx.waker());
        let Some((result, buf)) = shared.lock().take() else {
            return Poll::Pending;
        };
        self.issued = None;
        let buf = *buf.downcast::<B>().expect("the buffer comes back as the type it went in as");
        Poll::Ready((result, buf))
    }
}

impl<B> Drop for Transfer<'_, B> {
    fn drop(&mut self) {
        if let Some((id, shared)) = self.issued.take() {
            if shared.lock().is_some() {
                return; // completed: the buffer drops with `shared`
            }
            shared.waker.clear();
            // The completion still comes (normally ERROR_OPERATION_ABORTED)
            // and frees the buffer. An error means it is already on its way.
            let _ = self.io.bound.io.cancel(id);
        }
    }
}

/// Gives the buffer back out of a refused submission.
fn refused<T, B: 'static>(e: SubmitError<T>, buf: impl FnOnce(T) -> Box<dyn Any + Send>) -> (io::Error, B) {
    let (error, payload) = e.into_parts();
    let buf = *buf(payload).downcast::<B>().expect("the buffer comes back as the type it went in as");
    (error, buf)
}

/// The future of [`AsyncIo::read_at`] and [`AsyncIo::read`]: resolves to the
/// bytes read and the buffer. Lazy: the read is issued at the first poll.
/// Dropping it after that cancels the read (`CancelIoEx`) without waiting;
/// the buffer is freed when the cancelled completion arrives.
#[must_use = "futures do nothing unless polled"]
pub struct ReadFuture<'a, B>(Transfer<'a, B>);

/// The future of [`AsyncIo::write_at`] and [`AsyncIo::write`]: resolves to
/// the bytes written and the buffer. Lazy, and cancelled by a drop, as
/// [`ReadFuture`] is.
#[must_use = "futures do nothing unless polled"]
pub struct WriteFuture<'a, B>(Transfer<'a, B>);

// The buffer is never pinned: it moves into the operation at the first poll.
impl<B> Unpin for ReadFuture<'_, B> {}
impl<B> Unpin for WriteFuture<'_, B> {}

impl<B> core::fmt::Debug for ReadFuture<'_, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ReadFuture")
            .field("offset", &self.0.offset)
            .field("issued", &self.0.issued.as_ref().map(|(id, _)| *id))
            .finish()
    }
}

impl<B> core::fmt::Debug for WriteFuture<'_, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WriteFuture")
            .field("offset", &self.0.offset)
            .field("issued", &self.0.issued.as_ref().map(|(id, _)| *id))
            .finish()
    }
}

impl<B: AsMut<[u8]> + Send + 'static> Future for ReadFuture<'_, B> {
    type Output = (io::Result<usize>, B);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut()
            .0
            .poll_with(cx, |io, offset, buf, shared| {
                io.read_at(offset, ReadOp { buf: Box::new(buf), shared })
                    .map_err(|e| refused(e, |op: ReadOp| op.buf.into_any()))
            })
            .map(|(result, buf)| (read_result(result), buf))
    }
}

impl<B: AsRef<[u8]> + Send + 'static> Future for WriteFuture<'_, B> {
    type Output = (io::Result<usize>, B);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().0.poll_with(cx, |io, offset, buf, shared| {
            io.write_at(offset, WriteOp { buf: Box::new(buf), shared })
                .map_err(|e| refused(e, |op: WriteOp| op.buf.into_any()))
        })
    }
}
