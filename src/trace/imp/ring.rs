//! The ring of records and the snapshots dumps read from it.
//!
//! Platform-independent (the clock and thread id come in as arguments), so
//! it also builds on the host: its unit tests run under Miri there, and the
//! claim/publish/read protocol is model-checked with loom (`loom_tests`
//! below; the atomics come from `crate::sync`).

use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, fence};

/// One record's storage: a cache line. Every field is atomic so that a
/// reader racing a writer performs no data race; the sequence word says
/// whether what it read is one whole record.
#[repr(C, align(64))]
pub(crate) struct Slot {
    /// 0: never written; `2i + 1`: record `i` being written; `2i + 2`:
    /// record `i` complete.
    pub(super) seq: AtomicU64,
    pub(super) ticks: AtomicU64,
    pub(super) a: AtomicU64,
    pub(super) b: AtomicU64,
    pub(super) target: AtomicPtr<u8>,
    pub(super) event: AtomicPtr<u8>,
    pub(super) target_len: AtomicU32,
    pub(super) event_len: AtomicU32,
    pub(super) tid: AtomicU32,
}

// Loom's atomics are larger than the machine's.
#[cfg(not(all(test, loom)))]
const _: () = assert!(size_of::<Slot>() == 64);

impl Slot {
    /// An unwritten slot (the all-zero value `Ring::new` allocates), built
    /// field by field: a loom atomic cannot come from zeroed memory.
    #[cfg(all(test, loom))]
    fn new() -> Self {
        let null = || AtomicPtr::new(core::ptr::null_mut());
        let (u64_, u32_) = (|| AtomicU64::new(0), || AtomicU32::new(0));
        Self {
            seq: u64_(),
            ticks: u64_(),
            a: u64_(),
            b: u64_(),
            target: null(),
            event: null(),
            target_len: u32_(),
            event_len: u32_(),
            tid: u32_(),
        }
    }

    pub(super) fn fill(&self, ticks: i64, tid: u32, target: &'static str, event: &'static str, a: u64, b: u64) {
        let (tp, tl) = parts(target);
        let (ep, el) = parts(event);
        self.ticks.store(ticks as u64, Relaxed);
        self.a.store(a, Relaxed);
        self.b.store(b, Relaxed);
        self.target.store(tp, Relaxed);
        self.event.store(ep, Relaxed);
        self.target_len.store(tl, Relaxed);
        self.event_len.store(el, Relaxed);
        self.tid.store(tid, Relaxed);
    }
}

/// Keeps the hot counter off the line the other fields live on.
#[repr(align(64))]
pub(super) struct Padded<T>(T);

/// A record as a dump sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) index: u64,
    pub(crate) ticks: i64,
    pub(crate) tid: u32,
    pub(crate) target: &'static str,
    pub(crate) event: &'static str,
    pub(crate) a: u64,
    pub(crate) b: u64,
}

/// The records a dump reads, oldest first.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub(crate) records: Vec<Record>,
    /// Records overwritten since the last clear because the ring was full.
    pub(crate) dropped: u64,
    /// Records in the window not shown because they were still being
    /// written, or were abandoned by a writer lapped by the ring.
    pub(crate) incomplete: u64,
    pub(crate) capacity: u64,
}

/// A fixed-capacity ring of records, overwriting the oldest when full.
pub(crate) struct Ring {
    pub(super) head: Padded<AtomicU64>,
    /// Index of the first record since the last [`clear`](Ring::clear).
    pub(super) tail: AtomicU64,
    pub(super) mask: u64,
    pub(super) slots: Box<[Slot]>,
}

/// A record's fields as `push` takes them: ticks, thread, target, event, `a`, `b`.
pub(super) type Fields = (i64, u32, &'static str, &'static str, u64, u64);

/// A `&'static str` too long for the slot's 32-bit length is recorded as this.
const TOO_LONG: &str = "<name too long>";

pub(super) fn parts(s: &'static str) -> (*mut u8, u32) {
    let s = if u32::try_from(s.len()).is_ok() { s } else { TOO_LONG };
    (s.as_ptr().cast_mut(), s.len() as u32)
}

impl Ring {
    /// A ring of `capacity` records; `capacity` must be a power of two.
    pub(crate) fn new(capacity: usize) -> Self {
        assert!(capacity.is_power_of_two(), "ring capacity {capacity} is not a power of two");
        #[cfg(not(all(test, loom)))]
        // SAFETY: every field of `Slot` is an atomic integer or pointer,
        // for which all-zero bytes are a valid value.
        let slots = unsafe { Box::<[Slot]>::new_zeroed_slice(capacity).assume_init() };
        #[cfg(all(test, loom))]
        let slots = (0..capacity).map(|_| Slot::new()).collect();
        Self { head: Padded(AtomicU64::new(0)), tail: AtomicU64::new(0), mask: capacity as u64 - 1, slots }
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.mask + 1
    }

    pub(super) fn slot(&self, index: u64) -> &Slot {
        &self.slots[(index & self.mask) as usize]
    }

    /// Appends one record. Lock-free: never waits for another writer.
    pub(crate) fn push(&self, ticks: i64, tid: u32, target: &'static str, event: &'static str, a: u64, b: u64) {
        self.push_with(|_| (ticks, tid, target, event, a, b));
    }

    /// [`Ring::push`], with the record's fields made from the index it
    /// takes: the tests tie what a record holds to where it is.
    #[inline(always)]
    pub(super) fn push_with(&self, record: impl FnOnce(u64) -> Fields) {
        let index = self.head.0.fetch_add(1, Relaxed);
        if let Some(slot) = self.claim(index) {
            let (ticks, tid, target, event, a, b) = record(index);
            slot.fill(ticks, tid, target, event, a, b);
            slot.seq.store(2 * index + 2, Release);
        }
    }

    /// Takes record `index`'s slot for writing, or gives the record up
    /// (`None`): if the slot is still being written by a writer a lap (or
    /// more) behind, or a newer record already took it. A dump then counts
    /// the index as incomplete.
    pub(super) fn claim(&self, index: u64) -> Option<&Slot> {
        let slot = self.slot(index);
        let writing = 2 * index + 1;
        let mut seq = slot.seq.load(Relaxed);
        loop {
            if seq & 1 == 1 || seq >= writing {
                return None;
            }
            // Acquire: the claim reads the previous record's publication,
            // so that record's field stores happen before ours. With a
            // relaxed claim they need not, a store of the older record may
            // land after ours, and a reader that sees our publication reads
            // it as ours: record `i + capacity` shown with record `i`'s
            // fields (the loom model `loom_a_writer_lapping_..` found this).
            match slot.seq.compare_exchange_weak(seq, writing, Acquire, Relaxed) {
                Ok(_) => break,
                Err(now) => seq = now,
            }
        }
        // Orders the claim before the field stores: a reader that sees a
        // new field also sees the odd sequence when it re-checks.
        fence(Release);
        Some(slot)
    }

    /// Reads record `index`: `Ok` if complete, `Err(true)` if a newer
    /// record replaced it, `Err(false)` if it is not (or never will be)
    /// complete.
    pub(super) fn read(&self, index: u64) -> Result<Record, bool> {
        let slot = self.slot(index);
        let done = 2 * index + 2;
        let seq = slot.seq.load(Acquire);
        if seq != done {
            return Err(seq > done);
        }
        let ticks = slot.ticks.load(Relaxed) as i64;
        let (a, b) = (slot.a.load(Relaxed), slot.b.load(Relaxed));
        let (tp, ep) = (slot.target.load(Relaxed), slot.event.load(Relaxed));
        let (tl, el) = (slot.target_len.load(Relaxed), slot.event_len.load(Relaxed));
        let tid = slot.tid.load(Relaxed);
        fence(Acquire);
        if slot.seq.load(Relaxed) != done {
            return Err(true);
        }
        // SAFETY: the sequence was `done` before and after the loads, so
        // no writer touched the slot in between: pointer and length are
        // the parts of one `&'static str` stored by `push`.
        let (target, event) = unsafe {
            (
                core::str::from_utf8_unchecked(core::slice::from_raw_parts(tp, tl as usize)),
                core::str::from_utf8_unchecked(core::slice::from_raw_parts(ep, el as usize)),
            )
        };
        Ok(Record { index, ticks, tid, target, event, a, b })
    }

    /// The complete records still held, oldest first. Every index pushed
    /// since the last clear is either shown, dropped or incomplete.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let head = self.head.0.load(Acquire);
        let tail = self.tail.load(Acquire).min(head);
        let first = tail.max(head.saturating_sub(self.capacity()));
        let (mut dropped, mut incomplete) = (first - tail, 0);
        let mut records = Vec::with_capacity((head - first) as usize);
        for index in first..head {
            match self.read(index) {
                Ok(r) => records.push(r),
                Err(true) => dropped += 1,
                Err(false) => incomplete += 1,
            }
        }
        Snapshot { records, dropped, incomplete, capacity: self.capacity() }
    }

    /// Forgets every record pushed so far.
    pub(crate) fn clear(&self) {
        self.tail.store(self.head.0.load(Acquire), Release);
    }

    /// Starts a record and stops before filling it in, as a writer
    /// preempted mid-record would; [`Ring::resume`] finishes it.
    #[cfg(test)]
    pub(crate) fn stall(&self) -> (u64, &Slot) {
        let index = self.head.0.fetch_add(1, Relaxed);
        (index, self.claim(index).expect("the slot is free"))
    }

    /// Finishes a record started by [`Ring::stall`], in the two steps of
    /// `push`: `publish` false stops after filling in the fields.
    #[cfg(test)]
    pub(crate) fn resume(&self, index: u64, slot: &Slot, a: u64, publish: bool) {
        slot.fill(a as i64, 7, "work", "submitted", a, !a);
        if publish {
            slot.seq.store(2 * index + 2, Release);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn push_n(ring: &Ring, n: u64) {
        ring.push(n as i64, 7, "work", "submitted", n, !n);
    }

    /// The `a` slots of the snapshot, checking each record is whole.
    fn window(ring: &Ring) -> (Vec<u64>, u64) {
        let snap = ring.snapshot();
        for r in &snap.records {
            assert_eq!((r.b, r.ticks, r.tid, r.target, r.event), (!r.a, r.a as i64, 7, "work", "submitted"), "{r:?}");
            assert_eq!(r.index, r.a, "index and payload disagree: {r:?}");
        }
        (snap.records.iter().map(|r| r.a).collect(), snap.dropped)
    }

    #[test]
    fn ring_keeps_the_exact_window_through_several_turns() {
        const CAP: u64 = 8;
        let ring = Ring::new(CAP as usize);
        assert_eq!(window(&ring), (vec![], 0));
        let mut cleared_at = 0;
        for n in 0..CAP * 6 + 3 {
            push_n(&ring, n);
            let pushed = n + 1;
            let first = cleared_at.max(pushed.saturating_sub(CAP));
            let expected: Vec<u64> = (first..pushed).collect();
            let dropped = (pushed - cleared_at).saturating_sub(CAP);
            assert_eq!(window(&ring), (expected, dropped), "after push #{n}");
            assert_eq!(ring.snapshot().incomplete, 0);
            if n == CAP * 3 + 2 {
                ring.clear();
                cleared_at = pushed;
                assert_eq!(window(&ring), (vec![], 0), "after clear");
            }
        }
    }

    #[test]
    fn a_writer_lapped_mid_record_never_mixes_with_the_newer_record() {
        let ring = Ring::new(4);
        push_n(&ring, 0);
        let (stalled, slot) = ring.stall();
        assert_eq!(stalled, 1);
        // Records 5 and 9 want the stalled writer's slot and give up.
        for n in 2..10 {
            push_n(&ring, n);
        }
        let snap = ring.snapshot();
        assert_eq!((snap.dropped, snap.incomplete), (6, 1));
        // The stalled writer fills in its fields: they must not surface as record 9.
        ring.resume(stalled, slot, 1, false);
        assert_eq!(window(&ring).0, [6, 7, 8]);
        ring.resume(stalled, slot, 1, true);
        assert_eq!(window(&ring).0, [6, 7, 8]);
        let snap = ring.snapshot();
        assert_eq!((snap.records.len(), snap.dropped, snap.incomplete), (3, 6, 1));
        // The slot is usable again by the next lap.
        for n in 10..14 {
            push_n(&ring, n);
        }
        assert_eq!(window(&ring), ((10..14).collect(), 10));
    }

    #[test]
    fn concurrent_writers_never_show_a_torn_or_reordered_record() {
        // Miri interprets every access: a few laps of a small ring there.
        let (per_thread, capacity) = if cfg!(miri) { (200, 16) } else { (100_000, 256) };
        let ring = Ring::new(capacity as usize);
        let done = std::sync::atomic::AtomicUsize::new(0);
        let key = |tid: u32| 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(tid as u64 + 1);
        let check = |snap: &Snapshot| {
            let mut last: [Option<u64>; 2] = [None; 2];
            let mut index = None;
            for r in &snap.records {
                assert!(r.tid < 2 && r.b == r.a ^ key(r.tid) && r.ticks == r.a as i64, "torn record {r:?}");
                assert!(index < Some(r.index), "indices out of order at {r:?}");
                index = Some(r.index);
                let l = &mut last[r.tid as usize];
                assert!(*l < Some(r.a), "thread {}'s records out of order at {r:?}", r.tid);
                *l = Some(r.a);
            }
        };
        let snapshots = std::thread::scope(|s| {
            for tid in 0..2u32 {
                let (ring, done) = (&ring, &done);
                s.spawn(move || {
                    for i in 0..per_thread {
                        ring.push(i as i64, tid, "work", "submitted", i, i ^ key(tid));
                    }
                    done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                });
            }
            let mut snapshots = 0;
            while done.load(std::sync::atomic::Ordering::SeqCst) < 2 {
                check(&ring.snapshot());
                snapshots += 1;
            }
            snapshots
        });
        let last = ring.snapshot();
        check(&last);
        // Quiescent: every record is accounted for, and the window is full
        // (only a writer lapped mid-record leaves a hole in it).
        assert_eq!(last.records.len() as u64 + last.dropped + last.incomplete, 2 * per_thread, "{snapshots} snapshots");
        assert_eq!(last.records.len() as u64 + last.incomplete, capacity);
        assert!(!last.records.is_empty());
    }
}

/// The claim/publish/read protocol under every interleaving (up to a
/// preemption bound) of two or three threads, with the weak-memory loads
/// loom can return. A record's fields are all derived from its index, so a
/// record put together from two writes shows.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::model;
    use loom::sync::Arc;

    /// Two targets of one length: a pointer from one and a length from the
    /// other still make a valid `str`, and the check names the tear.
    const TARGETS: [&str; 2] = ["work", "wait"];
    const EVENTS: [&str; 2] = ["submitted", "cancelled"];

    fn push(ring: &Ring) {
        ring.push_with(|i| {
            let k = (i % 2) as usize;
            (i as i64, k as u32, TARGETS[k], EVENTS[k], i, !i)
        });
    }

    fn check(snap: &Snapshot) {
        for r in &snap.records {
            let k = (r.index % 2) as usize;
            let whole = (r.ticks, r.tid, r.target, r.event, r.a, r.b);
            assert_eq!(whole, (r.index as i64, k as u32, TARGETS[k], EVENTS[k], r.index, !r.index), "torn record");
        }
    }

    /// One writer, one reader: a record is shown only once published, and
    /// then whole. A relaxed publication fails it (a record of zeros).
    #[test]
    fn loom_a_reader_sees_a_record_whole_or_not_at_all() {
        model(|| {
            let ring = Arc::new(Ring::new(2));
            let writer = {
                let ring = Arc::clone(&ring);
                loom::thread::spawn(move || push(&ring))
            };
            let snap = ring.snapshot();
            check(&snap);
            assert!(snap.records.len() as u64 + snap.dropped + snap.incomplete <= 1, "{snap:?}");
            writer.join().unwrap();
            let snap = ring.snapshot();
            check(&snap);
            assert_eq!(snap.records.len(), 1, "{snap:?}");
        });
    }

    /// Capacity 1: two writers take the one slot in turn (the second laps
    /// the first, or gives its record up if the first is mid-write) while a
    /// reader reads it. No torn record, and at the end every record is
    /// shown, dropped or incomplete. Fails with a relaxed claim, without
    /// the claim's release fence, or without the reader's acquire fence.
    #[test]
    fn loom_a_writer_lapping_another_never_tears_a_record() {
        model(|| {
            let ring = Arc::new(Ring::new(1));
            let writers: Vec<_> = (0..2)
                .map(|_| {
                    let ring = Arc::clone(&ring);
                    loom::thread::spawn(move || push(&ring))
                })
                .collect();
            check(&ring.snapshot());
            for w in writers {
                w.join().unwrap();
            }
            let snap = ring.snapshot();
            check(&snap);
            assert_eq!(snap.records.len() as u64 + snap.dropped + snap.incomplete, 2, "{snap:?}");
            assert_eq!(snap.dropped, 1, "{snap:?}");
        });
    }
}
