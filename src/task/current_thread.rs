//! [`block_on`]: runs a future on the calling thread.

use core::future::Future;
use core::task::{Context, Poll, Waker};
use std::sync::Arc;
use std::task::Wake;
use std::thread::{self, Thread};

/// Wakes the blocked thread (`unpark` is remembered if it comes first).
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` on the calling thread until it completes, parking the
/// thread between wakes; returns its output.
///
/// The futures of this crate complete from pool callbacks, so they need no
/// driver on this thread: `block_on` works from `main`, a test, or a thread
/// of another runtime. Called from a pool callback, it blocks that pool
/// thread for as long as the future takes (say so with
/// [`may_run_long`](super::may_run_long)).
pub fn block_on<F: Future>(future: F) -> F::Output {
    // Blocks: a task the calling callback parked would wait for it.
    crate::callback::inplace::flush();
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = core::pin::pin!(future);
    loop {
        let budget = super::budget::Scope::enter(&waker);
        let polled = future.as_mut().poll(&mut cx);
        drop(budget);
        if let Poll::Ready(v) = polled {
            return v;
        }
        thread::park();
    }
}
