//! 10 to 13 and 20: one-off tasks (`spawn`, `for_each`, `scope`, `map`)
//! against the raw `TrySubmitThreadpoolCallback` (or a plain loop),
//! `windows-threading`, rayon and `std::thread::scope`.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::time::Instant;

use rayon::prelude::*;
use windows_sys::Win32::System::Threading::{PTP_CALLBACK_INSTANCE, TrySubmitThreadpoolCallback};

use crate::report::{CRATE, Cell, RAW, RAYON, STD, Table, WINDOWS_THREADING};
use crate::workloads::Config;

pub fn run(cfg: &Config, table: &mut Table) {
    spawn_join(cfg, table);
    for_each_rows(cfg, table);
    scope_64(cfg, table);
    map_collect(cfg, table);
}

/// Spins until `n` have finished.
fn spin_until(done: &AtomicUsize, n: usize) {
    while done.load(Acquire) < n {
        std::hint::spin_loop();
    }
}

/// What a raw callback of the spawn row computes and where it puts it.
struct Slot {
    input: usize,
    out: AtomicUsize,
    done: *const AtomicUsize,
}

unsafe extern "system" fn raw_slot(_: PTP_CALLBACK_INSTANCE, ctx: *mut core::ffi::c_void) {
    // SAFETY: ctx is a `Slot` of a vector kept alive until every callback has counted itself done.
    let s = unsafe { &*(ctx as *const Slot) };
    s.out.store(s.input * 2, Relaxed);
    // SAFETY: as above; the counter outlives the slots.
    unsafe { &*s.done }.fetch_add(1, Release);
}

/// 10. spawn + join of N tasks returning a value. ns per task.
fn spawn_join(cfg: &Config, table: &mut Table) {
    let n = cfg.n(10_000);
    let expect: usize = (0..n).map(|i| i * 2).sum();
    let per = |t: Instant| t.elapsed().as_nanos() as f64 / n as f64;
    let mut cols: [Vec<f64>; 5] = Default::default();
    for trial in 0..=cfg.trials {
        // This crate.
        let t = Instant::now();
        let handles: Vec<_> = (0..n).map(|i| windows_threadpool::task::spawn_blocking(move || i * 2)).collect();
        let sum: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        cols[CRATE].push(per(t));
        assert_eq!(sum, expect);

        // Raw: one TrySubmitThreadpoolCallback per task, results in slots.
        let done = AtomicUsize::new(0);
        let t = Instant::now();
        let slots: Vec<Slot> = (0..n).map(|i| Slot { input: i, out: AtomicUsize::new(0), done: &done }).collect();
        for s in &slots {
            // SAFETY: `slots` and `done` outlive every callback: we spin until all have counted.
            let ok =
                unsafe { TrySubmitThreadpoolCallback(Some(raw_slot), s as *const Slot as *mut _, core::ptr::null()) };
            assert_ne!(ok, 0);
        }
        spin_until(&done, n);
        let sum: usize = slots.iter().map(|s| s.out.load(Relaxed)).sum();
        cols[RAW].push(per(t));
        assert_eq!(sum, expect);

        // windows-threading: submit, results in shared slots.
        let shared = Arc::new(((0..n).map(|_| AtomicUsize::new(0)).collect::<Vec<_>>(), AtomicUsize::new(0)));
        let t = Instant::now();
        for i in 0..n {
            let s = Arc::clone(&shared);
            windows_threading::submit(move || {
                s.0[i].store(i * 2, Relaxed);
                s.1.fetch_add(1, Release);
            });
        }
        spin_until(&shared.1, n);
        let sum: usize = shared.0.iter().map(|v| v.load(Relaxed)).sum();
        cols[WINDOWS_THREADING].push(per(t));
        assert_eq!(sum, expect);

        // rayon: scope + spawn, results in slots.
        let t = Instant::now();
        let out: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        rayon::scope(|s| {
            for (i, o) in out.iter().enumerate() {
                s.spawn(move |_| o.store(i * 2, Relaxed));
            }
        });
        let sum: usize = out.iter().map(|v| v.load(Relaxed)).sum();
        cols[RAYON].push(per(t));
        assert_eq!(sum, expect);

        // std::thread::scope: one thread per task.
        let t = Instant::now();
        let sum: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..n).map(|i| s.spawn(move || i * 2)).collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        cols[STD].push(per(t));
        assert_eq!(sum, expect);
        if trial == 0 {
            cols.iter_mut().for_each(Vec::clear);
        }
    }
    table.add(
        format!(
            "10. spawn + join, {n} tasks returning a value (raw: TrySubmitThreadpoolCallback per task; rayon: scope + \
             spawn; std: thread::scope, a thread per task)"
        ),
        "ns/task",
        cols.clone().map(|v| Some(Cell::trials(v))),
    );
    table.add(
        "10b. the crate's own share of row 10: spawn_blocking + join minus the raw TrySubmitThreadpoolCallback, \
         trial by trial (add it to Windows' own submission cost)",
        "ns/task",
        [Some(Cell::difference(&cols[CRATE], &cols[RAW]))],
    );
}

/// About 1 µs of arithmetic.
fn work_1us(i: usize) -> usize {
    let mut x = i as u64;
    // A xorshift-multiply chain: unlike a linear recurrence, the compiler
    // cannot fold iterations together.
    for _ in 0..black_box(500) {
        x = (x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    }
    x as usize
}

/// 11 and 12. for_each over N items: ns per item. Raw is a plain loop on one thread.
fn for_each_rows(cfg: &Config, table: &mut Table) {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    for (label, full, heavy) in [("an atomic add", 1_000_000, false), ("~1 µs of arithmetic", 1_000_000, true)] {
        let n = cfg.n(full);
        // windows-threading submits one callback per item: a hundredth of the items.
        let n_wt = (n / 100).max(10);
        let mut cols: [Vec<f64>; 5] = Default::default();
        let sum = AtomicUsize::new(0);
        let item = |i: usize| {
            // black_box: all of the result is used, so none of the arithmetic is elided.
            let v = if heavy { black_box(work_1us(i)) & 1 } else { i & 1 };
            sum.fetch_add(v, Relaxed);
        };
        let time = |count: usize, f: &dyn Fn()| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as f64 / count as f64
        };
        for trial in 0..=cfg.trials {
            cols[CRATE].push(time(n, &|| windows_threadpool::for_each(0..n, item)));
            cols[RAW].push(time(n, &|| (0..n).for_each(item)));
            cols[WINDOWS_THREADING].push(time(n_wt, &|| windows_threading::for_each(0..n_wt, item)));
            cols[RAYON].push(time(n, &|| (0..n).into_par_iter().for_each(item)));
            cols[STD].push(time(n, &|| {
                let per = n.div_ceil(threads);
                std::thread::scope(|s| {
                    for k in 0..threads {
                        s.spawn(move || (k * per..((k + 1) * per).min(n)).for_each(item));
                    }
                });
            }));
            if trial == 0 {
                cols.iter_mut().for_each(Vec::clear);
            }
        }
        black_box(sum.load(Relaxed));
        let row = if heavy { 12 } else { 11 };
        table.add(
            format!(
                "{row}. for_each over {n} items, {label} (raw: a plain loop on one thread; windows-threading: \
                 {n_wt} items; rayon: par_iter().for_each; std: thread::scope, one range per processor)"
            ),
            "ns/item",
            cols.map(|v| Some(Cell::trials(v))),
        );
    }
}

unsafe extern "system" fn raw_add(_: PTP_CALLBACK_INSTANCE, ctx: *mut core::ffi::c_void) {
    // SAFETY: ctx is the counter the scope spins on until all 64 have added.
    unsafe { &*(ctx as *const AtomicUsize) }.fetch_add(1, Release);
}

/// 13. A scope of 64 tasks borrowing a stack counter. µs per scope.
fn scope_64(cfg: &Config, table: &mut Table) {
    const TASKS: usize = 64;
    let n = cfg.n(2_000);
    let mut cols: [Vec<f64>; 5] = Default::default();
    let time = |count: usize, f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..count {
            f();
        }
        t.elapsed().as_nanos() as f64 / 1000.0 / count as f64
    };
    let wt_pool = windows_threading::Pool::new();
    // std creates 64 threads per scope: fewer scopes.
    let n_std = (n / 20).max(10);
    for trial in 0..=cfg.trials {
        cols[CRATE].push(time(n, &mut || {
            let hits = AtomicUsize::new(0);
            windows_threadpool::scope(|s| {
                for _ in 0..TASKS {
                    s.spawn(|| hits.fetch_add(1, Relaxed));
                }
            });
            assert_eq!(hits.load(Relaxed), TASKS);
        }));
        cols[RAW].push(time(n, &mut || {
            let hits = AtomicUsize::new(0);
            for _ in 0..TASKS {
                // SAFETY: `hits` outlives every callback: we spin until all have added.
                let ok = unsafe {
                    TrySubmitThreadpoolCallback(Some(raw_add), &hits as *const _ as *mut _, core::ptr::null())
                };
                assert_ne!(ok, 0);
            }
            spin_until(&hits, TASKS);
        }));
        cols[WINDOWS_THREADING].push(time(n, &mut || {
            let hits = AtomicUsize::new(0);
            wt_pool.scope(|s| {
                for _ in 0..TASKS {
                    s.submit(|| {
                        hits.fetch_add(1, Relaxed);
                    });
                }
            });
            assert_eq!(hits.load(Relaxed), TASKS);
        }));
        cols[RAYON].push(time(n, &mut || {
            let hits = AtomicUsize::new(0);
            rayon::scope(|s| {
                for _ in 0..TASKS {
                    s.spawn(|_| {
                        hits.fetch_add(1, Relaxed);
                    });
                }
            });
            assert_eq!(hits.load(Relaxed), TASKS);
        }));
        cols[STD].push(time(n_std, &mut || {
            let hits = AtomicUsize::new(0);
            std::thread::scope(|s| {
                for _ in 0..TASKS {
                    s.spawn(|| hits.fetch_add(1, Relaxed));
                }
            });
            assert_eq!(hits.load(Relaxed), TASKS);
        }));
        if trial == 0 {
            cols.iter_mut().for_each(Vec::clear);
        }
    }
    table.add(
        format!(
            "13. scope with {TASKS} tasks borrowing a stack counter, {n} scopes (raw: {TASKS} \
             TrySubmitThreadpoolCallback + spin; windows-threading: Pool::scope on one pool; std: thread::scope, \
             {n_std} scopes)"
        ),
        "µs/scope",
        cols.map(|v| Some(Cell::trials(v))),
    );
}

/// 20. map over N items collected into a `Vec`: ns per item. Raw is `map().collect()` on one thread.
fn map_collect(cfg: &Config, table: &mut Table) {
    let n = cfg.n(1_000_000);
    let f = |i: usize| i ^ (i >> 3);
    let mut cols: [Vec<f64>; 4] = Default::default();
    let time = |col: &mut Vec<f64>, make: &dyn Fn() -> Vec<usize>| {
        let t = Instant::now();
        let out = make();
        col.push(t.elapsed().as_nanos() as f64 / n as f64);
        assert!(out.len() == n && out[n - 1] == f(n - 1));
        // Freed outside the timed part, as for every column.
        drop(black_box(out));
    };
    for trial in 0..=cfg.trials {
        time(&mut cols[CRATE], &|| windows_threadpool::map(0..n, f));
        time(&mut cols[RAW], &|| (0..n).map(f).collect());
        time(&mut cols[RAYON], &|| (0..n).into_par_iter().map(f).collect());
        if trial == 0 {
            cols.iter_mut().for_each(Vec::clear);
        }
    }
    let [c, r, _, y] = cols;
    table.add(
        format!(
            "20. map over {n} items collected into a Vec, i ^ (i >> 3) each (this crate: map; raw: map().collect() \
             on one thread; rayon: par_iter().map().collect())"
        ),
        "ns/item",
        [Some(Cell::trials(c)), Some(Cell::trials(r)), None, Some(Cell::trials(y))],
    );
}
