//! [`Child`]: a spawned process, awaited on the pool.

use core::future::{Future, poll_fn};
use core::pin::pin;
use core::task::Poll;
use std::io;
use std::os::windows::io::{AsRawHandle, OwnedHandle, RawHandle};
use std::process::{ExitStatus, Output};

use super::stdio::{ChildStderr, ChildStdin, ChildStdout, read_to_end};
use crate::io::AsyncIo;

/// A child process started by [`Command::spawn`](super::Command::spawn).
///
/// Its pipes are the public fields, to be taken (`child.stdout.take()`), as
/// in tokio. [`wait`](Self::wait) waits on the pool: no thread is parked
/// for the child. See the [module docs](super) for killing and dropping.
#[derive(Debug)]
pub struct Child {
    /// The child's stdin, if it was [`piped`](std::process::Stdio::piped).
    pub stdin: Option<ChildStdin>,
    /// The child's stdout, if it was piped.
    pub stdout: Option<ChildStdout>,
    /// The child's stderr, if it was piped.
    pub stderr: Option<ChildStderr>,
    inner: std::process::Child,
    /// The exit status, once a wait has seen it: the child is reaped.
    status: Option<ExitStatus>,
    kill_on_drop: bool,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Child>();
};

impl Child {
    /// Takes `inner`'s pipes, each bound by `bind` (which sees only those
    /// ends, each just taken out of `inner`). If one fails, the child
    /// is killed and waited for (it could not be talked to as asked), and
    /// the error returned.
    pub(super) fn from_std(
        mut inner: std::process::Child,
        kill_on_drop: bool,
        bind: impl Fn(OwnedHandle) -> io::Result<AsyncIo>,
    ) -> io::Result<Self> {
        let mut ends = || -> io::Result<_> {
            Ok((
                inner.stdin.take().map(|e| bind(e.into())).transpose()?.map(|io| ChildStdin { io }),
                inner.stdout.take().map(|e| bind(e.into())).transpose()?.map(|io| ChildStdout { io }),
                inner.stderr.take().map(|e| bind(e.into())).transpose()?.map(|io| ChildStderr { io }),
            ))
        };
        match ends() {
            Ok((stdin, stdout, stderr)) => Ok(Self { stdin, stdout, stderr, inner, status: None, kill_on_drop }),
            Err(e) => {
                // Terminated, the child is gone at once: this wait is short.
                if inner.kill().is_ok() {
                    let _ = inner.wait();
                }
                Err(e)
            }
        }
    }

    /// The child's process id while it is not reaped; `None` once a
    /// [`wait`](Self::wait) or [`try_wait`](Self::try_wait) has returned
    /// its exit status (as tokio's).
    pub fn id(&self) -> Option<u32> {
        self.status.is_none().then(|| self.inner.id())
    }

    /// The child's process handle while it is not reaped (as [`id`](Self::id)).
    pub fn raw_handle(&self) -> Option<RawHandle> {
        self.status.is_none().then(|| self.inner.as_raw_handle())
    }

    /// Waits for the child to exit, on the pool
    /// ([`wait::process_exit`](crate::wait::process_exit): a thread-pool
    /// wait, no thread parked), and resolves to its exit status; once it
    /// has, every later call resolves to the same status at once.
    ///
    /// Drops [`stdin`](Self::stdin) first, as tokio's and std's `wait` do:
    /// a child reading its input to the end would otherwise wait for us as
    /// we wait for it. Dropping the future is harmless: the child is not
    /// reaped, and a later `wait` waits again.
    // Not an `async fn`: the signature promises `Send`.
    #[allow(clippy::manual_async_fn)]
    pub fn wait(&mut self) -> impl Future<Output = io::Result<ExitStatus>> + Send + '_ {
        async move {
            drop(self.stdin.take());
            if let Some(status) = self.status {
                return Ok(status);
            }
            let status = crate::wait::process_exit(&mut self.inner).await?;
            self.status = Some(status);
            Ok(status)
        }
    }

    /// The exit status if the child has exited, without waiting; `None`
    /// while it runs. Does not drop stdin.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self.inner.try_wait()?;
        }
        Ok(self.status)
    }

    /// Asks the system to end the child (`TerminateProcess`, exit code 1,
    /// through std's `Child::kill`) and returns without waiting for it to
    /// be gone. A child that has already exited, reaped or not, is `Ok`
    /// (std's rule; tokio refuses a reaped one).
    ///
    /// The child's own children are not ended (see the [module
    /// docs](super#no-job-object)).
    pub fn start_kill(&mut self) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        self.inner.kill()
    }

    /// [`start_kill`](Self::start_kill), then [`wait`](Self::wait): resolves
    /// once the child is gone.
    // Not an `async fn`: the signature promises `Send`.
    #[allow(clippy::manual_async_fn)]
    pub fn kill(&mut self) -> impl Future<Output = io::Result<()>> + Send + '_ {
        async move {
            self.start_kill()?;
            self.wait().await.map(drop)
        }
    }

    /// Waits for the child to exit while reading all of its stdout and
    /// stderr (those that are piped and not taken), concurrently, so that
    /// neither pipe fills up and blocks the child. Drops stdin first, as
    /// [`wait`](Self::wait) does. The first error ends it, and the child is
    /// dropped (killed, with `kill_on_drop`).
    // Not an `async fn`: the signature promises `Send`.
    #[allow(clippy::manual_async_fn)]
    pub fn wait_with_output(mut self) -> impl Future<Output = io::Result<Output>> + Send {
        async move {
            let (stdout, stderr) = (self.stdout.take(), self.stderr.take());
            let (status, stdout, stderr) = try_join3(
                self.wait(),
                read_to_end(stdout.as_ref().map(|s| &s.io)),
                read_to_end(stderr.as_ref().map(|s| &s.io)),
            )
            .await?;
            Ok(Output { status, stdout, stderr })
        }
    }
}

impl Drop for Child {
    /// With `kill_on_drop`, ends a child not yet reaped. The handle it holds
    /// is the process's own, so no other process can be hit.
    fn drop(&mut self) {
        if self.kill_on_drop && self.status.is_none() {
            let _ = self.inner.kill();
        }
    }
}

/// Polls the three to their ends, on one task; the first error ends it.
async fn try_join3<A, B, C>(
    a: impl Future<Output = io::Result<A>>,
    b: impl Future<Output = io::Result<B>>,
    c: impl Future<Output = io::Result<C>>,
) -> io::Result<(A, B, C)> {
    let (mut a, mut b, mut c) = (pin!(a), pin!(b), pin!(c));
    let (mut ra, mut rb, mut rc) = (None, None, None);
    poll_fn(|cx| {
        if ra.is_none()
            && let Poll::Ready(r) = a.as_mut().poll(cx)
        {
            ra = Some(r?);
        }
        if rb.is_none()
            && let Poll::Ready(r) = b.as_mut().poll(cx)
        {
            rb = Some(r?);
        }
        if rc.is_none()
            && let Poll::Ready(r) = c.as_mut().poll(cx)
        {
            rc = Some(r?);
        }
        match (ra.take(), rb.take(), rc.take()) {
            (Some(a), Some(b), Some(c)) => Poll::Ready(Ok((a, b, c))),
            (a, b, c) => {
                (ra, rb, rc) = (a, b, c);
                Poll::Pending
            }
        }
    })
    .await
}
