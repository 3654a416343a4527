//! What `Debug` shows for every public object, token and handle: the type's
//! name and the fields a reader needs (a raw handle, a state). Failures
//! print the whole output.
#![cfg(windows)]

use crate::support;

use std::sync::mpsc;
use std::time::Duration;

use windows_threadpool::io::{self, AsyncIo, Io, IoCompletion};
use windows_threadpool::wait::{self, Event, Wait, WaitableHandle};
use windows_threadpool::{CallbackEnviron, CleanupGroup, Deadline, PeriodicTimer, Pool, Timer, Work, scope, task};

#[track_caller]
fn shows(value: &dyn std::fmt::Debug, parts: &[&str]) {
    let s = format!("{value:?}");
    for p in parts {
        assert!(s.contains(p), "{p:?} missing from {s:?}");
    }
}

#[test]
fn objects_show_their_type_and_raw_handle() {
    let work = Work::new(|_| {}).unwrap();
    shows(&work, &["Work", "raw"]);
    let timer = Timer::new(|_| {}).unwrap();
    shows(&timer, &["Timer", "raw"]);
    let periodic = PeriodicTimer::new(Duration::from_millis(5), |_| {}).unwrap();
    shows(&periodic, &["PeriodicTimer", "raw"]);
    let event = Event::manual_reset().unwrap();
    let handle: WaitableHandle = event.try_clone().unwrap().into();
    shows(&handle, &["WaitableHandle"]);
    let w = Wait::new(handle, |_| {}).unwrap();
    shows(&w, &["Wait", "raw"]);
    let (a, _b) = io::pipe_pair().unwrap();
    let io = Io::new(a, |_: &IoCompletion| {}).unwrap();
    shows(&io, &["Io"]);
    let mut group = CleanupGroup::new().unwrap();
    shows(&group, &["CleanupGroup", "raw", "owned_resources"]);
    let member = group.create_work(|_| {}).unwrap();
    shows(&member, &["Work"]);
    drop(member);
    group.close_members();
    let pool = Pool::new().unwrap();
    shows(&pool, &["Pool"]);
    shows(&CallbackEnviron::new().with_pool(&pool), &["CallbackEnviron"]);
}

#[test]
fn callback_tokens_show_their_type() {
    let (tx, rx) = mpsc::channel();
    let t = tx.clone();
    let work = Work::new(move |inv| t.send(format!("{inv:?}")).unwrap()).unwrap();
    work.submit();
    work.wait();
    let t = tx.clone();
    let timer = Timer::new(move |f| t.send(format!("{f:?}")).unwrap()).unwrap();
    timer.arm(Duration::ZERO);
    timer.wait();
    let t = tx.clone();
    let periodic = PeriodicTimer::new(Duration::from_millis(1), move |tick| {
        let _ = t.send(format!("{tick:?}"));
        tick.disarm();
    })
    .unwrap();
    periodic.arm(Duration::ZERO);
    let event = Event::manual_reset().unwrap();
    let t = tx.clone();
    let w = Wait::new(event.try_clone().unwrap().into(), move |act| t.send(format!("{act:?}")).unwrap()).unwrap();
    w.arm(Deadline::NEVER);
    event.set().unwrap();
    let (a, b) = io::pipe_pair().unwrap();
    let t = tx.clone();
    let io = Io::new(a, move |c: &IoCompletion| t.send(format!("{c:?} {:?}", c.instance())).unwrap()).unwrap();
    io.read(vec![0u8; 4]).unwrap();
    let writer = Io::new(b, |_: &IoCompletion| {}).unwrap();
    writer.write(b"ping".to_vec()).unwrap();
    let got: Vec<String> = (0..5).map(|_| rx.recv_timeout(support::PATIENCE).unwrap()).collect();
    for name in ["WorkInvocation", "TimerFiring", "PeriodicTick", "WaitActivation", "IoCompletion", "CallbackInstance"]
    {
        assert!(got.iter().any(|s| s.contains(name)), "no {name} among {got:?}");
    }
    periodic.stop_and_drain();
    writer.wait();
    io.wait();
}

#[test]
fn tasks_and_futures_show_their_state() {
    let h = task::spawn_blocking(|| 1);
    shows(&h, &["JoinHandle", "finished"]);
    assert_eq!(h.join().unwrap(), 1);
    scope(|s| {
        shows(s, &["Scope"]);
        let h = s.spawn(|| 2);
        shows(&h, &["ScopedJoinHandle", "finished"]);
    });
    let event = Event::manual_reset().unwrap();
    shows(&wait::signalled(event.try_clone().unwrap(), Deadline::NEVER), &["Signalled"]);
    let (a, _b) = io::pipe_pair().unwrap();
    let aio = AsyncIo::new(a).unwrap();
    shows(&aio.read(vec![0u8; 4]), &["ReadFuture"]);
    shows(&aio.write(vec![0u8; 4]), &["WriteFuture"]);
    shows(&windows_threadpool::time::sleep(Duration::from_secs(1)), &["Sleep"]);
}

/// An I/O operation shows its payload; a submission error its error and
/// payload type, and displays and chains its error.
#[test]
fn io_operations_and_submit_errors_show_their_parts() {
    use std::error::Error as _;
    let path = std::env::temp_dir().join(format!("wtp-debug-{}", std::process::id()));
    std::fs::write(&path, b"0123").unwrap();
    let read_only = io::open_file(&path, std::fs::OpenOptions::new().read(true)).unwrap();
    let (tx, rx) = mpsc::channel();
    let io = Io::new(read_only, move |c: &IoCompletion| tx.send(c.claim::<Vec<u8>>()).unwrap()).unwrap();
    let err = io.write_at(0, vec![1u8; 2]).expect_err("a write through a read-only handle fails at once");
    shows(&err, &["SubmitError", "error", "Vec<u8>"]);
    let display = err.to_string();
    assert!(display.starts_with("the operation was not issued: "), "{display}");
    assert!(display.ends_with(&err.error().to_string()), "{display}");
    let source = err.source().expect("the error is the source");
    assert_eq!(source.to_string(), err.error().to_string());
    drop(err);
    io.read_at(0, vec![0u8; 4]).unwrap();
    let op = rx.recv_timeout(support::PATIENCE).unwrap().expect("the read's operation");
    shows(&op, &["Operation", "payload", "[48, 49, 50, 51]"]);
    drop(op);
    io.wait();
    drop(io);
    std::fs::remove_file(&path).unwrap();
}
