//! Waits as futures: [`signalled`] and [`process_exit`].

use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicU8, Ordering};
use core::task::{Context, Poll};
use core::time::Duration;
use std::io;
use std::process::{Child, ExitStatus};
use std::sync::Arc;
use std::time::Instant;

use super::{Wait, WaitResult, WaitableHandle};
use crate::callback_env::CallbackEnviron;
use crate::reentry;
use crate::time::Deadline;
use crate::waker_slot::WakerSlot;

/// What the wait's callback and the future share.
struct Shared {
    /// [`PENDING`], [`SIGNALLED`] or [`TIMED_OUT`]; written once by the callback.
    outcome: AtomicU8,
    waker: WakerSlot,
}

const PENDING: u8 = 0;
const SIGNALLED: u8 = 1;
const TIMED_OUT: u8 = 2;

impl Shared {
    fn outcome(&self) -> Option<WaitResult> {
        match self.outcome.load(Ordering::Acquire) {
            SIGNALLED => Some(WaitResult::Signalled),
            TIMED_OUT => Some(WaitResult::TimedOut),
            _ => None,
        }
    }
}

/// An armed wait and what its callback completes.
struct Armed {
    wait: Wait,
    shared: Arc<Shared>,
}

impl reentry::Settle for Armed {
    /// The callback has published: it is at most finishing its wake.
    fn settled(&self) -> bool {
        self.shared.outcome().is_some()
    }
    fn settle(&self) {
        // Disarm and drain, never cancel.
        self.wait.stop_and_drain();
    }
}

/// Where the future stands.
enum State {
    /// Not polled yet: the wait object does not exist.
    Unarmed { handle: WaitableHandle, env: Option<Box<CallbackEnviron>> },
    /// Armed; the callback completes `shared`.
    Armed(Armed),
    /// The output was returned (or creating the wait failed).
    Done,
}

/// Resolves when `handle` is signalled or, with `timeout`, when the timeout
/// expires, on the process default pool.
///
/// The deadline is fixed now (`timeout` from this call, as `tokio::time::sleep`
/// counts); the wait object is created and armed at the first poll, and an
/// error creating it is the poll's output. See the
/// [module docs](crate::wait#waits-as-futures) for what dropping it does.
///
/// ```
/// use std::time::Duration;
/// use windows_threadpool::wait::{self, Event, WaitResult};
///
/// let event = Event::manual_reset()?;
/// let signalled = wait::signalled(event.try_clone()?.into(), None);
/// event.set()?;
/// assert_eq!(futures::executor::block_on(signalled)?, WaitResult::Signalled);
///
/// let idle = Event::manual_reset()?;
/// let timed = wait::signalled(idle.into(), Some(Duration::from_millis(1)));
/// assert_eq!(futures::executor::block_on(timed)?, WaitResult::TimedOut);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn signalled(handle: WaitableHandle, timeout: Option<Duration>) -> Signalled {
    Signalled::new(handle, timeout, None)
}

/// [`signalled`] on the pool and with the settings of `env` (a clone of it is
/// kept until the first poll creates the wait).
pub fn signalled_in(handle: WaitableHandle, timeout: Option<Duration>, env: &CallbackEnviron) -> Signalled {
    Signalled::new(handle, timeout, Some(Box::new(env.clone())))
}

/// The future of [`signalled`]: resolves to how the wait ended.
///
/// `Send` and `Sync`. Dropping it before it completes never blocks and never
/// cancels a callback (see the [module docs](crate::wait#waits-as-futures)).
#[must_use = "futures do nothing unless polled"]
pub struct Signalled {
    deadline: Deadline,
    state: State,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Signalled>();
    send_sync::<ProcessExit<'static>>();
};

impl core::fmt::Debug for Signalled {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let state = match &self.state {
            State::Unarmed { .. } => "unarmed",
            State::Armed(_) => "armed",
            State::Done => "done",
        };
        f.debug_struct("Signalled").field("deadline", &self.deadline).field("state", &state).finish()
    }
}

impl Signalled {
    fn new(handle: WaitableHandle, timeout: Option<Duration>, env: Option<Box<CallbackEnviron>>) -> Self {
        // A deadline too far to represent is no deadline.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t)).map_or(Deadline::NEVER, Deadline::from);
        Self { deadline, state: State::Unarmed { handle, env } }
    }

    /// Creates and arms the wait.
    fn arm(&mut self, handle: WaitableHandle, env: Option<&CallbackEnviron>) -> io::Result<()> {
        let shared = Arc::new(Shared { outcome: AtomicU8::new(PENDING), waker: WakerSlot::new() });
        let done = Arc::clone(&shared);
        let callback = move |act: &super::WaitActivation<'_>| {
            let outcome = if act.is_signalled() { SIGNALLED } else { TIMED_OUT };
            done.outcome.store(outcome, Ordering::Release);
            done.waker.wake();
        };
        let wait = match env {
            None => Wait::new(handle, callback)?,
            Some(env) => Wait::new_in(handle, callback, env)?,
        };
        wait.arm(self.deadline);
        self.state = State::Armed(Armed { wait, shared });
        Ok(())
    }
}

impl Future for Signalled {
    type Output = io::Result<WaitResult>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let State::Unarmed { .. } = this.state {
            let State::Unarmed { handle, env } = core::mem::replace(&mut this.state, State::Done) else {
                unreachable!()
            };
            this.arm(handle, env.as_deref())?;
        }
        let State::Armed(Armed { shared, .. }) = &this.state else {
            panic!("`Signalled` polled after completion");
        };
        shared.waker.register(cx.waker());
        match shared.outcome() {
            None => Poll::Pending,
            Some(result) => {
                // The callback has published and is at most finishing its
                // wake: dropping the wait here drains without waiting long,
                // and costs less than a hand-off (under Wine, 2,000 waits
                // in sequence: 0.2 to 0.65 ms each, against 0.7 to 0.95 ms).
                this.state = State::Done;
                Poll::Ready(Ok(result))
            }
        }
    }
}

impl Drop for Signalled {
    fn drop(&mut self) {
        if let State::Armed(armed) = core::mem::replace(&mut self.state, State::Done) {
            armed.shared.waker.clear();
            // A drain waits for a queued callback to get a pool thread (and,
            // under Wine, for a flush): never on the executor's thread.
            reentry::drop_unblocking(armed);
        }
    }
}

/// Resolves to `child`'s exit status once it has exited, without taking it:
/// the wait is on a `SYNCHRONIZE` duplicate of its handle
/// ([`WaitableHandle::from_child`]), then the status is read with
/// [`Child::try_wait`]. Lazy, like [`signalled`]: nothing happens before the
/// first poll.
///
/// The child stays borrowed until the future is gone:
///
/// ```compile_fail,E0499
/// let mut child = std::process::Command::new("cmd").args(["/c", "exit 0"]).spawn()?;
/// let exit = windows_threadpool::wait::process_exit(&mut child);
/// child.kill()?;
/// drop(exit);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// ```
/// let mut child = std::process::Command::new("cmd").args(["/c", "exit 3"]).spawn()?;
/// let status = futures::executor::block_on(windows_threadpool::wait::process_exit(&mut child))?;
/// assert_eq!(status.code(), Some(3));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn process_exit(child: &mut Child) -> ProcessExit<'_> {
    ProcessExit { child, exit: None }
}

/// The future of [`process_exit`]; `Send` and `Sync`.
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct ProcessExit<'a> {
    child: &'a mut Child,
    exit: Option<Signalled>,
}

impl Future for ProcessExit<'_> {
    type Output = io::Result<ExitStatus>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let exit = match &mut this.exit {
            Some(exit) => exit,
            None => {
                if let Some(status) = this.child.try_wait()? {
                    return Poll::Ready(Ok(status));
                }
                this.exit.insert(signalled(WaitableHandle::from_child(this.child)?, None))
            }
        };
        match Pin::new(exit).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(result) => {
                result?;
                // Signalled: the process has exited, so its status is there.
                Poll::Ready(this.child.try_wait()?.ok_or_else(|| io::Error::other("process signalled but not exited")))
            }
        }
    }
}
