//! The named pipes model (`pipe::PipeListener`, `pipe::PipeStream`): one
//! listener (each bind a name of its own: a name stays taken while an
//! instance it accepted lives) and [`PAIRS`] connected pairs, each pair two
//! streams (end 0 the client, `PipeStream::connect`; end 1 the accepted
//! instance) and two flows of bytes (flow `e` from end `e` to the other).
//!
//! Operations: open a pair (binding a new listener if it is gone; the
//! accept waiting as the client arrives, the client first, or the client
//! arriving at an accept that is then dropped, so that the next accept
//! must return it), an accept left pending and dropped (its instance goes
//! back to the listener, still listening: the next pair's client must
//! find it), read, write, `write_all`, a stream's drop (plain; with a read
//! pending, forgotten or dropped; inside a task on the pool; inside a
//! `Work` callback; in a task woken by the read's completion; by the
//! cancelled read's own completion, whose buffer holds the last owner)
//! and the listener's drop (plain, or with an accept pending dropped;
//! here or inside a task). A listener dropped with its accept forgotten
//! is left out: the accept future owns the instance it waits on, so
//! `mem::forget` leaks that instance (its handle, context and wait), which
//! the leak checks would report; one dropped with its accept in flight
//! does not compile (the future borrows the listener).
//!
//! Each flow's operations are serialised by the flow's lock, so the model
//! knows, when a read is issued, what it must see: the next bytes written,
//! or, where nothing can arrive (nothing unread, the writer alive),
//! pending until dropped (`streams.rs`, which also drops the streams); and
//! - after the writer's drop: the rest, then `Ok(0)` for every read after.
//!   Closing a pipe's handle discards nothing and resets nothing, so unlike
//!   the sockets model no error is allowed. A dropped writer's close is
//!   only awaited through these reads: a handed-off rundown that never
//!   closed its handle hangs them, and fails.
//!
//! A write resolves to the bytes it took (`write`: 1 to all; `write_all`:
//! all), appended to the flow. To a dropped peer it fails with
//! `BrokenPipe` (nothing counted) if the peer's drop closed the handle
//! before returning (nothing was in flight and the drop ran outside the
//! stream's own callbacks); otherwise the close may come later and the
//! write may still succeed.
//!
//! Writes stay far below the pipe's buffer (64 KiB by default): at most
//! [`MAX_WRITE`] bytes each, and a flow gets at most one write per
//! operation of a case ([`MAX_FLOW`] bytes in all), so every write
//! completes without a reader and a `write_all` never waits for one (a
//! write larger than the buffer stays in flight until the reader takes
//! enough, which would block the step: the model's reads run in other
//! steps).
//!
//! A drop with a read forgotten orphans the stream: the read's cancelled
//! completion drops it; with in-place polling off that teardown is handed
//! to another thread, so [`windows_threadpool::handoffs`] grows by at
//! least one per such drop (checked here).
//! At the end every surviving end reads its flow to the end, a read left
//! pending on end 1 must end with `Ok(0)` when end 0 is dropped and a
//! write after it with `BrokenPipe`, so every byte is accounted for; then
//! everything is dropped, and the engine waits for the contexts and
//! operation blocks to return to their count before the case.
//!
//! Cases: [`DEFAULT_CASES`], or a share of `PROPTEST_CASES` (see [`config`]).

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};

use proptest::prelude::*;
use windows_threadpool::pipe::{PipeListener, PipeOptions, PipeStream};

use super::engine::{self, Model, Step, THREADS};
use super::streams::{
    self, ALIVE, Flow, Left, ListenerPool, PAIRS, StreamModel, Via, count, leave_pending, left, lock, poll_once, read,
    via,
};

/// Cases unless `PROPTEST_CASES` says otherwise: a case opens up to a few
/// dozen pipe connections, as the sockets model's cases do.
pub const DEFAULT_CASES: u32 = 40;

/// Steps per case.
const MAX_STEPS: usize = 12;
/// The largest write the model issues.
const MAX_WRITE: usize = 48;
/// The most bytes a flow is sent in a case: a write per operation, and
/// the woken read's 8 bytes.
const MAX_FLOW: usize = MAX_STEPS * THREADS * MAX_WRITE + 8;
// Every write completes without a reader (see the module docs).
const _: () = assert!(MAX_FLOW < 64 * 1024);

/// The proptest configuration: [`DEFAULT_CASES`], or its share of
/// `PROPTEST_CASES` ([`engine::config_share`]).
fn config() -> proptest::test_runner::Config {
    engine::config_share(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/objects/lifecycle/pipe.proptest-regressions"),
        DEFAULT_CASES,
    )
}

/// How a pair's client meets its accept.
#[derive(Debug, Clone, Copy)]
pub enum Meet {
    /// The accept waits when the client arrives.
    AcceptFirst,
    /// The client opens the listening instance before the accept.
    ClientFirst,
    /// The client arrives at a waiting accept, which is then dropped: the
    /// next accept must return it.
    AfterDroppedAccept,
}

#[derive(Debug, Clone)]
pub enum Op {
    Open {
        pair: usize,
        meet: Meet,
    },
    Accept,
    Read {
        pair: usize,
        end: usize,
        len: u8,
    },
    Write {
        pair: usize,
        end: usize,
        len: u8,
        all: bool,
    },
    Drop {
        pair: usize,
        end: usize,
        via: Via,
        left: Left,
    },
    /// `cancelled`: with an accept pending, dropped just before.
    DropListener {
        in_task: bool,
        cancelled: bool,
    },
}

fn meet() -> impl Strategy<Value = Meet> {
    prop_oneof![Just(Meet::AcceptFirst), Just(Meet::ClientFirst), Just(Meet::AfterDroppedAccept)]
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..PAIRS;
    let e = 0..2usize;
    prop_oneof![
        2 => (p.clone(), meet()).prop_map(|(pair, meet)| Op::Open { pair, meet }),
        1 => Just(Op::Accept),
        5 => (p.clone(), e.clone(), 1u8..=32).prop_map(|(pair, end, len)| Op::Read { pair, end, len }),
        5 => (p.clone(), e.clone(), 1u8..=MAX_WRITE as u8, any::<bool>())
            .prop_map(|(pair, end, len, all)| Op::Write { pair, end, len, all }),
        2 => (p, e, via(), left()).prop_map(|(pair, end, via, left)| Op::Drop { pair, end, via, left }),
        1 => (any::<bool>(), any::<bool>()).prop_map(|(in_task, cancelled)| Op::DropListener { in_task, cancelled }),
    ]
}

/// How an end is gone (`Pair::gone`), besides `ALIVE`:
/// its drop closed the handle before returning.
const CLOSED: u8 = 1;
/// Its drop left the close to a completion or another thread.
const CLOSING: u8 = 2;

type Pair = streams::Pair<PipeStream>;

/// Runs `fut` on this thread; panics naming `what` after `PATIENCE`.
#[track_caller]
fn bounded<F: std::future::Future>(what: &str, fut: F) -> F::Output {
    streams::bounded("pipe", what, fut)
}

/// What the cases did besides `streams::Seen`'s counts.
struct Seen {
    streams: streams::Seen,
    opened: [AtomicUsize; 3],
    writes_to_dropped_peers: [AtomicUsize; 2],
    listener_drops: AtomicUsize,
}

static SEEN: Seen = Seen {
    streams: streams::Seen::new(),
    opened: [const { AtomicUsize::new(0) }; 3],
    writes_to_dropped_peers: [const { AtomicUsize::new(0) }; 2],
    listener_drops: AtomicUsize::new(0),
};

struct PipeModel {
    /// The listener and its name.
    listener: Mutex<Option<(PipeListener, String)>>,
    pairs: Vec<Pair>,
    pool: ListenerPool,
}

impl StreamModel for PipeModel {
    type Stream = PipeStream;
    type Own = ();
    const NAME: &'static str = "pipe";

    fn seen() -> &'static streams::Seen {
        &SEEN.streams
    }

    /// Closing a pipe's handle discards nothing and resets nothing: no
    /// error is allowed.
    fn read_ended(pair: &Pair, from: usize, flow: &Flow, r: std::io::Result<()>) {
        let writer_gone = pair.gone[from].load(SeqCst);
        match r {
            Ok(()) => {
                assert!(writer_gone != ALIVE, "pipe: end of file with the writer alive");
                assert_eq!(flow.unread(), 0, "pipe: end of file with bytes unread (a close discarded them)");
            }
            Err(e) => panic!("pipe: a read failed: {e:?} (unread {}, writer gone {writer_gone})", flow.unread()),
        }
    }

    /// The handle is closed when the drop returns if nothing was in flight
    /// and the drop ran outside the stream's callbacks.
    fn gone(_pair: &Pair, _end: usize, _flows: &[MutexGuard<'_, Flow>; 2], settled: bool) -> u8 {
        if settled { CLOSED } else { CLOSING }
    }
}

impl PipeModel {
    /// The pairs opened, pair `p` as `meets[p]` says.
    fn new(meets: [Meet; PAIRS]) -> Self {
        let model = Self {
            listener: Mutex::new(None),
            pairs: (0..PAIRS).map(Pair::empty).collect(),
            pool: ListenerPool::new(),
        };
        for (p, meet) in meets.into_iter().enumerate() {
            model.open(p, meet);
        }
        model
    }

    /// Connects and accepts pair `p` if both its ends are gone.
    fn open(&self, p: usize, meet: Meet) {
        let mut listener = lock(&self.listener);
        let pair = &self.pairs[p];
        let mut ends = [pair.ends[0].write().unwrap(), pair.ends[1].write().unwrap()];
        if ends.iter().any(|e| e.is_some()) {
            return;
        }
        let (l, name) = listener.get_or_insert_with(|| {
            let name = crate::support::unique_pipe_name();
            (PipeOptions::new().bind_in(&name, &self.pool.env).expect("bind"), name)
        });
        let name = name.as_str();
        let (client, accepted) = match meet {
            Meet::AcceptFirst => {
                bounded("accept and connect", async { futures::join!(PipeStream::connect(name), l.accept()) })
            }
            Meet::ClientFirst => {
                let client = bounded("connect", PipeStream::connect(name));
                (client, bounded("an accept of a client there before it", l.accept()))
            }
            Meet::AfterDroppedAccept => {
                let mut accept = l.accept();
                assert!(poll_once(&mut accept).is_pending(), "pipe: an accept with nobody connecting completed");
                let client = bounded("connect", PipeStream::connect(name));
                drop(accept);
                (client, bounded("the accept after a dropped one", l.accept()))
            }
        };
        let (client, server) = (client.expect("connect"), accepted.expect("accept"));
        pair.restart();
        count(&SEEN.opened[meet as usize], 1);
        *ends[0] = Some(client);
        *ends[1] = Some(server);
    }

    fn accept_pending(&self) {
        let listener = lock(&self.listener);
        if let Some((l, _)) = listener.as_ref() {
            let mut accept = l.accept();
            assert!(poll_once(&mut accept).is_pending(), "pipe: an accept with nobody connecting completed");
            count(&SEEN.streams.accepts_cancelled, 1);
        }
    }

    fn write(&self, pair: &Pair, end: usize, len: usize, all: bool) {
        let slot = pair.ends[end].read().unwrap();
        let Some(s) = slot.as_ref() else { return };
        let mut flow = lock(&pair.flows[end]);
        let reader_gone = pair.gone[1 - end].load(SeqCst);
        let data = flow.next_bytes(len);
        let r = if all {
            bounded("a write_all", s.write_all(data.clone())).0.map(|()| len)
        } else {
            bounded("a write", s.write(data.clone())).0
        };
        match reader_gone {
            ALIVE => {
                let n = r.unwrap_or_else(|e| panic!("pipe: a write failed: {e:?}"));
                assert!((1..=len).contains(&n), "pipe: a write of {len} bytes took {n}");
                flow.sent.extend_from_slice(&data[..n]);
            }
            CLOSED => {
                let e = r.expect_err("pipe: a write to a closed peer succeeded");
                assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "pipe: a write to a closed peer: {e:?}");
                count(&SEEN.writes_to_dropped_peers[0], 1);
            }
            _ => {
                if let Err(e) = r {
                    assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "pipe: a write to a dropped peer: {e:?}");
                }
                count(&SEEN.writes_to_dropped_peers[1], 1);
            }
        }
    }

    fn drop_listener(&self, in_task: bool, cancelled: bool) {
        let Some((l, _)) = lock(&self.listener).take() else { return };
        let drop_it = move || {
            if cancelled && !leave_pending(l.accept(), false) {
                return Err("an accept with nobody connecting completed");
            }
            drop(l);
            Ok(())
        };
        let r = if in_task { self.pool.in_task("pipe", 1, "a listener's drop", drop_it) } else { drop_it() };
        r.unwrap_or_else(|e| panic!("pipe: {e}"));
        count(&SEEN.listener_drops, 1);
    }

    /// Reads the flow to end `end` until nothing is unread, and to its end
    /// if its writer is gone (bounded: a read that returns data makes
    /// progress).
    fn drain(&self, pair: &Pair, end: usize) {
        let from = 1 - end;
        let budget = lock(&pair.flows[from]).unread() + 2;
        for _ in 0..budget {
            let done = {
                let flow = lock(&pair.flows[from]);
                flow.ended || (flow.unread() == 0 && pair.gone[from].load(SeqCst) == ALIVE)
            };
            if done || pair.ends[end].read().unwrap().is_none() {
                break;
            }
            read::<Self>(pair, end, 64);
        }
        if pair.ends[end].read().unwrap().is_some() {
            let flow = lock(&pair.flows[from]);
            assert_eq!(flow.unread(), 0, "pipe: {} bytes to end {end} never read", flow.unread());
            let writer_gone = pair.gone[from].load(SeqCst) != ALIVE;
            assert!(flow.ended || !writer_gone, "pipe: the flow to end {end} did not end after its writer's drop");
        }
    }
}

impl Model for PipeModel {
    type Op = Op;

    fn slot(op: &Op) -> usize {
        match *op {
            Op::Open { pair, .. } | Op::Read { pair, .. } | Op::Write { pair, .. } | Op::Drop { pair, .. } => pair,
            Op::Accept | Op::DropListener { .. } => PAIRS,
        }
    }

    fn apply(&self, op: &Op, _alone: bool) {
        match *op {
            Op::Open { pair, meet } => self.open(pair, meet),
            Op::Accept => self.accept_pending(),
            Op::Read { pair, end, len } => read::<Self>(&self.pairs[pair], end, len.into()),
            Op::Write { pair, end, len, all } => self.write(&self.pairs[pair], end, len.into(), all),
            Op::Drop { pair, end, via, left } => {
                streams::drop_stream::<Self>(&self.pool, &self.pairs[pair], end, via, left)
            }
            Op::DropListener { in_task, cancelled } => self.drop_listener(in_task, cancelled),
        }
    }

    fn after_step(&self, _step: &Step<Op>) {}

    /// Every surviving end reads its flow; where both ends survive, a read
    /// pending on end 1 must end with `Ok(0)` when end 0 is dropped, and a
    /// write after it with `BrokenPipe`; then everything is dropped.
    fn finish(&self) {
        for pair in &self.pairs {
            for end in 0..2 {
                self.drain(pair, end);
            }
            let mut ends = [pair.ends[0].write().unwrap(), pair.ends[1].write().unwrap()];
            let [client, server] = &mut ends;
            if client.is_some()
                && let Some(server) = server.as_ref()
            {
                let mut read = server.read(vec![0u8; 8]);
                assert!(poll_once(&mut read).is_pending(), "pipe: a read with nothing to read completed");
                drop(client.take());
                let (r, _) = bounded("a read pending as its peer left", read);
                assert_eq!(r.expect("pipe: a read pending as its peer left"), 0, "pipe: data after the flow");
                count(&SEEN.streams.eofs, 1);
                let (r, _) = bounded("a write to a closed peer", server.write(vec![1u8]));
                let e = r.expect_err("pipe: a write to a closed peer succeeded");
                assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "pipe: a write to a closed peer: {e:?}");
            }
            for end in &mut ends {
                drop(end.take());
            }
        }
        drop(lock(&self.listener).take());
    }
}

fn pipe_lifecycle_cases() {
    let cases = (prop::array::uniform(meet()), engine::steps(op(), MAX_STEPS));
    engine::run_cases(config(), cases, |(meets, steps)| engine::run("pipe", || PipeModel::new(meets), &steps));
}

/// What the cases covered, printed after them.
fn report() {
    let l = |c: &AtomicUsize| c.load(SeqCst);
    let (o, w) = (&SEEN.opened, &SEEN.writes_to_dropped_peers);
    eprintln!(
        "pipe: pairs opened {} (accept first {}, client first {}, after a dropped accept {}), writes to dropped peers \
         {} (closed) + {} (closing), {} listener drops, {}",
        o.iter().map(l).sum::<usize>(),
        l(&o[0]),
        l(&o[1]),
        l(&o[2]),
        l(&w[0]),
        l(&w[1]),
        l(&SEEN.listener_drops),
        SEEN.streams,
    );
}

/// The cases with in-place polling on.
#[test]
fn pipe_lifecycle() {
    streams::run_test("lifecycle::pipe::pipe_lifecycle", true, pipe_lifecycle_cases, report);
}

/// The same cases with in-place polling off: a drop whose rundown cannot
/// settle in place hands it to another thread.
#[test]
fn pipe_lifecycle_without_inplace() {
    streams::run_test("lifecycle::pipe::pipe_lifecycle_without_inplace", false, pipe_lifecycle_cases, || {
        // Each stream dropped with its read forgotten is dropped by that
        // read's completion, from its own callback: a handoff.
        let (forgotten, handoffs) = (SEEN.streams.forgotten.load(SeqCst), windows_threadpool::handoffs());
        assert!(handoffs >= forgotten, "{handoffs} handoffs for {forgotten} drops with a read forgotten");
        report();
    });
}
