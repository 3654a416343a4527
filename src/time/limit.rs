//! [`timeout`]: a future with a deadline.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::io;
use std::time::{Duration, Instant};

use super::delay::{Sleep, sleep, sleep_until};

/// The error of a [`Timeout`] whose deadline came first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elapsed(());

impl core::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for io::Error {
    fn from(e: Elapsed) -> Self {
        io::Error::new(io::ErrorKind::TimedOut, e)
    }
}

/// A future with a deadline; made by [`timeout`] or [`timeout_at`].
///
/// It polls the future first, so a future that is ready when the deadline
/// has also passed still gives its output. Dropping it drops the future and
/// the sleep (whose entry is removed at once).
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Timeout<F> {
    future: F,
    sleep: Sleep,
}

/// Runs `future` for at most `duration`: its output, or [`Elapsed`].
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout { future, sleep: sleep(duration) }
}

/// Runs `future` until `deadline` at most: its output, or [`Elapsed`].
pub fn timeout_at<F: Future>(deadline: Instant, future: F) -> Timeout<F> {
    Timeout { future, sleep: sleep_until(deadline) }
}

impl<F> Timeout<F> {
    /// The future.
    pub fn get_ref(&self) -> &F {
        &self.future
    }

    /// The future, mutably (it is not pinned yet: `&mut self` is not).
    pub fn get_mut(&mut self) -> &mut F {
        &mut self.future
    }

    /// The future, giving up the deadline.
    pub fn into_inner(self) -> F {
        self.future
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `future` is structurally pinned: it is only ever reached
        // through this pinned projection once `Timeout` is pinned, `Timeout`
        // has no `Drop` and is `Unpin` only when `F` is. `sleep` is `Unpin`
        // and not pinned, so a plain `&mut` to it is fine.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above.
        if let Poll::Ready(v) = unsafe { Pin::new_unchecked(&mut this.future) }.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        Pin::new(&mut this.sleep).poll(cx).map(|()| Err(Elapsed(())))
    }
}
