//! The platform-independent core of [`for_each`](super::for_each) and
//! [`map`](super::map): how an iterator is cut into chunks, the loop every
//! participant runs, and `map`'s ordered output. Who runs the participants
//! is the caller's `spread` (pool tasks in `parallel.rs`), so the unit tests
//! here run the same code on `std` threads, under Miri on the host.
//!
//! **`map` writes each result at its item's index.** The index of a chunk's
//! first item is taken under the source's lock with the chunk, so the
//! chunks tile `0..n` in the iterator's order. Results for indices below the
//! iterator's lower size bound go straight into the spare capacity of the
//! output `Vec`, allocated once up front: for a range, a slice's or a
//! `Vec`'s iterator (exact bounds) that is the only allocation beyond the
//! chunk buffers. A chunk never straddles that bound. Results past it (an
//! iterator that cannot say its length, such as `filter`'s, or one whose
//! lower bound is low) are pushed onto a buffer of the participant's with
//! their runs' start indices, and stitched in order after every participant
//! has returned: a few allocations per participant, amortised, not one per
//! chunk. Size hints are only trusted for capacity, never for soundness: an
//! iterator yielding fewer items than its lower bound leaves slots unused,
//! one yielding more spills.
//!
//! **A panic drops every written result once.** If `f` panics, the rest of
//! its chunk is dropped unvisited and the unwritten slots of the chunk are
//! recorded as a hole; the other chunks go on, as in `for_each`. Afterwards
//! the output's slots below the last index given out, minus the holes, are
//! exactly the written ones, and are dropped with the participants'
//! spilled results before the first panic is returned. A panic of the
//! iterator itself happens under the lock before a chunk gets its index, so
//! it leaves no hole.

use core::ops::Range;
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, PoisonError};

/// A caught panic's payload.
pub(super) type Panic = Box<dyn Any + Send>;

/// Items per chunk at most: large enough that the source's lock costs
/// nothing per item, small enough to balance ~1 µs items.
const MAX_CHUNK: usize = 1024;
/// Chunks per participant at least, for balance when items are few.
const CHUNKS_EACH: usize = 4;
/// Items per chunk when the iterator does not say how many it holds.
const UNKNOWN_CHUNK: usize = 64;

/// How many helpers to start besides the caller, and how many items each
/// takes from the source at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    helpers: usize,
    chunk: usize,
}

/// The plan for an iterator of `size_hint` on `parallelism` processors, or
/// `None` if it promises no item.
fn plan((low, high): (usize, Option<usize>), parallelism: usize) -> Option<Plan> {
    if high == Some(0) {
        return None;
    }
    let known = high.unwrap_or(low).max(low);
    let most = parallelism - 1;
    let helpers = if known == 0 { most } else { most.min(known - 1) };
    let chunk = if known == 0 { UNKNOWN_CHUNK } else { (known / ((helpers + 1) * CHUNKS_EACH)).clamp(1, MAX_CHUNK) };
    Some(Plan { helpers, chunk })
}

/// Calls `f` on every item of `items`, in chunks, on the participants
/// `spread` runs: it is given the number of helpers and the participant, and
/// runs the participant on the calling thread and on that many others,
/// returning once every one has returned. Returns the first panic of `f`.
pub(super) fn for_each<It, F>(
    items: It,
    f: F,
    parallelism: usize,
    spread: impl FnOnce(usize, &(dyn Fn() + Sync)),
) -> Option<Panic>
where
    It: Iterator + Send,
    It::Item: Send,
    F: Fn(It::Item) + Sync,
{
    let items = items.fuse();
    let plan = plan(items.size_hint(), parallelism)?;
    let source = Mutex::new(items);
    let first_panic = Mutex::new(None);
    spread(plan.helpers, &|| {
        if let Some(p) = drive(&source, plan.chunk, &f) {
            first_panic.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(p);
        }
    });
    first_panic.into_inner().unwrap_or_else(PoisonError::into_inner)
}

/// Takes chunks from `source` into a buffer of this participant's and calls
/// `f` on each item until the source is exhausted. If `f` panics, the rest of
/// its chunk is dropped and the first such panic returned.
fn drive<It: Iterator>(source: &Mutex<It>, chunk: usize, f: &impl Fn(It::Item)) -> Option<Panic> {
    // Allocated by the first chunk taken: a helper that finds the source
    // exhausted allocates nothing.
    let mut buf = Vec::new();
    let mut first_panic = None;
    loop {
        // A panic of the iterator itself poisons the lock; the others go on
        // with what is left of it, and the panic reaches the caller.
        buf.extend(source.lock().unwrap_or_else(PoisonError::into_inner).by_ref().take(chunk));
        if buf.is_empty() {
            return first_panic;
        }
        // `drain` drops the items left in the chunk if `f` panics.
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| buf.drain(..).for_each(f))) {
            first_panic.get_or_insert(p);
        }
    }
}

/// `f` of every item of `items`, in the items' order, computed in chunks on
/// the participants `spread` runs (as for [`for_each`]); or the first panic
/// of `f`, once every written result has been dropped.
pub(super) fn map<It, R, F>(
    items: It,
    f: F,
    parallelism: usize,
    spread: impl FnOnce(usize, &(dyn Fn() + Sync)),
) -> Result<Vec<R>, Panic>
where
    It: Iterator + Send,
    It::Item: Send,
    R: Send,
    F: Fn(It::Item) -> R + Sync,
{
    let items = items.fuse();
    let hint = items.size_hint();
    let Some(plan) = plan(hint, parallelism) else { return Ok(Vec::new()) };
    let run = MapRun::new(items, hint.0);
    spread(plan.helpers, &|| run.participate(plan.chunk, &f));
    run.finish()
}

/// The iterator and the index its next item will have.
struct Source<It> {
    items: It,
    next: usize,
}

/// The output `Vec`'s first `cap` slots, written by index from several
/// threads while its length stays 0.
struct Slots<R> {
    out: Vec<R>,
    /// `out`'s buffer, taken once so that writes never go through `out`.
    base: *mut R,
    cap: usize,
}

// SAFETY: through a shared `Slots`, participants only `write` slots, each
// index by one participant (`write`'s contract), and never read one; the
// results are moved in from the participants' threads and later owned (or
// dropped) by the `Slots`' owner, hence `R: Send`.
unsafe impl<R: Send> Sync for Slots<R> {}

impl<R> Slots<R> {
    /// # Safety
    /// `i < self.cap`, slot `i` is written by no other call, and nothing
    /// reads it until every participant has returned.
    unsafe fn write(&self, i: usize, r: R) {
        // SAFETY: `base` points to a buffer of at least `cap` slots
        // (`Vec::with_capacity`), `i < cap`, and no one else touches slot `i`.
        unsafe { self.base.add(i).write(r) };
    }
}

/// Results of a participant's chunks past the slots: `results` holds its
/// runs back to back, `runs` their (start index, length) in taken order.
struct Spill<R> {
    results: Vec<R>,
    runs: Vec<(usize, usize)>,
}

/// What the participants hand back: the first panic, the unwritten parts of
/// slot chunks where `f` panicked, and their spilled results.
struct Outcome<R> {
    first_panic: Option<Panic>,
    holes: Vec<Range<usize>>,
    spills: Vec<Spill<R>>,
}

/// The shared state of one `map`; dropping it drops the written slots.
struct MapRun<It, R> {
    source: Mutex<Source<It>>,
    slots: Slots<R>,
    outcome: Mutex<Outcome<R>>,
}

impl<It: Iterator, R> MapRun<It, R> {
    fn new(items: It, cap: usize) -> Self {
        let mut out = Vec::with_capacity(cap);
        let base = out.as_mut_ptr();
        MapRun {
            source: Mutex::new(Source { items, next: 0 }),
            slots: Slots { out, base, cap },
            outcome: Mutex::new(Outcome { first_panic: None, holes: Vec::new(), spills: Vec::new() }),
        }
    }

    /// One participant: takes chunks, each with its start index, and writes
    /// `f` of each item at its index until the source is exhausted.
    fn participate(&self, chunk: usize, f: &impl Fn(It::Item) -> R) {
        let cap = self.slots.cap;
        // Allocated only by a first chunk and a first spill.
        let mut buf = Vec::new();
        let mut spill = Spill { results: Vec::new(), runs: Vec::new() };
        let mut first_panic = None;
        loop {
            let start = {
                // As in `drive`, an iterator's panic poisons the lock and
                // the others go on; it leaves `next` as it was.
                let mut src = self.source.lock().unwrap_or_else(PoisonError::into_inner);
                let start = src.next;
                let take = if start < cap { chunk.min(cap - start) } else { chunk };
                buf.extend(src.items.by_ref().take(take));
                src.next += buf.len();
                start
            };
            if buf.is_empty() {
                break;
            }
            let len = buf.len();
            let mut written = 0;
            // `drain` drops the items left in the chunk if `f` panics.
            let r = catch_unwind(AssertUnwindSafe(|| {
                for item in buf.drain(..) {
                    let r = f(item);
                    if start < cap {
                        // SAFETY: `start + written < start + len <= cap`; the
                        // indices `start..start + len` were given to this
                        // participant alone, under the source's lock; the
                        // slots are read only after `spread` has returned.
                        unsafe { self.slots.write(start + written, r) };
                    } else {
                        spill.results.push(r);
                    }
                    written += 1;
                }
            }));
            if start >= cap {
                spill.runs.push((start, written));
            }
            if let Err(p) = r {
                if start < cap {
                    self.outcome().holes.push(start + written..start + len);
                }
                first_panic.get_or_insert(p);
            }
        }
        if first_panic.is_some() || !spill.runs.is_empty() {
            let mut outcome = self.outcome();
            if let Some(p) = first_panic {
                outcome.first_panic.get_or_insert(p);
            }
            if !spill.runs.is_empty() {
                outcome.spills.push(spill);
            }
        }
    }

    fn outcome(&self) -> std::sync::MutexGuard<'_, Outcome<R>> {
        self.outcome.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The results in order, or the first panic (and `Drop` drops the
    /// written results). Called once every participant has returned.
    fn finish(mut self) -> Result<Vec<R>, Panic> {
        let outcome = self.outcome.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = outcome.first_panic.take() {
            return Err(p);
        }
        debug_assert!(outcome.holes.is_empty(), "a hole without a panic");
        let spills = std::mem::take(&mut outcome.spills);
        // From here `Drop` finds no slot given out, and drops none.
        let total = std::mem::take(&mut self.source.get_mut().unwrap_or_else(PoisonError::into_inner).next);
        let mut out = std::mem::take(&mut self.slots.out);
        // SAFETY: without a panic there is no hole, so each slot below the
        // last index given out (and below `cap`) was written, once; every
        // participant has returned.
        unsafe { out.set_len(total.min(self.slots.cap)) };
        Ok(stitch(out, spills, total))
    }
}

impl<It, R> Drop for MapRun<It, R> {
    fn drop(&mut self) {
        let filled = self.source.get_mut().unwrap_or_else(PoisonError::into_inner).next.min(self.slots.cap);
        let holes = &mut self.outcome.get_mut().unwrap_or_else(PoisonError::into_inner).holes;
        holes.sort_unstable_by_key(|h| h.start);
        let mut i = 0;
        for hole in holes.iter().chain([&(filled..filled)]) {
            // SAFETY: every participant has returned (`spread` has); the
            // slots `i..hole.start` lie below the last index given out and
            // between holes, so they were written, and nothing has moved
            // them out (`finish` resets `next` first).
            unsafe { core::ptr::slice_from_raw_parts_mut(self.slots.base.add(i), hole.start - i).drop_in_place() };
            i = hole.end;
        }
    }
}

/// `out` (the slots' results) followed by the spilled runs in index order,
/// up to `total` results.
fn stitch<R>(mut out: Vec<R>, spills: Vec<Spill<R>>, total: usize) -> Vec<R> {
    if spills.is_empty() {
        return out;
    }
    out.reserve_exact(total - out.len());
    let mut parts: Vec<_> =
        spills.into_iter().map(|s| (s.runs.into_iter().peekable(), s.results.into_iter())).collect();
    while out.len() < total {
        let at = out.len();
        let k = parts
            .iter_mut()
            .position(|(runs, _)| runs.peek().is_some_and(|&(start, _)| start == at))
            .expect("the spilled runs tile the indices past the slots");
        let (runs, results) = &mut parts[k];
        let (_, len) = runs.next().expect("peeked");
        out.extend(results.by_ref().take(len));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::resume_unwind;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    /// The participant on this thread and on `helpers` `std` threads.
    fn threads(helpers: usize, run: &(dyn Fn() + Sync)) {
        std::thread::scope(|s| {
            for _ in 0..helpers {
                s.spawn(run);
            }
            run();
        });
    }

    /// Smaller than the crate's tests under Miri, which is slow.
    const N: usize = if cfg!(miri) { 300 } else { 20_000 };

    fn map_on<I>(items: I, f: impl Fn(I::Item) -> usize + Sync) -> Vec<usize>
    where
        I: Iterator + Send,
        I::Item: Send,
    {
        map(items, f, 4, threads).unwrap_or_else(|p| resume_unwind(p))
    }

    #[test]
    fn plans_chunks_as_for_each_always_did() {
        assert_eq!(plan((0, Some(0)), 4), None);
        assert_eq!(plan((1, Some(1)), 4), Some(Plan { helpers: 0, chunk: 1 }));
        assert_eq!(plan((1000, Some(1000)), 2), Some(Plan { helpers: 1, chunk: 125 }));
        assert_eq!(plan((1_000_000, Some(1_000_000)), 2), Some(Plan { helpers: 1, chunk: MAX_CHUNK }));
        assert_eq!(plan((0, None), 3), Some(Plan { helpers: 2, chunk: UNKNOWN_CHUNK }));
        assert_eq!(plan((0, Some(100)), 1), Some(Plan { helpers: 0, chunk: 25 }));
    }

    #[test]
    fn for_each_visits_every_item_once() {
        let seen: Vec<AtomicUsize> = (0..N).map(|_| AtomicUsize::new(0)).collect();
        let p = for_each(0..N, |i| _ = seen[i].fetch_add(1, SeqCst), 4, threads);
        assert!(p.is_none());
        assert!(seen.iter().all(|s| s.load(SeqCst) == 1));
    }

    #[test]
    fn map_keeps_the_order_of_an_exact_iterator() {
        assert_eq!(map_on(0..N, |i| i * 3), (0..N).map(|i| i * 3).collect::<Vec<_>>());
    }

    #[test]
    fn map_keeps_the_order_of_an_iterator_of_unknown_length() {
        let mut next = 0;
        let items = std::iter::from_fn(move || {
            next += 1;
            (next <= N).then_some(next)
        });
        assert_eq!(map_on(items, |i| i + 1), (2..N + 2).collect::<Vec<_>>());
    }

    /// A lower bound below the length: the first part in slots, the rest
    /// spilled, joined at the bound.
    #[test]
    fn map_joins_slots_and_spills_in_order() {
        let items = (0..N / 2).chain((N / 2..N * 2).filter(|i| i % 2 == 0));
        assert_eq!(items.size_hint().0, N / 2);
        let expect: Vec<usize> = (0..N / 2).chain((N / 2..N * 2).filter(|i| i % 2 == 0)).map(|i| i * 7).collect();
        assert_eq!(map_on(items, |i| i * 7), expect);
    }

    /// An iterator whose `size_hint` lies either way.
    struct Lying {
        left: usize,
        hint: (usize, Option<usize>),
    }
    impl Iterator for Lying {
        type Item = usize;
        fn next(&mut self) -> Option<usize> {
            self.left = self.left.checked_sub(1)?;
            Some(self.left)
        }
        fn size_hint(&self) -> (usize, Option<usize>) {
            self.hint
        }
    }

    #[test]
    fn map_trusts_no_size_hint_for_soundness() {
        for (left, hint) in [(10, (N, Some(N))), (N, (10, Some(10))), (N, (5, Some(N * 2))), (7, (0, Some(3)))] {
            let got = map_on(Lying { left, hint }, |i| i);
            assert_eq!(got, (0..left).rev().collect::<Vec<_>>(), "{left} items with hint {hint:?}");
        }
    }

    #[test]
    fn map_of_nothing_and_of_one_item() {
        assert_eq!(map_on(std::iter::empty::<usize>(), |i| i), Vec::<usize>::new());
        assert_eq!(map_on(std::iter::once(5), |i| i * 2), [10]);
    }

    #[test]
    fn map_to_a_zero_sized_result() {
        let calls = AtomicUsize::new(0);
        let out = map((0..N).filter(|_| true).chain(0..N), |_| _ = calls.fetch_add(1, SeqCst), 4, threads);
        assert_eq!(out.ok().map(|v| v.len()), Some(2 * N));
        assert_eq!(calls.load(SeqCst), 2 * N);
    }

    /// Counts its drops in `drops[i]`.
    struct Counted<'a>(usize, &'a [AtomicUsize]);
    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.1[self.0].fetch_add(1, SeqCst);
        }
    }

    /// Every item and every written result is dropped exactly once when `f`
    /// panics, in slots and in spills alike; Miri reports any leak.
    #[test]
    fn a_panic_in_f_drops_every_item_and_every_written_result_once() {
        for spill in [false, true] {
            let items: Vec<AtomicUsize> = (0..N).map(|_| AtomicUsize::new(0)).collect();
            let results: Vec<AtomicUsize> = (0..N).map(|_| AtomicUsize::new(0)).collect();
            let made = AtomicUsize::new(0);
            let source = (0..N).filter(|_| true).take(if spill { N } else { 0 }).chain(0..if spill { 0 } else { N });
            let r = map(
                source.map(|i| Counted(i, &items)),
                |item| {
                    if item.0 % 97 == 13 {
                        panic!("boom");
                    }
                    made.fetch_add(1, SeqCst);
                    Counted(item.0, &results)
                },
                4,
                threads,
            );
            let p = r.err().expect("the panic is returned");
            assert_eq!(p.downcast_ref::<&str>(), Some(&"boom"));
            assert!(items.iter().all(|d| d.load(SeqCst) == 1), "an item dropped other than once");
            let dropped: usize = results.iter().map(|d| d.load(SeqCst)).sum();
            assert!(results.iter().all(|d| d.load(SeqCst) <= 1), "a result dropped twice");
            assert!(made.load(SeqCst) > 0, "no result was written before the panic");
            assert_eq!(dropped, made.load(SeqCst), "a result not dropped (spill: {spill})");
        }
    }

    /// The iterator panics after some chunks have been written: they are
    /// dropped once when the panic unwinds out of `map`.
    #[test]
    fn a_panic_of_the_iterator_drops_the_written_results() {
        let results: Vec<AtomicUsize> = (0..N).map(|_| AtomicUsize::new(0)).collect();
        let made = AtomicUsize::new(0);
        let items = (0..N).map(|i| if i == N / 2 { panic!("source boom") } else { i });
        let r = catch_unwind(AssertUnwindSafe(|| {
            map(
                items,
                |i| {
                    made.fetch_add(1, SeqCst);
                    Counted(i, &results)
                },
                4,
                threads,
            )
        }));
        assert!(r.is_err());
        assert!(made.load(SeqCst) > 0, "no result was written before the panic");
        assert!(results.iter().all(|d| d.load(SeqCst) <= 1), "a result dropped twice");
        assert_eq!(results.iter().map(|d| d.load(SeqCst)).sum::<usize>(), made.load(SeqCst));
    }

    #[test]
    fn results_with_drop_are_dropped_once_with_the_output() {
        let results: Vec<AtomicUsize> = (0..N).map(|_| AtomicUsize::new(0)).collect();
        let out = map(0..N, |i| Counted(i, &results), 4, threads).expect("no panic");
        assert!(out.iter().enumerate().all(|(i, c)| c.0 == i));
        assert!(results.iter().all(|d| d.load(SeqCst) == 0));
        drop(out);
        assert!(results.iter().all(|d| d.load(SeqCst) == 1));
    }
}
