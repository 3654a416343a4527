//! `service::run` started by something other than the service control
//! manager: it runs as a console program, stopped by a console control
//! event, with its future's outcome (error or panic) handed back. Each
//! scenario runs in a child process: the dispatcher can be started once per
//! process. The run under the SCM is `cargo xtask test`'s, with
//! `examples/pipe_service.rs` installed in the Wine prefix by `sc`.
//!
//! Under Wine the dispatcher may take about 10 s to report that no service
//! control manager started the process (`docs/wine.md`).

use std::sync::mpsc;

use windows_threadpool::service;
use windows_threadpool::signal::{CtrlEvent, deliver_as_the_system};

use crate::support::child;

/// On a console, `stopping` resolves on Ctrl+C, and `run` returns the
/// future's `Ok`; a second `run` meanwhile is refused, and one after it
/// fails as the dispatcher does once it has run.
#[test]
fn on_a_console_ctrl_c_stops_the_service() {
    child("service::on_a_console_ctrl_c_stops_the_service", &[], || {
        let (started, up) = mpsc::channel();
        let runner = std::thread::spawn(move || {
            service::run("windows-threadpool-test", move |ctl| async move {
                assert!(!ctl.under_scm() && !ctl.is_stopping());
                started.send(()).unwrap();
                ctl.stopping().await;
                assert!(ctl.is_stopping());
                Ok(())
            })
        });
        up.recv().unwrap();
        let e = service::run("another", |_| async { Ok(()) }).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert!(deliver_as_the_system(CtrlEvent::C), "the console run listens for Ctrl+C");
        runner.join().unwrap().unwrap();
    })
    .assert_completed();
}

/// The close of the console stops it too, and holds the process until the
/// future has finished.
#[test]
fn on_a_console_a_close_waits_for_the_service_to_finish() {
    child("service::on_a_console_a_close_waits_for_the_service_to_finish", &[], || {
        let (started, up) = mpsc::channel();
        let (finished_tx, finished) = mpsc::channel();
        let runner = std::thread::spawn(move || {
            service::run("windows-threadpool-test", move |ctl| async move {
                started.send(()).unwrap();
                ctl.stopping().await;
                windows_threadpool::time::sleep(std::time::Duration::from_millis(50)).await; // the flush
                finished_tx.send(()).unwrap();
                Ok(())
            })
        });
        up.recv().unwrap();
        assert!(deliver_as_the_system(CtrlEvent::Close));
        assert!(finished.try_recv().is_ok(), "the close handler returned before the service finished");
        runner.join().unwrap().unwrap();
    })
    .assert_completed();
}

/// The future's error is `run`'s.
#[test]
fn a_failed_service_returns_its_error() {
    child("service::a_failed_service_returns_its_error", &[], || {
        let e = service::run("windows-threadpool-test", |_| async { Err(std::io::Error::from_raw_os_error(5)) })
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(5));
        let e = service::run("", |_| async { Ok(()) }).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    })
    .assert_completed();
}

/// The future's panic is resumed by `run`, not swallowed.
#[test]
fn a_panicking_service_panics_run() {
    child("service::a_panicking_service_panics_run", &[], || {
        let panic = std::panic::catch_unwind(|| {
            service::run("windows-threadpool-test", |_| async { panic!("the service broke") })
        })
        .unwrap_err();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"the service broke"));
    })
    .assert_completed();
}
