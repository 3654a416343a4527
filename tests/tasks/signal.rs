//! Console control events: `signal::ctrl_c` and its siblings. Ctrl+C is
//! generated for real in a child process with a console of its own; close,
//! logoff and shutdown, which no program can generate, are delivered
//! through the handler as the system calls it (`deliver_as_the_system`).

use std::os::windows::process::CommandExt;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use windows_sys::Win32::System::Console::{CTRL_C_EVENT, GenerateConsoleCtrlEvent};
use windows_sys::Win32::System::Threading::CREATE_NEW_CONSOLE;
use windows_threadpool::signal::{self, CtrlEvent, deliver_as_the_system, delivered};
use windows_threadpool::task;

use crate::executors::on_each_executor;
use crate::support::{self, CHILD_DONE, CHILD_VAR, alone};

/// `STATUS_CONTROL_C_EXIT`: how the default handler ends a process on Ctrl+C.
const CONTROL_C_EXIT: u32 = 0xC000_013A;

/// Runs `scenario` in a child process with a console of its own (Wine
/// delivers console events only there), as `support::child` does.
fn console_child(test: &str, scenario: impl FnOnce()) -> std::process::Output {
    if std::env::var(CHILD_VAR).as_deref() == Ok(test) {
        scenario();
        std::process::exit(CHILD_DONE);
    }
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"]).env(CHILD_VAR, test);
    cmd.creation_flags(CREATE_NEW_CONSOLE);
    support::output(&mut cmd).expect("spawn the child")
}

fn generate_ctrl_c() {
    // SAFETY: no pointers; group 0 is every process on this console.
    let ok = unsafe { GenerateConsoleCtrlEvent(CTRL_C_EVENT, 0) };
    assert_ne!(ok, 0, "GenerateConsoleCtrlEvent: {}", std::io::Error::last_os_error());
}

/// Waits until `n` events of `kind` have been delivered (the handler's
/// threads are then inside it); fails after `PATIENCE`.
fn wait_for_deliveries(kind: CtrlEvent, n: u64) {
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while delivered(kind) < n {
        assert!(std::time::Instant::now() < deadline, "{kind:?}: {} of {n} deliveries", delivered(kind));
        std::thread::yield_now();
    }
}

/// A real Ctrl+C resolves the listener, and the process goes on.
#[test]
fn ctrl_c_resolves_its_listener_and_the_process_goes_on() {
    let out = console_child("signal::ctrl_c_resolves_its_listener_and_the_process_goes_on", || {
        let listener = signal::ctrl_c();
        generate_ctrl_c();
        let got = task::block_on(windows_threadpool::time::timeout(support::PATIENCE, listener));
        assert_eq!(got.expect("the Ctrl+C came").unwrap().event(), CtrlEvent::C);
    });
    assert_eq!(out.status.code(), Some(CHILD_DONE), "{out:?}");
}

/// Before any listener, Ctrl+C keeps its default: it ends the process, with
/// `STATUS_CONTROL_C_EXIT` on Windows and exit code 0 under Wine (see
/// `docs/wine.md`). The other half of the test above: without it, that one
/// would pass with a handler that ignores the listeners.
#[test]
fn without_a_listener_ctrl_c_ends_the_process() {
    let out = console_child("signal::without_a_listener_ctrl_c_ends_the_process", || {
        generate_ctrl_c();
        std::thread::sleep(support::PATIENCE); // ended before this returns
        println!("still running after Ctrl+C");
    });
    let expected = if support::on_wine() { 0 } else { CONTROL_C_EXIT as i32 };
    assert_eq!(out.status.code(), Some(expected), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("still running"), "{out:?}");
}

/// Every listener of a kind is woken by one event, under every executor; a
/// kind no one listens for keeps its default (the handler says unhandled).
#[test]
fn one_event_wakes_every_listener_under_every_executor() {
    alone("signal::one_event_wakes_every_listener_under_every_executor", || {
        assert!(!deliver_as_the_system(CtrlEvent::Break), "no one listens for Ctrl+Break yet");
        on_each_executor(|| async {
            let (a, b) = (signal::ctrl_break(), signal::ctrl_break());
            let deliver = async {
                windows_threadpool::time::sleep(Duration::from_millis(5)).await;
                task::spawn_blocking(|| deliver_as_the_system(CtrlEvent::Break)).await.unwrap()
            };
            let (a, b, handled) = futures::join!(a, b, deliver);
            assert!(handled);
            assert_eq!((a.unwrap().event(), b.unwrap().event()), (CtrlEvent::Break, CtrlEvent::Break));
        });
        // A listener made after an event waits for the next one.
        let mut late = signal::ctrl_break();
        assert!(futures::executor::block_on(async { futures::poll!(&mut late) }).is_pending());
    });
}

/// For close (and logoff and shutdown) the handler returns only once the
/// program has dropped what the event resolved to.
#[test]
fn the_close_handler_waits_for_the_program_to_finish() {
    alone("signal::the_close_handler_waits_for_the_program_to_finish", || {
        let listener = signal::ctrl_close();
        let flushed = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&flushed);
        let system = std::thread::spawn(move || {
            let handled = deliver_as_the_system(CtrlEvent::Close);
            (handled, seen.load(Ordering::SeqCst))
        });
        let closing = task::block_on(listener).unwrap();
        assert_eq!(closing.event(), CtrlEvent::Close);
        std::thread::sleep(Duration::from_millis(50)); // the flush; a handler that does not wait returns meanwhile
        flushed.store(true, Ordering::SeqCst);
        drop(closing);
        let (handled, flushed_first) = system.join().unwrap();
        assert!(handled);
        assert!(flushed_first, "the handler returned before the program dropped its Signalled");
    });
}

/// A listener dropped unresolved after the event releases the handler too.
#[test]
fn a_listener_dropped_after_the_event_releases_the_handler() {
    alone("signal::a_listener_dropped_after_the_event_releases_the_handler", || {
        for kind in [CtrlEvent::Logoff, CtrlEvent::Shutdown] {
            let listener = match kind {
                CtrlEvent::Logoff => signal::ctrl_logoff(),
                _ => signal::ctrl_shutdown(),
            };
            let released = Arc::new(AtomicBool::new(false));
            let seen = Arc::clone(&released);
            let system = std::thread::spawn(move || {
                let handled = deliver_as_the_system(kind);
                (handled, seen.load(Ordering::SeqCst))
            });
            wait_for_deliveries(kind, 1); // the listener is counted: the handler waits for it
            released.store(true, Ordering::SeqCst);
            drop(listener);
            let (handled, after_drop) = system.join().unwrap();
            assert!(handled, "{kind:?}");
            assert!(after_drop, "{kind:?}: the handler returned while a listener it woke was alive");
        }
    });
}

/// A listener counted by two deliveries before it resolves releases both
/// handlers once its `Signalled` is dropped.
#[test]
fn a_listener_across_two_deliveries_releases_both_handlers() {
    alone("signal::a_listener_across_two_deliveries_releases_both_handlers", || {
        let mut listener = signal::ctrl_close();
        let (done, returned) = std::sync::mpsc::channel();
        for _ in 0..2 {
            let done = done.clone();
            std::thread::spawn(move || done.send(deliver_as_the_system(CtrlEvent::Close)).unwrap());
        }
        // Both deliveries count the listener before it is polled.
        wait_for_deliveries(CtrlEvent::Close, 2);
        let closing = task::block_on(&mut listener).unwrap();
        drop(closing);
        drop(listener);
        for _ in 0..2 {
            assert!(returned.recv_timeout(support::PATIENCE).expect("a close handler never returned"));
        }
    });
}
