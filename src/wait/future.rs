//! Waits as futures: [`signalled`] and [`process_exit`].

use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicU8, Ordering};
use core::task::{Context, Poll};
use std::io;
use std::process::{Child, ExitStatus};
use std::sync::Arc;

use super::{Wait, WaitResult, WaitTarget, WaitableHandle};
use crate::callback::reentry;
use crate::callback::waker_slot::WakerSlot;
use crate::callback_env::CallbackEnviron;
use crate::sys::deadline::Deadline;

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
    /// Not polled yet: the wait object does not exist. An error getting
    /// the handle is the first poll's output.
    Unarmed { handle: io::Result<WaitableHandle>, env: Option<Box<CallbackEnviron>> },
    /// Armed; the callback completes `shared`.
    Armed(Armed),
    /// The output was returned (or creating the wait failed).
    Done,
}

/// Resolves when `target` is signalled or when `timeout` expires
/// ([`Deadline::NEVER`] for no timeout), on the process default pool.
///
/// `target` is a [`WaitableHandle`] (or an [`Event`](super::Event), a
/// `Child`, ... given up), or a borrowed event, duplicated here so that the
/// same event can be awaited again and again ([`WaitTarget`]). The deadline
/// is fixed now (a delay counts from this call, as `tokio::time::sleep`
/// counts); the wait object is created and armed at the first poll, and an
/// error duplicating the handle or creating the wait is the poll's output.
/// See the [module docs](crate::wait#waits-as-futures) for what dropping it
/// does.
///
/// Dropping it is not free for an auto-reset event: a future dropped after
/// its wait was satisfied (the callback queued, or under Wine the signal
/// taken by the teardown's flush) has consumed the signal, which no other
/// wait then sees. Await such a future to its end, or use a manual-reset
/// event where futures may be dropped early.
///
/// ```
/// use std::time::Duration;
/// use windows_threadpool::time::Deadline;
/// use windows_threadpool::wait::{self, Event, WaitResult};
///
/// let event = Event::auto_reset()?;
/// for _ in 0..3 {
///     let signalled = wait::signalled(&event, Deadline::NEVER);
///     event.set()?;
///     assert_eq!(futures::executor::block_on(signalled)?, WaitResult::Signalled);
/// }
///
/// let idle = Event::manual_reset()?;
/// let timed = wait::signalled(idle, Duration::from_millis(1));
/// assert_eq!(futures::executor::block_on(timed)?, WaitResult::TimedOut);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn signalled(target: impl WaitTarget, timeout: impl Into<Deadline>) -> Signalled {
    Signalled::new(target.into_waitable(), timeout.into(), None)
}

/// [`signalled`] on the pool and with the settings of `env` (a clone of it is
/// kept until the first poll creates the wait).
pub fn signalled_in(target: impl WaitTarget, timeout: impl Into<Deadline>, env: &CallbackEnviron) -> Signalled {
    Signalled::new(target.into_waitable(), timeout.into(), Some(Box::new(env.clone())))
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
    fn new(handle: io::Result<WaitableHandle>, timeout: Deadline, env: Option<Box<CallbackEnviron>>) -> Self {
        Self { deadline: timeout.fixed_now(), state: State::Unarmed { handle, env } }
    }

    /// Creates and arms the wait.
    fn arm(&mut self, handle: WaitableHandle, env: Option<&CallbackEnviron>) -> io::Result<()> {
        let shared = Arc::new(Shared { outcome: AtomicU8::new(PENDING), waker: WakerSlot::new() });
        let done = Arc::clone(&shared);
        let class = crate::callback::inplace::Class::of_completions(env);
        let callback = move |act: &super::WaitActivation<'_>| {
            let _armed = crate::callback::inplace::arm(class);
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
            this.arm(handle?, env.as_deref())?;
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
                this.exit.insert(signalled(WaitableHandle::from_child(this.child)?, Deadline::NEVER))
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
