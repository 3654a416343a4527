//! A waker that panics when a pool callback wakes it aborts the process
//! with a message saying so (`crate::unwind`), at every site that wakes one:
//! a task's end (its `JoinHandle`), the time driver, a wait future and an
//! I/O completion.
#![cfg(windows)]

use crate::support;
use support::{AbortKind, PATIENCE};

use crate::executors;
use executors::poll_once;

use std::future::Future;
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::Duration;

use windows_threadpool::io::{self, AsyncIo};
use windows_threadpool::wait::{self, Event};
use windows_threadpool::{Deadline, task, time};

struct Panicking;

impl Wake for Panicking {
    fn wake(self: Arc<Self>) {
        panic!("this waker panics");
    }
}

/// Polls `fut` once with a waker that panics, makes its event happen with
/// `fire`, and gives the pool [`PATIENCE`] to wake it: the child must abort
/// before it returns.
fn woken_in_child<F: Future + Unpin>(test: &str, make: impl FnOnce() -> (F, Box<dyn FnOnce()>)) {
    let out = support::child(test, &[], || {
        let (mut fut, fire) = make();
        let waker = Waker::from(Arc::new(Panicking));
        assert!(poll_once(&mut fut, &waker).is_pending());
        fire();
        // Bounds the child's wait; the test passes only by the abort.
        std::thread::sleep(PATIENCE);
        drop(fut);
    });
    support::assert_panicked_and_aborted(&out, AbortKind::Explicit, "this waker panics");
    assert!(out.stderr.contains("windows-threadpool: a waker panicked; aborting"), "{out:#?}");
}

#[test]
fn a_panicking_waker_of_a_join_handle_aborts_saying_so() {
    woken_in_child("waker_panic::a_panicking_waker_of_a_join_handle_aborts_saying_so", || {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let handle = task::spawn_blocking(move || rx.recv_timeout(PATIENCE).unwrap());
        (handle, Box::new(move || tx.send(()).unwrap()))
    });
}

#[test]
fn a_panicking_waker_of_a_sleep_aborts_saying_so() {
    woken_in_child("waker_panic::a_panicking_waker_of_a_sleep_aborts_saying_so", || {
        (Box::pin(time::sleep(Duration::from_millis(1))), Box::new(|| {}))
    });
}

#[test]
fn a_panicking_waker_of_a_wait_aborts_saying_so() {
    woken_in_child("waker_panic::a_panicking_waker_of_a_wait_aborts_saying_so", || {
        let event = Event::manual_reset().unwrap();
        let signalled = wait::signalled(&event, Deadline::NEVER);
        (signalled, Box::new(move || event.set().unwrap()))
    });
}

#[test]
fn a_panicking_waker_of_an_io_read_aborts_saying_so() {
    woken_in_child("waker_panic::a_panicking_waker_of_an_io_read_aborts_saying_so", || {
        let (server, client) = io::pipe_pair().unwrap();
        // Leaked: the future borrows the object for the rest of the child.
        let server: &'static AsyncIo = Box::leak(Box::new(AsyncIo::new(server).unwrap()));
        let client = AsyncIo::new(client).unwrap();
        let read = server.read(vec![0u8; 16]);
        (read, Box::new(move || drop(futures::executor::block_on(client.write(b"x".to_vec())))))
    });
}
