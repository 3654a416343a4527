//! [`for_each`] and [`map`]: every item of an iterator visited in parallel,
//! on pool tasks; the chunking and the ordered output are in `chunked.rs`.

use core::sync::atomic::{AtomicUsize, Ordering};
use std::panic::resume_unwind;
use std::thread;

use super::chunked;
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

/// `f` of every item of `items`, in the items' order, computed in parallel on
/// the default pool and the calling thread: what
/// `items.into_par_iter().map(f).collect::<Vec<_>>()` gives with rayon.
///
/// The items are taken in chunks as by [`for_each`], and each result is
/// written at its item's index in the returned `Vec`. For an iterator that
/// knows its length (a range, a slice's or a `Vec`'s iterator, `map` or
/// `zip` of those) the output is allocated once, at that length, and
/// nothing is allocated per item or per chunk. Any iterator works: results
/// past the iterator's lower size bound (all of them for `filter` or
/// `from_fn`) are gathered per task and put in order at the end, which
/// moves them once more.
///
/// ```
/// let squares = windows_threadpool::task::map(0..1000u64, |i| i * i);
/// assert_eq!(squares[999], 998_001);
/// let lens = windows_threadpool::task::map(["a", "bb"], str::len);
/// assert_eq!(lens, [1, 2]);
/// ```
///
/// # Panics
/// If `f` panics: with its first panic, once every chunk has been finished,
/// and after every result already computed has been dropped. The items left
/// in the chunk where `f` panicked are dropped unvisited; every other item
/// is visited.
pub fn map<I, R, F>(items: I, f: F) -> Vec<R>
where
    I: IntoIterator,
    I::IntoIter: Send,
    I::Item: Send,
    R: Send,
    F: Fn(I::Item) -> R + Sync,
{
    map_with(None, items, f)
}

/// [`map`] with its tasks on the pool and with the settings of `env`.
pub fn map_in<I, R, F>(items: I, f: F, env: &CallbackEnviron) -> Vec<R>
where
    I: IntoIterator,
    I::IntoIter: Send,
    I::Item: Send,
    R: Send,
    F: Fn(I::Item) -> R + Sync,
{
    map_with(Some(env), items, f)
}

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

/// Runs `run` on the calling thread and on `helpers` scoped tasks in `env`,
/// and returns once every one has returned. A waiting caller runs the tasks
/// no pool thread has started (help while waiting).
fn on_tasks(env: Option<&CallbackEnviron>) -> impl FnOnce(usize, &(dyn Fn() + Sync)) + '_ {
    move |helpers, run| {
        run_scope(env, |s| {
            for _ in 0..helpers {
                // Helpers the pool has not started by the time the caller is
                // done are claimed here and find the source exhausted.
                let _ = s.spawn(run);
            }
            run();
        })
    }
}

fn for_each_with<I, F>(env: Option<&CallbackEnviron>, items: I, f: F)
where
    I: IntoIterator,
    I::IntoIter: Send,
    I::Item: Send,
    F: Fn(I::Item) + Sync,
{
    if let Some(p) = chunked::for_each(items.into_iter(), f, parallelism(), on_tasks(env)) {
        resume_unwind(p);
    }
}

fn map_with<I, R, F>(env: Option<&CallbackEnviron>, items: I, f: F) -> Vec<R>
where
    I: IntoIterator,
    I::IntoIter: Send,
    I::Item: Send,
    R: Send,
    F: Fn(I::Item) -> R + Sync,
{
    chunked::map(items.into_iter(), f, parallelism(), on_tasks(env)).unwrap_or_else(|p| resume_unwind(p))
}
