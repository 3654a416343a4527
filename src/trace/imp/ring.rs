//! The ring of records and the snapshots dumps read from it.

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, fence};

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

const _: () = assert!(size_of::<Slot>() == 64);

impl Slot {
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
        // SAFETY: every field of `Slot` is an atomic integer or pointer,
        // for which all-zero bytes are a valid value.
        let slots = unsafe { Box::<[Slot]>::new_zeroed_slice(capacity).assume_init() };
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
        let index = self.head.0.fetch_add(1, Relaxed);
        if let Some(slot) = self.claim(index) {
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
            match slot.seq.compare_exchange_weak(seq, writing, Relaxed, Relaxed) {
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
