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
#![allow(dead_code)]

use std::process::Command;

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

    /// The child died some other way: an abort, a crash, a test failure.
    pub fn died_abnormally(&self) -> bool {
        self.code != Some(CHILD_DONE) && self.code != Some(0)
    }

    /// Panics with the child's output unless it completed.
    #[track_caller]
    pub fn assert_completed(&self) {
        assert!(self.completed(), "child did not complete its scenario: {self:#?}");
    }
}

/// Runs `scenario` in a child process (see the module docs). `test` is the
/// test's full name as libtest knows it (for a test at the root of an
/// integration test file, its function name).
pub fn child(test: &str, env: &[(&str, &str)], scenario: impl FnOnce()) -> ChildOutcome {
    if std::env::var(CHILD_VAR).as_deref() == Ok(test) {
        scenario();
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(CHILD_DONE);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"]).env(CHILD_VAR, test);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn child test process");
    ChildOutcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// libtest's exit code when a test fails by an ordinary (unwinding) panic.
pub const TEST_FAILED: i32 = 101;

/// Asserts that a child aborted because a callback panicked: the panic
/// message reached its stderr, and the process died by abort rather than by
/// an unwinding test failure or a normal exit.
#[track_caller]
pub fn assert_panicked_and_aborted(out: &ChildOutcome, message: &str) {
    assert!(out.died_abnormally(), "child should have died abnormally: {out:#?}");
    assert_ne!(out.code, Some(TEST_FAILED), "the panic unwound into the test instead of aborting: {out:#?}");
    assert!(out.stderr.contains(message), "panic message {message:?} missing from stderr: {out:#?}");
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

/// Opens `gate` from another thread once `started` is set, after a short
/// delay: the call under test (a drain, a drop) must already be blocked in
/// the pool, which nothing lets us observe directly. A late opener only makes
/// the test fail, never pass.
pub fn open_after_start(
    gate: std::sync::Arc<Gate>,
    started: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !started.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::yield_now();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        gate.open();
    })
}
