//! The hot paths allocate nothing: work submission, timer arming and re-arming
//! from a firing, periodic start and stop, wait arming and re-arming from an
//! activation. Issuing an I/O operation allocates exactly one block, the
//! operation's own storage (its `OVERLAPPED` and payload), and resubmitting a
//! claimed operation allocates nothing; the futures of sockets and pipes
//! (reads, writes, accepts, datagrams) allocate nothing in steady state. Runs in every feature configuration;
//! with `trace` it runs again in a child process with every target armed.
//!
//! A counting global allocator counts the allocations of one watched thread
//! at a time (a thread id, not a thread-local: on this target thread-locals
//! are allocated lazily, which would recurse into the allocator). A window is
//! opened on the thread that makes the call, so allocations by other threads
//! (pool threads, the test harness) are not counted. A re-arm from inside a
//! callback is measured on the callback's thread; a timer's re-arm is applied
//! by the trampoline after the callback returns, so that window stays open
//! until the test has drained the timer. Each scenario first does the
//! operation once outside a window (one-time lazy state such as the trace
//! ring), then measures many calls, and then checks the calls took effect.
#![cfg(windows)]

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::os::windows::io::AsRawHandle;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use windows_sys::Win32::Storage::FileSystem::ReadFile;
use windows_sys::Win32::System::Threading::GetCurrentThreadId;
use windows_threadpool::Deadline;
use windows_threadpool::Work;
use windows_threadpool::io::{self, Io, IoCompletion, Operation, OperationId};
use windows_threadpool::timer::{PeriodicTimer, Timer};
use windows_threadpool::wait::{Event, Wait};

struct Counting;

/// The thread whose allocations are counted (0: none; no thread has id 0).
static WATCHED: AtomicU32 = AtomicU32::new(0);
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// The size of the last allocation counted, for failure messages.
static LAST_SIZE: AtomicUsize = AtomicUsize::new(0);
/// The address of the last allocation counted (an I/O operation's block is
/// the address its `OperationId` names).
static LAST_PTR: AtomicUsize = AtomicUsize::new(0);

fn tid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { GetCurrentThreadId() }
}

fn note(size: usize, ptr: *mut u8) {
    let w = WATCHED.load(SeqCst);
    if w != 0 && w == tid() {
        COUNT.fetch_add(1, SeqCst);
        LAST_SIZE.store(size, SeqCst);
        LAST_PTR.store(ptr as usize, SeqCst);
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged; the
// bookkeeping only touches atomics and never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc(layout) };
        note(layout.size(), p);
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc_zeroed(layout) };
        note(layout.size(), p);
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        note(new_size, p);
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Opens the (one, process-wide) counting window on the calling thread.
fn open_here() {
    COUNT.store(0, SeqCst);
    let prev = WATCHED.swap(tid(), SeqCst);
    assert_eq!(prev, 0, "a counting window was already open");
}

/// Closes the window, wherever it was opened; the allocations it counted.
fn close() -> Counted {
    let prev = WATCHED.swap(0, SeqCst);
    assert_ne!(prev, 0, "no counting window was open");
    Counted { n: COUNT.load(SeqCst), last_size: LAST_SIZE.load(SeqCst), last_ptr: LAST_PTR.load(SeqCst) }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Counted {
    n: usize,
    last_size: usize,
    last_ptr: usize,
}

#[track_caller]
fn assert_none(what: &str, c: Counted) {
    assert_eq!(c.n, 0, "{what} allocated {} time(s) (last: {} bytes)", c.n, c.last_size);
}

/// Allocations the current thread makes in `f`.
fn count_here(f: impl FnOnce()) -> Counted {
    open_here();
    f();
    close()
}

/// Tests share one window, so they run one at a time (libtest may run them
/// on parallel threads of one process).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A count callbacks bump and the test waits on (allocation-free on both sides).
#[derive(Default)]
struct Progress {
    n: Mutex<usize>,
    cv: Condvar,
}

impl Progress {
    fn bump(&self) -> usize {
        let mut n = self.n.lock().unwrap();
        *n += 1;
        self.cv.notify_all();
        *n
    }
    #[track_caller]
    fn wait_for(&self, at_least: usize) {
        let g = self.n.lock().unwrap();
        let (g, to) = self.cv.wait_timeout_while(g, Duration::from_secs(20), |n| *n < at_least).unwrap();
        assert!(!to.timed_out(), "waited 20 s for {at_least} callbacks, saw {}", *g);
    }
    fn get(&self) -> usize {
        *self.n.lock().unwrap()
    }
}

const CALLS: usize = 200;
const ROUNDS: usize = 20;

fn counter_counts() {
    let mut at = 0;
    let c = count_here(|| {
        let b = std::hint::black_box(Box::new(7u64));
        at = &*b as *const u64 as usize;
    });
    assert_eq!(
        c,
        Counted { n: 1, last_size: 8, last_ptr: at },
        "an allocation in the window must be counted, at its address"
    );

    // Another thread's allocation, made while the window is open here, is not.
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let b = Arc::clone(&barrier);
    let other = std::thread::spawn(move || {
        b.wait();
        drop(std::hint::black_box(Box::new([0u8; 32])));
        b.wait();
    });
    let c = count_here(|| {
        barrier.wait();
        barrier.wait();
    });
    other.join().unwrap();
    assert_none("waiting while another thread allocates", c);

    // A window opened inside a pool callback counts that thread's allocations.
    let seen = Arc::new(Mutex::new(None));
    let s = Arc::clone(&seen);
    let work = Work::new(move |_| {
        let c = count_here(|| drop(std::hint::black_box(vec![1u8; 100])));
        *s.lock().unwrap() = Some(c);
    })
    .unwrap();
    work.submit();
    work.wait();
    let seen = seen.lock().unwrap().expect("the callback ran");
    assert_eq!((seen.n, seen.last_size), (1, 100));
}

fn work_submit() {
    let p = Arc::new(Progress::default());
    let q = Arc::clone(&p);
    let work = Work::new(move |_| {
        q.bump();
    })
    .unwrap();
    work.submit();
    work.wait();
    let c = count_here(|| {
        for _ in 0..CALLS {
            work.submit();
        }
    });
    work.wait();
    assert_none("Work::submit", c);
    assert_eq!(p.get(), CALLS + 1, "every submission ran");
}

fn one_shot_arming() {
    let p = Arc::new(Progress::default());
    let q = Arc::clone(&p);
    let timer = Timer::new(move |_| {
        q.bump();
    })
    .unwrap();
    timer.arm(Duration::ZERO);
    p.wait_for(1);
    let far = Duration::from_secs(3600);
    let c = count_here(|| {
        for _ in 0..CALLS {
            timer.arm(far);
            timer.arm(SystemTime::now() + far);
            timer.arm(Instant::now() + far);
            timer.arm(Deadline::NEVER);
        }
        timer.arm(Duration::from_millis(1));
    });
    assert_none("Timer::arm with each kind of deadline", c);
    p.wait_for(2);
    timer.stop_and_drain();
}

fn one_shot_rearm_from_firing() {
    // Odd firings open a window and re-arm; the even firing the re-arm
    // produces reports progress. The window closes after the test has
    // drained the timer, so it covers the trampoline applying the re-arm.
    let p = Arc::new(Progress::default());
    let fired = Arc::new(AtomicUsize::new(0));
    let (q, f) = (Arc::clone(&p), Arc::clone(&fired));
    let timer = Timer::new(move |firing| {
        if f.fetch_add(1, SeqCst) % 2 == 0 {
            open_here();
            firing.rearm(Duration::from_millis(1));
        } else {
            q.bump();
        }
    })
    .unwrap();
    for round in 1..=ROUNDS {
        timer.arm(Duration::ZERO);
        p.wait_for(round);
        timer.wait();
        assert_none(&format!("TimerFiring::rearm and its application (round {round})"), close());
    }
    timer.stop_and_drain();
    assert_eq!(fired.load(SeqCst), 2 * ROUNDS, "each re-arm fired once");
}

fn periodic_start_stop() {
    let p = Arc::new(Progress::default());
    let q = Arc::clone(&p);
    let timer = PeriodicTimer::new(Duration::from_millis(1), move |_| {
        q.bump();
    })
    .unwrap();
    timer.arm(timer.period());
    timer.disarm();
    let mut seen = 0;
    for round in 0..ROUNDS {
        assert_none(&format!("PeriodicTimer::arm (round {round})"), count_here(|| timer.arm(timer.period())));
        assert!(timer.is_armed());
        p.wait_for(seen + 2);
        assert_none(
            &format!("PeriodicTimer::disarm (round {round})"),
            count_here(|| {
                let _ = timer.disarm();
            }),
        );
        assert!(!timer.is_armed());
        timer.wait();
        seen = p.get();
    }
    timer.stop_and_drain();

    // A tick stopping its own timer.
    let stopped = Arc::new(Mutex::new(None));
    let s = Arc::clone(&stopped);
    let timer = PeriodicTimer::new(Duration::from_millis(1), move |tick| {
        let mut slot = s.lock().unwrap();
        if slot.is_none() {
            *slot = Some(count_here(|| tick.disarm()));
        }
    })
    .unwrap();
    timer.arm(timer.period());
    let deadline = Instant::now() + Duration::from_secs(20);
    while timer.is_armed() {
        assert!(Instant::now() < deadline, "the tick never stopped its timer");
        std::thread::yield_now();
    }
    timer.stop_and_drain();
    assert_none("PeriodicTick::stop", stopped.lock().unwrap().expect("a tick ran"));
}

fn wait_arming() {
    let p = Arc::new(Progress::default());
    let q = Arc::clone(&p);
    let event = Event::auto_reset().unwrap();
    let wait = Wait::new(event.try_clone().unwrap().into(), move |_| {
        q.bump();
    })
    .unwrap();
    wait.arm(Deadline::NEVER);
    event.set().unwrap();
    p.wait_for(1);
    let c = count_here(|| {
        for _ in 0..CALLS {
            wait.arm(Duration::from_secs(3600));
            wait.arm(Deadline::NEVER);
        }
    });
    assert_none("Wait::arm", c);
    event.set().unwrap();
    p.wait_for(2);
    wait.stop_and_drain();
}

fn wait_rearm_from_activation() {
    let p = Arc::new(Progress::default());
    let counts = Arc::new(Mutex::new(Vec::with_capacity(ROUNDS + 1)));
    let (q, k) = (Arc::clone(&p), Arc::clone(&counts));
    let event = Event::auto_reset().unwrap();
    let wait = Wait::new(event.try_clone().unwrap().into(), move |act| {
        let mut rearmed = false;
        let c = count_here(|| rearmed = act.rearm(Deadline::NEVER));
        assert!(rearmed, "the re-arm was refused");
        k.lock().unwrap().push(c);
        q.bump();
    })
    .unwrap();
    wait.arm(Deadline::NEVER);
    for round in 1..=ROUNDS {
        event.set().unwrap();
        p.wait_for(round);
    }
    wait.stop_and_drain();
    let counts = counts.lock().unwrap();
    assert_eq!(counts.len(), ROUNDS, "each signal found the wait re-armed");
    for (i, c) in counts.iter().enumerate() {
        assert_none(&format!("WaitActivation::rearm (activation {i})"), *c);
    }
}

/// A file of `len` bytes in the temp directory, deleted on drop.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(tag: &str, len: usize) -> Self {
        let path = std::env::temp_dir().join(format!("wtp-alloc-{tag}-{}", std::process::id()));
        std::fs::write(&path, vec![0x5a; len]).unwrap();
        Self(path)
    }
    fn open(&self) -> io::OverlappedHandle {
        io::open_file(&self.0, std::fs::OpenOptions::new().read(true)).unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const IO_BLOCK: usize = 512;

/// `read_at` in a window: exactly one allocation, and it is the operation's
/// block (the address its id names as the `OVERLAPPED`'s).
#[track_caller]
fn assert_one_block(what: &str, issue: impl FnOnce() -> OperationId) {
    let mut id = None;
    let c = count_here(|| id = Some(issue()));
    let id = id.unwrap();
    assert_eq!(c.n, 1, "{what} allocated {} time(s), not just its operation block (last: {} bytes)", c.n, c.last_size);
    assert_eq!(
        c.last_ptr,
        id.overlapped_address(),
        "{what}: the one allocation ({} bytes) is not the operation block",
        c.last_size
    );
}

/// File reads one at a time, each from a buffer made before the window.
fn io_read_at() {
    let file = TempFile::new("read-at", IO_BLOCK * (CALLS + 1));
    let p = Arc::new(Progress::default());
    let q = Arc::clone(&p);
    let io = Io::new(file.open(), move |c: &IoCompletion| {
        assert!(c.error().is_none() && c.bytes_transferred() == IO_BLOCK, "read failed: {c:?}");
        q.bump();
    })
    .unwrap();
    // Outside a window: the registry's first slot. One read outstanding at a
    // time reuses it, so the registry never grows below.
    io.read_at(0, vec![0u8; IO_BLOCK]).unwrap();
    p.wait_for(1);
    let buffers: Vec<Vec<u8>> = (0..CALLS).map(|_| vec![0u8; IO_BLOCK]).collect();
    for (i, buf) in buffers.into_iter().enumerate() {
        let offset = ((i + 1) * IO_BLOCK) as u64;
        assert_one_block(&format!("Io::read_at #{i}"), || io.read_at(offset, buf).unwrap());
        p.wait_for(i + 2);
    }
    io.wait();
    assert_eq!(io.outstanding(), 0);
    drop(io);
}

/// Many reads outstanding at once on a pipe nobody writes to: once the
/// registry has grown to that many slots (the first round, outside a
/// window), each `read` of the next round allocates only its block.
fn io_outstanding_pipe_reads() {
    const DEPTH: usize = 64;
    let (server, _client) = io::pipe_pair().unwrap();
    let io = Io::new(server, |_: &IoCompletion| {}).unwrap();
    for round in 0..3 {
        let buffers: Vec<Vec<u8>> = (0..DEPTH).map(|_| vec![0u8; 8]).collect();
        for (i, buf) in buffers.into_iter().enumerate() {
            if round == 0 {
                io.read(buf).unwrap();
            } else {
                assert_one_block(&format!("Io::read, round {round}, {i} outstanding"), || io.read(buf).unwrap());
            }
        }
        assert_eq!(io.outstanding(), DEPTH, "the reads stay pending");
        io.run_down();
        assert_eq!(io.outstanding(), 0);
    }
}

/// A claimed operation resubmitted through `submit` allocates nothing.
fn io_resubmit_claimed() {
    let file = TempFile::new("resubmit", IO_BLOCK * 4);
    let p = Arc::new(Progress::default());
    let claimed: Arc<Mutex<Vec<Operation<Vec<u8>>>>> = Arc::new(Mutex::new(Vec::with_capacity(1)));
    let (q, k) = (Arc::clone(&p), Arc::clone(&claimed));
    let io = Io::new(file.open(), move |c: &IoCompletion| {
        assert!(c.error().is_none() && c.bytes_transferred() == IO_BLOCK, "read failed: {c:?}");
        k.lock().unwrap().push(c.claim::<Vec<u8>>().expect("a Vec<u8> read"));
        q.bump();
    })
    .unwrap();
    io.read_at(0, vec![0u8; IO_BLOCK]).unwrap();
    p.wait_for(1);
    for i in 0..CALLS {
        let op = claimed.lock().unwrap().pop().expect("the completion claimed its operation");
        let offset = (i % 4 * IO_BLOCK) as u64;
        let c = count_here(|| {
            // SAFETY: one ReadFile on the bound file handle with the given
            // OVERLAPPED, into the payload's buffer; `issue_result` returns
            // Ok exactly when a completion is queued.
            unsafe {
                io.submit(op, |h, ov, buf: &mut Vec<u8>| {
                    (*ov).Anonymous.Anonymous.Offset = offset as u32;
                    io::issue_result(ReadFile(
                        h.as_raw_handle(),
                        buf.as_mut_ptr(),
                        buf.len() as u32,
                        core::ptr::null_mut(),
                        ov,
                    ))
                })
            }
            .unwrap();
        });
        assert_none(&format!("Io::submit of a claimed operation #{i}"), c);
        p.wait_for(i + 2);
    }
    io.wait();
    drop(io);
}

/// The socket and pipe futures in steady state allocate nothing: an
/// operation's block (its `OVERLAPPED`, the operation, what its future
/// shares with its completion) is one the engine kept from an earlier
/// operation. Each round issues a read before its peer writes (the read
/// queued, completed on a pool thread, its output taken here) and a read of
/// data already there (finished at the first poll where the handle
/// completes inline). The first round, outside the window, fills the
/// engines' kept blocks.
fn stream_round_trips<S>(
    what: &str,
    a: &S,
    b: &S,
    read: impl AsyncFn(&S, Vec<u8>) -> (std::io::Result<usize>, Vec<u8>),
    write: impl AsyncFn(&S, Vec<u8>) -> (std::io::Result<usize>, Vec<u8>),
) {
    let (mut x, mut y) = (vec![7u8; 64], vec![0u8; 64]);
    let round = |x: Vec<u8>, y: Vec<u8>| {
        futures::executor::block_on(async {
            let ((got, y), (sent, x)) = futures::join!(read(b, y), write(a, x));
            assert_eq!((got.unwrap(), sent.unwrap()), (64, 64));
            let (sent, x) = write(b, x).await;
            let (got, y) = read(a, y).await;
            assert_eq!((got.unwrap(), sent.unwrap()), (64, 64));
            (x, y)
        })
    };
    (x, y) = round(x, y);
    let c = count_here(|| {
        for _ in 0..CALLS {
            (x, y) = round(core::mem::take(&mut x), core::mem::take(&mut y));
        }
    });
    assert_none(&format!("{CALLS} rounds of reads and writes on {what}"), c);
}

fn tcp_reads_and_writes() {
    use windows_threadpool::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (a, b) = futures::executor::block_on(async { futures::join!(TcpStream::connect(addr), listener.accept()) });
    let (a, (b, _)) = (a.unwrap(), b.unwrap());
    stream_round_trips(
        "a TCP connection",
        &a,
        &b,
        async |s: &TcpStream, buf| s.read(buf).await,
        async |s: &TcpStream, buf| s.write(buf).await,
    );
}

fn pipe_reads_and_writes() {
    use windows_threadpool::pipe::{PipeListener, PipeStream};
    let name = support::unique_pipe_name();
    let listener = PipeListener::bind(&name).unwrap();
    let (a, b) = futures::executor::block_on(async { futures::join!(PipeStream::connect(&name), listener.accept()) });
    let (a, b) = (a.unwrap(), b.unwrap());
    stream_round_trips(
        "a named pipe",
        &a,
        &b,
        async |s: &PipeStream, buf| s.read(buf).await,
        async |s: &PipeStream, buf| s.write(buf).await,
    );
}

/// Datagrams as the streams: a receive queued before its datagram is sent,
/// and one of a datagram already there.
fn udp_send_to_recv_from() {
    use windows_threadpool::net::UdpSocket;
    let (a, b) = (UdpSocket::bind("127.0.0.1:0").unwrap(), UdpSocket::bind("127.0.0.1:0").unwrap());
    let (at_a, at_b) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let (mut x, mut y) = (vec![7u8; 64], vec![0u8; 64]);
    let round = |x: Vec<u8>, y: Vec<u8>| {
        futures::executor::block_on(async {
            let ((got, y), (sent, x)) = futures::join!(b.recv_from(y), a.send_to(x, at_b));
            assert_eq!((got.unwrap(), sent.unwrap()), ((64, at_a), 64));
            let (sent, x) = b.send_to(x, at_a).await;
            let (got, y) = a.recv_from(y).await;
            assert_eq!((got.unwrap(), sent.unwrap()), ((64, at_b), 64));
            (x, y)
        })
    };
    (x, y) = round(x, y);
    let c = count_here(|| {
        for _ in 0..CALLS {
            (x, y) = round(core::mem::take(&mut x), core::mem::take(&mut y));
        }
    });
    assert_none(&format!("{CALLS} rounds of send_to and recv_from"), c);
}

/// An accept queued before its client connects allocates nothing of its
/// own: its block is kept, and what it allocates is the accepted stream's
/// own objects, as many as binding a connected `std` stream takes (its
/// engine; measured here the same way). The streams are dropped after the
/// windows.
fn tcp_accepts() {
    use windows_threadpool::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = || {
        futures::executor::block_on(async {
            let (accepted, client) =
                futures::join!(listener.accept(), async { std::net::TcpStream::connect(addr).unwrap() });
            (accepted.unwrap().0, client)
        })
    };
    let first = accept();
    let mut kept = Vec::with_capacity(CALLS);
    let accepts = count_here(|| {
        for _ in 0..CALLS {
            kept.push(accept());
        }
    });
    // The accepted streams stay open until the end: a stream dropped here
    // would leave its context block for the next bind on this thread.
    let (accepted, std_streams): (Vec<_>, Vec<_>) = kept.into_iter().unzip();
    let mut bound = Vec::with_capacity(CALLS);
    let binds = count_here(|| {
        for s in std_streams {
            bound.push(TcpStream::from_std(s).unwrap());
        }
    });
    assert!(binds.n >= CALLS, "binding {CALLS} streams allocated {} time(s): the count is not counting", binds.n);
    assert_eq!(
        accepts.n, binds.n,
        "{CALLS} accepts allocated {} time(s), binding {CALLS} streams {} (last: {} bytes)",
        accepts.n, binds.n, accepts.last_size
    );
    drop((first, accepted, bound));
}

/// A task is one allocation (its `Arc` block) on the spawning thread,
/// whether a pool thread runs it or the joining thread does.
fn spawn_join() {
    assert_eq!(windows_threadpool::task::spawn_blocking(|| 1).join().unwrap(), 1);
    let mut sum = 0;
    let c = count_here(|| {
        for i in 0..CALLS {
            sum += windows_threadpool::task::spawn_blocking(move || i).join().unwrap();
        }
    });
    assert_eq!(c.n, CALLS, "spawn + join of {CALLS} tasks allocated {} time(s)", c.n);
    assert_eq!(sum, (0..CALLS).sum::<usize>());
}

/// Waking an async task submits its work object and allocates nothing:
/// the wakes are counted on this thread, the polls they cause run on pool
/// threads.
fn async_task_wake() {
    let polls = Arc::new(Progress::default());
    let slot: Arc<Mutex<Option<std::task::Waker>>> = Arc::default();
    let (p, sl) = (polls.clone(), slot.clone());
    let h = windows_threadpool::task::spawn(std::future::poll_fn(move |cx| {
        let n = p.bump();
        if n > CALLS {
            return std::task::Poll::Ready(n);
        }
        *sl.lock().unwrap() = Some(cx.waker().clone());
        std::task::Poll::Pending
    }));
    for i in 1..=CALLS {
        polls.wait_for(i);
        let waker = loop {
            if let Some(w) = slot.lock().unwrap().take() {
                break w;
            }
            std::thread::yield_now();
        };
        let c = count_here(|| waker.wake_by_ref());
        assert_none(&format!("waking an async task #{i}"), c);
    }
    assert_eq!(h.join().unwrap(), CALLS + 1);
}

/// A scope allocates only its tasks' blocks: no list, no per-task bookkeeping.
fn scope_spawn() {
    let hits = AtomicUsize::new(0);
    windows_threadpool::scope(|s| {
        s.spawn(|| hits.fetch_add(1, SeqCst));
    });
    let c = count_here(|| {
        windows_threadpool::scope(|s| {
            for _ in 0..64 {
                s.spawn(|| hits.fetch_add(1, SeqCst));
            }
        })
    });
    assert_eq!(c.n, 64, "a scope of 64 tasks allocated {} time(s)", c.n);
    assert_eq!(hits.load(SeqCst), 65);
}

/// `for_each` allocates the collected items and one block per helper task,
/// however many items there are: nothing per item or per chunk.
fn for_each_items() {
    let sum = AtomicUsize::new(0);
    let run = |n: usize| {
        count_here(|| {
            windows_threadpool::for_each(0..n, |i| {
                sum.fetch_add(i, SeqCst);
            })
        })
    };
    run(10);
    let few = run(1_000);
    let many = run(100_000);
    // On this thread: one block per helper task, and this thread's chunk
    // buffer unless the helpers took every chunk first (a race, so not
    // pinned); nothing that grows with the items.
    let cpus = std::thread::available_parallelism().unwrap().get();
    for (items, n) in [(1_000, few.n), (100_000, many.n)] {
        assert!(
            (cpus - 1..=cpus).contains(&n),
            "for_each allocated {n} time(s) for {items} items on {cpus} processors"
        );
    }
    assert_eq!(sum.load(SeqCst), 45 + 499_500 + 4_999_950_000);
}

/// `map` over a range allocates its output once, at its length, and one
/// block per helper task: nothing per item or per chunk.
fn map_items() {
    let run = |n: usize| {
        count_here(|| {
            let out = windows_threadpool::map(0..n, |i| i * 2);
            assert!(out.iter().enumerate().all(|(i, &v)| v == i * 2));
        })
    };
    run(10);
    let cpus = std::thread::available_parallelism().unwrap().get();
    for items in [1_000, 100_000] {
        let c = run(items);
        // As for `for_each`, plus the output.
        assert!(
            (cpus..=cpus + 1).contains(&c.n),
            "map allocated {} time(s) for {items} items on {cpus} processors",
            c.n
        );
    }
}

/// Creating and dropping a work object, a one-shot and a periodic timer
/// reuses the context block the previous drop on this thread kept.
fn create_drop_pairs() {
    drop(Work::new(|_| {}).unwrap());
    drop(Timer::new(|_| {}).unwrap());
    drop(PeriodicTimer::new(Duration::from_millis(1), |_| {}).unwrap());
    let c = count_here(|| {
        for _ in 0..CALLS {
            drop(Work::new(|_| {}).unwrap());
            drop(Timer::new(|_| {}).unwrap());
            drop(PeriodicTimer::new(Duration::from_millis(1), |_| {}).unwrap());
        }
    });
    assert_none("creating and dropping a Work, a Timer and a PeriodicTimer", c);
}

/// A cleanup group's members and their contexts come from chunks, not from
/// one heap block each: 1,000 work members created and released cost the
/// chunks (512 B doubling to 32 KiB) and the list's growth.
fn group_members() {
    use windows_threadpool::cleanup_group::CleanupGroup;
    const MEMBERS: usize = 1000;
    let mut group = CleanupGroup::new().unwrap();
    // The group's claim on the default pool's self-heal entry, once.
    let _ = group.create_work(|_| {}).unwrap();
    group.close_members();
    let c = count_here(|| {
        for _ in 0..MEMBERS {
            let _ = group.create_work(|_| {}).unwrap();
        }
        group.close_members();
    });
    assert!(c.n <= 32, "{MEMBERS} members allocated {} times (last: {} bytes)", c.n, c.last_size);
}

#[test]
fn creating_and_dropping_objects_allocates_nothing() {
    let _s = serial();
    create_drop_pairs();
}

#[test]
fn a_cleanup_group_allocates_per_chunk_not_per_member() {
    let _s = serial();
    group_members();
}

#[test]
fn spawn_and_join_allocate_one_block_per_task() {
    let _s = serial();
    spawn_join();
}

#[test]
fn waking_an_async_task_allocates_nothing() {
    let _s = serial();
    async_task_wake();
}

#[test]
fn a_scope_allocates_one_block_per_task() {
    let _s = serial();
    scope_spawn();
}

#[test]
fn for_each_allocates_nothing_per_item() {
    let _s = serial();
    for_each_items();
}

#[test]
fn map_allocates_its_output_and_nothing_per_item() {
    let _s = serial();
    map_items();
}

#[test]
fn the_counter_counts_only_the_watched_thread() {
    let _s = serial();
    counter_counts();
}

#[test]
fn work_submit_allocates_nothing() {
    let _s = serial();
    work_submit();
}

#[test]
fn one_shot_arming_allocates_nothing() {
    let _s = serial();
    one_shot_arming();
}

#[test]
fn one_shot_rearm_from_a_firing_allocates_nothing() {
    let _s = serial();
    one_shot_rearm_from_firing();
}

#[test]
fn periodic_start_and_stop_allocate_nothing() {
    let _s = serial();
    periodic_start_stop();
}

#[test]
fn wait_arming_allocates_nothing() {
    let _s = serial();
    wait_arming();
}

#[test]
fn wait_rearm_from_an_activation_allocates_nothing() {
    let _s = serial();
    wait_rearm_from_activation();
}

#[test]
fn io_read_at_allocates_only_its_operation_block() {
    let _s = serial();
    io_read_at();
}

#[test]
fn io_reads_outstanding_at_once_allocate_only_their_blocks() {
    let _s = serial();
    io_outstanding_pipe_reads();
}

#[test]
fn io_resubmitting_a_claimed_operation_allocates_nothing() {
    let _s = serial();
    io_resubmit_claimed();
}

#[test]
fn tcp_reads_and_writes_allocate_nothing() {
    let _s = serial();
    tcp_reads_and_writes();
}

#[test]
fn named_pipe_reads_and_writes_allocate_nothing() {
    let _s = serial();
    pipe_reads_and_writes();
}

#[test]
fn udp_send_to_and_recv_from_allocate_nothing() {
    let _s = serial();
    udp_send_to_recv_from();
}

#[test]
fn tcp_accepts_allocate_nothing() {
    let _s = serial();
    tcp_accepts();
}

/// Every scenario again with every trace target armed: records go to the
/// ring, which is allocated once when the filter is first read (here, before
/// any window opens).
#[cfg(feature = "trace")]
#[test]
fn nothing_allocates_with_the_trace_armed() {
    let _s = serial();
    support::traced_child("nothing_allocates_with_the_trace_armed", "*", || {
        assert!(windows_threadpool::trace::enabled());
        counter_counts();
        work_submit();
        create_drop_pairs();
        group_members();
        one_shot_arming();
        one_shot_rearm_from_firing();
        periodic_start_stop();
        wait_arming();
        wait_rearm_from_activation();
        io_read_at();
        io_outstanding_pipe_reads();
        io_resubmit_claimed();
        tcp_reads_and_writes();
        pipe_reads_and_writes();
        udp_send_to_recv_from();
        tcp_accepts();
        spawn_join();
        async_task_wake();
        scope_spawn();
        for_each_items();
        map_items();
        let dump = windows_threadpool::trace::dump();
        for needle in
            ["work submitted", "timer rearm-entered", "timer-periodic armed", "wait rearm-entered", "io started"]
        {
            assert!(dump.contains(needle), "the trace did not record {needle:?}");
        }
    });
}
