//! Dropping an async wrapper over a pool object (`io::AsyncIo`) never
//! blocks the dropping thread and never panics in the object's own
//! callback (`reentry::drop_unblocking`).
#![cfg(windows)]

use crate::support;
use support::{Counter, Gate, PATIENCE};

use crate::executors;
use executors::{counting_waker, poll_once};

use std::sync::{Arc, mpsc};
use std::time::Duration;

use windows_threadpool::io::{self, AsyncIo};
use windows_threadpool::{CallbackEnviron, Pool, Work, task, time};

/// A read buffer that keeps its object alive: the completion that frees the
/// buffer may drop the object's last `Arc`.
struct Holding {
    _io: Arc<AsyncIo>,
    bytes: Vec<u8>,
}

impl AsMut<[u8]> for Holding {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

/// Resolves once `client`'s peer has closed its end (a read sees `Ok(0)`),
/// or fails after [`PATIENCE`].
fn await_peer_closed(client: AsyncIo) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (n, _) = futures::executor::block_on(client.read(vec![0u8; 16]));
        let _ = tx.send(n.map_err(|e| e.kind()));
    });
    assert_eq!(rx.recv_timeout(PATIENCE), Ok(Ok(0)), "the dropped object's handle was never closed");
}

/// A one-thread pool whose thread is held by a work callback until the
/// returned gate opens.
fn held_pool() -> (Pool, CallbackEnviron, Work, Arc<Gate>) {
    let pool = Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    let env = CallbackEnviron::new().with_pool(&pool);
    let (gate, entered) = (Arc::new(Gate::default()), Arc::new(Counter::default()));
    let (g, e) = (Arc::clone(&gate), Arc::clone(&entered));
    let blocker = Work::new_in(
        move |_| {
            e.bump();
            g.wait();
        },
        &env,
    )
    .unwrap();
    blocker.submit();
    entered.wait_for(1);
    (pool, env, blocker, gate)
}

/// The cancelled completion of a dropped read frees its buffer, which holds
/// the object's last `Arc`: the object is dropped inside its own completion
/// callback with that operation still outstanding. It must neither abort nor
/// hang, and its handle is closed once the callback has returned. The pool's
/// one thread is held while the read is cancelled and the other `Arc`
/// dropped, so the completion is certain to run last.
#[test]
fn an_async_io_dropped_by_its_own_completion_is_closed_after_it() {
    let out =
        support::child("async_teardown::an_async_io_dropped_by_its_own_completion_is_closed_after_it", &[], || {
            let (_pool, env, blocker, gate) = held_pool();
            let (server, client) = io::pipe_pair().unwrap();
            let aio = Arc::new(AsyncIo::new_in(server, &env).unwrap());
            let (_woken, w) = counting_waker();
            let mut read = aio.read(Holding { _io: Arc::clone(&aio), bytes: vec![0; 16] });
            assert!(poll_once(&mut read, &w).is_pending());
            drop(read);
            drop(aio);
            gate.open();
            await_peer_closed(AsyncIo::new(client).unwrap());
            blocker.wait();
        });
    out.assert_completed();
}

/// A task on a one-thread pool whose read times out (the read is cancelled)
/// and which then drops the object: the cancelled completion needs the
/// pool's only thread, the one running the task, so a drop that waited for
/// it would never return.
#[test]
fn an_async_io_dropped_in_a_task_on_a_busy_pool_does_not_wait_for_it() {
    let pool = Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    let env = CallbackEnviron::new().with_pool(&pool);
    let (server, client) = io::pipe_pair().unwrap();
    let aio = AsyncIo::new_in(server, &env).unwrap();
    let (tx, rx) = mpsc::channel();
    let handle = task::spawn_in(
        async move {
            let timed_out = time::timeout(Duration::from_millis(20), aio.read(vec![0u8; 16])).await.is_err();
            let outstanding = aio.outstanding();
            drop(aio);
            let _ = tx.send((timed_out, outstanding));
        },
        &env,
    );
    let (timed_out, outstanding) = rx.recv_timeout(PATIENCE).expect("the drop in the task never returned");
    assert!(timed_out, "the silent pipe's read completed");
    assert_eq!(outstanding, 1, "the cancelled read should still be outstanding when the object is dropped");
    task::block_on(handle).unwrap();
    await_peer_closed(AsyncIo::new(client).unwrap());
}

/// With every future resolved the object is closed by its drop without
/// waiting: at once, or, if the last completion's callback is still
/// finishing (running the waker, dropping what the future left), from that
/// callback as it ends. Either way the other end reads end of file, and at
/// most that one own-callback close is handed to another thread. In a child, so that no
/// other test's hand-off is counted.
#[test]
fn an_async_io_whose_futures_resolved_is_closed_by_its_drop() {
    let out = support::child("async_teardown::an_async_io_whose_futures_resolved_is_closed_by_its_drop", &[], || {
        let (server, client) = io::pipe_pair().unwrap();
        let server = AsyncIo::new(server).unwrap();
        let client = AsyncIo::new(client).unwrap();
        let (sent, _) = futures::executor::block_on(server.write(b"x".to_vec()));
        assert_eq!(sent.unwrap(), 1);
        let before = windows_threadpool::handoffs();
        drop(server);
        // The byte written before, then end of file once the handle is closed.
        let (n, _) = futures::executor::block_on(client.read(vec![0u8; 8]));
        assert_eq!(n.unwrap(), 1);
        let (n, _) = futures::executor::block_on(client.read(vec![0u8; 8]));
        assert_eq!(n.unwrap(), 0, "the dropped object's handle was not closed");
        drop(client);
        assert!(windows_threadpool::handoffs() <= before + 1, "the drop handed more than its own-callback close off");
    });
    out.assert_completed();
}
