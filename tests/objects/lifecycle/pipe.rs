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
//! knows, when a read is issued, what it must see:
//! - bytes unread: the read completes with the next bytes written, in order;
//! - none unread, the writer alive: the read is pending at its first poll;
//!   it is then dropped, and its buffer must be freed (the cancelled
//!   completion arrived) within [`PATIENCE`](engine::PATIENCE), so no later
//!   byte is lost to it;
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
//! completion drops it, in place (no handoff) with in-place polling on;
//! with it off that teardown is handed to another thread, so
//! [`windows_threadpool::handoffs`] grows by at least one per such drop.
//! At the end every surviving end reads its flow to the end, a read left
//! pending on end 1 must end with `Ok(0)` when end 0 is dropped and a
//! write after it with `BrokenPipe`, so every byte is accounted for; then
//! everything is dropped, and the engine waits for the contexts and
//! operation blocks to return to their count before the case.
//!
//! Cases: [`DEFAULT_CASES`], or a share of `PROPTEST_CASES` (see [`config`]).

use std::future::Future;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, mpsc};
use std::task::{Context, Poll, Waker};

use proptest::prelude::*;
use windows_threadpool::pipe::{PipeListener, PipeOptions, PipeStream};
use windows_threadpool::{CallbackEnviron, Pool, Work, task, time};

use super::engine::{self, Model, PATIENCE, Step, THREADS, wait_until};

/// Connected pairs per case.
pub const PAIRS: usize = engine::SLOTS;

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

/// Where a stream's last owner is dropped.
#[derive(Debug, Clone, Copy)]
pub enum Via {
    /// On the step's thread.
    Here,
    /// Inside a task on the pool.
    Task,
    /// Inside a `Work` callback.
    Work,
    /// Inside a task, once woken by its read's completion (the peer writes).
    Woken,
    /// By a cancelled read's completion: its buffer holds the last owner.
    OwnCompletion,
}

/// What is left of a read when its stream is dropped.
#[derive(Debug, Clone, Copy)]
pub enum Left {
    Nothing,
    /// Pending, its future forgotten.
    Forgotten,
    /// Pending, its future dropped (cancelled) just before.
    Cancelled,
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
    let via = prop_oneof![
        2 => Just(Via::Here),
        1 => Just(Via::Task),
        1 => Just(Via::Work),
        1 => Just(Via::Woken),
        1 => Just(Via::OwnCompletion),
    ];
    let left = prop_oneof![Just(Left::Nothing), Just(Left::Forgotten), Just(Left::Cancelled)];
    prop_oneof![
        2 => (p.clone(), meet()).prop_map(|(pair, meet)| Op::Open { pair, meet }),
        1 => Just(Op::Accept),
        5 => (p.clone(), e.clone(), 1u8..=32).prop_map(|(pair, end, len)| Op::Read { pair, end, len }),
        5 => (p.clone(), e.clone(), 1u8..=MAX_WRITE as u8, any::<bool>())
            .prop_map(|(pair, end, len, all)| Op::Write { pair, end, len, all }),
        2 => (p, e, via, left).prop_map(|(pair, end, via, left)| Op::Drop { pair, end, via, left }),
        1 => (any::<bool>(), any::<bool>()).prop_map(|(in_task, cancelled)| Op::DropListener { in_task, cancelled }),
    ]
}

/// How an end is gone (`Pair::gone`).
const ALIVE: u8 = 0;
/// Its drop closed the handle before returning.
const CLOSED: u8 = 1;
/// Its drop left the close to a completion or another thread.
const CLOSING: u8 = 2;

/// The bytes of one direction.
#[derive(Default)]
struct Flow {
    /// Every byte writes took, in order.
    sent: Vec<u8>,
    /// How many of them reads returned.
    received: usize,
    /// A read returned `Ok(0)`: no data may follow.
    ended: bool,
    /// Tags the bytes, so another flow's cannot pass for this one's.
    tag: u8,
}

impl Flow {
    fn unread(&self) -> usize {
        self.sent.len() - self.received
    }

    /// The next `n` bytes this flow's writer sends.
    fn next_bytes(&self, n: usize) -> Vec<u8> {
        (self.sent.len()..self.sent.len() + n).map(|i| (i % 251) as u8 ^ self.tag).collect()
    }
}

struct Pair {
    /// The streams; operations hold the read lock, a drop the write lock.
    ends: [RwLock<Option<PipeStream>>; 2],
    /// Flow `e`: from end `e` to the other. Locked after the ends, 0 before 1.
    flows: [Mutex<Flow>; 2],
    /// Per end: `ALIVE`, or how its drop closed it. Written with both flows locked.
    gone: [AtomicU8; 2],
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pair {
    fn empty(index: usize) -> Self {
        let flow = |e: usize| Mutex::new(Flow { tag: (index * 2 + e) as u8 * 0x40, ..Flow::default() });
        Self {
            ends: [RwLock::new(None), RwLock::new(None)],
            flows: [flow(0), flow(1)],
            gone: [AtomicU8::new(ALIVE), AtomicU8::new(ALIVE)],
        }
    }
}

/// Runs `fut` on this thread; panics naming `what` after [`PATIENCE`].
#[track_caller]
fn bounded<F: Future>(what: &str, fut: F) -> F::Output {
    task::block_on(time::timeout(PATIENCE, fut))
        .unwrap_or_else(|_| panic!("pipe: {what} did not finish in {PATIENCE:?}"))
}

/// Polls `fut` once.
fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    std::pin::Pin::new(fut).poll(&mut Context::from_waker(Waker::noop()))
}

/// A read buffer that records its drop: a dropped read's buffer is freed
/// by its (cancelled) completion. It may hold the stream's last owner.
struct Tracked {
    bytes: Vec<u8>,
    freed: Arc<std::sync::atomic::AtomicBool>,
    owner: Option<Arc<PipeStream>>,
}

impl Tracked {
    fn new(len: usize) -> (Self, Arc<std::sync::atomic::AtomicBool>) {
        let freed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        (Self { bytes: vec![0; len], freed: Arc::clone(&freed), owner: None }, freed)
    }
}

impl AsMut<[u8]> for Tracked {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

/// What the cases did, printed after them: the paths a run covered.
struct Seen {
    opened: [AtomicUsize; 3],
    bytes_read: AtomicUsize,
    reads_cancelled: AtomicUsize,
    eofs: AtomicUsize,
    writes_to_dropped_peers: [AtomicUsize; 2],
    accepts_cancelled: AtomicUsize,
    listener_drops: AtomicUsize,
    drops: [AtomicUsize; 5],
    forgotten: AtomicUsize,
    dropped_by_own_completion: AtomicUsize,
}

static SEEN: Seen = Seen {
    opened: [const { AtomicUsize::new(0) }; 3],
    bytes_read: AtomicUsize::new(0),
    reads_cancelled: AtomicUsize::new(0),
    eofs: AtomicUsize::new(0),
    writes_to_dropped_peers: [const { AtomicUsize::new(0) }; 2],
    accepts_cancelled: AtomicUsize::new(0),
    listener_drops: AtomicUsize::new(0),
    drops: [const { AtomicUsize::new(0) }; 5],
    forgotten: AtomicUsize::new(0),
    dropped_by_own_completion: AtomicUsize::new(0),
};

fn seen(c: &AtomicUsize, n: usize) {
    c.fetch_add(n, SeqCst);
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.take()
            && Arc::strong_count(&owner) == 1
        {
            seen(&SEEN.dropped_by_own_completion, 1);
        }
        self.freed.store(true, SeqCst);
    }
}

#[track_caller]
fn await_freed(freed: &std::sync::atomic::AtomicBool, what: &str) {
    wait_until(|| format!("pipe: the buffer of {what} to be freed (its cancelled completion)"), || freed.load(SeqCst));
}

/// A read on `s` of the flow `from` (`flow`, locked), which the model
/// says must complete: checks its outcome against the flow.
fn read_due(pair: &Pair, s: &PipeStream, from: usize, flow: &mut Flow, len: usize) {
    let writer_gone = pair.gone[from].load(SeqCst);
    let (r, buf) = bounded("a read", s.read(vec![0u8; len]));
    match r {
        Ok(0) => {
            assert!(writer_gone != ALIVE, "pipe: end of file with the writer alive");
            assert_eq!(flow.unread(), 0, "pipe: end of file with bytes unread (a close discarded them)");
            flow.ended = true;
            seen(&SEEN.eofs, 1);
        }
        Ok(n) => {
            assert!(!flow.ended, "pipe: {n} bytes read after the flow ended");
            let want = &flow.sent[flow.received..];
            assert!(n <= want.len(), "pipe: read {n} bytes, {} were sent and unread", want.len());
            assert_eq!(buf[..n], want[..n], "pipe: the bytes read are not the next bytes written");
            flow.received += n;
            seen(&SEEN.bytes_read, n);
        }
        Err(e) => panic!("pipe: a read failed: {e:?} (unread {}, writer gone {writer_gone})", flow.unread()),
    }
}

struct PipeModel {
    /// The listener and its name.
    listener: Mutex<Option<(PipeListener, String)>>,
    pairs: Vec<Pair>,
    /// A private pool limited to one thread: the listener's, so every
    /// accepted end (end 1) completes there, and its tasks run there. A
    /// task there that dropped its stream by draining it in place would
    /// wait for a cancelled completion that needs the thread it holds.
    env: CallbackEnviron,
    _pool: Pool,
}

impl PipeModel {
    /// The pairs opened, pair `p` as `meets[p]` says.
    fn new(meets: [Meet; PAIRS]) -> Self {
        let pool = Pool::new().expect("Pool::new");
        pool.set_max_threads(1).expect("set_max_threads");
        let env = CallbackEnviron::new().with_pool(&pool);
        let model = Self { listener: Mutex::new(None), pairs: (0..PAIRS).map(Pair::empty).collect(), env, _pool: pool };
        for (p, meet) in meets.into_iter().enumerate() {
            model.open(p, meet);
        }
        model
    }

    /// Spawns `fut` on the pool end `end`'s streams complete on.
    fn spawn_for<F>(&self, end: usize, fut: F) -> task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if end == 1 { task::spawn_in(fut, &self.env) } else { task::spawn(fut) }
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
            (PipeOptions::new().bind_in(&name, &self.env).expect("bind"), name)
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
        for (e, flow) in pair.flows.iter().enumerate() {
            let mut f = lock(flow);
            *f = Flow { tag: f.tag, ..Flow::default() };
            pair.gone[e].store(ALIVE, SeqCst);
        }
        seen(&SEEN.opened[meet as usize], 1);
        *ends[0] = Some(client);
        *ends[1] = Some(server);
    }

    fn accept_pending(&self) {
        let listener = lock(&self.listener);
        if let Some((l, _)) = listener.as_ref() {
            let mut accept = l.accept();
            assert!(poll_once(&mut accept).is_pending(), "pipe: an accept with nobody connecting completed");
            seen(&SEEN.accepts_cancelled, 1);
        }
    }

    fn read(&self, pair: &Pair, end: usize, len: usize) {
        let slot = pair.ends[end].read().unwrap();
        let Some(s) = slot.as_ref() else { return };
        let from = 1 - end;
        let mut flow = lock(&pair.flows[from]);
        if flow.unread() == 0 && pair.gone[from].load(SeqCst) == ALIVE {
            let (buf, freed) = Tracked::new(len);
            let mut read = s.read(buf);
            assert!(poll_once(&mut read).is_pending(), "pipe: a read with nothing to read completed");
            drop(read);
            await_freed(&freed, "a dropped read");
            seen(&SEEN.reads_cancelled, 1);
            return;
        }
        read_due(pair, s, from, &mut flow, len);
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
                seen(&SEEN.writes_to_dropped_peers[0], 1);
            }
            _ => {
                if let Err(e) = r {
                    assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "pipe: a write to a dropped peer: {e:?}");
                }
                seen(&SEEN.writes_to_dropped_peers[1], 1);
            }
        }
    }

    fn drop_stream(&self, pair: &Pair, end: usize, via: Via, left: Left) {
        // Both ends, in order (a woken task's peer writes), then both flows.
        let mut guards = [pair.ends[0].write().unwrap(), pair.ends[1].write().unwrap()];
        let Some(s) = guards[end].take() else { return };
        let peer = guards[1 - end].as_ref();
        let mut flows = [lock(&pair.flows[0]), lock(&pair.flows[1])];
        let from = 1 - end;
        let live = pair.gone[from].load(SeqCst) == ALIVE;
        // A drop with a read left needs a flow on which nothing can arrive:
        // what is unread is read first (at most a read per byte).
        let wants_quiet = !matches!((via, left), (Via::Here | Via::Task | Via::Work, Left::Nothing));
        for _ in 0..flows[from].unread() {
            if !(wants_quiet && live && flows[from].unread() > 0) {
                break;
            }
            read_due(pair, &s, from, &mut flows[from], 64);
        }
        // Nothing can arrive for a read: it stays pending.
        let quiet = live && flows[from].unread() == 0;
        // Whether the handle is closed when the drop returns: nothing was
        // in flight, and the drop ran outside the stream's callbacks.
        let closed = match via {
            Via::Woken if quiet && peer.is_some() => {
                let peer = peer.unwrap();
                let (polled_tx, polled_rx) = mpsc::channel();
                let (done_tx, done_rx) = mpsc::channel();
                let t = self.spawn_for(end, async move {
                    let (r, buf) = {
                        let mut read = s.read(vec![0u8; 64]);
                        let _ = polled_tx.send(futures::poll!(&mut read).is_pending());
                        read.await
                    };
                    drop(s);
                    let _ = done_tx.send((r.map_err(|e| e.kind()), buf));
                });
                let pending = polled_rx.recv_timeout(PATIENCE).expect("pipe: the task never polled its read");
                assert!(pending, "pipe: a read with nothing to read completed (in a task)");
                let data = flows[from].next_bytes(8);
                let (sent, _) = bounded("the peer's write_all", peer.write_all(data.clone()));
                sent.expect("the peer's write_all");
                flows[from].sent.extend_from_slice(&data);
                let (r, buf) =
                    done_rx.recv_timeout(PATIENCE).expect("pipe: a read woken by its completion never returned");
                let n = r.expect("pipe: the woken read failed");
                assert!((1..=8).contains(&n) && buf[..n] == data[..n], "pipe: the woken read got {:?}", &buf[..n]);
                flows[from].received += n;
                t.join().expect("the task");
                seen(&SEEN.drops[3], 1);
                false
            }
            Via::OwnCompletion if quiet => {
                let s = Arc::new(s);
                let (mut buf, freed) = Tracked::new(16);
                buf.owner = Some(Arc::clone(&s));
                let mut read = s.read(buf);
                assert!(poll_once(&mut read).is_pending(), "pipe: a read with nothing to read completed");
                drop(read);
                drop(s);
                await_freed(&freed, "a dropped read holding its stream");
                seen(&SEEN.drops[4], 1);
                false
            }
            _ => {
                let (via, left) = if quiet { (via, left) } else { (Via::Here, Left::Nothing) };
                let forgotten = matches!(left, Left::Forgotten);
                let drop_it = move || {
                    match left {
                        Left::Nothing => {}
                        Left::Forgotten | Left::Cancelled => {
                            let mut read = s.read(vec![0u8; 8]);
                            let pending = poll_once(&mut read).is_pending();
                            if forgotten {
                                std::mem::forget(read);
                            }
                            if !pending {
                                return Err("a read with nothing to read completed");
                            }
                        }
                    }
                    drop(s);
                    Ok(())
                };
                let r = match via {
                    Via::Task | Via::Woken | Via::OwnCompletion => {
                        let (tx, rx) = mpsc::channel();
                        let t = self.spawn_for(end, async move {
                            let _ = tx.send(drop_it());
                        });
                        let r = rx.recv_timeout(PATIENCE).expect("pipe: a drop in a task never returned");
                        t.join().expect("the task");
                        r
                    }
                    Via::Work => {
                        let (tx, rx) = mpsc::channel();
                        let cell = Mutex::new(Some((drop_it, tx)));
                        let work = Work::new(move |_| {
                            if let Some((drop_it, tx)) = lock(&cell).take() {
                                let _ = tx.send(drop_it());
                            }
                        })
                        .expect("Work::new");
                        work.submit();
                        let r = rx.recv_timeout(PATIENCE).expect("pipe: a drop in a work callback never returned");
                        work.wait();
                        r
                    }
                    Via::Here => drop_it(),
                };
                r.unwrap_or_else(|e| panic!("pipe: {e}"));
                seen(
                    &SEEN.drops[match via {
                        Via::Here => 0,
                        Via::Work => 2,
                        _ => 1,
                    }],
                    1,
                );
                if forgotten {
                    seen(&SEEN.forgotten, 1);
                }
                matches!(left, Left::Nothing)
            }
        };
        pair.gone[end].store(if closed { CLOSED } else { CLOSING }, SeqCst);
        drop(flows);
    }

    fn drop_listener(&self, in_task: bool, cancelled: bool) {
        let Some((l, _)) = lock(&self.listener).take() else { return };
        let drop_it = move || {
            if cancelled {
                let mut accept = l.accept();
                if poll_once(&mut accept).is_ready() {
                    return Err("an accept with nobody connecting completed");
                }
            }
            drop(l);
            Ok(())
        };
        let r = if in_task {
            let (tx, rx) = mpsc::channel();
            let t = self.spawn_for(1, async move {
                let _ = tx.send(drop_it());
            });
            let r = rx.recv_timeout(PATIENCE).expect("pipe: a listener's drop in a task never returned");
            t.join().expect("the task");
            r
        } else {
            drop_it()
        };
        r.unwrap_or_else(|e| panic!("pipe: {e}"));
        seen(&SEEN.listener_drops, 1);
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
            self.read(pair, end, 64);
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
            Op::Read { pair, end, len } => self.read(&self.pairs[pair], end, len.into()),
            Op::Write { pair, end, len, all } => self.write(&self.pairs[pair], end, len.into(), all),
            Op::Drop { pair, end, via, left } => self.drop_stream(&self.pairs[pair], end, via, left),
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
                seen(&SEEN.eofs, 1);
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

/// Creates the process's one timer driver (a context, kept for good), which
/// the cases' timeouts use, before any case counts the contexts.
fn warm_up() {
    task::block_on(time::sleep(std::time::Duration::from_millis(1)));
}

/// What the cases covered, printed after them.
fn report() {
    let l = |c: &AtomicUsize| c.load(SeqCst);
    let (o, d, w) = (&SEEN.opened, &SEEN.drops, &SEEN.writes_to_dropped_peers);
    eprintln!(
        "pipe: pairs opened {} (accept first {}, client first {}, after a dropped accept {}), {} bytes read, {} reads \
         cancelled, {} EOFs, writes to dropped peers {} (closed) + {} (closing), {} accepts cancelled, {} listener \
         drops; stream drops here {}, in a task {}, in a work callback {}, in a woken task {}, through the own \
         completion {} (by it: {}), with a read forgotten {}; {} handoffs",
        o.iter().map(l).sum::<usize>(),
        l(&o[0]),
        l(&o[1]),
        l(&o[2]),
        l(&SEEN.bytes_read),
        l(&SEEN.reads_cancelled),
        l(&SEEN.eofs),
        l(&w[0]),
        l(&w[1]),
        l(&SEEN.accepts_cancelled),
        l(&SEEN.listener_drops),
        l(&d[0]),
        l(&d[1]),
        l(&d[2]),
        l(&d[3]),
        l(&d[4]),
        l(&SEEN.dropped_by_own_completion),
        l(&SEEN.forgotten),
        windows_threadpool::handoffs(),
    );
}

/// The cases, in a process of their own (the counts are the process's).
#[test]
fn pipe_lifecycle() {
    crate::support::alone("lifecycle::pipe::pipe_lifecycle", || {
        warm_up();
        pipe_lifecycle_cases();
        // The tasks woken by completions ran in place (`task` module docs).
        assert!(task::inplace_polls() > 0, "no task was polled in place");
        report();
    });
}

/// The same cases with in-place polling off (`WINDOWS_THREADPOOL_NO_INPLACE`,
/// read once per process): every wake submits, and a drop whose rundown
/// cannot settle in place hands it to another thread.
#[test]
fn pipe_lifecycle_without_inplace() {
    let name = "lifecycle::pipe::pipe_lifecycle_without_inplace";
    let out = crate::support::child(name, &[("WINDOWS_THREADPOOL_NO_INPLACE", "1")], || {
        warm_up();
        pipe_lifecycle_cases();
        assert_eq!(task::inplace_polls(), 0, "polled in place with in-place polling off");
        // Each stream dropped with its read forgotten is dropped by that
        // read's completion, from its own callback: a handoff.
        let (forgotten, handoffs) = (SEEN.forgotten.load(SeqCst), windows_threadpool::handoffs());
        assert!(handoffs >= forgotten, "{handoffs} handoffs for {forgotten} drops with a read forgotten");
        report();
    });
    print!("{}", out.stdout);
    eprint!("{}", out.stderr);
    out.assert_completed();
}
