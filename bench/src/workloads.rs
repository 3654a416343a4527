//! The workloads. Each measures the same thing through every column that
//! applies; the raw column uses `windows-sys` directly.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, mpsc};
use std::time::Instant;

use windows_sys::Win32::Foundation::{CloseHandle, FILETIME, HANDLE};
use windows_sys::Win32::System::Performance::{QueryPerformanceCounter, QueryPerformanceFrequency};
use windows_sys::Win32::System::Threading::*;
use windows_threadpool::Deadline;
use windows_threadpool::Work;
use windows_threadpool::cleanup_group::CleanupGroup;
use windows_threadpool::timer::{PeriodicTimer, Timer};
use windows_threadpool::wait::{Event, Wait, WaitActivation};

use crate::report::{CRATE, Cell, RAW, RAYON, STD, Table, WINDOWS_THREADING};

pub struct Config {
    pub trials: usize,
    /// Multiplies every count (`--quick` shrinks it).
    pub scale: f64,
}

impl Config {
    pub fn n(&self, full: usize) -> usize {
        ((full as f64 * self.scale) as usize).max(10)
    }
}

pub fn run_all(cfg: &Config, table: &mut Table) {
    work_throughput(cfg, table);
    work_latency(cfg, table);
    timer_latency(cfg, table);
    periodic_jitter(cfg, table);
    wait_latency(cfg, table);
    crate::io_workload::run(cfg, table);
    create_rows(cfg, table);
    crate::task_workload::run(cfg, table);
    crate::async_workload::run(cfg, table);
    // Last before the trace rows: the first safe cancellation starts the
    // self-heal healer (a 250 ms timer), which then runs for the process's life.
    cancellation(cfg, table);
    trace_cost(cfg, table);
    crate::tracing_workload::run(cfg, table);
}

/// Every create + drop row (7): work, wait, timers, cleanup group.
pub fn create_rows(cfg: &Config, table: &mut Table) {
    create_drop(cfg, table);
    timer_create_drop(cfg, table);
    group_create_release(cfg, table);
}

/// Nanoseconds on the performance counter.
pub fn now_ns() -> u64 {
    static FREQ: AtomicU64 = AtomicU64::new(0);
    let mut f = FREQ.load(Relaxed);
    if f == 0 {
        let mut q = 0i64;
        // SAFETY: valid out pointer.
        unsafe { QueryPerformanceFrequency(&mut q) };
        f = q as u64;
        FREQ.store(f, Relaxed);
    }
    let mut c = 0i64;
    // SAFETY: valid out pointer.
    unsafe { QueryPerformanceCounter(&mut c) };
    ((c as u128 * 1_000_000_000) / f as u128) as u64
}

fn spin_until(counter: &AtomicUsize, n: usize) {
    while counter.load(Acquire) < n {
        std::thread::yield_now();
    }
}

/// A pool of plain `std` threads fed by a channel: the baseline a user writes by hand.
struct StdPool {
    tx: Option<mpsc::Sender<Box<dyn FnOnce() + Send>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl StdPool {
    fn new(n: usize) -> Self {
        let (tx, rx) = mpsc::channel::<Box<dyn FnOnce() + Send>>();
        let rx = Arc::new(std::sync::Mutex::new(rx));
        let threads = (0..n)
            .map(|_| {
                let rx = Arc::clone(&rx);
                std::thread::spawn(move || {
                    loop {
                        let job = rx.lock().unwrap().recv();
                        match job {
                            Ok(f) => f(),
                            Err(_) => break,
                        }
                    }
                })
            })
            .collect();
        Self { tx: Some(tx), threads }
    }
    fn submit(&self, f: impl FnOnce() + Send + 'static) {
        self.tx.as_ref().unwrap().send(Box::new(f)).unwrap();
    }
}

impl Drop for StdPool {
    fn drop(&mut self) {
        self.tx = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

unsafe extern "system" fn raw_count(_: PTP_CALLBACK_INSTANCE, ctx: *mut core::ffi::c_void, _: PTP_WORK) {
    // SAFETY: ctx is the AtomicUsize the benchmark keeps alive until the drain.
    unsafe { &*(ctx as *const AtomicUsize) }.fetch_add(1, Release);
}

/// 1. Work throughput: N submissions of a trivial callback, then a wait. ns per submission.
fn work_throughput(cfg: &Config, table: &mut Table) {
    let n = cfg.n(200_000);
    let per = |elapsed: std::time::Duration| elapsed.as_nanos() as f64 / n as f64;
    let mut cols: [Vec<f64>; 5] = Default::default();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    // The first trial warms every pool up (thread creation) and is discarded.
    for trial in 0..=cfg.trials {
        // This crate.
        let count = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&count);
        let work = Work::new(move |_| {
            c.fetch_add(1, Release);
        })
        .unwrap();
        let t = Instant::now();
        for _ in 0..n {
            work.submit();
        }
        work.wait();
        cols[CRATE].push(per(t.elapsed()));
        assert_eq!(count.load(Acquire), n);
        drop(work);

        // Raw.
        let count = AtomicUsize::new(0);
        // SAFETY: the counter outlives the work object, which is drained and closed below.
        unsafe {
            let w = CreateThreadpoolWork(Some(raw_count), &count as *const _ as *mut _, core::ptr::null());
            assert_ne!(w, 0);
            let t = Instant::now();
            for _ in 0..n {
                SubmitThreadpoolWork(w);
            }
            WaitForThreadpoolWorkCallbacks(w, 0);
            cols[RAW].push(per(t.elapsed()));
            CloseThreadpoolWork(w);
        }
        assert_eq!(count.load(Acquire), n);

        // windows-threading.
        let count = Arc::new(AtomicUsize::new(0));
        let t = Instant::now();
        for _ in 0..n {
            let c = Arc::clone(&count);
            windows_threading::submit(move || {
                c.fetch_add(1, Release);
            });
        }
        spin_until(&count, n);
        cols[WINDOWS_THREADING].push(per(t.elapsed()));

        // rayon.
        let count = Arc::new(AtomicUsize::new(0));
        let t = Instant::now();
        for _ in 0..n {
            let c = Arc::clone(&count);
            rayon::spawn(move || {
                c.fetch_add(1, Release);
            });
        }
        spin_until(&count, n);
        cols[RAYON].push(per(t.elapsed()));

        // std threads + channel.
        let pool = StdPool::new(threads);
        let count = Arc::new(AtomicUsize::new(0));
        let t = Instant::now();
        for _ in 0..n {
            let c = Arc::clone(&count);
            pool.submit(move || {
                c.fetch_add(1, Release);
            });
        }
        spin_until(&count, n);
        cols[STD].push(per(t.elapsed()));
        if trial == 0 {
            cols.iter_mut().for_each(Vec::clear);
        }
    }
    table.add(format!("1. work throughput ({n} submits + wait)"), "ns/submit", cols.map(|v| Some(Cell::trials(v))));
}

/// 2. Work latency: one submission at a time, submit to callback entry.
fn work_latency(cfg: &Config, table: &mut Table) {
    let n = cfg.n(5_000);
    let mut cols: [Option<Cell>; 5] = Default::default();

    let entered = Arc::new(AtomicU64::new(0));
    let e = Arc::clone(&entered);
    let work = Work::new(move |_| e.store(now_ns(), Release)).unwrap();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        entered.store(0, Release);
        let t0 = now_ns();
        work.submit();
        work.wait();
        samples.push((entered.load(Acquire) - t0) as f64 / 1000.0);
    }
    cols[CRATE] = Some(Cell::latency(samples));

    unsafe extern "system" fn raw_stamp(_: PTP_CALLBACK_INSTANCE, ctx: *mut core::ffi::c_void, _: PTP_WORK) {
        // SAFETY: ctx is the AtomicU64 kept alive until the drain.
        unsafe { &*(ctx as *const AtomicU64) }.store(now_ns(), Release);
    }
    let stamp = AtomicU64::new(0);
    let mut samples = Vec::with_capacity(n);
    // SAFETY: the stamp outlives the work object, drained and closed below.
    unsafe {
        let w = CreateThreadpoolWork(Some(raw_stamp), &stamp as *const _ as *mut _, core::ptr::null());
        for _ in 0..n {
            stamp.store(0, Release);
            let t0 = now_ns();
            SubmitThreadpoolWork(w);
            WaitForThreadpoolWorkCallbacks(w, 0);
            samples.push((stamp.load(Acquire) - t0) as f64 / 1000.0);
        }
        CloseThreadpoolWork(w);
    }
    cols[RAW] = Some(Cell::latency(samples));

    let measure = |submit: &dyn Fn(Arc<AtomicU64>)| {
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let s = Arc::new(AtomicU64::new(0));
            let t0 = now_ns();
            submit(Arc::clone(&s));
            let mut v;
            loop {
                v = s.load(Acquire);
                if v != 0 {
                    break;
                }
                std::hint::spin_loop();
            }
            samples.push((v - t0) as f64 / 1000.0);
        }
        Cell::latency(samples)
    };
    cols[WINDOWS_THREADING] = Some(measure(&|s| windows_threading::submit(move || s.store(now_ns(), Release))));
    cols[RAYON] = Some(measure(&|s| rayon::spawn(move || s.store(now_ns(), Release))));
    let pool = StdPool::new(2);
    cols[STD] = Some(measure(&|s| pool.submit(move || s.store(now_ns(), Release))));
    table.add(format!("2. work latency ({n} single submits)"), "µs submit→entry", cols);
}

/// Paired trials of a create + drop row: `trials` pairs of runs of the
/// crate's loop and the raw loop, alternating which runs first (so a drift
/// of the machine's speed weighs on both alike). Returns ns per object.
fn paired_trials(trials: usize, mut crate_run: impl FnMut() -> f64, mut raw_run: impl FnMut() -> f64) -> [Vec<f64>; 2] {
    let (mut c, mut r) = (Vec::with_capacity(trials), Vec::with_capacity(trials));
    for i in 0..trials {
        if i % 2 == 0 {
            c.push(crate_run());
            r.push(raw_run());
        } else {
            r.push(raw_run());
            c.push(crate_run());
        }
    }
    [c, r]
}

/// Adds a create + drop row and, below it, the crate's share of it (the
/// crate's time minus the raw time of the same trial).
fn add_create_rows(table: &mut Table, what: &str, [c, r]: [Vec<f64>; 2]) {
    let share = Cell::difference(&c, &r);
    table.add(
        format!("7. create + drop: {what}"),
        "ns/object",
        [Some(Cell::trials(c)), Some(Cell::trials(r)), None, None, None],
    );
    table.add(
        format!("7b. the crate's own share of 7. {what}: minus the raw calls of the same trial"),
        "ns/object",
        [Some(share), None, None, None, None],
    );
}

/// Trials of a create + drop row: many short ones, so that the paired
/// differences have a median worth reading.
const CREATE_TRIALS: usize = 4;

/// 7. Create + drop of each object type.
pub fn create_drop(cfg: &Config, table: &mut Table) {
    // A pair costs 0.2 to 1 µs: 50,000 make a trial long enough (10 to 50
    // ms) that one descheduling does not move its mean.
    let n = cfg.n(50_000);
    let crate_run = || {
        let t = Instant::now();
        for _ in 0..n {
            drop(Work::new(|_| {}).unwrap());
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    let raw_run = || {
        let t = Instant::now();
        for _ in 0..n {
            // SAFETY: created, drained and closed with no callback pending.
            unsafe {
                let w = CreateThreadpoolWork(Some(raw_count), core::ptr::null_mut(), core::ptr::null());
                WaitForThreadpoolWorkCallbacks(w, 0);
                CloseThreadpoolWork(w);
            }
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    add_create_rows(table, "work", paired_trials(CREATE_TRIALS * cfg.trials, crate_run, raw_run));

    // A wait's event costs wineserver round trips (about 0.2 ms a pair).
    let n = cfg.n(5_000);
    let mut cols: [Vec<f64>; 5] = Default::default();
    unsafe extern "system" fn raw_nop(_: PTP_CALLBACK_INSTANCE, _: *mut core::ffi::c_void, _: PTP_WAIT, _: u32) {}
    for _ in 0..cfg.trials {
        // The event is part of both: a wait owns its handle.
        let t = Instant::now();
        for _ in 0..n {
            let w = Wait::new(Event::auto_reset().unwrap().into(), |_| {}).unwrap();
            drop(w);
        }
        cols[CRATE].push(t.elapsed().as_nanos() as f64 / n as f64);
        let t = Instant::now();
        for _ in 0..n {
            // SAFETY: created, disarmed, drained and closed with no callback pending.
            unsafe {
                let e = CreateEventW(core::ptr::null(), 0, 0, core::ptr::null());
                let w = CreateThreadpoolWait(Some(raw_nop), core::ptr::null_mut(), core::ptr::null());
                SetThreadpoolWait(w, core::ptr::null_mut(), core::ptr::null());
                WaitForThreadpoolWaitCallbacks(w, 0);
                CloseThreadpoolWait(w);
                CloseHandle(e);
            }
        }
        cols[RAW].push(t.elapsed().as_nanos() as f64 / n as f64);
    }
    let [c, r, ..] = cols;
    table.add(
        "7. create + drop: wait (with its event)",
        "ns/object",
        [Some(Cell::trials(c)), Some(Cell::trials(r)), None, None, None],
    );
}

/// Workload 5: an auto-reset event signalled to wait-callback entry, with a
/// re-arm per activation.
fn wait_latency(cfg: &Config, table: &mut Table) {
    let n = cfg.n(5_000);
    let mut cols: [Option<Cell>; 5] = Default::default();
    let spin = |stamp: &AtomicU64| loop {
        let v = stamp.load(Acquire);
        if v != 0 {
            return v;
        }
        std::hint::spin_loop();
    };

    let event = Event::auto_reset().unwrap();
    let stamp = Arc::new(AtomicU64::new(0));
    let s = Arc::clone(&stamp);
    let wait = Wait::new(event.try_clone().unwrap().into(), move |act: &WaitActivation<'_>| {
        s.store(now_ns(), Release);
        let _ = act.rearm(Deadline::NEVER);
    })
    .unwrap();
    wait.arm(Deadline::NEVER);
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        stamp.store(0, Release);
        let t0 = now_ns();
        event.set().unwrap();
        samples.push((spin(&stamp) - t0) as f64 / 1000.0);
    }
    wait.stop_and_drain();
    drop(wait);
    cols[CRATE] = Some(Cell::latency(samples));

    struct RawCtx {
        stamp: AtomicU64,
        event: HANDLE,
    }
    unsafe extern "system" fn raw_wait(_: PTP_CALLBACK_INSTANCE, ctx: *mut core::ffi::c_void, wait: PTP_WAIT, _: u32) {
        // SAFETY: ctx is the RawCtx kept alive until the wait is drained and closed.
        let ctx = unsafe { &*(ctx as *const RawCtx) };
        ctx.stamp.store(now_ns(), Release);
        // SAFETY: re-arming the live wait from its own callback.
        unsafe { SetThreadpoolWait(wait, ctx.event, core::ptr::null()) };
    }
    // SAFETY: the context outlives the wait, which is disarmed, drained and closed below.
    unsafe {
        let event = CreateEventW(core::ptr::null(), 0, 0, core::ptr::null());
        let ctx = RawCtx { stamp: AtomicU64::new(0), event };
        let w = CreateThreadpoolWait(Some(raw_wait), &ctx as *const _ as *mut _, core::ptr::null());
        SetThreadpoolWait(w, event, core::ptr::null());
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            ctx.stamp.store(0, Release);
            let t0 = now_ns();
            SetEvent(event);
            samples.push((spin(&ctx.stamp) - t0) as f64 / 1000.0);
        }
        SetThreadpoolWait(w, core::ptr::null_mut(), core::ptr::null());
        WaitForThreadpoolWaitCallbacks(w, 0);
        CloseThreadpoolWait(w);
        CloseHandle(event);
        cols[RAW] = Some(Cell::latency(samples));
    }
    table.add(format!("5. wait latency ({n} signals, re-armed each time)"), "µs SetEvent→entry", cols);
}

/// 7. Create + drop of a cleanup group of 1,000 work members.
fn group_create_release(cfg: &Config, table: &mut Table) {
    let members = 1000;
    // About 0.5 ms a group: 50 of them make a trial.
    let groups = cfg.n(50);
    let mut cols: [Vec<f64>; 5] = Default::default();
    for _ in 0..cfg.trials {
        let t = Instant::now();
        for _ in 0..groups {
            let mut group = CleanupGroup::new().unwrap();
            for _ in 0..members {
                let _ = group.create_work(|_| {}).unwrap();
            }
            group.close_members();
            drop(group);
        }
        cols[CRATE].push(t.elapsed().as_nanos() as f64 / 1000.0 / groups as f64);

        let t = Instant::now();
        for _ in 0..groups {
            // SAFETY: members are created in the group and released by it; no callback is pending.
            unsafe {
                let g = CreateThreadpoolCleanupGroup();
                let mut env: TP_CALLBACK_ENVIRON_V3 = core::mem::zeroed();
                env.Version = 3;
                env.CallbackPriority = TP_CALLBACK_PRIORITY_NORMAL;
                env.Size = size_of::<TP_CALLBACK_ENVIRON_V3>() as u32;
                env.CleanupGroup = g;
                for _ in 0..members {
                    CreateThreadpoolWork(Some(raw_count), core::ptr::null_mut(), &env);
                }
                CloseThreadpoolCleanupGroupMembers(g, 0, core::ptr::null_mut());
                CloseThreadpoolCleanupGroup(g);
            }
        }
        cols[RAW].push(t.elapsed().as_nanos() as f64 / 1000.0 / groups as f64);
    }
    let [c, r, ..] = cols;
    table.add(
        format!("7. cleanup group: create {members} work members + release"),
        "µs/group",
        [Some(Cell::trials(c)), Some(Cell::trials(r)), None, None, None],
    );
}

/// Workload 8: the cost of one trace record, on one thread and on two at
/// once, in whatever state this build and process are in: feature off,
/// disarmed (feature on, filter unset) or armed (`WINDOWS_THREADPOOL_TRACE=*`).
pub fn trace_cost(cfg: &Config, table: &mut Table) {
    use windows_threadpool::trace;
    let state = if !cfg!(feature = "trace") {
        "feature off"
    } else if trace::enabled() {
        "armed"
    } else {
        "disarmed"
    };
    let n = cfg.n(1_000_000);
    let run = |i: u64| {
        let t = Instant::now();
        for k in 0..n as u64 {
            trace::record("work", "submitted", std::hint::black_box(k), i);
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    for threads in [1, 2] {
        let mut v = Vec::new();
        for _ in 0..cfg.trials {
            trace::clear();
            let per: Vec<f64> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads).map(|i| s.spawn(move || run(i))).collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            v.push(per.iter().sum::<f64>() / per.len() as f64);
        }
        table.add(
            format!("8. trace record, {state}, {threads} thread{}", if threads > 1 { "s at once" } else { "" }),
            "ns/record",
            [Some(Cell::trials(v)), None, None, None, None],
        );
    }
}

/// Spins until `stamp` is non-zero and returns it.
fn spin_stamp(stamp: &AtomicU64) -> u64 {
    loop {
        let v = stamp.load(Acquire);
        if v != 0 {
            return v;
        }
        std::hint::spin_loop();
    }
}

/// A `FILETIME` holding the raw signed 100 ns count the timer API reads
/// (negative: relative, 0: immediately).
pub fn filetime(v: i64) -> FILETIME {
    FILETIME { dwLowDateTime: v as u32, dwHighDateTime: (v >> 32) as u32 }
}

unsafe extern "system" fn raw_timer_stamp(_: PTP_CALLBACK_INSTANCE, ctx: *mut core::ffi::c_void, _: PTP_TIMER) {
    // SAFETY: ctx is the AtomicU64 kept alive until the timer is drained and closed.
    unsafe { &*(ctx as *const AtomicU64) }.store(now_ns(), Release);
}

/// Workload 3, one-shot timer: arm to callback entry, one arming at a time, for a
/// zero delay ("immediately"), a 1 ms delay, and a 0.1 ms delay (which shows
/// the timer's granularity: it fires when the pool's timer next looks, not
/// after 100 µs).
fn timer_latency(cfg: &Config, table: &mut Table) {
    for (delay_us, full) in [(0u64, 5_000), (100, 1_000), (1_000, 1_000)] {
        let n = cfg.n(full);
        let delay = std::time::Duration::from_micros(delay_us);
        let mut cols: [Option<Cell>; 5] = Default::default();

        let stamp = Arc::new(AtomicU64::new(0));
        let s = Arc::clone(&stamp);
        let timer = Timer::new(move |_| s.store(now_ns(), Release)).unwrap();
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            stamp.store(0, Release);
            let t0 = now_ns();
            timer.arm(delay);
            samples.push((spin_stamp(&stamp) - t0) as f64 / 1000.0);
        }
        timer.stop_and_drain();
        drop(timer);
        cols[CRATE] = Some(Cell::latency(samples));

        let stamp = AtomicU64::new(0);
        // The same rounding as the crate: whole 100 ns units, negative = relative.
        let due = filetime(-((delay_us * 10) as i64));
        let mut samples = Vec::with_capacity(n);
        // SAFETY: the stamp outlives the timer, which is disarmed, drained and closed below.
        unsafe {
            let t = CreateThreadpoolTimer(Some(raw_timer_stamp), &stamp as *const _ as *mut _, core::ptr::null());
            assert_ne!(t, 0);
            for _ in 0..n {
                stamp.store(0, Release);
                let t0 = now_ns();
                SetThreadpoolTimer(t, &due, 0, 0);
                samples.push((spin_stamp(&stamp) - t0) as f64 / 1000.0);
            }
            SetThreadpoolTimer(t, core::ptr::null(), 0, 0);
            WaitForThreadpoolTimerCallbacks(t, 0);
            CloseThreadpoolTimer(t);
        }
        cols[RAW] = Some(Cell::latency(samples));
        let what = match delay_us {
            0 => "0 ms (immediately)".to_string(),
            d if d < 1000 => format!("{} ms", d as f64 / 1000.0),
            d => format!("{} ms", d / 1000),
        };
        table.add(format!("3. one-shot timer armed for {what} ({n} armings)"), "µs arm→entry", cols);
    }
}

/// Tick timestamps of a periodic timer, written by its callback.
struct Ticks {
    stamps: Vec<AtomicU64>,
    next: AtomicUsize,
}

impl Ticks {
    fn new(cap: usize) -> Self {
        Self { stamps: (0..cap).map(|_| AtomicU64::new(0)).collect(), next: AtomicUsize::new(0) }
    }
    fn tick(&self) {
        let i = self.next.fetch_add(1, Relaxed);
        if let Some(s) = self.stamps.get(i) {
            s.store(now_ns(), Release);
        }
    }
    /// The tick timestamps in ns, sorted (ticks may overlap and finish out of order).
    fn take(&self) -> Vec<u64> {
        let n = self.next.load(Acquire).min(self.stamps.len());
        let mut v: Vec<u64> = self.stamps[..n].iter().map(|s| s.load(Acquire)).filter(|&t| t != 0).collect();
        v.sort_unstable();
        v
    }
}

/// Workload 4, periodic timer: 1 ms period for 1 s; the jitter is `|interval − period|`
/// for consecutive ticks (all trials' intervals pooled), and the tick
/// count per run shows whether the cadence holds.
fn periodic_jitter(cfg: &Config, table: &mut Table) {
    const PERIOD_NS: u64 = 1_000_000;
    let run_for = std::time::Duration::from_secs_f64(cfg.scale.max(0.05));
    let trials = cfg.trials.min(3);
    let cap = (run_for.as_secs_f64() * 4_000.0) as usize + 100;
    let mut jitter: [Vec<f64>; 2] = Default::default();
    let mut counts: [Vec<f64>; 2] = Default::default();
    let mut record = |col: usize, stamps: Vec<u64>| {
        counts[col].push(stamps.len() as f64);
        jitter[col].extend(stamps.windows(2).map(|w| (w[1] - w[0]).abs_diff(PERIOD_NS) as f64 / 1000.0));
    };
    unsafe extern "system" fn raw_tick(_: PTP_CALLBACK_INSTANCE, ctx: *mut core::ffi::c_void, _: PTP_TIMER) {
        // SAFETY: ctx is the Ticks kept alive until the timer is stopped, drained and closed.
        unsafe { &*(ctx as *const Ticks) }.tick();
    }
    for _ in 0..trials {
        let ticks = Arc::new(Ticks::new(cap));
        let t = Arc::clone(&ticks);
        let timer = PeriodicTimer::new(std::time::Duration::from_millis(1), move |_| t.tick()).unwrap();
        timer.arm(timer.period());
        std::thread::sleep(run_for);
        timer.stop_and_drain();
        drop(timer);
        record(CRATE, ticks.take());

        let ticks = Ticks::new(cap);
        // SAFETY: the ticks outlive the timer, which is stopped, drained and closed below.
        unsafe {
            let t = CreateThreadpoolTimer(Some(raw_tick), &ticks as *const _ as *mut _, core::ptr::null());
            assert_ne!(t, 0);
            // As `start()`: first tick one period from now, 1 ms period, no window.
            let due = filetime(-((PERIOD_NS / 100) as i64));
            SetThreadpoolTimer(t, &due, 1, 0);
            std::thread::sleep(run_for);
            SetThreadpoolTimer(t, core::ptr::null(), 0, 0);
            WaitForThreadpoolTimerCallbacks(t, 0);
            CloseThreadpoolTimer(t);
        }
        record(RAW, ticks.take());
    }
    let [jc, jr] = jitter;
    table.add(
        format!(
            "4. periodic timer, 1 ms period for {} ms: jitter, each interval's distance from the period",
            run_for.as_millis()
        ),
        "µs",
        [Some(Cell::latency(jc)), Some(Cell::latency(jr)), None, None, None],
    );
    let [cc, cr] = counts;
    table.add(
        format!("4. periodic timer, 1 ms period for {} ms: ticks per run ({trials} runs)", run_for.as_millis()),
        "ticks",
        [Some(Cell::trials(cc)), Some(Cell::trials(cr)), None, None, None],
    );
}

/// Workload 7, create + drop of a one-shot and of a periodic timer (never armed). The
/// raw column does what the crate's teardown does: disarm, drain, close.
fn timer_create_drop(cfg: &Config, table: &mut Table) {
    let n = cfg.n(50_000);
    unsafe extern "system" fn raw_nop(_: PTP_CALLBACK_INSTANCE, _: *mut core::ffi::c_void, _: PTP_TIMER) {}
    let raw = || {
        let t = Instant::now();
        for _ in 0..n {
            // SAFETY: created, disarmed, drained and closed with no callback pending.
            unsafe {
                let t = CreateThreadpoolTimer(Some(raw_nop), core::ptr::null_mut(), core::ptr::null());
                SetThreadpoolTimer(t, core::ptr::null(), 0, 0);
                WaitForThreadpoolTimerCallbacks(t, 0);
                CloseThreadpoolTimer(t);
            }
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    let one_shot = || {
        let t = Instant::now();
        for _ in 0..n {
            drop(Timer::new(|_| {}).unwrap());
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    let periodic = || {
        let t = Instant::now();
        for _ in 0..n {
            drop(PeriodicTimer::new(std::time::Duration::from_millis(1), |_| {}).unwrap());
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    let trials = CREATE_TRIALS * cfg.trials;
    add_create_rows(table, "one-shot timer", paired_trials(trials, one_shot, raw));
    add_create_rows(table, "periodic timer", paired_trials(trials, periodic, raw));
}

/// Workload 9, cancellation of an armed wait with nothing queued (its event is never
/// signalled): the cost of the call itself. The crate's safe
/// `try_cancel_pending` also stamps the pool for the self-heal repair; the
/// `try_cancel_pending_without_heal` does not; the raw column is
/// `WaitForThreadpoolWaitCallbacks(.., TRUE)`.
fn cancellation(cfg: &Config, table: &mut Table) {
    let n = cfg.n(20_000);
    let mut heal = Vec::new();
    let mut no_heal = Vec::new();
    let mut raw = Vec::new();
    unsafe extern "system" fn raw_nop(_: PTP_CALLBACK_INSTANCE, _: *mut core::ffi::c_void, _: PTP_WAIT, _: u32) {}
    let wait = Wait::new(Event::auto_reset().unwrap().into(), |_| {}).unwrap();
    wait.arm(Deadline::NEVER);
    // The first safe cancellation starts the healer: keep that out of the trials.
    wait.try_cancel_pending();
    for _ in 0..cfg.trials {
        let t = Instant::now();
        for _ in 0..n {
            wait.try_cancel_pending();
        }
        heal.push(t.elapsed().as_nanos() as f64 / n as f64);

        let t = Instant::now();
        for _ in 0..n {
            // The pool dispatches again: the self-heal stamps above (and
            // every cancellation here queued nothing to lose).
            wait.try_cancel_pending_without_heal();
        }
        no_heal.push(t.elapsed().as_nanos() as f64 / n as f64);

        // SAFETY: the event outlives the wait, which is disarmed, drained and closed below.
        unsafe {
            let e = CreateEventW(core::ptr::null(), 0, 0, core::ptr::null());
            let w = CreateThreadpoolWait(Some(raw_nop), core::ptr::null_mut(), core::ptr::null());
            SetThreadpoolWait(w, e, core::ptr::null());
            let t = Instant::now();
            for _ in 0..n {
                WaitForThreadpoolWaitCallbacks(w, 1);
            }
            raw.push(t.elapsed().as_nanos() as f64 / n as f64);
            SetThreadpoolWait(w, core::ptr::null_mut(), core::ptr::null());
            WaitForThreadpoolWaitCallbacks(w, 0);
            CloseThreadpoolWait(w);
            CloseHandle(e);
        }
    }
    wait.stop_and_drain();
    drop(wait);
    let raw = Cell::trials(raw);
    table.add(
        "9. cancel an armed wait, nothing queued: try_cancel_pending (self-heal)",
        "ns/call",
        [Some(Cell::trials(heal)), Some(raw.clone()), None, None, None],
    );
    table.add(
        "9. cancel an armed wait, nothing queued: try_cancel_pending_without_heal",
        "ns/call",
        [Some(Cell::trials(no_heal)), Some(raw), None, None, None],
    );
}
