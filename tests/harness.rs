//! The harness itself: a crashing child must read as a failure.
//!
//! Under Wine with the default AeDebug auto-debugger a crash can exit 0;
//! `cargo xtask setup` clears it. These tests prove it from inside the test
//! runner, through the same child harness the other suites use.
#![cfg(windows)]

mod support;

#[test]
fn completed_child_is_reported_as_completed() {
    let out = support::child("completed_child_is_reported_as_completed", &[], || println!("child says hi"));
    out.assert_completed();
    assert!(out.stdout.contains("child says hi"), "{out:#?}");
}

#[test]
fn null_write_in_child_is_a_failure() {
    let out = support::child("null_write_in_child_is_a_failure", &[], || {
        let p = std::hint::black_box(core::ptr::null_mut::<u32>());
        // SAFETY: not safe, on purpose: the child must crash.
        unsafe { p.write_volatile(7) };
    });
    assert!(out.died_abnormally(), "{out:#?}");
    assert!(!out.stderr.contains("Register dump"), "a debugger attached: {out:#?}");
}

#[test]
fn abort_in_child_is_a_failure() {
    let out = support::child("abort_in_child_is_a_failure", &[], || std::process::abort());
    assert!(out.died_abnormally(), "{out:#?}");
    assert_ne!(out.code, Some(support::TEST_FAILED), "{out:#?}");
}
