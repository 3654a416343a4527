//! The parent's ends of a child's pipes: [`ChildStdin`], [`ChildStdout`],
//! [`ChildStderr`], each an [`AsyncIo`] over the end `std` made.

use core::future::Future;
use std::io;
use std::os::windows::io::{AsRawHandle, OwnedHandle, RawHandle};

#[cfg(any(feature = "futures-io", feature = "tokio", feature = "hyper"))]
use crate::io::compat::FileLike;
#[cfg(any(feature = "futures-io", feature = "tokio", feature = "hyper"))]
use crate::io::engine::Engine;
use crate::io::{AsyncIo, OverlappedHandle, ReadFuture, WriteFuture};

/// Binds the parent's end of a pipe `std` made for a child.
///
/// # Errors
/// `InvalidInput` if the end is synchronous or inheritable
/// ([`OverlappedHandle::try_from_owned`]); the OS error if binding fails.
///
/// # Safety
/// `end` is a piped end (`stdin`, `stdout` or `stderr`) just taken from a
/// `std::process::Child` that `spawn` has returned, and nothing has used
/// it since.
pub(super) unsafe fn bind(end: OwnedHandle) -> io::Result<AsyncIo> {
    // SAFETY: `end` is the parent's end of a pipe `std` made for this spawn
    // and handed over in a `ChildStd*` nobody else saw (the caller's
    // contract): `std` keeps no copy of it (its `Command` keeps no piped
    // end), gives the child the pipe's other end, a file object of its own,
    // and has issued no I/O on it, so it is bound to no port, no I/O on its
    // file object is pending, and no other handle reaches that file object.
    // Its being overlapped and not inheritable is checked.
    AsyncIo::new(unsafe { OverlappedHandle::try_from_owned(end) }?)
}

/// The child's stdin, our end: write-only, and the child reads end of file
/// once it is dropped. [`Child::wait`](super::Child::wait) drops it first.
///
/// Its writes are [`AsyncIo`]'s: each takes a buffer by value and resolves
/// to the result and the buffer. `io::Compat::new(stdin)` makes it a
/// `tokio::io::AsyncWrite` (or `futures_io`'s); a `shutdown` there does not
/// close the pipe: drop the adapter.
#[derive(Debug)]
pub struct ChildStdin {
    pub(super) io: AsyncIo,
}

/// The child's stdout, our end: read-only; reads give `Ok(0)` once the
/// child, and every process that inherited its stdout, has closed it.
///
/// Its reads are [`AsyncIo`]'s: each takes a buffer by value and resolves
/// to the count and the buffer. `io::Compat::new(stdout)` makes it a
/// `tokio::io::AsyncRead` and `AsyncBufRead` (or `futures_io`'s), for
/// `BufReader`, `lines` and `read_to_end` (its `AsyncWrite` side fails
/// with `ERROR_ACCESS_DENIED`: the pipe goes one way).
#[derive(Debug)]
pub struct ChildStdout {
    pub(super) io: AsyncIo,
}

/// The child's stderr, our end: as [`ChildStdout`].
#[derive(Debug)]
pub struct ChildStderr {
    pub(super) io: AsyncIo,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<ChildStdin>();
    send_sync::<ChildStdout>();
    send_sync::<ChildStderr>();
};

impl ChildStdin {
    /// Writes `buf`; resolves to the bytes written and the buffer (see
    /// [`AsyncIo::write`]).
    pub fn write<B>(&self, buf: B) -> WriteFuture<'_, B>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        self.io.write(buf)
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
                let (r, back) = self.io.write(rest).await;
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
}

/// A buffer from `start` on: what is left to write of it.
struct Rest<B> {
    buf: B,
    start: usize,
}

impl<B: AsRef<[u8]>> AsRef<[u8]> for Rest<B> {
    fn as_ref(&self) -> &[u8] {
        &self.buf.as_ref()[self.start..]
    }
}

macro_rules! reader {
    ($t:ident) => {
        impl $t {
            /// Reads into `buf`; resolves to the bytes read (0 at end of
            /// file) and the buffer (see [`AsyncIo::read`]).
            pub fn read<B>(&self, buf: B) -> ReadFuture<'_, B>
            where
                B: AsMut<[u8]> + Send + 'static,
            {
                self.io.read(buf)
            }
        }
    };
}
reader!(ChildStdout);
reader!(ChildStderr);

macro_rules! common {
    ($t:ident) => {
        /// Our end's value; deliberately no `AsHandle` (see
        /// [`Io`](crate::io::Io)'s).
        impl AsRawHandle for $t {
            fn as_raw_handle(&self) -> RawHandle {
                self.io.as_raw_handle()
            }
        }

        #[cfg(any(feature = "futures-io", feature = "tokio", feature = "hyper"))]
        impl crate::io::CompatIo for $t {}

        #[cfg(any(feature = "futures-io", feature = "tokio", feature = "hyper"))]
        impl FileLike for $t {
            fn file_engine(&self) -> &Engine {
                self.io.file_engine()
            }
            fn completes_inline(&self) -> bool {
                self.io.completes_inline()
            }
        }
    };
}
common!(ChildStdin);
common!(ChildStdout);
common!(ChildStderr);

/// Reads `io` to its end of file; nothing (`None`) reads as empty.
pub(super) async fn read_to_end(io: Option<&AsyncIo>) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let Some(io) = io else { return Ok(out) };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let (n, back) = io.read(buf).await;
        buf = back;
        match n? {
            0 => return Ok(out),
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}
