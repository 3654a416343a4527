//! Placement (`src/placement.rs`): an environment's processor set places
//! every callback of the objects created from it, and the pool thread's
//! own affinity is restored before it runs anything else.
//!
//! Needs at least two processors (this suite runs on a 2-core machine):
//! callbacks are placed on processor 1, which must differ from where an
//! unplaced thread may run.

#![cfg(windows)]

use std::io::ErrorKind;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use windows_sys::Win32::System::Threading::{
    ALL_PROCESSOR_GROUPS, GetActiveProcessorCount, GetCurrentProcessorNumber, GetCurrentThreadId,
};
use windows_threadpool::cleanup_group::CleanupGroup;
use windows_threadpool::{CallbackEnviron, Pool, ProcessorSet, Timer, Work};

/// Bound on every wait for something that must happen.
const PATIENCE: Duration = Duration::from_secs(20);

/// Processor 1 of group 0, the set every placed callback here runs on.
fn cpu1() -> ProcessorSet {
    // SAFETY: no preconditions.
    let n = unsafe { GetActiveProcessorCount(ALL_PROCESSOR_GROUPS) };
    assert!(n >= 2, "placement tests need at least 2 processors, this machine has {n}");
    ProcessorSet::new(0, 0b10).unwrap()
}

/// What a callback observed about where it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    thread: u32,
    processor: u32,
    affinity: ProcessorSet,
}

fn seen() -> Seen {
    Seen {
        // SAFETY: no preconditions.
        thread: unsafe { GetCurrentThreadId() },
        // SAFETY: no preconditions.
        processor: unsafe { GetCurrentProcessorNumber() },
        affinity: ProcessorSet::current().unwrap(),
    }
}

fn observer() -> (Sender<Seen>, Receiver<Seen>) {
    mpsc::channel()
}

fn recv(rx: &Receiver<Seen>) -> Seen {
    rx.recv_timeout(PATIENCE).expect("the callback ran")
}

#[test]
fn every_placed_callback_runs_on_the_set() {
    let set = cpu1();
    let env = CallbackEnviron::new().with_affinity(set);
    assert_eq!(env.affinity(), Some(set));
    let (tx, rx) = observer();
    let work = Work::new_in(move |_| tx.send(seen()).unwrap(), &env).unwrap();
    for _ in 0..64 {
        work.submit();
    }
    work.wait();
    let all: Vec<Seen> = rx.try_iter().collect();
    assert_eq!(all.len(), 64);
    for s in &all {
        assert_eq!(s.processor, 1, "a placed callback ran on processor {}: {s:?}", s.processor);
        assert_eq!(s.affinity, set, "a placed callback's thread affinity: {s:?}");
    }
}

#[test]
fn a_placed_timer_and_a_placed_group_member_run_on_the_set() {
    let set = cpu1();
    let env = CallbackEnviron::new().with_affinity(set);
    let (tx, rx) = observer();
    let t = tx.clone();
    let timer = Timer::new_in(move |_| t.send(seen()).unwrap(), &env).unwrap();
    timer.arm(Duration::ZERO);
    assert_eq!(recv(&rx).processor, 1, "the placed timer's firing");
    timer.stop_and_drain();
    let group = CleanupGroup::new().unwrap();
    let member = group.create_work_in(move |_| tx.send(seen()).unwrap(), &env).unwrap();
    member.submit();
    assert_eq!(recv(&rx).processor, 1, "the placed group member's callback");
}

/// A one-thread private pool: the callbacks of every object on it run on
/// the same thread, so an unplaced callback after a placed one shows what
/// the placed one left behind.
struct OneThread {
    pool: Pool,
}

impl OneThread {
    fn new() -> Self {
        let pool = Pool::new().unwrap();
        pool.set_max_threads(1).unwrap();
        pool.set_min_threads(1).unwrap();
        Self { pool }
    }

    fn env(&self) -> CallbackEnviron {
        CallbackEnviron::new().with_pool(&self.pool)
    }

    /// An unplaced work object that reports where it ran.
    fn probe(&self) -> (Work, Receiver<Seen>) {
        let (tx, rx) = observer();
        (Work::new_in(move |_| tx.send(seen()).unwrap(), &self.env()).unwrap(), rx)
    }
}

fn look(probe: &(Work, Receiver<Seen>)) -> Seen {
    probe.0.submit();
    probe.0.wait();
    recv(&probe.1)
}

/// Asserts `after` is on `before`'s thread with its affinity, and that the
/// placed callback in between ran on that thread, placed.
fn assert_restored(before: Seen, placed: Seen, after: Seen, set: ProcessorSet) {
    assert_ne!(before.affinity, set, "the pool thread must start unplaced for this test to show anything");
    assert_eq!((placed.thread, placed.processor, placed.affinity), (before.thread, 1, set), "the placed callback");
    assert_eq!(after.thread, before.thread, "the one-thread pool used another thread");
    assert_eq!(after.affinity, before.affinity, "the pool thread kept the placed callback's affinity");
}

#[test]
fn the_pool_threads_affinity_is_restored_after_a_placed_callback() {
    let set = cpu1();
    let pool = OneThread::new();
    let probe = pool.probe();
    let before = look(&probe);
    let env = pool.env().with_affinity(set);
    let (tx, rx) = observer();
    let placed = Work::new_in(move |_| tx.send(seen()).unwrap(), &env).unwrap();
    placed.submit();
    placed.wait();
    let during = recv(&rx);
    assert_restored(before, during, look(&probe), set);
}

#[test]
fn the_affinity_is_restored_when_the_callback_rearms_its_timer() {
    let set = cpu1();
    let pool = OneThread::new();
    let probe = pool.probe();
    let before = look(&probe);
    let env = pool.env().with_affinity(set);
    let (tx, rx) = observer();
    let timer = Timer::new_in(
        move |firing| {
            tx.send(seen()).unwrap();
            firing.rearm(Duration::from_secs(3600));
        },
        &env,
    )
    .unwrap();
    timer.arm(Duration::ZERO);
    let during = recv(&rx);
    // The re-arm is applied by the trampoline after the callback; the probe
    // runs after the trampoline has returned (one thread).
    let after = look(&probe);
    assert_restored(before, during, after, set);
    timer.stop_and_drain();
}

/// Sends when dropped: the placed object's context is freed.
struct Freed(Sender<()>);

impl Drop for Freed {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

#[test]
fn the_affinity_is_restored_when_the_callback_drops_its_own_object() {
    let set = cpu1();
    let pool = OneThread::new();
    let probe = pool.probe();
    let before = look(&probe);
    let env = pool.env().with_affinity(set);
    let (tx, rx) = observer();
    let (freed_tx, freed_rx) = mpsc::channel();
    let slot: Arc<Mutex<Option<Work>>> = Arc::default();
    let s = Arc::clone(&slot);
    let freed = Freed(freed_tx);
    let (dropped_tx, dropped_rx) = mpsc::channel();
    let work = Work::new_in(
        move |_| {
            let _keep = &freed;
            tx.send(seen()).unwrap();
            // The teardown is handed to another thread; it frees the
            // context once this trampoline has returned.
            let own = s.lock().unwrap().take();
            dropped_tx.send(own.is_some()).unwrap();
            drop(own);
        },
        &env,
    )
    .unwrap();
    let mut held = slot.lock().unwrap();
    held.insert(work).submit();
    drop(held);
    let during = recv(&rx);
    assert!(dropped_rx.recv_timeout(PATIENCE).unwrap(), "the callback dropped its own object");
    let after = look(&probe);
    assert_restored(before, during, after, set);
    freed_rx.recv_timeout(PATIENCE).expect("the placed work's context was freed");
}

#[test]
fn processor_sets_are_validated() {
    // SAFETY: no preconditions.
    let count = unsafe { GetActiveProcessorCount(0) };
    let kind = |r: std::io::Result<ProcessorSet>| r.map_err(|e| e.kind());
    assert_eq!(kind(ProcessorSet::new(0, 0)), Err(ErrorKind::InvalidInput), "empty mask");
    if count < usize::BITS {
        assert_eq!(kind(ProcessorSet::new(0, 1 << count)), Err(ErrorKind::NotFound), "beyond the active ones");
    }
    assert_eq!(kind(ProcessorSet::new(u16::MAX, 1)), Err(ErrorKind::NotFound), "no such group");
    let all = if count >= usize::BITS { usize::MAX } else { (1 << count) - 1 };
    let s = ProcessorSet::new(0, all).unwrap();
    assert_eq!((s.group(), s.mask()), (0, all));
    assert_eq!(CallbackEnviron::new().affinity(), None);
    assert_eq!(CallbackEnviron::new().with_affinity(s).affinity(), Some(s));
}
