//! [`PipeStream`]: a connected pipe instance, the server's or the client's.

use core::future::Future;
use std::ffi::OsStr;
use std::io;
use std::os::windows::io::{AsRawHandle, RawHandle};
use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::{ERROR_PIPE_BUSY, ERROR_SEM_TIMEOUT, GENERIC_READ, GENERIC_WRITE, HANDLE};
use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_OVERLAPPED;
use windows_sys::Win32::System::Pipes::{
    GetNamedPipeClientProcessId, GetNamedPipeServerProcessId, PIPE_READMODE_MESSAGE, SetNamedPipeHandleState,
};

use super::busy::Backoff;
use super::options::wide;
use crate::callback_env::CallbackEnviron;
use crate::io::engine::{Engine, OpFuture, Unblocking};
use crate::io::handles::{complete_inline_unless_message, open_pipe_client, pipe_is_message};
use crate::io::iocore::BoundHandle;
use crate::io::op::fs::Transfer;
use crate::io::op::pipe::Listen;
use crate::io::{OverlappedHandle, ReadFuture, WriteFuture};

/// How long [`PipeStream::connect`] waits while every instance of the pipe
/// is busy.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One end of a connected named pipe, whose reads and writes are futures
/// that complete on the pool, with owned buffers as
/// [`TcpStream`](crate::net::TcpStream)'s: accepted by a
/// [`PipeListener`](super::PipeListener), or opened by
/// [`connect`](Self::connect).
///
/// The futures borrow the stream (`&self`), so one task can read while
/// another writes (share it as an `Arc<PipeStream>`).
/// [`io::Compat`](crate::io::Compat) gives it the poll-based traits of
/// `futures-io`, tokio and hyper, as it does a `TcpStream`. Dropping it
/// never blocks (see [Teardown](super#teardown)).
#[derive(Debug)]
pub struct PipeStream {
    pub(super) engine: Unblocking,
    /// The instance has skip-on-success (byte mode): a read of data already
    /// in the pipe, or a write the pipe has room for, completes inline.
    inline: bool,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<PipeStream>();
};

impl PipeStream {
    /// A pipe instance, bound to the pool (of `env`, or the default one).
    /// A byte-mode one gets skip-on-success; a message-mode one does not
    /// (see [One completion path](super#one-completion-path)).
    pub(super) fn bind(handle: OverlappedHandle, env: Option<&CallbackEnviron>, message: bool) -> io::Result<Self> {
        let handle = handle.into_owned();
        let inline = complete_inline_unless_message(handle.as_raw_handle(), message)?;
        Ok(Self { engine: Unblocking::new(Engine::bind(BoundHandle::File(handle), env)?), inline })
    }

    pub(super) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The wait for a client, on a server's instance.
    pub(super) fn listen(&self) -> Listen {
        Listen(self.inline)
    }

    fn raw(&self) -> HANDLE {
        self.engine.io.as_raw_handle()
    }

    /// Opens the pipe `name` (`\\.\pipe\...`, or `\\server\pipe\...`) as
    /// its client, bound to the process default pool. `NotFound` when no
    /// instance of it exists (no server). While every instance is busy
    /// (connected to other clients) it waits, on pool timers and without
    /// blocking the caller's thread, for one to become free, up to
    /// [`DEFAULT_CONNECT_TIMEOUT`] (10 s); then it fails with
    /// `ERROR_SEM_TIMEOUT` (kind `TimedOut`), as `WaitNamedPipe` does.
    ///
    /// The stream reads in the mode the server created the pipe in (bytes
    /// or messages). The client is opened for identification only (see
    /// [Security](super#security)).
    pub fn connect(name: impl AsRef<OsStr>) -> impl Future<Output = io::Result<PipeStream>> + Send {
        Self::connect_with(wide(name.as_ref()), DEFAULT_CONNECT_TIMEOUT, None)
    }

    /// [`connect`](Self::connect), waiting up to `timeout` while every
    /// instance is busy (`Duration::ZERO`: not at all).
    pub fn connect_timeout(
        name: impl AsRef<OsStr>,
        timeout: Duration,
    ) -> impl Future<Output = io::Result<PipeStream>> + Send {
        Self::connect_with(wide(name.as_ref()), timeout, None)
    }

    /// [`connect_timeout`](Self::connect_timeout), with the stream bound to
    /// the pool of `env`, with its settings.
    pub fn connect_in(
        name: impl AsRef<OsStr>,
        timeout: Duration,
        env: &CallbackEnviron,
    ) -> impl Future<Output = io::Result<PipeStream>> + Send {
        Self::connect_with(wide(name.as_ref()), timeout, Some(env.clone()))
    }

    async fn connect_with(
        name: io::Result<Vec<u16>>,
        timeout: Duration,
        env: Option<CallbackEnviron>,
    ) -> io::Result<PipeStream> {
        let name = name?;
        let deadline = Instant::now().checked_add(timeout);
        let mut backoff = Backoff::new();
        let mut seen_busy = false;
        loop {
            let e = match open_client(&name) {
                Ok((handle, message)) => return Self::bind(handle, env.as_ref(), message),
                Err(e) => e,
            };
            // Once seen busy, the name may be between instances (the last
            // busy one closed before the server opened the next): no
            // instance is then `NotFound`, and worth waiting out too.
            let busy = e.raw_os_error() == Some(ERROR_PIPE_BUSY as i32);
            let between = seen_busy && e.kind() == io::ErrorKind::NotFound;
            if !(busy || between) {
                return Err(e);
            }
            seen_busy = true;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(io::Error::from_raw_os_error(ERROR_SEM_TIMEOUT as i32));
            }
            backoff.sleep(deadline).await;
        }
    }

    /// Reads into `buf`; resolves to the bytes read (0 once the peer has
    /// closed its end) and the buffer. Lazy: the read is issued at the first
    /// poll. In message mode, see [Errors and ends](super#errors-and-ends).
    pub fn read<B>(&self, buf: B) -> ReadFuture<'_, B>
    where
        B: AsMut<[u8]> + Send + 'static,
    {
        ReadFuture::new(OpFuture::new(&self.engine, Transfer::new(buf, 0, self.inline)))
    }

    /// Writes from `buf` (in message mode, one message); resolves to the
    /// bytes written and the buffer. A write of more than the reader has
    /// room for stays in flight until the reader has taken enough of it.
    pub fn write<B>(&self, buf: B) -> WriteFuture<'_, B>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        WriteFuture::new(OpFuture::new(&self.engine, Transfer::new(buf, 0, self.inline)))
    }

    /// Writes all of `buf`, in as many writes as it takes; resolves to the
    /// outcome and the buffer. A write that writes nothing is `WriteZero`.
    // Not an `async fn`: the signature promises `Send`.
    #[allow(clippy::manual_async_fn)]
    pub fn write_all<B>(&self, buf: B) -> impl Future<Output = (io::Result<()>, B)> + Send + '_
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        async move {
            let mut rest = Rest { buf, start: 0 };
            while rest.start < rest.buf.as_ref().len() {
                let (r, back) = OpFuture::new(&self.engine, Transfer::<_, true>::new(rest, 0, self.inline)).await;
                rest = back;
                match r {
                    Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), rest.buf),
                    Ok(n) => rest.start += n,
                    Err(e) => return (Err(e), rest.buf),
                }
            }
            (Ok(()), rest.buf)
        }
    }

    /// The process id of the pipe's client (`GetNamedPipeClientProcessId`):
    /// on a server's stream, who connected; on a client's, this process.
    pub fn client_process_id(&self) -> io::Result<u32> {
        let mut pid = 0;
        // SAFETY: `self.raw()` is an open pipe handle; `pid` a valid out-pointer.
        crate::sys::check(unsafe { GetNamedPipeClientProcessId(self.raw(), &mut pid) })?;
        Ok(pid)
    }

    /// The process id of the pipe's server (`GetNamedPipeServerProcessId`).
    pub fn server_process_id(&self) -> io::Result<u32> {
        let mut pid = 0;
        // SAFETY: as in `client_process_id`.
        crate::sys::check(unsafe { GetNamedPipeServerProcessId(self.raw(), &mut pid) })?;
        Ok(pid)
    }

    /// Operations issued and not yet settled, including those of dropped
    /// futures whose cancelled completion has not arrived.
    pub fn outstanding(&self) -> usize {
        self.engine.io.outstanding()
    }
}

/// The instance's handle value; deliberately no `AsHandle` (see
/// [`Io`](crate::io::Io)'s).
impl AsRawHandle for PipeStream {
    fn as_raw_handle(&self) -> RawHandle {
        self.raw()
    }
}

/// A write buffer from `start` on: what each write of
/// [`PipeStream::write_all`] sends.
struct Rest<B> {
    buf: B,
    start: usize,
}

impl<B: AsRef<[u8]>> AsRef<[u8]> for Rest<B> {
    fn as_ref(&self) -> &[u8] {
        let s = self.buf.as_ref();
        &s[self.start.min(s.len())..]
    }
}

/// Opens `name` (NUL-terminated) as an overlapped client for reading and
/// writing, at identification level, in the pipe's own read mode; and
/// whether that is message mode.
fn open_client(name: &[u16]) -> io::Result<(OverlappedHandle, bool)> {
    let handle = open_pipe_client(name, GENERIC_READ | GENERIC_WRITE, FILE_FLAG_OVERLAPPED)?;
    let message = pipe_is_message(handle.as_raw_handle()).ok_or_else(io::Error::last_os_error)?;
    if message {
        // A client end starts in byte read mode whatever the pipe's type.
        let mode = PIPE_READMODE_MESSAGE;
        // SAFETY: `mode` outlives the call; the other pointers are null (unchanged).
        let set =
            unsafe { SetNamedPipeHandleState(handle.as_raw_handle(), &mode, core::ptr::null(), core::ptr::null()) };
        crate::sys::check(set)?;
    }
    // SAFETY: opened with FILE_FLAG_OVERLAPPED, not inheritable (null
    // security attributes), fresh (so bound to no port) and without
    // skip-on-success.
    Ok((unsafe { OverlappedHandle::assume_overlapped(handle) }, message))
}

#[cfg(any(feature = "futures-io", feature = "tokio", feature = "hyper"))]
impl crate::io::compat::FileLike for PipeStream {
    fn file_engine(&self) -> &Engine {
        &self.engine
    }
    fn completes_inline(&self) -> bool {
        self.inline
    }
}

#[cfg(any(feature = "futures-io", feature = "tokio", feature = "hyper"))]
impl crate::io::CompatIo for PipeStream {}
