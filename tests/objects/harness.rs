//! The harness itself: a crashing child must read as a failure, and each way
//! of dying is told apart by its exact exit status.
//!
//! Under Wine with the default AeDebug auto-debugger a crash can exit 0;
//! `cargo xtask setup` clears it. These tests prove it from inside the test
//! runner, through the same child harness the other suites use.
#![cfg(windows)]

use crate::support;
use support::{ABORT_STATUS, ACCESS_VIOLATION, AbortKind, ChildOutcome};

#[test]
fn completed_child_is_reported_as_completed() {
    let out = support::child("harness::completed_child_is_reported_as_completed", &[], || println!("child says hi"));
    out.assert_completed();
    assert!(out.stdout.contains("child says hi"), "{out:#?}");
}

#[test]
fn null_write_in_child_is_a_failure() {
    let out = support::child("harness::null_write_in_child_is_a_failure", &[], || {
        let p = std::hint::black_box(core::ptr::null_mut::<u32>());
        // SAFETY: not safe, on purpose: the child must crash.
        unsafe { p.write_volatile(7) };
    });
    assert!(out.exited_with(ACCESS_VIOLATION), "{out:#?}");
    assert!(!out.stderr.contains("Register dump"), "a debugger attached: {out:#?}");
}

#[test]
fn abort_in_child_exits_with_the_abort_status() {
    let out = support::child("harness::abort_in_child_exits_with_the_abort_status", &[], || std::process::abort());
    assert!(out.exited_with(ABORT_STATUS), "{out:#?}");
}

/// A panic leaving an `extern "system"` function aborts with the same status
/// as `abort`, after the panic's message and one of std's two lines for a
/// stopped unwind.
#[test]
fn panic_in_an_extern_system_function_aborts() {
    extern "system" fn cannot_unwind() {
        panic!("boom in an extern system function");
    }
    let out = support::child("harness::panic_in_an_extern_system_function_aborts", &[], || cannot_unwind());
    support::assert_panicked_and_aborted(&out, AbortKind::CannotUnwind, "boom in an extern system function");
}

/// What no abort check may accept: an ordinary test failure, a crash with
/// another status, a normal exit, and a runner that exits 1 with no output.
#[test]
fn abort_checks_reject_every_other_outcome() {
    let outcome = |code, stderr: &str| ChildOutcome { code: Some(code), stdout: String::new(), stderr: stderr.into() };
    let msg = "boom\npanic in a function that cannot unwind\naborting";
    for (what, out) in [
        ("runner exit 1, no output", outcome(1, "")),
        ("runner exit 1 with the message", outcome(1, msg)),
        ("an unwinding test failure", outcome(support::TEST_FAILED, msg)),
        ("an access violation", outcome(ACCESS_VIOLATION as i32, msg)),
        ("a normal exit", outcome(0, msg)),
        ("the scenario's own exit", outcome(support::CHILD_DONE, msg)),
        ("the abort status without the message", outcome(ABORT_STATUS as i32, "")),
        ("no exit code at all", ChildOutcome { code: None, stdout: String::new(), stderr: msg.into() }),
    ] {
        let r =
            std::panic::catch_unwind(|| support::assert_panicked_and_aborted(&out, AbortKind::CannotUnwind, "boom"));
        assert!(r.is_err(), "{what} was accepted as an abort: {out:#?}");
    }
    let explicit = outcome(ABORT_STATUS as i32, "boom");
    let r =
        std::panic::catch_unwind(|| support::assert_panicked_and_aborted(&explicit, AbortKind::CannotUnwind, "boom"));
    assert!(r.is_err(), "an abort without the cannot-unwind line passed as one");
    support::assert_panicked_and_aborted(&explicit, AbortKind::Explicit, "boom");
    support::assert_panicked_and_aborted(&outcome(ABORT_STATUS as i32, msg), AbortKind::CannotUnwind, "boom");
    let no_handler = "boom\nfatal runtime error: failed to initiate panic, error 5, aborting";
    support::assert_panicked_and_aborted(&outcome(ABORT_STATUS as i32, no_handler), AbortKind::CannotUnwind, "boom");
}

/// Bodies run under `support::alone` in this process.
static ALONE_BODIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Two tests whose bodies each find no other body in their process: under
/// libtest's threads (`cargo test`) as under nextest's processes.
#[test]
fn alone_bodies_get_a_process_each_first() {
    support::alone("harness::alone_bodies_get_a_process_each_first", || {
        assert_eq!(ALONE_BODIES.fetch_add(1, std::sync::atomic::Ordering::SeqCst), 0);
    });
}

#[test]
fn alone_bodies_get_a_process_each_second() {
    support::alone("harness::alone_bodies_get_a_process_each_second", || {
        assert_eq!(ALONE_BODIES.fetch_add(1, std::sync::atomic::Ordering::SeqCst), 0);
    });
}

/// `alone` named after another test would run that one instead.
#[test]
fn alone_refuses_another_tests_name() {
    let r = std::panic::catch_unwind(|| support::alone("harness::completed_child_is_reported_as_completed", || {}));
    assert!(r.is_err(), "alone ran under another test's name");
}

/// What counts as a process started for one test: nextest's command line
/// and the re-execution's do; `cargo test`'s, a substring filter, another
/// test's and a flag whose value could be a filter do not.
#[test]
fn runs_only_reads_the_command_line() {
    let runs_only = |args: &[&str]| support::runs_only("a::t", args.iter().map(|a| a.to_string()));
    assert!(runs_only(&["a::t", "--exact", "--nocapture"]));
    assert!(runs_only(&["--exact", "a::t", "--nocapture", "--ignored"]));
    assert!(runs_only(&["a::t", "--exact", "--nocapture", "--test-threads=1"]));
    assert!(!runs_only(&[]));
    assert!(!runs_only(&["a::t"]));
    assert!(!runs_only(&["a::t", "--exact", "b"]));
    assert!(!runs_only(&["a::tt", "--exact"]));
    assert!(!runs_only(&["--exact", "--skip", "a::t"]));
    assert!(!runs_only(&["a::t", "--exact", "--test-threads", "2"]));
}
