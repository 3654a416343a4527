//! Shared test support: the child-process harness.
//!
//! A test that must observe something only a separate process can show (an
//! abort, a panic's message on stderr, a trace armed by an environment
//! variable read once per process) calls [`child`] with its own name. In the
//! parent, `child` re-executes the test binary running just that test, with
//! [`CHILD_VAR`] naming it, and returns what the child did. In the child,
//! `child` runs the scenario and exits with [`CHILD_DONE`], a distinctive code,
//! so the parent can tell "the scenario ran to its end" from "the child never
//! reached it" (wrong test name, a filter that matched nothing).
//!
//! A test that reads process-wide state other tests change (the live
//! context and operation counts, a counting global allocator, the handle
//! count, the self-heal healer) wraps its body in [`alone`]: libtest runs a
//! binary's tests on parallel threads of one process (`cargo test`), nextest
//! runs each in a process of its own, and `alone` gives the body a process
//! of its own under both.
#![allow(dead_code)]

use std::process::Command;

mod start;
// Each test binary uses its own share of these.
use start::note_retry;
#[allow(unused_imports)]
pub(crate) use start::{failed_to_start, output, retry_start_with, spawn, spawn_died_starting};

/// Names the test whose scenario the child process runs.
pub const CHILD_VAR: &str = "WINDOWS_THREADPOOL_TEST_CHILD";
/// Exit code of a child whose scenario returned.
pub const CHILD_DONE: i32 = 0x5A;

/// What a child process did.
#[derive(Debug)]
pub struct ChildOutcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl ChildOutcome {
    /// The scenario returned and the child exited through [`child`].
    pub fn completed(&self) -> bool {
        self.code == Some(CHILD_DONE)
    }

    /// The child ended with the Windows exit status `status` (an NTSTATUS
    /// such as [`ABORT_STATUS`], or a process exit code).
    pub fn exited_with(&self, status: u32) -> bool {
        self.code == Some(status as i32)
    }

    /// Panics with the child's output unless it completed.
    #[track_caller]
    pub fn assert_completed(&self) {
        assert!(self.completed(), "child did not complete its scenario: {self:#?}");
    }
}

/// Runs `scenario` in a child process (see the module docs). `test` is the
/// test's full name as libtest knows it (for a test of an area binary's
/// module, `module::function`; at a binary's root, its function name).
pub fn child(test: &str, env: &[(&str, &str)], scenario: impl FnOnce()) -> ChildOutcome {
    if std::env::var(CHILD_VAR).as_deref() == Ok(test) {
        scenario();
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(CHILD_DONE);
    }
    let mut vars = vec![(CHILD_VAR, test)];
    vars.extend_from_slice(env);
    run_one(test, &vars)
}

/// Re-executes the test binary running just `test`, with `env` added and
/// [`CHILD_VAR`] removed unless `env` sets it.
fn run_one(test: &str, env: &[(&str, &str)]) -> ChildOutcome {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"]).env_remove(CHILD_VAR);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut out = output(&mut cmd).expect("spawn child test process");
    if failed_to_start(&out) {
        note_retry(&format!(
            "the child {test} exited with STATUS_DLL_INIT_FAILED having written nothing (Wine's start-up failure \
             signature); retrying once"
        ));
        out = output(&mut cmd).expect("spawn child test process");
    }
    ChildOutcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `body`, the whole of the test `test` (its full name as libtest
/// knows it), in a process that runs no other test. In place when this
/// process was started for `test` alone (nextest, or the re-execution
/// below); otherwise in a re-execution of the test binary running just
/// `test`, whose output is passed on and whose failure fails this test.
///
/// Unlike [`child`], the re-executed test is an ordinary libtest run: a
/// [`child`] inside `body` works as it does anywhere.
#[track_caller]
pub fn alone(test: &str, body: impl FnOnce()) {
    // libtest names a test's thread after the test: a wrong `test` would
    // re-execute some other test (or none) in place of this one.
    let thread = std::thread::current().name().map(str::to_owned);
    assert!(thread.as_deref().is_none_or(|t| t == test || t == "main"), "alone({test:?}) called from {thread:?}");
    if runs_only(test, std::env::args().skip(1)) {
        body();
        return;
    }
    let out = run_one(test, &[]);
    print!("{}", out.stdout);
    eprint!("{}", out.stderr);
    // libtest's own summary: a filter that matched nothing also exits 0.
    let ran = out.stdout.contains("test result: ok. 1 passed;");
    assert!(out.code == Some(0) && ran, "{test}, run alone in a child process, failed (exit {:?})", out.code);
}

/// Panics unless the current test (named by its libtest thread) runs in a
/// process of its own: code that reads process-wide counts calls it, so a
/// test that forgot [`alone`] fails under `cargo test` at once rather than
/// now and then.
#[track_caller]
pub fn assert_alone() {
    let test = std::thread::current().name().unwrap_or_default().to_owned();
    assert!(
        runs_only(&test, std::env::args().skip(1)),
        "{test:?} reads process-wide counts: wrap it in support::alone"
    );
}

/// Whether the libtest arguments `args` run `test` and nothing else: an
/// exact filter naming it and no flag that could take a separate value
/// (which could be a filter in disguise). Any doubt answers no, which
/// costs only a re-execution.
pub fn runs_only(test: &str, args: impl Iterator<Item = String>) -> bool {
    let (mut exact, mut filters) = (false, Vec::new());
    for a in args {
        match a.as_str() {
            "--exact" => exact = true,
            "--nocapture" | "--no-capture" | "--ignored" | "--include-ignored" | "--quiet" | "-q" | "--show-output" => {
            }
            f if f.starts_with("--") && f.contains('=') => {}
            f if f.starts_with('-') => return false,
            _ => filters.push(a),
        }
    }
    exact && filters == [test]
}

/// libtest's exit code when a test fails by an ordinary (unwinding) panic.
pub const TEST_FAILED: i32 = 101;

/// The exit status of a Rust abort on Windows. `std::process::abort` and a
/// panic that cannot unwind (one leaving an `extern "system"` callback, or a
/// second panic during an unwind) both end in `__fastfail(FAST_FAIL_FATAL_APP_EXIT)`,
/// which Windows reports as `STATUS_STACK_BUFFER_OVERRUN`. Measured under
/// Wine 8 for the gnu target: this status for every one of 10 runs of each
/// kind, as seen by a parent inside Wine (a Linux shell sees its low byte, 9).
pub const ABORT_STATUS: u32 = 0xC000_0409;

/// The exit status of an access violation (`STATUS_ACCESS_VIOLATION`), on
/// Windows and under Wine alike (measured: 10 of 10 null writes).
pub const ACCESS_VIOLATION: u32 = 0xC000_0005;

/// How a panic became an abort; each leaves its own trace on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortKind {
    /// The panic reached an `extern "system"` callback's boundary. Std then
    /// prints one of two lines after the panic's own message: "panic in a
    /// function that cannot unwind" when the unwinder's search found a handler
    /// above the callback and unwinding reached the callback's abort pad, or
    /// "failed to initiate panic" when the search found none (under Wine it
    /// depends on the pool's own frames and on whether the trampoline holds a
    /// guard with a destructor). Either way no frame outside Rust was unwound.
    CannotUnwind,
    /// A destructor panicked while the thread was already unwinding.
    PanicWhileUnwinding,
    /// The crate called `std::process::abort` while the panic unwound (a
    /// guard's `Drop`); std adds nothing to the panic's message.
    Explicit,
}

/// Asserts that a child aborted because of a panic: the exit status is
/// exactly [`ABORT_STATUS`] (not an unwinding test failure, not a crash with
/// another status, not the exit 1 with no output of a broken runner), the
/// panic's `message` reached stderr, and so did what `kind` prints.
#[track_caller]
pub fn assert_panicked_and_aborted(out: &ChildOutcome, kind: AbortKind, message: &str) {
    assert!(out.exited_with(ABORT_STATUS), "child should have aborted (status {ABORT_STATUS:#x}): {out:#?}");
    assert!(out.stderr.contains(message), "panic message {message:?} missing from stderr: {out:#?}");
    // Each inner list is a set of alternatives, one of which must appear.
    let trail: &[&[&str]] = match kind {
        AbortKind::CannotUnwind => {
            &[&["panic in a function that cannot unwind", "failed to initiate panic"], &["aborting"]]
        }
        AbortKind::PanicWhileUnwinding => &[&["aborting"]],
        AbortKind::Explicit => &[],
    };
    for alternatives in trail {
        assert!(
            alternatives.iter().any(|t| out.stderr.contains(t)),
            "{kind:?}: none of {alternatives:?} on stderr: {out:#?}"
        );
    }
}

/// Whether this process runs under Wine (ntdll exports `wine_get_version`).
/// Tests that pin a behaviour where Wine and Windows differ assert the
/// platform's own outcome on each, and `docs/wine.md` lists them.
pub fn on_wine() -> bool {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
    // SAFETY: both strings are NUL-terminated; ntdll is always loaded.
    unsafe {
        let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
        !ntdll.is_null() && GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast()).is_some()
    }
}

/// Wine's version as `(major, minor)`, from ntdll's `wine_get_version`
/// ("8.0", "10.0"); `None` on Windows. Where Wine 10 behaves as Windows and
/// Wine 8 does not, a test asserts each Wine's own outcome by it.
pub fn wine_version() -> Option<(u32, u32)> {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
    // SAFETY: both strings are NUL-terminated; ntdll is always loaded.
    let f =
        unsafe { GetProcAddress(GetModuleHandleA(c"ntdll.dll".as_ptr().cast()), c"wine_get_version".as_ptr().cast()) }?;
    // SAFETY: Wine declares it `const char * CDECL wine_get_version(void)`,
    // a static NUL-terminated string.
    let text = unsafe {
        let get = core::mem::transmute::<
            unsafe extern "system" fn() -> isize,
            unsafe extern "C" fn() -> *const core::ffi::c_char,
        >(f);
        std::ffi::CStr::from_ptr(get()).to_string_lossy().into_owned()
    };
    let mut parts = text.split(|c: char| !c.is_ascii_digit()).map(|n| n.parse().unwrap_or(0));
    Some((parts.next().unwrap_or(0), parts.next().unwrap_or(0)))
}

/// Whether this is a Wine older than `major` (`false` on Windows).
pub fn wine_before(major: u32) -> bool {
    wine_version().is_some_and(|(m, _)| m < major)
}

/// Runs a teardown that finds a drain still owed. With `fail-fast` it must
/// panic, after the teardown finished, with a report naming `type_name`, the
/// words "drain still owed" and `stop_and_drain`; without it, it must not
/// panic. Either way the caller then checks the teardown's invariants.
#[track_caller]
pub fn teardown_owing(type_name: &str, teardown: impl FnOnce()) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(teardown));
    if cfg!(feature = "fail-fast") {
        let payload = r.expect_err("fail-fast: a teardown with a drain owed must panic");
        let msg = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        for needle in [type_name, "drain still owed", "stop_and_drain"] {
            assert!(msg.contains(needle), "fail-fast report {msg:?} lacks {needle:?}");
        }
    } else if let Err(p) = r {
        std::panic::resume_unwind(p);
    }
}

/// Runs a teardown that may or may not find a drain owed (it races a
/// dispatch): with `fail-fast`, a panic must be the drain report; otherwise it
/// must not panic.
#[track_caller]
pub fn teardown_maybe_owing(type_name: &str, teardown: impl FnOnce()) {
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(teardown)) {
        let msg = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        let report = cfg!(feature = "fail-fast") && msg.contains(type_name) && msg.contains("drain still owed");
        if !report {
            std::panic::resume_unwind(payload);
        }
    }
}

/// The variable the trace filter is read from.
pub const TRACE_VAR: &str = "WINDOWS_THREADPOOL_TRACE";

/// Runs `scenario` in a child process whose trace filter is `filter`, and
/// returns what the child did once it has completed.
///
/// Assertions about records belong in `scenario`: a failing one makes the
/// child exit with a test failure, which fails the parent here. Before the
/// scenario the child asserts that the filter arms each target it names (or,
/// for `*`, `work`), so a filter that matches nothing fails rather than passes
/// with nothing recorded; the parent checks the child's distinctive exit code,
/// so a child that never ran the scenario fails too.
#[track_caller]
pub fn traced_child(test: &str, filter: &str, scenario: impl FnOnce()) -> ChildOutcome {
    traced_child_env(test, filter, &[], scenario)
}

/// [`traced_child`] with more environment variables for the child (for
/// example `WINDOWS_THREADPOOL_TRACE_CAPACITY`).
#[track_caller]
pub fn traced_child_env(test: &str, filter: &str, env: &[(&str, &str)], scenario: impl FnOnce()) -> ChildOutcome {
    traced_child_setup(test, filter, env, || {}, scenario)
}

/// [`traced_child_env`] that first runs `setup` in the child, before anything
/// reads the filter (and so before the trace installs its exception observer).
#[track_caller]
pub fn traced_child_setup(
    test: &str,
    filter: &str,
    env: &[(&str, &str)],
    setup: impl FnOnce(),
    scenario: impl FnOnce(),
) -> ChildOutcome {
    assert!(!filter.trim().is_empty(), "traced_child needs a filter that arms something");
    let mut vars = vec![(TRACE_VAR, filter)];
    vars.extend_from_slice(env);
    let out = child(test, &vars, || {
        setup();
        assert_eq!(std::env::var(TRACE_VAR).as_deref(), Ok(filter), "the child did not get the filter");
        for name in filter.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let target = if name == "*" { "work" } else { name };
            assert!(windows_threadpool::trace::wants(target), "filter {filter:?} does not arm {target:?}");
        }
        scenario();
    });
    out.assert_completed();
    out
}

/// How long a test waits for something that must happen before failing.
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// A pipe name no other test (or process) uses: the process id and a
/// count (a listener's name stays taken while an instance it accepted lives).
pub fn unique_pipe_name() -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(r"\\.\pipe\windows-threadpool-test-{}-{n}", std::process::id())
}

/// A gate callbacks can block on until the test opens it.
#[derive(Default)]
pub struct Gate {
    open: std::sync::Mutex<bool>,
    cv: std::sync::Condvar,
}

impl Gate {
    pub fn wait(&self) {
        let g = self.open.lock().unwrap();
        drop(self.cv.wait_while(g, |open| !*open).unwrap());
    }
    pub fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
    pub fn is_open(&self) -> bool {
        *self.open.lock().unwrap()
    }
}

/// A count tests can wait on.
#[derive(Default)]
pub struct Counter {
    n: std::sync::Mutex<usize>,
    cv: std::sync::Condvar,
}

impl Counter {
    pub fn bump(&self) -> usize {
        let mut n = self.n.lock().unwrap();
        *n += 1;
        self.cv.notify_all();
        *n
    }
    pub fn get(&self) -> usize {
        *self.n.lock().unwrap()
    }
    /// Waits until the count reaches `n` (at most [`PATIENCE`]); panics otherwise.
    #[track_caller]
    pub fn wait_for(&self, n: usize) {
        let g = self.n.lock().unwrap();
        let (g, _) = self.cv.wait_timeout_while(g, PATIENCE, |c| *c < n).unwrap();
        assert!(*g >= n, "count stuck at {} (waited {PATIENCE:?} for {n})", *g);
    }
}

/// Opens `gate` from another thread after a short delay, to make it likely
/// that the caller is already blocked (in a drain, a drop) when it opens.
/// Nothing lets a test observe that, so a test using this must pass whether
/// the gate opens before or after the call it makes next; the delay only makes
/// the interesting interleaving likelier.
pub fn open_soon(gate: &std::sync::Arc<Gate>) -> std::thread::JoinHandle<()> {
    let gate = std::sync::Arc::clone(gate);
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        gate.open();
    })
}

/// Opens `gate` from another thread once `ready()` holds (polled), so what
/// the test claims does not depend on scheduling. If `ready()` does not hold
/// within [`PATIENCE`] it opens the gate anyway, so the test ends instead of
/// hanging; joining the handle says whether `ready()` held.
pub fn open_when(
    gate: &std::sync::Arc<Gate>,
    ready: impl Fn() -> bool + Send + 'static,
) -> std::thread::JoinHandle<bool> {
    let gate = std::sync::Arc::clone(gate);
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + PATIENCE;
        let held = loop {
            if ready() {
                break true;
            }
            if std::time::Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        };
        gate.open();
        held
    })
}

/// Whether this (traced) process has recorded a `target event` row.
pub fn traced(target: &str, event: &str) -> bool {
    windows_threadpool::trace::dump().lines().filter(|l| !l.starts_with('#')).any(|l| {
        let mut f = l.split_whitespace().skip(2);
        f.next() == Some(target) && f.next() == Some(event)
    })
}

/// A private pool limited to one thread, whose only thread is held in a work
/// callback until [`release`](HeldPool::release) (or the drop): nothing
/// queued on `env` can start on a pool thread meanwhile, whatever the
/// scheduling.
pub struct HeldPool {
    pub env: windows_threadpool::CallbackEnviron,
    pub gate: std::sync::Arc<Gate>,
    pub blocker: windows_threadpool::Work,
    pub pool: windows_threadpool::Pool,
}

/// Returns once the pool's only thread is inside the blocker.
pub fn held_pool() -> HeldPool {
    let pool = windows_threadpool::Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    let env = windows_threadpool::CallbackEnviron::new().with_pool(&pool);
    let gate = std::sync::Arc::new(Gate::default());
    let entered = std::sync::Arc::new(Gate::default());
    let (g, e) = (std::sync::Arc::clone(&gate), std::sync::Arc::clone(&entered));
    let blocker = windows_threadpool::Work::new_in(
        move |_| {
            e.open();
            g.wait();
        },
        &env,
    )
    .unwrap();
    blocker.submit();
    entered.wait();
    HeldPool { env, gate, blocker, pool }
}

impl HeldPool {
    /// Lets the pool's thread go and waits until the blocker has returned.
    pub fn release(&self) {
        self.gate.open();
        self.blocker.wait();
    }
}

impl Drop for HeldPool {
    fn drop(&mut self) {
        self.release();
    }
}

/// Races a cancelling drain with a plain one on the same object, each on a
/// thread of its own, while a callback of the object is queued and cannot
/// start (`release` lets it start): first `drain` (`wait`, `stop_and_drain`),
/// then, a moment later, `cancel` (`cancel_pending`), then `release`. Either
/// may come first, so the callback runs once or is discarded (the caller
/// checks that, if it likes); what is checked here is that both return
/// within [`PATIENCE`]. Nothing shows that `drain` is already asleep on the
/// queued callback when `cancel` starts: the delays only make that
/// interleaving (the one that strands it under Wine 8, docs/wine.md) likely,
/// and the outcome must be the same either way.
///
/// If either is still blocked after [`PATIENCE`], `rescue` makes a callback
/// of the object run to completion (under Wine 8 nothing else wakes a drain
/// stranded by a cancellation), the threads are joined, and it panics,
/// naming the one that was stranded.
pub fn cancel_racing_a_drain(
    drain: impl Fn() + Sync,
    cancel: impl Fn() + Sync,
    release: impl FnOnce(),
    rescue: impl Fn(),
) {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::time::{Duration, Instant};
    let (drained, cancelled) = (AtomicBool::new(false), AtomicBool::new(false));
    let stranded = std::thread::scope(|s| {
        s.spawn(|| {
            drain();
            drained.store(true, SeqCst);
        });
        std::thread::sleep(Duration::from_millis(30));
        s.spawn(|| {
            cancel();
            cancelled.store(true, SeqCst);
        });
        std::thread::sleep(Duration::from_millis(30));
        release();
        let deadline = Instant::now() + PATIENCE;
        while !(drained.load(SeqCst) && cancelled.load(SeqCst)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let stranded = (!drained.load(SeqCst), !cancelled.load(SeqCst));
        if stranded != (false, false) {
            // Repeated: a callback that runs before a stranded waiter went
            // back to sleep would not be enough on its own.
            let give_up = Instant::now() + PATIENCE;
            while !(drained.load(SeqCst) && cancelled.load(SeqCst)) {
                if Instant::now() > give_up {
                    // The threads cannot be joined: end the process, saying why.
                    eprintln!("cancel_racing_a_drain: {stranded:?} (drain, cancel) still blocked after a rescue");
                    std::process::exit(101);
                }
                rescue();
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        stranded
    });
    assert!(
        stranded == (false, false),
        "a cancellation racing a drain left {} blocked for {PATIENCE:?} (released only by a later callback)",
        match stranded {
            (true, true) => "both",
            (true, false) => "the drain",
            _ => "the cancellation",
        }
    );
}

/// In a `traced_child` scenario tracing `pool`: the thread (as the dump
/// prints it) that recorded the first pool close, once one is recorded.
/// Panics after [`PATIENCE`] without one.
#[cfg(feature = "trace")]
pub fn pool_closer() -> String {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let dump = windows_threadpool::trace::dump();
        let row = dump.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2..4) == Some(&["pool", "closed"][..])).then(|| f[1].to_string())
        });
        if let Some(t) = row {
            return t;
        }
        assert!(std::time::Instant::now() < deadline, "the pool was never closed:\n{dump}");
        std::thread::yield_now();
    }
}
