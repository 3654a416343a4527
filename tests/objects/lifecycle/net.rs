//! The sockets model (`net::TcpListener`, `net::TcpStream`), on loopback:
//! one listener and [`PAIRS`] connected pairs, each pair two streams (end 0
//! the connecting one, end 1 the accepted one) and two flows of bytes (flow
//! `e` from end `e` to the other).
//!
//! Operations: open a pair (connect and accept at once, binding a new
//! listener if it is gone), an accept left pending and dropped, read, write,
//! `write_all`, `shutdown(Write)`, a stream's drop (plain; with a read
//! pending, forgotten or dropped; inside a task on the pool; inside a
//! `Work` callback; in a task woken by the read's completion; by the
//! cancelled read's own completion, whose buffer holds the last owner) and
//! the listener's drop (plain; with an accept pending, forgotten or
//! dropped; inside a task).
//!
//! Each flow's operations are serialised by the flow's lock (the two flows
//! of a stream, pairs and the listener run concurrently), so the model
//! knows, when a read is issued, what it must see: the next bytes written,
//! or, where nothing can arrive (nothing unread, the writer alive and not
//! shut down), pending until dropped (`streams.rs`, which also drops the
//! streams); and
//! - after the writer's `shutdown(Write)`: the rest, then `Ok(0)`, for
//!   every read after;
//! - after the writer's drop: the rest, then `Ok(0)`, if the close was
//!   graceful: the dropped end had read everything sent to it and its peer
//!   wrote nothing after the drop. Otherwise the close may be abortive
//!   (`closesocket` with unread data sends a reset; so does the closed
//!   end's stack when data arrives for it), and a read may instead fail
//!   with `ConnectionReset` or `ConnectionAborted` (data still unread may
//!   then be lost), after which every read gives `Ok(0)` or that error. A
//!   dropped peer's close is only awaited through these reads: a handed-off
//!   rundown that never closed its socket hangs them, and fails.
//!
//! A write resolves to the bytes it took (`write`: 1 to all; `write_all`:
//! all), appended to the flow; after the own `shutdown(Write)` it fails; to
//! a dropped peer it may succeed or fail with a reset (nothing is counted).
//! At the end every surviving end shuts its writing side down and reads
//! its flow to the end, so every byte is accounted for, then everything is
//! dropped, and the engine waits for the contexts and operation blocks to
//! return to their count before the case (a handed-off rundown frees its
//! object's context when it is done).
//!
//! Cases: [`DEFAULT_CASES`], or a share of `PROPTEST_CASES` (see [`config`]).

use std::net::Shutdown;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

use proptest::prelude::*;
use windows_threadpool::net::{TcpListener, TcpStream};

use super::engine::{self, Model, Step};
use super::streams::{
    self, ALIVE, Flow, Left, ListenerPool, PAIRS, StreamModel, Via, count, leave_pending, left, lock, poll_once, read,
    via,
};

/// Cases unless `PROPTEST_CASES` says otherwise: a case opens up to a few
/// dozen connections and costs several of the other models' cases (40
/// cases took 2.5 to 6 s under Wine here, depending on the machine's load).
pub const DEFAULT_CASES: u32 = 40;

/// The proptest configuration: [`DEFAULT_CASES`], or its share of
/// `PROPTEST_CASES` ([`engine::config_share`]).
fn config() -> proptest::test_runner::Config {
    engine::config_share(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/objects/lifecycle/net.proptest-regressions"),
        DEFAULT_CASES,
    )
}

#[derive(Debug, Clone)]
pub enum Op {
    Open(usize),
    Accept,
    Read { pair: usize, end: usize, len: u8 },
    Write { pair: usize, end: usize, len: u8, all: bool },
    Shutdown { pair: usize, end: usize },
    Drop { pair: usize, end: usize, via: Via, left: Left },
    DropListener { in_task: bool, left: Left },
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..PAIRS;
    let e = 0..2usize;
    prop_oneof![
        2 => p.clone().prop_map(Op::Open),
        1 => Just(Op::Accept),
        5 => (p.clone(), e.clone(), 1u8..=32).prop_map(|(pair, end, len)| Op::Read { pair, end, len }),
        5 => (p.clone(), e.clone(), 1u8..=48, any::<bool>())
            .prop_map(|(pair, end, len, all)| Op::Write { pair, end, len, all }),
        1 => (p.clone(), e.clone()).prop_map(|(pair, end)| Op::Shutdown { pair, end }),
        2 => (p, e, via(), left()).prop_map(|(pair, end, via, left)| Op::Drop { pair, end, via, left }),
        1 => (any::<bool>(), left()).prop_map(|(in_task, left)| Op::DropListener { in_task, left }),
    ]
}

/// How an end is gone (`Pair::gone`), besides `ALIVE`.
const GRACEFUL: u8 = 1;
const ABORTIVE: u8 = 2;

/// The sockets model's own state of a pair.
#[derive(Default)]
struct Resets {
    /// Per flow: its reader may see a reset. Set before what may cause one
    /// (a write to a dropped peer); read after a read's result.
    reset_possible: [AtomicBool; 2],
}

type Pair = streams::Pair<TcpStream, Resets>;

/// Whether a read or write error is the reset an abortive close causes.
fn is_reset(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionReset | ConnectionAborted)
}

/// Runs `fut` on this thread; panics naming `what` after `PATIENCE`.
#[track_caller]
fn bounded<F: std::future::Future>(what: &str, fut: F) -> F::Output {
    streams::bounded("net", what, fut)
}

/// What the cases did besides `streams::Seen`'s counts.
struct Seen {
    streams: streams::Seen,
    opened: AtomicUsize,
    resets: AtomicUsize,
    writes_to_dropped_peers: AtomicUsize,
}

static SEEN: Seen = Seen {
    streams: streams::Seen::new(),
    opened: AtomicUsize::new(0),
    resets: AtomicUsize::new(0),
    writes_to_dropped_peers: AtomicUsize::new(0),
};

struct NetModel {
    listener: Mutex<Option<TcpListener>>,
    pairs: Vec<Pair>,
    pool: ListenerPool,
}

impl StreamModel for NetModel {
    type Stream = TcpStream;
    type Own = Resets;
    const NAME: &'static str = "net";

    fn seen() -> &'static streams::Seen {
        &SEEN.streams
    }

    fn read_ended(pair: &Pair, from: usize, flow: &Flow, r: std::io::Result<()>) {
        let writer_gone = pair.gone[from].load(SeqCst);
        let reset_possible = pair.reset_possible[from].load(SeqCst);
        match r {
            Ok(()) => {
                assert!(flow.shut || writer_gone != ALIVE, "net: end of file with the writer alive and not shut down");
                assert!(
                    flow.unread() == 0 || reset_possible,
                    "net: end of file with {} bytes unread and no reset possible",
                    flow.unread()
                );
            }
            Err(e) if is_reset(&e) && reset_possible => count(&SEEN.resets, 1),
            Err(e) => panic!(
                "net: a read failed: {e:?} (unread {}, shut {}, writer gone {writer_gone}, reset possible \
                 {reset_possible})",
                flow.unread(),
                flow.shut
            ),
        }
    }

    fn gone(pair: &Pair, end: usize, flows: &[std::sync::MutexGuard<'_, Flow>; 2], _settled: bool) -> u8 {
        // Unread data makes `closesocket` reset the connection.
        if flows[1 - end].unread() > 0 {
            pair.reset_possible[end].store(true, SeqCst);
            ABORTIVE
        } else {
            GRACEFUL
        }
    }
}

impl NetModel {
    fn new() -> Self {
        let model = Self {
            listener: Mutex::new(None),
            pairs: (0..PAIRS).map(Pair::empty).collect(),
            pool: ListenerPool::new(),
        };
        for p in 0..PAIRS {
            model.open(p);
        }
        model
    }

    /// Connects and accepts pair `p` if both its ends are gone.
    fn open(&self, p: usize) {
        let mut listener = lock(&self.listener);
        let pair = &self.pairs[p];
        let mut ends = [pair.ends[0].write().unwrap(), pair.ends[1].write().unwrap()];
        if ends.iter().any(|e| e.is_some()) {
            return;
        }
        let l = listener.get_or_insert_with(|| TcpListener::bind_in("127.0.0.1:0", &self.pool.env).expect("bind"));
        let addr = l.local_addr().unwrap();
        let (client, accepted) =
            bounded("connect and accept", async { futures::join!(TcpStream::connect(addr), l.accept()) });
        let (client, (server, peer)) = (client.expect("connect"), accepted.expect("accept"));
        assert_eq!(peer, client.local_addr().unwrap(), "net: an accept gave another pair's connection");
        pair.restart();
        for r in &pair.reset_possible {
            r.store(false, SeqCst);
        }
        count(&SEEN.opened, 1);
        *ends[0] = Some(client);
        *ends[1] = Some(server);
    }

    fn accept_pending(&self) {
        let listener = lock(&self.listener);
        if let Some(l) = listener.as_ref() {
            let mut accept = l.accept();
            assert!(poll_once(&mut accept).is_pending(), "net: an accept with nobody connecting completed");
            count(&SEEN.streams.accepts_cancelled, 1);
        }
    }

    fn write(&self, pair: &Pair, end: usize, len: usize, all: bool) {
        let slot = pair.ends[end].read().unwrap();
        let Some(s) = slot.as_ref() else { return };
        let mut flow = lock(&pair.flows[end]);
        let reader_gone = pair.gone[1 - end].load(SeqCst) != ALIVE;
        if reader_gone {
            // The closed end's stack answers with a reset.
            pair.reset_possible[1 - end].store(true, SeqCst);
        }
        let data = flow.next_bytes(len);
        let r = if all {
            bounded("a write_all", s.write_all(data.clone())).0.map(|()| len)
        } else {
            bounded("a write", s.write(data.clone())).0
        };
        if flow.shut {
            assert!(r.is_err(), "net: a write after shutdown(Write) succeeded: {r:?}");
        } else if reader_gone {
            count(&SEEN.writes_to_dropped_peers, 1);
            if let Err(e) = r {
                assert!(is_reset(&e), "net: a write to a dropped peer failed with {e:?}");
            }
        } else {
            let n = r.unwrap_or_else(|e| panic!("net: a write failed: {e:?}"));
            assert!((1..=len).contains(&n), "net: a write of {len} bytes took {n}");
            flow.sent.extend_from_slice(&data[..n]);
        }
    }

    fn shutdown(&self, pair: &Pair, end: usize) {
        let slot = pair.ends[end].read().unwrap();
        let Some(s) = slot.as_ref() else { return };
        let mut flow = lock(&pair.flows[end]);
        if flow.shut {
            return;
        }
        match s.shutdown(Shutdown::Write) {
            Ok(()) => {}
            // The peer's close may have reset the connection.
            Err(e) if is_reset(&e) && pair.reset_possible[1 - end].load(SeqCst) => {}
            Err(e) => panic!("net: shutdown(Write) failed: {e:?}"),
        }
        flow.shut = true;
    }

    fn drop_listener(&self, in_task: bool, left: Left) {
        let Some(l) = lock(&self.listener).take() else { return };
        let forgotten = matches!(left, Left::Forgotten);
        let drop_it = move || {
            if !matches!(left, Left::Nothing) && !leave_pending(l.accept(), forgotten) {
                return Err("an accept with nobody connecting completed");
            }
            drop(l);
            Ok(())
        };
        let r = if in_task { self.pool.in_task("net", 1, "a listener's drop", drop_it) } else { drop_it() };
        r.unwrap_or_else(|e| panic!("net: {e}"));
    }
}

impl Model for NetModel {
    type Op = Op;

    fn slot(op: &Op) -> usize {
        match *op {
            Op::Open(pair)
            | Op::Read { pair, .. }
            | Op::Write { pair, .. }
            | Op::Shutdown { pair, .. }
            | Op::Drop { pair, .. } => pair,
            Op::Accept | Op::DropListener { .. } => PAIRS,
        }
    }

    fn apply(&self, op: &Op, _alone: bool) {
        match *op {
            Op::Open(p) => self.open(p),
            Op::Accept => self.accept_pending(),
            Op::Read { pair, end, len } => read::<Self>(&self.pairs[pair], end, len.into()),
            Op::Write { pair, end, len, all } => self.write(&self.pairs[pair], end, len.into(), all),
            Op::Shutdown { pair, end } => self.shutdown(&self.pairs[pair], end),
            Op::Drop { pair, end, via, left } => {
                streams::drop_stream::<Self>(&self.pool, &self.pairs[pair], end, via, left)
            }
            Op::DropListener { in_task, left } => self.drop_listener(in_task, left),
        }
    }

    fn after_step(&self, _step: &Step<Op>) {}

    /// Every surviving end shuts down its writing side and reads its flow to
    /// the end (bounded: a read that returns data makes progress), then
    /// everything is dropped.
    fn finish(&self) {
        for pair in &self.pairs {
            for end in 0..2 {
                self.shutdown(pair, end);
            }
            for end in 0..2 {
                let budget = lock(&pair.flows[1 - end]).unread() + 2;
                for _ in 0..budget {
                    if pair.ends[end].read().unwrap().is_none() || lock(&pair.flows[1 - end]).ended {
                        break;
                    }
                    read::<Self>(pair, end, 64);
                }
                if pair.ends[end].read().unwrap().is_some() {
                    let flow = lock(&pair.flows[1 - end]);
                    assert!(flow.ended, "net: the flow to end {end} did not end ({} bytes unread)", flow.unread());
                    if pair.gone[1 - end].load(SeqCst) != ABORTIVE && !pair.reset_possible[1 - end].load(SeqCst) {
                        assert_eq!(flow.unread(), 0, "net: bytes lost with no reset possible");
                    }
                }
            }
            for end in &pair.ends {
                drop(end.write().unwrap().take());
            }
        }
        drop(lock(&self.listener).take());
    }
}

fn net_lifecycle_cases() {
    engine::run_cases(config(), engine::steps(op(), 12), |steps| engine::run("net", NetModel::new, &steps));
}

/// What the cases covered, printed after them.
fn report() {
    let l = |c: &AtomicUsize| c.load(SeqCst);
    eprintln!(
        "net: {} pairs opened, {} resets, {} writes to dropped peers, {}",
        l(&SEEN.opened),
        l(&SEEN.resets),
        l(&SEEN.writes_to_dropped_peers),
        SEEN.streams,
    );
}

/// The cases with in-place polling on.
#[test]
fn net_lifecycle() {
    streams::run_test("lifecycle::net::net_lifecycle", true, net_lifecycle_cases, report);
}

/// The same cases with in-place polling off.
#[test]
fn net_lifecycle_without_inplace() {
    streams::run_test("lifecycle::net::net_lifecycle_without_inplace", false, net_lifecycle_cases, report);
}
