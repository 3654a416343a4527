//! What the two stream models share, the sockets model (`net.rs`) and
//! the named pipes model (`pipe.rs`): [`PAIRS`] connected pairs, each two
//! streams (end 0 the connecting one, end 1 the accepted one) and two flows
//! of bytes (flow `e` from end `e` to the other), the reads nothing can
//! complete, a stream's drop, the pool the listener's ends complete on,
//! the coverage counters and how the two tests run the cases. A model's
//! streams come in through [`Stream`] (each stream type has read and write
//! futures of its own); what a model's own streams do (what ends a flow,
//! what a close does to the peer) comes in through [`StreamModel`].
//!
//! Each flow's operations are serialised by the flow's lock; a pair's
//! streams sit behind read-write locks (operations read, a drop writes),
//! always taken before the flows, end 0 before end 1 and flow 0 before
//! flow 1.
//!
//! A read ([`read`]) on a flow on which nothing can arrive (nothing unread,
//! the writer alive and not shut down: [`Pair::quiet`]) is pending at its
//! first poll; it is then dropped, and its buffer must be freed (the
//! cancelled completion arrived) within [`PATIENCE`], so no later byte is
//! lost to it. Any other read must complete: its bytes must be the flow's
//! next ones, and no data may follow what ends the flow (an end of file,
//! or an error the model allows: [`StreamModel::read_ended`]).
//!
//! A stream's drop ([`drop_stream`]) takes its last owner [`Via`] one of
//! five places with a read [`Left`] behind. A read left needs a flow on
//! which nothing can arrive, so what is unread is read first; where the
//! flow cannot be made quiet (its writer is gone or shut down) the drop is
//! a plain one on the step's thread. Dropped in a task woken by its read's
//! completion, the peer writes 8 bytes to wake it, which the read must
//! return. Dropped by the cancelled read's own completion, the read's
//! buffer holds the last owner. A drop with a read forgotten cannot settle
//! the read in place: the read's cancelled completion drops the stream,
//! in place with in-place polling on; with it off, that rundown is handed
//! to another thread ([`windows_threadpool::handoffs`] grows). How the
//! dropped end is gone is the model's ([`StreamModel::gone`]), decided
//! with both flows still locked.

use std::fmt;
use std::future::Future;
use std::io;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, mpsc};
use std::task::{Poll, Waker};

use proptest::prelude::*;
use windows_threadpool::net::TcpStream;
use windows_threadpool::pipe::PipeStream;
use windows_threadpool::{CallbackEnviron, Pool, Work, task, time};

use super::engine::{self, PATIENCE, wait_until};

/// Connected pairs per case.
pub const PAIRS: usize = engine::SLOTS;

/// A stream a model drives.
pub trait Stream: Send + Sync + 'static {
    fn read<B>(&self, buf: B) -> impl Future<Output = (io::Result<usize>, B)> + Send + Unpin + '_
    where
        B: AsMut<[u8]> + Send + 'static;
    fn write_all(&self, data: Vec<u8>) -> impl Future<Output = (io::Result<()>, Vec<u8>)> + Send + '_;
}

/// Both stream types' own `read` and `write_all`.
macro_rules! stream {
    ($t:ty) => {
        impl Stream for $t {
            fn read<B>(&self, buf: B) -> impl Future<Output = (io::Result<usize>, B)> + Send + Unpin + '_
            where
                B: AsMut<[u8]> + Send + 'static,
            {
                <$t>::read(self, buf)
            }

            fn write_all(&self, data: Vec<u8>) -> impl Future<Output = (io::Result<()>, Vec<u8>)> + Send + '_ {
                <$t>::write_all(self, data)
            }
        }
    };
}

stream!(TcpStream);
stream!(PipeStream);

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

/// What is left of a read when its stream (or of an accept when its
/// listener) is dropped.
#[derive(Debug, Clone, Copy)]
pub enum Left {
    Nothing,
    /// Pending, its future forgotten.
    Forgotten,
    /// Pending, its future dropped (cancelled) just before.
    Cancelled,
}

pub fn via() -> impl Strategy<Value = Via> + Clone {
    prop_oneof![
        2 => Just(Via::Here),
        1 => Just(Via::Task),
        1 => Just(Via::Work),
        1 => Just(Via::Woken),
        1 => Just(Via::OwnCompletion),
    ]
}

pub fn left() -> impl Strategy<Value = Left> + Clone {
    prop_oneof![Just(Left::Nothing), Just(Left::Forgotten), Just(Left::Cancelled)]
}

/// An end not dropped (`Pair::gone`); each model names how one is gone.
pub const ALIVE: u8 = 0;

/// The bytes of one direction.
#[derive(Default)]
pub struct Flow {
    /// Every byte writes took, in order.
    pub sent: Vec<u8>,
    /// How many of them reads returned.
    pub received: usize,
    /// The writer shut down its writing side (sockets only).
    pub shut: bool,
    /// A read returned `Ok(0)` or an error the model allows: no data may follow.
    pub ended: bool,
    /// Tags the bytes, so another flow's cannot pass for this one's.
    tag: u8,
}

impl Flow {
    pub fn unread(&self) -> usize {
        self.sent.len() - self.received
    }

    /// The next `n` bytes this flow's writer sends.
    pub fn next_bytes(&self, n: usize) -> Vec<u8> {
        (self.sent.len()..self.sent.len() + n).map(|i| (i % 251) as u8 ^ self.tag).collect()
    }

    /// Checks that the `n` bytes a read returned in `buf` are the flow's
    /// next ones, and takes them as read.
    fn took(&mut self, model: &str, n: usize, buf: &[u8], seen: &Seen) {
        assert!(!self.ended, "{model}: {n} bytes read after the flow ended");
        let want = &self.sent[self.received..];
        assert!(n <= want.len(), "{model}: read {n} bytes, {} were sent and unread", want.len());
        assert_eq!(buf[..n], want[..n], "{model}: the bytes read are not the next bytes written");
        self.received += n;
        count(&seen.bytes_read, n);
    }
}

/// A connected pair's streams and flows; `X` is the model's own state of
/// a pair, reached through `Deref`.
pub struct Pair<S, X = ()> {
    /// The streams; operations hold the read lock, a drop the write lock.
    pub ends: [RwLock<Option<S>>; 2],
    /// Flow `e`: from end `e` to the other. Locked after the ends, 0 before 1.
    pub flows: [Mutex<Flow>; 2],
    /// Per end: [`ALIVE`], or how its drop closed it. Written with both flows locked.
    pub gone: [AtomicU8; 2],
    own: X,
}

impl<S, X: Default> Pair<S, X> {
    pub fn empty(index: usize) -> Self {
        let flow = |e: usize| Mutex::new(Flow { tag: (index * 2 + e) as u8 * 0x40, ..Flow::default() });
        Self {
            ends: [RwLock::new(None), RwLock::new(None)],
            flows: [flow(0), flow(1)],
            gone: [AtomicU8::new(ALIVE), AtomicU8::new(ALIVE)],
            own: X::default(),
        }
    }
}

impl<S, X> Pair<S, X> {
    /// A new connection's flows: nothing sent, both ends alive.
    pub fn restart(&self) {
        for (e, flow) in self.flows.iter().enumerate() {
            let mut f = lock(flow);
            *f = Flow { tag: f.tag, ..Flow::default() };
            self.gone[e].store(ALIVE, SeqCst);
        }
    }

    /// Whether flow `from`'s writer is alive and has not shut down.
    pub fn writing(&self, from: usize, flow: &Flow) -> bool {
        !flow.shut && self.gone[from].load(SeqCst) == ALIVE
    }

    /// Whether nothing can arrive for a read of flow `from` (`flow`, locked).
    pub fn quiet(&self, from: usize, flow: &Flow) -> bool {
        !flow.ended && flow.unread() == 0 && self.writing(from, flow)
    }
}

impl<S, X> Deref for Pair<S, X> {
    type Target = X;

    fn deref(&self) -> &X {
        &self.own
    }
}

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `fut` on this thread; panics naming `what` after [`PATIENCE`].
#[track_caller]
pub fn bounded<F: Future>(model: &str, what: &str, fut: F) -> F::Output {
    task::block_on(time::timeout(PATIENCE, fut))
        .unwrap_or_else(|_| panic!("{model}: {what} did not finish in {PATIENCE:?}"))
}

/// Polls `fut` once.
pub fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    crate::executors::poll_once(fut, Waker::noop())
}

/// Polls `fut` (a read, an accept) once, then forgets it (`forget`) or
/// drops it: whether it was pending.
pub fn leave_pending<F: Future + Unpin>(mut fut: F, forget: bool) -> bool {
    let pending = poll_once(&mut fut).is_pending();
    if forget {
        std::mem::forget(fut);
    }
    pending
}

/// What the cases did, printed after them: the paths a run covered (a
/// stream is dropped by its own completion only when that completion comes
/// after the model's own drop, which nothing forces). Each model adds its
/// own counts.
pub struct Seen {
    pub bytes_read: AtomicUsize,
    pub reads_cancelled: AtomicUsize,
    pub eofs: AtomicUsize,
    pub accepts_cancelled: AtomicUsize,
    /// Stream drops, by [`Via`] (in the order it lists them).
    pub drops: [AtomicUsize; 5],
    /// Stream drops with a read forgotten.
    pub forgotten: AtomicUsize,
    pub dropped_by_own_completion: AtomicUsize,
}

impl Seen {
    pub const fn new() -> Self {
        Self {
            bytes_read: AtomicUsize::new(0),
            reads_cancelled: AtomicUsize::new(0),
            eofs: AtomicUsize::new(0),
            accepts_cancelled: AtomicUsize::new(0),
            drops: [const { AtomicUsize::new(0) }; 5],
            forgotten: AtomicUsize::new(0),
            dropped_by_own_completion: AtomicUsize::new(0),
        }
    }
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = |c: &AtomicUsize| c.load(SeqCst);
        let d = &self.drops;
        write!(
            f,
            "{} bytes read, {} reads cancelled, {} EOFs, {} accepts cancelled; stream drops here {}, in a task {}, \
             in a work callback {}, in a woken task {}, through the own completion {} (by it: {}), with a read \
             forgotten {}; {} handoffs",
            l(&self.bytes_read),
            l(&self.reads_cancelled),
            l(&self.eofs),
            l(&self.accepts_cancelled),
            l(&d[0]),
            l(&d[1]),
            l(&d[2]),
            l(&d[3]),
            l(&d[4]),
            l(&self.dropped_by_own_completion),
            l(&self.forgotten),
            windows_threadpool::handoffs(),
        )
    }
}

pub fn count(c: &AtomicUsize, n: usize) {
    c.fetch_add(n, SeqCst);
}

/// A read buffer that records its drop: a dropped read's buffer is freed
/// by its (cancelled) completion. It may hold the stream's last owner.
struct Tracked<S> {
    bytes: Vec<u8>,
    freed: Arc<AtomicBool>,
    owner: Option<Arc<S>>,
    seen: &'static Seen,
}

impl<S> Tracked<S> {
    fn new(len: usize, seen: &'static Seen) -> (Self, Arc<AtomicBool>) {
        let freed = Arc::new(AtomicBool::new(false));
        (Self { bytes: vec![0; len], freed: Arc::clone(&freed), owner: None, seen }, freed)
    }
}

impl<S> AsMut<[u8]> for Tracked<S> {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

impl<S> Drop for Tracked<S> {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.take()
            && Arc::strong_count(&owner) == 1
        {
            count(&self.seen.dropped_by_own_completion, 1);
        }
        self.freed.store(true, SeqCst);
    }
}

#[track_caller]
fn await_freed(model: &str, freed: &AtomicBool, what: &str) {
    wait_until(
        || format!("{model}: the buffer of {what} to be freed (its cancelled completion)"),
        || freed.load(SeqCst),
    );
}

/// A private pool limited to one thread: the listener's, so every
/// accepted end (end 1) completes there, and its tasks run there. A task
/// there that dropped its stream by draining it in place would wait for a
/// cancelled completion that needs the thread it holds.
pub struct ListenerPool {
    pub env: CallbackEnviron,
    _pool: Pool,
}

impl ListenerPool {
    pub fn new() -> Self {
        let pool = Pool::new().expect("Pool::new");
        pool.set_max_threads(1).expect("set_max_threads");
        Self { env: CallbackEnviron::new().with_pool(&pool), _pool: pool }
    }

    /// Spawns `fut` on the pool end `end`'s streams complete on.
    pub fn spawn_for<F>(&self, end: usize, fut: F) -> task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if end == 1 { task::spawn_in(fut, &self.env) } else { task::spawn(fut) }
    }

    /// Runs `f` in a task on the pool end `end`'s streams complete on;
    /// panics naming `what` if it does not return within [`PATIENCE`].
    pub fn in_task<R: Send + 'static>(
        &self,
        model: &str,
        end: usize,
        what: &str,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> R {
        let (tx, rx) = mpsc::channel();
        let t = self.spawn_for(end, async move {
            let _ = tx.send(f());
        });
        let r = rx.recv_timeout(PATIENCE).unwrap_or_else(|_| panic!("{model}: {what} in a task never returned"));
        t.join().expect("the task");
        r
    }
}

/// Runs `f` in a `Work` callback; panics naming `what` if it does not
/// return within [`PATIENCE`].
fn in_work<R: Send + 'static>(model: &str, what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    let cell = Mutex::new(Some((f, tx)));
    let work = Work::new(move |_| {
        if let Some((f, tx)) = lock(&cell).take() {
            let _ = tx.send(f());
        }
    })
    .expect("Work::new");
    work.submit();
    let r = rx.recv_timeout(PATIENCE).unwrap_or_else(|_| panic!("{model}: {what} in a work callback never returned"));
    work.wait();
    r
}

/// A stream model: what [`read`] and [`drop_stream`] need of it.
pub trait StreamModel {
    type Stream: Stream;
    /// The model's own state of a pair.
    type Own: Default;
    /// Names the model in messages.
    const NAME: &'static str;
    fn seen() -> &'static Seen;
    /// Checks a read of flow `from` (`flow`, locked) that returned an end
    /// of file (`Ok(())`) or failed: panics unless the model allows it.
    /// The flow ends after it.
    fn read_ended(pair: &PairOf<Self>, from: usize, flow: &Flow, r: io::Result<()>);
    /// How end `end` is gone after its drop (both flows locked). `settled`:
    /// the drop left nothing in flight and ran outside the stream's own
    /// callbacks.
    fn gone(pair: &PairOf<Self>, end: usize, flows: &[MutexGuard<'_, Flow>; 2], settled: bool) -> u8;
}

pub type PairOf<M> = Pair<<M as StreamModel>::Stream, <M as StreamModel>::Own>;

/// A read on `s` of the flow `from` (`flow`, locked), which the model says
/// must complete: checks its outcome against the flow.
fn read_due<M: StreamModel>(pair: &PairOf<M>, s: &M::Stream, from: usize, flow: &mut Flow, len: usize) {
    let (r, buf) = bounded(M::NAME, "a read", s.read(vec![0u8; len]));
    match r {
        Ok(n) if n > 0 => flow.took(M::NAME, n, &buf, M::seen()),
        r => {
            let eof = r.is_ok();
            M::read_ended(pair, from, flow, r.map(drop));
            flow.ended = true;
            if eof {
                count(&M::seen().eofs, 1);
            }
        }
    }
}

/// A read of up to `len` bytes on end `end`, pending and dropped if nothing
/// can arrive, else due (see the module docs).
pub fn read<M: StreamModel>(pair: &PairOf<M>, end: usize, len: usize) {
    let slot = pair.ends[end].read().unwrap();
    let Some(s) = slot.as_ref() else { return };
    let from = 1 - end;
    let mut flow = lock(&pair.flows[from]);
    if pair.quiet(from, &flow) {
        let (buf, freed) = Tracked::<M::Stream>::new(len, M::seen());
        let mut read = s.read(buf);
        assert!(poll_once(&mut read).is_pending(), "{}: a read with nothing to read completed", M::NAME);
        drop(read);
        await_freed(M::NAME, &freed, "a dropped read");
        count(&M::seen().reads_cancelled, 1);
        return;
    }
    read_due::<M>(pair, s, from, &mut flow, len);
}

/// Drops end `end` of `pair` `via` a place, with a read `left` (see the
/// module docs); `pool` is the model's.
pub fn drop_stream<M: StreamModel>(pool: &ListenerPool, pair: &PairOf<M>, end: usize, via: Via, left: Left) {
    let name = M::NAME;
    let seen = M::seen();
    // Both ends, in order (a woken task's peer writes), then both flows.
    let mut guards = [pair.ends[0].write().unwrap(), pair.ends[1].write().unwrap()];
    let Some(s) = guards[end].take() else { return };
    let peer = guards[1 - end].as_ref();
    let mut flows = [lock(&pair.flows[0]), lock(&pair.flows[1])];
    let from = 1 - end;
    // A drop with a read left needs a flow on which nothing can arrive:
    // what is unread is read first (at most a read per byte).
    let wants_quiet = !matches!((via, left), (Via::Here | Via::Task | Via::Work, Left::Nothing));
    let live = pair.writing(from, &flows[from]);
    for _ in 0..flows[from].unread() {
        if !(wants_quiet && live && flows[from].unread() > 0) {
            break;
        }
        read_due::<M>(pair, &s, from, &mut flows[from], 64);
    }
    // Nothing can arrive for a read: it stays pending.
    let quiet = pair.quiet(from, &flows[from]);
    let settled = match via {
        Via::Woken if quiet && peer.is_some() => {
            let peer = peer.unwrap();
            let (polled_tx, polled_rx) = mpsc::channel();
            let (done_tx, done_rx) = mpsc::channel();
            let t = pool.spawn_for(end, async move {
                let (r, buf) = {
                    let mut read = s.read(vec![0u8; 64]);
                    let _ = polled_tx.send(futures::poll!(&mut read).is_pending());
                    read.await
                };
                drop(s);
                let _ = done_tx.send((r.map_err(|e| e.kind()), buf));
            });
            let pending =
                polled_rx.recv_timeout(PATIENCE).unwrap_or_else(|_| panic!("{name}: the task never polled its read"));
            assert!(pending, "{name}: a read with nothing to read completed (in a task)");
            let data = flows[from].next_bytes(8);
            let (sent, _) = bounded(name, "the peer's write_all", peer.write_all(data.clone()));
            sent.expect("the peer's write_all");
            flows[from].sent.extend_from_slice(&data);
            let (r, buf) = done_rx
                .recv_timeout(PATIENCE)
                .unwrap_or_else(|_| panic!("{name}: a read woken by its completion never returned"));
            let n = r.unwrap_or_else(|e| panic!("{name}: the woken read failed: {e:?}"));
            assert!((1..=8).contains(&n) && buf[..n] == data[..n], "{name}: the woken read got {:?}", &buf[..n]);
            flows[from].received += n;
            t.join().expect("the task");
            count(&seen.drops[Via::Woken as usize], 1);
            false
        }
        Via::OwnCompletion if quiet => {
            let s = Arc::new(s);
            let (mut buf, freed) = Tracked::new(16, seen);
            buf.owner = Some(Arc::clone(&s));
            let mut read = s.read(buf);
            assert!(poll_once(&mut read).is_pending(), "{name}: a read with nothing to read completed");
            drop(read);
            drop(s);
            await_freed(name, &freed, "a dropped read holding its stream");
            count(&seen.drops[Via::OwnCompletion as usize], 1);
            false
        }
        _ => {
            let (via, left) = if quiet { (via, left) } else { (Via::Here, Left::Nothing) };
            let forgotten = matches!(left, Left::Forgotten);
            let drop_it = move || {
                if !matches!(left, Left::Nothing) && !leave_pending(s.read(vec![0u8; 8]), forgotten) {
                    return Err("a read with nothing to read completed");
                }
                drop(s);
                Ok(())
            };
            let (r, counted) = match via {
                Via::Here => (drop_it(), Via::Here),
                Via::Work => (in_work(name, "a drop", drop_it), Via::Work),
                _ => (pool.in_task(name, end, "a drop", drop_it), Via::Task),
            };
            r.unwrap_or_else(|e| panic!("{name}: {e}"));
            count(&seen.drops[counted as usize], 1);
            if forgotten {
                count(&seen.forgotten, 1);
            }
            matches!(left, Left::Nothing)
        }
    };
    pair.gone[end].store(M::gone(pair, end, &flows, settled), SeqCst);
    drop(flows);
}

/// Creates the process's one timer driver (a context, kept for good), which
/// the cases' timeouts use, before any case counts the contexts.
fn warm_up() {
    task::block_on(time::sleep(std::time::Duration::from_millis(1)));
}

/// Runs `cases` as the test `test` (its full name), in a process of its
/// own (the counts are the process's), then `after` (the model's checks
/// and report). With `inplace`, the tasks woken by completions must have
/// run in place (`task` module docs); without, the cases run in a child
/// with in-place polling off (`WINDOWS_THREADPOOL_NO_INPLACE`, read once
/// per process): every wake submits.
pub fn run_test(test: &str, inplace: bool, cases: impl FnOnce(), after: impl FnOnce()) {
    let body = || {
        warm_up();
        cases();
        if inplace {
            assert!(task::inplace_polls() > 0, "no task was polled in place");
        } else {
            assert_eq!(task::inplace_polls(), 0, "polled in place with in-place polling off");
        }
        after();
    };
    if inplace {
        crate::support::alone(test, body);
    } else {
        let out = crate::support::child(test, &[("WINDOWS_THREADPOOL_NO_INPLACE", "1")], body);
        print!("{}", out.stdout);
        eprint!("{}", out.stderr);
        out.assert_completed();
    }
}
