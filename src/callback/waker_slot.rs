//! The waker of a future completed by a pool callback.
//!
//! Every future in the crate has one event that completes it (a timer's
//! deadline, a handle's signal, an I/O completion, a task's end) and one
//! task waiting for it. The future stores the waker of its latest poll here
//! (replacing it when the executor hands a different one), and the callback
//! that completes the event takes it out and wakes it once. A mutex, not a
//! lock-free cell: both sides hold it for a pointer swap, it never blocks for
//! long, and its correctness is obvious.
//!
//! The protocol that gives exactly one wake and no lost wake:
//! - the completing side publishes the outcome, then calls [`WakerSlot::wake`];
//! - the polling side calls [`WakerSlot::register`], then checks the outcome.
//!
//! Whichever order the two run in, either the poll sees the outcome or the
//! wake finds the registered waker.

use std::sync::Mutex;
use std::task::Waker;

/// One registered waker, taken by the single wake that completes the future.
#[derive(Debug, Default)]
pub(crate) struct WakerSlot {
    waker: Mutex<Option<Waker>>,
}

impl WakerSlot {
    pub(crate) const fn new() -> Self {
        Self { waker: Mutex::new(None) }
    }

    /// Stores `waker` for the next [`wake`](Self::wake), unless the stored
    /// one already wakes the same task.
    pub(crate) fn register(&self, waker: &Waker) {
        let mut slot = self.lock();
        if slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            return;
        }
        // The old waker's drop is user code: run it after the lock is released.
        let old = slot.replace(waker.clone());
        drop(slot);
        drop(old);
    }

    /// Wakes and forgets the registered waker, if any. Called by the pool
    /// callback that completes the future, where no unwind may go: a waker
    /// that panics aborts the process, saying so (`crate::callback::unwind`).
    pub(crate) fn wake(&self) {
        wake(self.take());
    }

    /// Forgets the registered waker without waking it.
    pub(crate) fn clear(&self) {
        drop(self.take());
    }

    /// Takes the registered waker out without waking it, for the caller to
    /// drop or [`wake`] when it chooses.
    pub(crate) fn take(&self) -> Option<Waker> {
        self.lock().take()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Waker>> {
        // Nothing panics while the lock is held except a waker's `clone`,
        // which leaves the slot as it was.
        self.waker.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Wakes `waker` (one taken from a slot), if any, from a pool callback,
/// where no unwind may go: a waker that panics aborts the process, saying
/// so (`crate::callback::unwind`).
pub(crate) fn wake(waker: Option<Waker>) {
    if let Some(w) = waker {
        crate::callback::unwind::or_abort("a waker", || w.wake());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn wakes_the_latest_waker_once() {
        let (a, b) = (Arc::new(Count(AtomicUsize::new(0))), Arc::new(Count(AtomicUsize::new(0))));
        let slot = WakerSlot::new();
        slot.register(&Waker::from(a.clone()));
        slot.register(&Waker::from(b.clone()));
        slot.wake();
        slot.wake();
        assert_eq!((a.0.load(Ordering::SeqCst), b.0.load(Ordering::SeqCst)), (0, 1));
    }

    /// A waker that counts its clones (its data pointer is unused). A
    /// `static`, so every `&COUNTED` is one address and `will_wake` holds.
    static CLONES: AtomicUsize = AtomicUsize::new(0);
    static COUNTED: std::task::RawWakerVTable = std::task::RawWakerVTable::new(
        |_| {
            CLONES.fetch_add(1, Ordering::SeqCst);
            std::task::RawWaker::new(core::ptr::null(), &COUNTED)
        },
        |_| {},
        |_| {},
        |_| {},
    );

    /// Polling again with a waker that wakes the same task keeps the stored
    /// one: no clone per poll.
    #[test]
    fn the_same_waker_is_not_cloned_again() {
        // SAFETY: the vtable's functions ignore the (null) data pointer.
        let w = unsafe { Waker::from_raw(std::task::RawWaker::new(core::ptr::null(), &COUNTED)) };
        let slot = WakerSlot::new();
        slot.register(&w);
        slot.register(&w);
        slot.register(&w);
        assert_eq!(CLONES.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn clear_forgets_without_waking() {
        let a = Arc::new(Count(AtomicUsize::new(0)));
        let slot = WakerSlot::new();
        slot.register(&Waker::from(a.clone()));
        slot.clear();
        slot.wake();
        assert_eq!(a.0.load(Ordering::SeqCst), 0);
        assert_eq!(Arc::strong_count(&a), 1);
    }
}
