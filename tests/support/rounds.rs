//! The rounds of hostile-client scenarios, whatever the server: a
//! scenario ([`Scenario`]) runs its load in rounds, alone
//! ([`Scenario::run`]) or beside others of the same server ([`run_all`]),
//! each phase on a server of its own ([`Server`]). The HTTP server's
//! scenarios are `hostile.rs`'s, the named-pipe server's `pipe_hostile.rs`'s.
//!
//! The first round warms the process up and is not measured: the allocator
//! keeps what a burst of connections took, and the pool the threads it
//! made, for a while. The others must end the way every scenario ends:
//! every connection the server accepted has ended, a new well-behaved
//! client is answered within [`PROMPTLY`], no close was handed to another
//! thread to wait for a completion (`windows_threadpool::handoffs`), and,
//! once the process is back to the threads it had before them (a pool
//! thread holds about 1 MiB), its handles and memory are back within the
//! leak checks' slack: the Rust heap's live blocks where the binary counts
//! them (`leak::CountingAlloc`), the memory held (the committed private
//! memory, `VirtualQuery`, but what the process heap keeps free: it grows
//! to a burst's peak and keeps it), and, but under Wine, the private bytes.
//! Under Wine 8 the private bytes are the Linux process's anonymous
//! resident memory, which counts Wine's own Unix-side allocations and keeps
//! a burst's peak (600 resets mid-body: +18 MB, with the commit +0.5 MB and
//! the Rust heap's blocks back; docs/wine.md): they are reported, not
//! checked; and Wine keeps about 64 KiB for each thread of the most the
//! process has had at once, which a round that goes past the warm-up's peak
//! is allowed, and what [`Server::WINE_BYTES_PER_CONNECTION`] says for each
//! connection. Hostile clients run on threads of their own ([`off_pool`]),
//! not on the pool, so the pool's threads are the server's (and its
//! well-behaved clients').
//!
//! A run reads process-wide counts: it must have a process of its own
//! (`support::alone`; the stress harness under nextest runs each scenario
//! in a process of its own). Scenarios run together share one baseline and
//! one leak check, so `cargo xtask stress`, which runs each alone, is where
//! a leak is put down to its scenario. Include it beside `support` and
//! `leak`.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use windows_threadpool::{task, time};

use crate::leak as process;
use crate::support;

/// How long a new well-behaved client's request may take, during a
/// scenario and after it. Under Wine one takes a few milliseconds (an HTTP
/// `GET /`: connect, request, answer; the slowest seen, 652 ms, beside 500
/// slowloris clients); a server queued behind its hostile clients takes
/// their timeouts (10 s) or the test's patience. Room is left for a loaded
/// 2-core machine.
pub const PROMPTLY: Duration = Duration::from_secs(5);

/// How long the threads a round added may take to idle out (Wine ends an
/// idle pool thread 5 s after it was last woken).
pub const SETTLE: Duration = Duration::from_secs(30);

/// Under Wine 8, the committed private memory a process keeps for each
/// thread of the most it has had at once, once they have exited (measured:
/// bursts of 50, 100 and 200 pool threads left +3.1, +6.4 and +12.9 MB;
/// a second burst of the same size, nothing more; docs/wine.md). A round
/// whose threads peak above the warm-up's is allowed that much more.
pub const WINE_THREAD_BYTES: usize = 64 << 10;

/// How long Wine's pool keeps an idle thread.
pub const IDLE_OUT: Duration = Duration::from_secs(5);

/// A thread count unchanged this long is the pool at rest.
pub const STILL: Duration = Duration::from_secs(6);

/// Polls the thread count every 100 ms from this thread, with the pool
/// left alone (Wine ends an idle pool thread 5 s after it was last woken,
/// and a timer of the pool's every few milliseconds would wake them in
/// turn and keep them), until `done(count, time it has held)` or
/// `patience`; whether it was done, and the counts seen (ms, threads).
pub fn settle(done: impl Fn(usize, Duration) -> bool, patience: Duration) -> (bool, Vec<(u128, usize)>) {
    let t = Instant::now();
    let mut seen: Vec<(u128, usize)> = Vec::new();
    let mut since = t;
    loop {
        let n = process::thread_ids().len();
        if seen.last().is_none_or(|&(_, m)| m != n) {
            seen.push((t.elapsed().as_millis(), n));
            since = Instant::now();
        }
        if done(n, since.elapsed()) {
            return (true, seen);
        }
        if t.elapsed() > patience {
            return (false, seen);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Idles for `idle`, then measures the footprint of what stayed open:
/// once the threads a burst added (each holds about 1 MiB) have idled out
/// back to `threads` (or held still for [`STILL`], as the pool may keep
/// one more while connections are open), when `idle` is at least
/// [`IDLE_OUT`]; after a shorter idle time they count. Returns the
/// footprint and the thread counts seen while waiting (ms, threads).
pub async fn after_idle(idle: Duration, threads: usize) -> (Footprint, Vec<(u128, usize)>) {
    time::sleep(idle).await;
    let seen = if idle >= IDLE_OUT { settle(|n, still| n <= threads || still >= STILL, SETTLE).1 } else { Vec::new() };
    (Footprint::memory(), seen)
}

/// Polls `done` every 10 ms until it holds; panics after `patience`.
pub async fn until(what: &str, patience: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + patience;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {patience:?}");
        time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits (at most `patience`) until `count()` reaches `value`, and checks
/// it did not pass it; `show` says what the server counted.
pub async fn reaches(what: &str, patience: Duration, count: impl Fn() -> u64, value: u64, show: impl Fn() -> String) {
    until(what, patience, || count() >= value).await;
    assert_eq!(count(), value, "{what}: {}", show());
}

/// Runs `f` on a thread of its own (not the pool's), awaits its result
/// and joins it (so it is gone from the thread count); a panic there is
/// resumed here.
pub async fn off_pool<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let thread = std::thread::spawn(move || drop(tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)))));
    let result = rx.await.expect("the client thread ended without a result");
    thread.join().unwrap();
    result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The process's threads, open handles (not threads), private bytes,
/// committed private memory and the part of it the process heap keeps
/// free, and the Rust heap's live blocks where they are counted.
#[derive(Debug, Clone, Copy)]
pub struct Footprint {
    pub threads: usize,
    pub handles: usize,
    pub private_bytes: usize,
    pub committed: usize,
    pub heap_free: usize,
    pub heap_blocks: Option<isize>,
}

impl Footprint {
    /// The committed private memory the process holds: but what its heap
    /// keeps free.
    pub fn held(&self) -> usize {
        self.committed.saturating_sub(self.heap_free)
    }

    /// Threads and memory only (counting handles takes 16,384 probes).
    pub fn memory() -> Self {
        Self {
            threads: process::thread_ids().len(),
            handles: 0,
            private_bytes: process::private_bytes(),
            committed: process::committed_private_bytes(),
            heap_free: process::heap_free_bytes(),
            heap_blocks: process::heap_blocks(),
        }
    }

    pub fn now() -> Self {
        Self {
            threads: process::thread_ids().len(),
            handles: process::handle_count(),
            private_bytes: process::private_bytes(),
            committed: process::committed_private_bytes(),
            heap_free: process::heap_free_bytes(),
            heap_blocks: process::heap_blocks(),
        }
    }
}

/// The largest thread count seen by a sampler thread (every 50 ms; a
/// Toolhelp snapshot takes about 8 ms under Wine), which counts itself out.
struct Peak {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicUsize>,
    sampler: std::thread::JoinHandle<()>,
}

impl Peak {
    fn start() -> Self {
        let (stop, peak) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let (s, p) = (stop.clone(), peak.clone());
        let sampler = std::thread::spawn(move || {
            while !s.load(SeqCst) {
                p.fetch_max(process::thread_ids().len() - 1, SeqCst);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Self { stop, peak, sampler }
    }

    fn stop(self) -> usize {
        self.stop.store(true, SeqCst);
        self.sampler.join().unwrap();
        self.peak.load(SeqCst)
    }
}

/// What a scenario measured.
#[derive(Debug)]
pub struct Report {
    pub name: &'static str,
    pub rounds: usize,
    /// The warm-up round's time, and its peak thread count.
    pub warm_up: (Duration, usize),
    /// The measured rounds' time.
    pub load: Duration,
    /// The connections the measured rounds (and the client after them) made.
    pub connections: usize,
    pub before: Footprint,
    /// The threads when the measured rounds began (above `before.threads`
    /// by what a scenario run before them left, still idling out).
    pub start_threads: usize,
    /// The measured rounds' peak thread count.
    pub peak_threads: usize,
    /// Teardowns the crate handed to another thread meanwhile
    /// (`windows_threadpool::handoffs`, a test hook).
    pub handoffs: usize,
    pub after: Footprint,
    /// How long the threads took to come back to `before.threads`.
    pub settled_in: Duration,
    /// The well-behaved client after the rounds.
    pub get_after: Duration,
    pub stats: String,
    /// The last round's own numbers.
    pub notes: String,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (b, a) = (&self.before, &self.after);
        let heap = match (b.heap_blocks, a.heap_blocks) {
            (Some(b), Some(a)) => format!("; heap blocks {b} -> {a}"),
            _ => String::new(),
        };
        write!(
            f,
            "{}: warm-up round {:.2}s (peak {} threads), {} rounds {:.2}s; {}; threads {} -> peak {} -> {} ({} hand-offs; settled \
             in {:.1}s); handles {} -> {}; held {} -> {} ({:+}; committed {:+}, of which the heap's free {:+}); \
             private bytes {} -> {} ({:+}){heap}; a new client after them in {:.1} ms; {}",
            self.name,
            self.warm_up.0.as_secs_f64(),
            self.warm_up.1,
            self.rounds,
            self.load.as_secs_f64(),
            self.notes,
            b.threads,
            self.peak_threads,
            a.threads,
            self.handoffs,
            self.settled_in.as_secs_f64(),
            b.handles,
            a.handles,
            b.held(),
            a.held(),
            a.held() as i64 - b.held() as i64,
            a.committed as i64 - b.committed as i64,
            a.heap_free as i64 - b.heap_free as i64,
            b.private_bytes,
            a.private_bytes,
            a.private_bytes as i64 - b.private_bytes as i64,
            self.get_after.as_secs_f64() * 1e3,
            self.stats
        )
    }
}

/// A server the scenarios of one kind run against, one for each phase.
pub trait Server: Sized + 'static {
    /// Its settings.
    type Setup: Copy + Send + Sync + 'static;
    /// What a round gets: where the server is, and its counters.
    type Target: Clone + Send + 'static;
    /// What Wine may keep for each connection the process has served
    /// (beside the leak checks' slack), with the crate's heap back.
    const WINE_BYTES_PER_CONNECTION: usize;
    fn start(setup: &Self::Setup) -> Self;
    fn target(&self) -> Self::Target;
    /// A new well-behaved client answered within [`PROMPTLY`]; its time.
    fn promptly(target: &Self::Target, during: &str) -> impl Future<Output = Duration>;
    /// Waits (at most [`support::PATIENCE`]) until every connection the
    /// server accepted has ended.
    fn all_ended(target: &Self::Target, what: &str) -> impl Future<Output = ()>;
    /// The connections it has had: those it accepted, and those its
    /// clients opened that it never saw (each counted in what Wine keeps).
    fn connections(&self) -> usize;
    /// Its counters, for the report.
    fn stats(&self) -> String;
    /// Stops it, and checks that every connection it accepted ended.
    fn stop(self) -> impl Future<Output = ()>;
}

/// The rounds of a scenario: `round(target, n)` runs round `n` (0 is the
/// warm-up) and returns its notes.
type Round<T> = Box<dyn Fn(T, usize) -> Pin<Box<dyn Future<Output = String> + Send>> + Send + Sync>;

/// A scenario: its server's settings and its rounds (each asserts what
/// its own load must do). Run alone ([`Scenario::run`]) or beside others
/// of the same server ([`run_all`]).
pub struct Scenario<S: Server> {
    name: &'static str,
    setup: S::Setup,
    /// Measured rounds, after the warm-up round.
    rounds: usize,
    /// How long the rounds may take (the settling and counting around them
    /// get [`run_all`]'s own allowance).
    limit: Duration,
    round: Round<S::Target>,
}

impl<S: Server> Scenario<S> {
    /// A scenario of `round`, `rounds` measured rounds within `limit`,
    /// against a server set up as `setup`.
    pub fn new<R, Fut>(name: &'static str, setup: S::Setup, rounds: usize, limit: Duration, round: R) -> Self
    where
        R: Fn(S::Target, usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = String> + Send + 'static,
    {
        Self { name, setup, rounds, limit, round: Box::new(move |t, r| Box::pin(round(t, r))) }
    }

    /// Runs this scenario alone; prints and returns its report.
    pub fn run(self) -> Report {
        run_all(vec![self]).pop().expect("one scenario, one report")
    }
}

/// One phase of a scenario on a server of its own, started as its setup
/// says and stopped once every connection has ended: the rounds
/// `rounds`, then a new well-behaved client.
async fn phase<S: Server>(
    s: &Scenario<S>,
    rounds: std::ops::RangeInclusive<usize>,
    step: &(dyn Fn(String) + Sync),
) -> Phase {
    let start_threads = process::thread_ids().len();
    let handoffs = windows_threadpool::handoffs();
    let server = S::start(&s.setup);
    let target = server.target();
    let peak = Peak::start();
    let t = Instant::now();
    let mut notes = String::new();
    for r in rounds {
        step(format!("{}: round {r}", s.name));
        notes = (s.round)(target.clone(), r).await;
        S::all_ended(&target, &format!("{}: round {r}'s connections ended", s.name)).await;
    }
    let load = t.elapsed();
    let get_after = S::promptly(&target, &format!("{}: after the rounds", s.name)).await;
    S::all_ended(&target, &format!("{}: the last client's connection ended", s.name)).await;
    let peak_threads = peak.stop();
    let stats = server.stats();
    let connections = server.connections();
    let handoffs = windows_threadpool::handoffs() - handoffs;
    server.stop().await;
    Phase { start_threads, handoffs, load, peak_threads, get_after, connections, stats, notes }
}

/// What one [`phase`] measured.
struct Phase {
    start_threads: usize,
    handoffs: usize,
    load: Duration,
    peak_threads: usize,
    /// The well-behaved client after the rounds.
    get_after: Duration,
    connections: usize,
    /// The server's counters.
    stats: String,
    /// The last round's notes.
    notes: String,
}

/// Runs each scenario's warm-up round (round 0), each on a server of its
/// own; waits for their threads to idle out and takes the baseline; runs
/// each scenario's measured rounds `1..=rounds`, again each on a server of
/// its own; and checks the end every scenario shares (see the module docs)
/// once, for all of them, and that none handed a teardown to another
/// thread (`windows_threadpool::handoffs`). One
/// settling each side serves every scenario (each takes Wine's pool 5 s of
/// idling out). Prints and returns the reports.
pub fn run_all<S: Server>(scenarios: Vec<Scenario<S>>) -> Vec<Report> {
    let started = Instant::now();
    let stage = Arc::new(std::sync::Mutex::new(String::from("starting")));
    let at = stage.clone();
    // Says on stderr where the run is, so a failure shows how far it got.
    let step = move |what: String| {
        eprintln!("hostile: {:.3}s: {what}", started.elapsed().as_secs_f64());
        *at.lock().unwrap() = what;
    };
    // The rounds' limits, and the settling and counting around them.
    let limit = scenarios.iter().map(|s| s.limit + support::PATIENCE).sum::<Duration>() + SETTLE * 2;
    let (scenarios, before, after, settled_in, measured) = task::block_on(time::timeout(limit, async move {
        let quiet = process::thread_ids().len();
        let mut warm = Vec::new();
        for s in &scenarios {
            let p = phase(s, 0..=0, &step).await;
            warm.push(((p.load, p.peak_threads), p.notes));
        }
        // Private bytes compare only at the same threads: the baseline is
        // taken once the warm-up's threads have idled out.
        step("waiting for the warm-up's threads to idle out".into());
        let (_, seen) = settle(|n, still| n <= quiet || still >= STILL, SETTLE);
        let before = Footprint::now();
        step(format!("baseline: {before:?}; idle out (ms, threads): {seen:?}"));
        let mut measured = Vec::new();
        for (s, (warm_up, warm_notes)) in scenarios.iter().zip(warm) {
            measured.push((warm_up, warm_notes, phase(s, 1..=s.rounds, &step).await));
        }
        step("waiting for the threads to settle".into());
        let t = Instant::now();
        let (settled, seen) = settle(|n, _| n <= before.threads, SETTLE);
        let back = before.threads;
        assert!(settled, "the threads did not come back to {back} within {SETTLE:?} (ms, threads): {seen:?}");
        (scenarios, before, Footprint::now(), t.elapsed(), measured)
    }))
    .unwrap_or_else(|_| panic!("not done within {limit:?}: stuck in {:?}", stage.lock().unwrap()));
    let reports: Vec<Report> = scenarios
        .iter()
        .zip(measured)
        .map(|(s, (w, warm_notes, m))| Report {
            name: s.name,
            rounds: s.rounds,
            warm_up: w,
            load: m.load,
            connections: m.connections,
            before,
            start_threads: m.start_threads,
            peak_threads: m.peak_threads,
            handoffs: m.handoffs,
            after,
            settled_in,
            get_after: m.get_after,
            stats: m.stats,
            notes: format!("{} (warm-up round: {warm_notes})", m.notes),
        })
        .collect();
    let all: Vec<String> = reports.iter().map(|r| r.to_string()).collect();
    let all = all.join("\n");
    println!("{all}");
    let (b, a) = (&before, &after);
    assert!(a.handles <= b.handles + process::POOL_HANDLE_SLACK, "handles leaked: {all}");
    if let (Some(b), Some(a)) = (b.heap_blocks, a.heap_blocks) {
        assert!(a <= b + process::HEAP_BLOCK_SLACK, "Rust heap blocks leaked: {all}");
    }
    let wine = if support::on_wine() {
        // Wine keeps memory for each thread of the most the process has had at once.
        let most = |f: fn(&Report) -> usize| reports.iter().map(f).max().unwrap_or(0);
        let new_peak = most(|r| r.peak_threads).saturating_sub(most(|r| r.warm_up.1).max(b.threads));
        let connections: usize = reports.iter().map(|r| r.connections).sum();
        new_peak * WINE_THREAD_BYTES + connections * S::WINE_BYTES_PER_CONNECTION
    } else {
        0
    };
    let slack = process::PRIVATE_BYTES_SLACK + wine;
    assert!(a.held() <= b.held() + slack, "memory leaked (slack {slack}): {all}");
    if !support::on_wine() {
        assert!(a.private_bytes <= b.private_bytes + process::PRIVATE_BYTES_SLACK, "private bytes leaked: {all}");
    }
    for r in &reports {
        // A connection's close waits for nothing on a thread of its own.
        assert_eq!(r.handoffs, 0, "{}: teardowns handed to another thread: {all}", r.name);
    }
    reports
}
