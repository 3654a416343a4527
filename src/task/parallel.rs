//! [`for_each`]: every item of an iterator visited in parallel.

use core::sync::atomic::{AtomicUsize, Ordering};
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Mutex;
use std::thread;

use super::scoped::run_scope;
use crate::callback_env::CallbackEnviron;

/// Calls `f` on every item of `items`, in parallel on the default pool and
/// the calling thread; returns once every item has been visited.
///
/// The caller and one task per other processor take chunks of items from
/// the iterator, under a lock, until it is exhausted, and visit each chunk
/// without it (see the [module docs](super)), so the cost per item
/// approaches a plain loop's. The iterator is therefore advanced on several
/// threads, one at a time (`I::IntoIter: Send`). Each item is visited
/// exactly once, in no particular order.
///
/// # Panics
/// If `f` panics: with its first panic, once every chunk has been finished.
/// The items left in the chunk where `f` panicked are dropped unvisited;
/// every other item is visited.
pub fn for_each<I, F>(items: I, f: F)
where
    I: IntoIterator,
    I::IntoIter: Send,
    I::Item: Send,
    F: Fn(I::Item) + Sync,
{
    for_each_with(None, items, f);
}

/// [`for_each`] with its tasks on the pool and with the settings of `env`.
pub fn for_each_in<I, F>(items: I, f: F, env: &CallbackEnviron)
where
    I: IntoIterator,
    I::IntoIter: Send,
    I::Item: Send,
    F: Fn(I::Item) + Sync,
{
    for_each_with(Some(env), items, f);
}

/// Items per chunk at most: large enough that the source's lock costs
/// nothing per item, small enough to balance ~1 µs items.
const MAX_CHUNK: usize = 1024;
/// Chunks per participant at least, for balance when items are few.
const CHUNKS_EACH: usize = 4;

/// The processors of this process, read once.
fn parallelism() -> usize {
    static N: AtomicUsize = AtomicUsize::new(0);
    match N.load(Ordering::Relaxed) {
        0 => {
            let n = thread::available_parallelism().map_or(1, |n| n.get());
            N.store(n, Ordering::Relaxed);
            n
        }
        n => n,
    }
}

/// Items per chunk when the iterator does not say how many it holds.
const UNKNOWN_CHUNK: usize = 64;

/// Takes chunks from `source` into a buffer of this participant's and calls
/// `f` on each item until the source is exhausted. If `f` panics, the rest of
/// its chunk is dropped and the first such panic returned.
fn drive<It: Iterator>(source: &Mutex<It>, chunk: usize, f: &impl Fn(It::Item)) -> Option<Box<dyn Any + Send>> {
    // Allocated by the first chunk taken: a helper that finds the source
    // exhausted allocates nothing.
    let mut buf = Vec::new();
    let mut first_panic = None;
    loop {
        // A panic of the iterator itself poisons the lock; the others go on
        // with what is left of it, and the panic reaches the caller.
        buf.extend(source.lock().unwrap_or_else(std::sync::PoisonError::into_inner).by_ref().take(chunk));
        if buf.is_empty() {
            return first_panic;
        }
        // `drain` drops the items left in the chunk if `f` panics.
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| buf.drain(..).for_each(f))) {
            first_panic.get_or_insert(p);
        }
    }
}

fn for_each_with<I, F>(env: Option<&CallbackEnviron>, items: I, f: F)
where
    I: IntoIterator,
    I::IntoIter: Send,
    I::Item: Send,
    F: Fn(I::Item) + Sync,
{
    let items = items.into_iter().fuse();
    let (low, high) = items.size_hint();
    if high == Some(0) {
        return;
    }
    let known = high.unwrap_or(low).max(low);
    let most = parallelism() - 1;
    let helpers = if known == 0 { most } else { most.min(known - 1) };
    let chunk = if known == 0 { UNKNOWN_CHUNK } else { (known / ((helpers + 1) * CHUNKS_EACH)).clamp(1, MAX_CHUNK) };
    let source = Mutex::new(items);
    let first_panic = Mutex::new(None);
    let run = || {
        if let Some(p) = drive(&source, chunk, &f) {
            first_panic.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(p);
        }
    };
    run_scope(env, |s| {
        for _ in 0..helpers {
            // Helpers the pool has not started by the time the caller is
            // done are claimed here and find the source exhausted.
            let _ = s.spawn(run);
        }
        run();
    });
    if let Some(p) = first_panic.into_inner().unwrap_or_else(|e| e.into_inner()) {
        resume_unwind(p);
    }
}
