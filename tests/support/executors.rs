//! Runs one async test body under every executor the futures must work with.
//!
//! Each executor gets a fresh future from `make`, so a body is written once
//! and checked under the crate's own executor (`task::block_on` on the test
//! thread, and `task::spawn` on the pool), `futures`' `block_on` and tokio's
//! current-thread and multi-thread runtimes. A hang
//! is a failure: a watchdog aborts the test process, naming the executor,
//! once [`PATIENCE`](crate::support::PATIENCE) has passed.
//!
//! Include it beside `support` with
//! `#[path = "support/executors.rs"] mod executors;`.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, mpsc};
use std::task::{Context, Poll, Wake, Waker};

/// The executors, by name, in the order [`on_each_executor`] runs them.
pub const EXECUTORS: &[&str] =
    &["task::block_on", "task::spawn", "futures::executor::block_on", "tokio current-thread", "tokio multi-thread"];

/// Runs `make()` to completion under each of [`EXECUTORS`].
pub fn on_each_executor<F, M>(make: M)
where
    M: Fn() -> F,
    F: Future<Output = ()> + Send + 'static,
{
    for name in EXECUTORS {
        run_on(name, make());
    }
}

/// Runs `fut` to completion under the executor `name` (one of [`EXECUTORS`]).
pub fn run_on<F>(name: &str, fut: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let _watch = Watchdog::start(name);
    match name {
        "task::block_on" => windows_threadpool::task::block_on(fut),
        "task::spawn" => {
            if let Err(panic) = windows_threadpool::task::spawn(fut).join() {
                std::panic::resume_unwind(panic);
            }
        }
        "futures::executor::block_on" => futures::executor::block_on(fut),
        "tokio current-thread" => {
            tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(fut)
        }
        "tokio multi-thread" => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move { tokio::spawn(fut).await.unwrap() }),
        other => panic!("unknown executor {other}"),
    }
}

/// Aborts the process if not dropped within `PATIENCE`.
struct Watchdog(Option<mpsc::Sender<()>>);

impl Watchdog {
    fn start(name: &str) -> Self {
        let (tx, rx) = mpsc::channel::<()>();
        let name = name.to_string();
        std::thread::spawn(move || {
            // Disconnected (the watchdog dropped) ends the wait early.
            if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(crate::support::PATIENCE) {
                eprintln!("hang: the future did not complete within {:?} under {name}", crate::support::PATIENCE);
                std::process::abort();
            }
        });
        Self(Some(tx))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.take();
    }
}

/// A waker that counts its wakes.
#[derive(Default)]
pub struct CountingWaker(pub crate::support::Counter);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.bump();
    }
}

/// A counting waker and the count to read it by.
pub fn counting_waker() -> (Arc<CountingWaker>, Waker) {
    let c = Arc::new(CountingWaker::default());
    (Arc::clone(&c), Waker::from(c))
}

/// Polls `fut` once with `waker`.
pub fn poll_once<F: Future + Unpin>(fut: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(waker))
}
