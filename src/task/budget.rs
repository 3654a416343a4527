//! The cooperative budget of a task poll (see [the task module's
//! docs](super#the-budget)): the mechanism, in one place.

use core::cell::Cell;
use core::task::{Context, Poll, Waker};

use crate::callback::local::{self, Mark};

/// The operations a task poll may complete before the crate's futures make
/// it yield (as tokio's budget, 128).
pub(crate) const PER_POLL: u32 = 128;

/// Gives this thread a fresh budget for one poll of the task woken by
/// `waker`, until dropped (then the outer poll's budget is back: a nested
/// `block_on`). Only futures polled with that waker spend it: one polled by
/// an executor nested in the poll, or by a combinator that gives its
/// futures wakers of their own, runs without a budget, since nothing would
/// give it a fresh one.
pub(crate) struct Scope {
    _budget: Option<Mark<u32>>,
    _owner: Option<Mark<*const ()>>,
}

impl Scope {
    #[inline]
    pub(crate) fn enter(waker: &Waker) -> Self {
        Self { _budget: Mark::set(|l| &l.budget, PER_POLL), _owner: Mark::set(|l| &l.budget_waker, waker.data()) }
    }
}

/// Runs `f` with the budget `cx` is polled under, if any.
#[inline]
fn with_budget<R>(cx: &Context<'_>, f: impl FnOnce(Option<&Cell<u32>>) -> R) -> R {
    let data = cx.waker().data();
    local::with(|here| f(here.filter(|l| l.budget_waker.get() == data).map(|l| &l.budget)))
}

/// Polls `f` under the budget of the task poll `cx` belongs to: once it is
/// spent, wakes the task (so it is polled again, after what is queued) and
/// is `Pending` without calling `f`; otherwise spends one unit when `f` is
/// `Ready`.
#[inline]
pub(crate) fn guard<T>(cx: &mut Context<'_>, f: impl FnOnce(&mut Context<'_>) -> Poll<T>) -> Poll<T> {
    if with_budget(cx, |b| b.is_some_and(|b| b.get() == 0)) {
        #[cfg(any(test, feature = "test-hooks"))]
        YIELDS.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        cx.waker().wake_by_ref();
        return Poll::Pending;
    }
    let out = f(cx);
    if out.is_ready() {
        with_budget(cx, |b| {
            if let Some(b) = b {
                b.set(b.get().saturating_sub(1));
            }
        });
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
