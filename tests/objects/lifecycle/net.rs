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
//! knows, when a read is issued, what it must see:
//! - bytes unread: the read completes with the next bytes written, in order;
//! - none unread, the writer alive and not shut down: nothing can arrive,
//!   so the read is pending at its first poll; it is then dropped, and its
//!   buffer must be freed (the cancelled completion arrived) within
//!   [`PATIENCE`](engine::PATIENCE), so no later byte is lost to it;
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
//! A drop with a read forgotten cannot settle the read in place: with
//! in-place polling on, the cancelled read's own completion drops the
//! stream; with it off, the rundown is handed off
//! ([`windows_threadpool::handoffs`] grows).
//! At the end every surviving end shuts its writing side down and reads
//! its flow to the end, so every byte is accounted for, then everything is
//! dropped, and the engine waits for the contexts and operation blocks to
//! return to their count before the case (a handed-off rundown frees its
//! object's context when it is done).
//!
//! Cases: [`DEFAULT_CASES`], or a share of `PROPTEST_CASES` (see [`config`]).

use std::future::Future;
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, mpsc};
use std::task::{Context, Poll, Waker};

use proptest::prelude::*;
use windows_threadpool::net::{TcpListener, TcpStream};
use windows_threadpool::{CallbackEnviron, Pool, Work, task, time};

use super::engine::{self, Model, PATIENCE, Step, wait_until};

/// Connected pairs per case.
pub const PAIRS: usize = engine::SLOTS;

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

/// What is left of a read when its stream (or an accept when its listener)
/// is dropped.
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
    let via = prop_oneof![
        2 => Just(Via::Here),
        1 => Just(Via::Task),
        1 => Just(Via::Work),
        1 => Just(Via::Woken),
        1 => Just(Via::OwnCompletion),
    ];
    let left = prop_oneof![Just(Left::Nothing), Just(Left::Forgotten), Just(Left::Cancelled)];
    prop_oneof![
        2 => p.clone().prop_map(Op::Open),
        1 => Just(Op::Accept),
        5 => (p.clone(), e.clone(), 1u8..=32).prop_map(|(pair, end, len)| Op::Read { pair, end, len }),
        5 => (p.clone(), e.clone(), 1u8..=48, any::<bool>())
            .prop_map(|(pair, end, len, all)| Op::Write { pair, end, len, all }),
        1 => (p.clone(), e.clone()).prop_map(|(pair, end)| Op::Shutdown { pair, end }),
        2 => (p, e, via, left.clone()).prop_map(|(pair, end, via, left)| Op::Drop { pair, end, via, left }),
        1 => (any::<bool>(), left).prop_map(|(in_task, left)| Op::DropListener { in_task, left }),
    ]
}

/// How an end is gone (`Pair::gone`).
const ALIVE: u8 = 0;
const GRACEFUL: u8 = 1;
const ABORTIVE: u8 = 2;

/// The bytes of one direction.
#[derive(Default)]
struct Flow {
    /// Every byte writes took, in order.
    sent: Vec<u8>,
    /// How many of them reads returned.
    received: usize,
    /// The writer shut down its writing side.
    shut: bool,
    /// A read returned `Ok(0)` or a reset: no data may follow.
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
    ends: [RwLock<Option<TcpStream>>; 2],
    /// Flow `e`: from end `e` to the other. Locked after the ends, 0 before 1.
    flows: [Mutex<Flow>; 2],
    /// Per end: `ALIVE`, or how its drop closed it. Written with both flows locked.
    gone: [AtomicU8; 2],
    /// Per flow: its reader may see a reset. Set before what may cause one
    /// (a write to a dropped peer); read after a read's result.
    reset_possible: [AtomicBool; 2],
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
            reset_possible: [AtomicBool::new(false), AtomicBool::new(false)],
        }
    }
}

/// Whether a read or write error is the reset an abortive close causes.
fn is_reset(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionReset | ConnectionAborted)
}

/// Runs `fut` on this thread; panics naming `what` after [`PATIENCE`].
#[track_caller]
fn bounded<F: Future>(what: &str, fut: F) -> F::Output {
    task::block_on(time::timeout(PATIENCE, fut))
        .unwrap_or_else(|_| panic!("net: {what} did not finish in {PATIENCE:?}"))
}

/// Polls `fut` once.
fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    std::pin::Pin::new(fut).poll(&mut Context::from_waker(Waker::noop()))
}

/// A read buffer that records its drop: a dropped read's buffer is freed
/// by its (cancelled) completion. It may hold the stream's last owner.
struct Tracked {
    bytes: Vec<u8>,
    freed: Arc<AtomicBool>,
    owner: Option<Arc<TcpStream>>,
}

impl Tracked {
    fn new(len: usize) -> (Self, Arc<AtomicBool>) {
        let freed = Arc::new(AtomicBool::new(false));
        (Self { bytes: vec![0; len], freed: Arc::clone(&freed), owner: None }, freed)
    }
}

impl AsMut<[u8]> for Tracked {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

/// What the cases did, printed after them: the paths a run covered (a
/// stream is dropped by its own completion only when that completion comes
/// after the model's own drop, which nothing forces).
#[derive(Default)]
struct Seen {
    opened: AtomicUsize,
    bytes_read: AtomicUsize,
    reads_cancelled: AtomicUsize,
    eofs: AtomicUsize,
    resets: AtomicUsize,
    writes_to_dropped_peers: AtomicUsize,
    accepts_cancelled: AtomicUsize,
    drops: [AtomicUsize; 5],
    dropped_by_own_completion: AtomicUsize,
}

static SEEN: Seen = Seen {
    opened: AtomicUsize::new(0),
    bytes_read: AtomicUsize::new(0),
    reads_cancelled: AtomicUsize::new(0),
    eofs: AtomicUsize::new(0),
    resets: AtomicUsize::new(0),
    writes_to_dropped_peers: AtomicUsize::new(0),
    accepts_cancelled: AtomicUsize::new(0),
    drops: [const { AtomicUsize::new(0) }; 5],
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
fn await_freed(freed: &AtomicBool, what: &str) {
    wait_until(|| format!("net: the buffer of {what} to be freed (its cancelled completion)"), || freed.load(SeqCst));
}

/// A read on `s` of the flow `from` (`flow`, locked), which the model
/// says must complete: checks its outcome against the flow.
fn read_due(pair: &Pair, s: &TcpStream, from: usize, flow: &mut Flow, len: usize) {
    let writer_gone = pair.gone[from].load(SeqCst);
    let (r, buf) = bounded("a read", s.read(vec![0u8; len]));
    let reset_possible = pair.reset_possible[from].load(SeqCst);
    match r {
        Ok(0) => {
            assert!(flow.shut || writer_gone != ALIVE, "net: end of file with the writer alive and not shut down");
            assert!(
                flow.unread() == 0 || reset_possible,
                "net: end of file with {} bytes unread and no reset possible",
                flow.unread()
            );
            flow.ended = true;
            seen(&SEEN.eofs, 1);
        }
        Ok(n) => {
            assert!(!flow.ended, "net: {n} bytes read after the flow ended");
            let want = &flow.sent[flow.received..];
            assert!(n <= want.len(), "net: read {n} bytes, {} were sent and unread", want.len());
            assert_eq!(buf[..n], want[..n], "net: the bytes read are not the next bytes written");
            flow.received += n;
            seen(&SEEN.bytes_read, n);
        }
        Err(e) if is_reset(&e) && reset_possible => {
            flow.ended = true;
            seen(&SEEN.resets, 1);
        }
        Err(e) => panic!(
            "net: a read failed: {e:?} (unread {}, shut {}, writer gone {writer_gone}, reset possible \
             {reset_possible})",
            flow.unread(),
            flow.shut
        ),
    }
}

struct NetModel {
    listener: Mutex<Option<TcpListener>>,
    pairs: Vec<Pair>,
    /// A private pool limited to one thread: the listener's, so every
    /// accepted end (end 1) completes there, and its tasks run there. A
    /// task there that dropped its stream by draining it in place would
    /// wait for a cancelled completion that needs the thread it holds.
    env: CallbackEnviron,
    _pool: Pool,
}

impl NetModel {
    fn new() -> Self {
        let pool = Pool::new().expect("Pool::new");
        pool.set_max_threads(1).expect("set_max_threads");
        let env = CallbackEnviron::new().with_pool(&pool);
        let model = Self { listener: Mutex::new(None), pairs: (0..PAIRS).map(Pair::empty).collect(), env, _pool: pool };
        for p in 0..PAIRS {
            model.open(p);
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
    fn open(&self, p: usize) {
        let mut listener = lock(&self.listener);
        let pair = &self.pairs[p];
        let mut ends = [pair.ends[0].write().unwrap(), pair.ends[1].write().unwrap()];
        if ends.iter().any(|e| e.is_some()) {
            return;
        }
        let l = listener.get_or_insert_with(|| TcpListener::bind_in("127.0.0.1:0", &self.env).expect("bind"));
        let addr = l.local_addr().unwrap();
        let (client, accepted) =
            bounded("connect and accept", async { futures::join!(TcpStream::connect(addr), l.accept()) });
        let (client, (server, peer)) = (client.expect("connect"), accepted.expect("accept"));
        assert_eq!(peer, client.local_addr().unwrap(), "net: an accept gave another pair's connection");
        for (e, flow) in pair.flows.iter().enumerate() {
            let mut f = lock(flow);
            *f = Flow { tag: f.tag, ..Flow::default() };
            pair.gone[e].store(ALIVE, SeqCst);
            pair.reset_possible[e].store(false, SeqCst);
        }
        seen(&SEEN.opened, 1);
        *ends[0] = Some(client);
        *ends[1] = Some(server);
    }

    fn accept_pending(&self) {
        let listener = lock(&self.listener);
        if let Some(l) = listener.as_ref() {
            let mut accept = l.accept();
            assert!(poll_once(&mut accept).is_pending(), "net: an accept with nobody connecting completed");
            seen(&SEEN.accepts_cancelled, 1);
        }
    }

    fn read(&self, pair: &Pair, end: usize, len: usize) {
        let slot = pair.ends[end].read().unwrap();
        let Some(s) = slot.as_ref() else { return };
        let from = 1 - end;
        let mut flow = lock(&pair.flows[from]);
        let writer_gone = pair.gone[from].load(SeqCst);
        if !flow.ended && flow.unread() == 0 && !flow.shut && writer_gone == ALIVE {
            let (buf, freed) = Tracked::new(len);
            let mut read = s.read(buf);
            assert!(poll_once(&mut read).is_pending(), "net: a read with nothing to read completed");
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
            seen(&SEEN.writes_to_dropped_peers, 1);
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

    fn drop_stream(&self, pair: &Pair, end: usize, via: Via, left: Left) {
        // Both ends, in order (a woken task's peer writes), then both flows.
        let mut guards = [pair.ends[0].write().unwrap(), pair.ends[1].write().unwrap()];
        let Some(s) = guards[end].take() else { return };
        let peer = guards[1 - end].as_ref();
        let mut flows = [lock(&pair.flows[0]), lock(&pair.flows[1])];
        let from = 1 - end;
        // A drop with a read left needs a flow on which nothing can arrive:
        // what is unread is read first (at most a read per byte).
        let wants_quiet = !matches!((via, left), (Via::Here | Via::Task | Via::Work, Left::Nothing));
        let live = !flows[from].shut && pair.gone[from].load(SeqCst) == ALIVE;
        for _ in 0..flows[from].unread() {
            if !(wants_quiet && live && flows[from].unread() > 0) {
                break;
            }
            read_due(pair, &s, from, &mut flows[from], 64);
        }
        // Nothing can arrive for a read: it stays pending.
        let quiet = flows[from].unread() == 0 && !flows[from].shut && pair.gone[from].load(SeqCst) == ALIVE;
        match via {
            Via::Woken if quiet && peer.is_some() && !flows[from].shut => {
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
                let pending = polled_rx.recv_timeout(PATIENCE).expect("net: the task never polled its read");
                assert!(pending, "net: a read with nothing to read completed (in a task)");
                let data = flows[from].next_bytes(8);
                let (sent, _) = bounded("the peer's write_all", peer.write_all(data.clone()));
                sent.expect("the peer's write_all");
                flows[from].sent.extend_from_slice(&data);
                let (r, buf) =
                    done_rx.recv_timeout(PATIENCE).expect("net: a read woken by its completion never returned");
                let n = r.expect("net: the woken read failed");
                assert!((1..=8).contains(&n) && buf[..n] == data[..n], "net: the woken read got {:?}", &buf[..n]);
                flows[from].received += n;
                t.join().expect("the task");
                seen(&SEEN.drops[3], 1);
            }
            Via::OwnCompletion if quiet => {
                let s = Arc::new(s);
                let (mut buf, freed) = Tracked::new(16);
                buf.owner = Some(Arc::clone(&s));
                let mut read = s.read(buf);
                assert!(poll_once(&mut read).is_pending(), "net: a read with nothing to read completed");
                drop(read);
                drop(s);
                await_freed(&freed, "a dropped read holding its stream");
                seen(&SEEN.drops[4], 1);
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
                        let r = rx.recv_timeout(PATIENCE).expect("net: a drop in a task never returned");
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
                        let r = rx.recv_timeout(PATIENCE).expect("net: a drop in a work callback never returned");
                        work.wait();
                        r
                    }
                    Via::Here => drop_it(),
                };
                r.unwrap_or_else(|e| panic!("net: {e}"));
                seen(
                    &SEEN.drops[match via {
                        Via::Here => 0,
                        Via::Work => 2,
                        _ => 1,
                    }],
                    1,
                );
            }
        }
        // Unread data makes `closesocket` reset the connection.
        let abortive = flows[from].unread() > 0;
        pair.gone[end].store(if abortive { ABORTIVE } else { GRACEFUL }, SeqCst);
        if abortive {
            pair.reset_possible[end].store(true, SeqCst);
        }
        drop(flows);
    }

    fn drop_listener(&self, in_task: bool, left: Left) {
        let Some(l) = lock(&self.listener).take() else { return };
        let forgotten = matches!(left, Left::Forgotten);
        let drop_it = move || {
            if !matches!(left, Left::Nothing) {
                let mut accept = l.accept();
                let pending = poll_once(&mut accept).is_pending();
                if forgotten {
                    std::mem::forget(accept);
                }
                if !pending {
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
            let r = rx.recv_timeout(PATIENCE).expect("net: a listener's drop in a task never returned");
            t.join().expect("the task");
            r
        } else {
            drop_it()
        };
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
            Op::Read { pair, end, len } => self.read(&self.pairs[pair], end, len.into()),
            Op::Write { pair, end, len, all } => self.write(&self.pairs[pair], end, len.into(), all),
            Op::Shutdown { pair, end } => self.shutdown(&self.pairs[pair], end),
            Op::Drop { pair, end, via, left } => self.drop_stream(&self.pairs[pair], end, via, left),
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
                    self.read(pair, end, 64);
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

/// Creates the process's one timer driver (a context, kept for good), which
/// the cases' timeouts use, before any case counts the contexts.
fn warm_up() {
    task::block_on(time::sleep(std::time::Duration::from_millis(1)));
}

/// The cases, in a process of their own (the counts are the process's).
#[test]
fn net_lifecycle() {
    crate::support::alone("lifecycle::net::net_lifecycle", || {
        warm_up();
        net_lifecycle_cases();
        // The tasks woken by completions ran in place (`task` module docs).
        assert!(task::inplace_polls() > 0, "no task was polled in place");
    });
    let l = |c: &AtomicUsize| c.load(SeqCst);
    let d = &SEEN.drops;
    eprintln!(
        "net: {} pairs opened, {} bytes read, {} reads cancelled, {} EOFs, {} resets, {} writes to dropped peers, \
         {} accepts cancelled; stream drops here {}, in a task {}, in a work callback {}, in a woken task {}, \
         through the own completion {} (by it: {}); {} handoffs",
        l(&SEEN.opened),
        l(&SEEN.bytes_read),
        l(&SEEN.reads_cancelled),
        l(&SEEN.eofs),
        l(&SEEN.resets),
        l(&SEEN.writes_to_dropped_peers),
        l(&SEEN.accepts_cancelled),
        l(&d[0]),
        l(&d[1]),
        l(&d[2]),
        l(&d[3]),
        l(&d[4]),
        l(&SEEN.dropped_by_own_completion),
        windows_threadpool::handoffs(),
    );
}

/// The same cases with in-place polling off (`WINDOWS_THREADPOOL_NO_INPLACE`,
/// read once per process): every wake submits, as before it existed.
#[test]
fn net_lifecycle_without_inplace() {
    let name = "lifecycle::net::net_lifecycle_without_inplace";
    let out = crate::support::child(name, &[("WINDOWS_THREADPOOL_NO_INPLACE", "1")], || {
        warm_up();
        net_lifecycle_cases();
        assert_eq!(task::inplace_polls(), 0, "polled in place with in-place polling off");
    });
    print!("{}", out.stdout);
    eprint!("{}", out.stderr);
    out.assert_completed();
}
