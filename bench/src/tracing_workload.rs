//! Row 14, the cost of the `tracing` feature per callback: a private pool of one
//! thread runs N work callbacks back to back (the first holds the thread
//! until all N are queued, so the rest is pure dispatch: submit cost is not
//! in it), each submitted inside a span; ns per callback, against the raw
//! calls doing the same. Measured in three builds/states: the feature off,
//! on with no subscriber, and on with a minimal subscriber that records
//! every span (ids and a per-thread stack of entered spans; no formatting or
//! I/O, so the row shows the crate's own cost: the parent captured at
//! submit, and one span created, entered, exited and closed per callback).
//! A real subscriber (`tracing-subscriber`'s registry and a formatter) adds
//! its own cost on top. The submit side is timed too (second row): N
//! submits, capture included.
//!
//! `cargo xtask bench` runs it in the plain build (feature off) and twice in
//! a build with `--features tracing`: without, then with
//! `WTP_BENCH_SUBSCRIBER=1`, which installs the subscriber.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::time::{Duration, Instant};

use windows_sys::Win32::System::Threading::*;
use windows_threadpool::{CallbackEnviron, Pool, Work};

use crate::report::{CRATE, Cell, RAW, Table};
use crate::workloads::Config;

/// What the raw callback shares with the benchmark.
struct RawShared {
    count: AtomicUsize,
    gate: AtomicBool,
}

unsafe extern "system" fn raw_gated(_: PTP_CALLBACK_INSTANCE, ctx: *mut core::ffi::c_void, _: PTP_WORK) {
    // SAFETY: ctx is the RawShared the benchmark keeps alive until the drain.
    let s = unsafe { &*(ctx as *const RawShared) };
    if s.count.fetch_add(1, AcqRel) == 0 {
        hold(&s.gate);
    }
}

/// The first callback holds the pool's one thread until every submit is queued.
fn hold(gate: &AtomicBool) {
    while !gate.load(Acquire) {
        std::thread::yield_now();
    }
}

pub fn run(cfg: &Config, table: &mut Table) {
    let state = state();
    let n = cfg.n(50_000);
    let pool = Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    pool.set_min_threads(1).unwrap();
    let env = CallbackEnviron::new().with_pool(&pool);
    let per = |d: Duration| d.as_nanos() as f64 / (n - 1) as f64;
    let per_submit = |d: Duration| d.as_nanos() as f64 / n as f64;
    let (mut ours, mut raw, mut ours_submit, mut raw_submit) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // The first trial warms the pool up and is discarded.
    for trial in 0..=cfg.trials {
        let count = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(AtomicBool::new(false));
        let (c, g) = (Arc::clone(&count), Arc::clone(&gate));
        let work = Work::new_in(
            move |_| {
                if c.fetch_add(1, AcqRel) == 0 {
                    hold(&g);
                }
            },
            &env,
        )
        .unwrap();
        let (t_submit, t) = in_request(|| {
            let t = Instant::now();
            for _ in 0..n {
                work.submit();
            }
            let t_submit = t.elapsed();
            let t = Instant::now();
            gate.store(true, Release);
            work.wait();
            (t_submit, t.elapsed())
        });
        assert_eq!(count.load(Acquire), n);
        drop(work);

        let shared = RawShared { count: AtomicUsize::new(0), gate: AtomicBool::new(false) };
        // SAFETY: `shared` outlives the work object, which is drained and
        // closed below; the environment names a live pool.
        let (r_submit, r) = unsafe {
            let mut renv: TP_CALLBACK_ENVIRON_V3 = core::mem::zeroed();
            renv.Version = 3;
            renv.CallbackPriority = TP_CALLBACK_PRIORITY_NORMAL;
            renv.Size = size_of::<TP_CALLBACK_ENVIRON_V3>() as u32;
            renv.Pool = pool.as_raw();
            let w = CreateThreadpoolWork(Some(raw_gated), &shared as *const _ as *mut _, &renv);
            assert_ne!(w, 0);
            let t = Instant::now();
            for _ in 0..n {
                SubmitThreadpoolWork(w);
            }
            let t_submit = t.elapsed();
            let t = Instant::now();
            shared.gate.store(true, Release);
            WaitForThreadpoolWorkCallbacks(w, 0);
            let e = t.elapsed();
            CloseThreadpoolWork(w);
            (t_submit, e)
        };
        assert_eq!(shared.count.load(Acquire), n);
        if trial > 0 {
            ours.push(per(t));
            raw.push(per(r));
            ours_submit.push(per_submit(t_submit));
            raw_submit.push(per_submit(r_submit));
        }
    }
    let row = |a: Vec<f64>, b: Vec<f64>| {
        let mut cells: [Option<Cell>; 5] = Default::default();
        cells[CRATE] = Some(Cell::trials(a));
        cells[RAW] = Some(Cell::trials(b));
        cells
    };
    table.add(
        format!("19. `tracing` {state}: {n} work callbacks back to back on one pool thread"),
        "ns/callback",
        row(ours, raw),
    );
    table.add(
        format!("19. `tracing` {state}: {n} work submits from inside a span"),
        "ns/submit",
        row(ours_submit, raw_submit),
    );
}

#[cfg(not(feature = "tracing"))]
fn state() -> &'static str {
    "feature off"
}

#[cfg(not(feature = "tracing"))]
fn in_request<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(feature = "tracing")]
fn state() -> &'static str {
    if std::env::var_os("WTP_BENCH_SUBSCRIBER").is_some() {
        minimal::install();
        "on, a minimal subscriber recording every span"
    } else {
        "on, no subscriber"
    }
}

#[cfg(feature = "tracing")]
fn in_request<R>(f: impl FnOnce() -> R) -> R {
    tracing::info_span!("request").in_scope(f)
}

/// A subscriber that does the least a span-recording one must: ids, and a
/// per-thread stack so `Span::current` works.
#[cfg(feature = "tracing")]
mod minimal {
    use std::cell::RefCell;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    struct Minimal {
        next: AtomicU64,
    }

    thread_local! {
        static STACK: RefCell<Vec<(u64, &'static Metadata<'static>)>> = const { RefCell::new(Vec::new()) };
        static META: RefCell<Vec<(u64, &'static Metadata<'static>)>> = const { RefCell::new(Vec::new()) };
    }

    impl Subscriber for Minimal {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, attrs: &Attributes<'_>) -> Id {
            let id = self.next.fetch_add(1, Relaxed);
            // Kept on the creating thread, where the crate enters it at once.
            META.with(|m| {
                let mut m = m.borrow_mut();
                if m.len() > 64 {
                    m.remove(0);
                }
                m.push((id, attrs.metadata()));
            });
            Id::from_u64(id)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, _: &Event<'_>) {}
        fn enter(&self, span: &Id) {
            let id = span.into_u64();
            let meta = META.with(|m| m.borrow().iter().rev().find(|(i, _)| *i == id).map(|(_, m)| *m));
            if let Some(meta) = meta {
                STACK.with(|s| s.borrow_mut().push((id, meta)));
            }
        }
        fn exit(&self, span: &Id) {
            STACK.with(|s| {
                let mut s = s.borrow_mut();
                if s.last().is_some_and(|(i, _)| *i == span.into_u64()) {
                    s.pop();
                }
            });
        }
        fn current_span(&self) -> tracing_core::span::Current {
            match STACK.with(|s| s.borrow().last().copied()) {
                Some((id, meta)) => tracing_core::span::Current::new(Id::from_u64(id), meta),
                None => tracing_core::span::Current::none(),
            }
        }
    }

    pub fn install() {
        let _ = tracing::subscriber::set_global_default(Minimal { next: AtomicU64::new(1) });
    }
}
