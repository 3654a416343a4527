//! The queue of pending sleeps and the one pool timer that drives it.
//!
//! Entries are ordered by `(deadline, sequence number)`, so two sleeps with
//! the same deadline are distinct and fire in the order they registered.
//! The pool timer is armed for the earliest deadline whenever an entry
//! becomes the earliest (and by its own callback for the next one); a
//! removed entry leaves the timer armed, and the firing that finds nothing
//! due only re-arms. Every change to the queue and to the arming happens
//! under one lock, so a registration and a firing cannot undo each other's
//! arming; wakers are woken after the lock is released.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use crate::callback::waker_slot::WakerSlot;
use crate::timer::Timer;

/// One registered sleep.
#[derive(Debug, Default)]
pub(super) struct Entry {
    /// Set, under the queue's lock, when the entry is taken off the queue as due.
    fired: AtomicBool,
    pub(super) waker: WakerSlot,
}

impl Entry {
    pub(super) fn fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }
}

/// Where a registered entry sits in the queue.
pub(super) type Key = (Instant, u64);

#[derive(Default)]
struct Queue {
    entries: BTreeMap<Key, Arc<Entry>>,
    next_seq: u64,
    /// The deadline the pool timer is armed for, if any.
    armed: Option<Instant>,
    /// Entries due in the current firing, woken after the lock is released;
    /// kept to reuse its buffer.
    due: Vec<Arc<Entry>>,
}

pub(super) struct Driver {
    queue: Mutex<Queue>,
    timer: Timer,
}

static DRIVER: OnceLock<Driver> = OnceLock::new();

impl Driver {
    /// The process's driver, created on first use.
    ///
    /// # Panics
    /// If the system refuses to create the pool timer
    /// (`CreateThreadpoolTimer`), as tokio panics without a timer driver.
    pub(super) fn get() -> &'static Driver {
        DRIVER.get_or_init(|| Driver {
            queue: Mutex::new(Queue::default()),
            // Armed only after `DRIVER` is set, so the callback finds it.
            timer: Timer::new(|_| {
                // The first sleep woken, if its task runs where this timer
                // does, is polled after this callback (`crate::callback::inplace`).
                let _armed = crate::callback::inplace::arm(Some(crate::callback::inplace::Class::DEFAULT));
                if let Some(d) = DRIVER.get() {
                    d.fire();
                }
            })
            .expect("windows-threadpool: CreateThreadpoolTimer failed for the sleep driver"),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Nothing panics under the lock but an allocation failure, which aborts.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Arms the pool timer for the earliest entry if it is armed for none
    /// or for a later deadline.
    fn arm_for_earliest(&self, q: &mut Queue) {
        if let Some(&(deadline, _)) = q.entries.first_key_value().map(|(k, _)| k)
            && q.armed.is_none_or(|a| deadline < a)
        {
            q.armed = Some(deadline);
            self.timer.arm(deadline);
        }
    }

    /// Registers `entry` to be woken at `deadline`; returns its key.
    pub(super) fn insert(&self, deadline: Instant, entry: Arc<Entry>) -> Key {
        let mut q = self.lock();
        let key = (deadline, q.next_seq);
        q.next_seq += 1;
        q.entries.insert(key, entry);
        self.arm_for_earliest(&mut q);
        key
    }

    /// Removes the entry at `key`, if it has not fired.
    pub(super) fn remove(&self, key: &Key) {
        drop(self.lock().entries.remove(key));
    }

    /// The pool timer's callback: wakes every entry that is due and re-arms
    /// for the next.
    fn fire(&self) {
        let mut q = self.lock();
        q.armed = None;
        let now = Instant::now();
        let mut due = core::mem::take(&mut q.due);
        while let Some(first) = q.entries.first_entry() {
            if first.key().0 > now {
                break;
            }
            let entry = first.remove();
            entry.fired.store(true, Ordering::Release);
            due.push(entry);
        }
        self.arm_for_earliest(&mut q);
        drop(q);
        for entry in due.drain(..) {
            entry.waker.wake();
        }
        // Kept for the next firing's reuse. A firing that overlapped this one
        // may have put its own buffer back; either will do.
        self.lock().due = due;
    }

    /// Entries waiting in the queue, for tests.
    #[cfg(test)]
    pub(super) fn pending(&self) -> usize {
        self.lock().entries.len()
    }
}
