//! The cooperative budget of a task poll (see [the task module's
//! docs](super#the-budget)): the mechanism, in one place.

use core::task::{Context, Poll};

use crate::local::{self, Mark};

/// The operations a task poll may complete before the crate's futures make
/// it yield (as tokio's budget, 128).
pub(crate) const PER_POLL: u32 = 128;

/// No budget: a poll the crate does not run (another executor's).
pub(crate) const UNLIMITED: u32 = u32::MAX;

/// Gives this thread a fresh budget for one poll of a task, until dropped
/// (then the outer poll's budget is back: a nested `block_on`).
pub(crate) struct Scope(#[allow(dead_code, reason = "restores the outer budget on drop")] Option<Mark<u32>>);

impl Scope {
    #[inline]
    pub(crate) fn enter() -> Self {
        Self(Mark::set(|l| &l.budget, PER_POLL))
    }
}

/// `Ready` if this poll may complete one more operation; otherwise wakes
/// the task (so it is polled again, after what is queued) and is
/// `Pending`. A future calls it before it would complete, and [`spend`]s
/// one when it does.
#[inline]
pub(crate) fn poll_proceed(cx: &mut Context<'_>) -> Poll<()> {
    if local::with(|here| here.is_none_or(|l| l.budget.get() != 0)) {
        return Poll::Ready(());
    }
    #[cfg(any(test, feature = "test-hooks"))]
    YIELDS.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    cx.waker().wake_by_ref();
    Poll::Pending
}

/// One operation completed in this poll.
#[inline]
pub(crate) fn spend() {
    local::with(|here| {
        if let Some(l) = here {
            let left = l.budget.get();
            if left != UNLIMITED {
                l.budget.set(left.saturating_sub(1));
            }
        }
    });
}

/// Polls `f` under the budget: `Pending` without calling it once the
/// budget is spent, and one unit spent when it is `Ready`.
#[inline]
pub(crate) fn guard<T>(cx: &mut Context<'_>, f: impl FnOnce(&mut Context<'_>) -> Poll<T>) -> Poll<T> {
    core::task::ready!(poll_proceed(cx));
    let out = f(cx);
    if out.is_ready() {
        spend();
    }
    out
}

#[cfg(any(test, feature = "test-hooks"))]
static YIELDS: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// How many times a future of this crate made its task yield because the
/// poll's budget was spent. A test hook, not API.
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub fn budget_yields() -> usize {
    YIELDS.load(core::sync::atomic::Ordering::Relaxed)
}
