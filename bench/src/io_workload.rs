//! Workload 6, thread-pool I/O: 4 KiB file reads at queue depth 1 and 32, and
//! pipe ping-pong latency. Each completion issues the next operation from the
//! callback, so the depth stays constant; the raw column does the same with
//! `CreateThreadpoolIo`/`StartThreadpoolIo`/`ReadFile` on its own
//! preallocated `OVERLAPPED` storage.

use std::os::windows::io::{AsRawHandle, OwnedHandle};
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::{ERROR_IO_PENDING, HANDLE};
use windows_sys::Win32::Storage::FileSystem::{ReadFile, WriteFile};
use windows_sys::Win32::System::IO::{CancelIoEx, OVERLAPPED};
use windows_sys::Win32::System::Threading::*;
use windows_threadpool::io::{self, Io, IoCompletion, Operation};

use crate::report::{CRATE, Cell, RAW, Table};
use crate::workloads::{Config, now_ns};

const BLOCK: usize = 4096;
/// A bench that has not finished after this long is broken, not slow.
const PATIENCE: Duration = Duration::from_secs(120);

pub fn run(cfg: &Config, table: &mut Table) {
    file_reads(cfg, table);
    pipe_ping_pong(cfg, table);
}

/// Set once by the last completion; the main thread sleeps on it (no spinning
/// thread competing with the pool for the two cores).
#[derive(Default)]
struct Latch {
    done: Mutex<bool>,
    cv: Condvar,
}

impl Latch {
    fn set(&self) {
        *self.done.lock().unwrap() = true;
        self.cv.notify_all();
    }
    fn wait(&self, what: &str) {
        let g = self.done.lock().unwrap();
        let (mut g, to) = self.cv.wait_timeout_while(g, PATIENCE, |d| !*d).unwrap();
        assert!(!to.timed_out(), "{what}: no completion for {PATIENCE:?}");
        *g = false;
    }
}

/// A `Io` whose callback can reach the object (to issue the next
/// operation). The callback holds a `Weak`; the caller must `wait()` or
/// `run_down()` before dropping the returned `Arc`, so no callback still
/// holds an upgraded one (whose drop would then tear the object down from
/// its own callback).
fn self_ref_io<F>(handle: io::OverlappedHandle, callback: F) -> Arc<Io>
where
    F: Fn(&Io, &IoCompletion) + Send + Sync + 'static,
{
    let me: Arc<OnceLock<Weak<Io>>> = Arc::default();
    let m = Arc::clone(&me);
    let io = Arc::new(
        Io::new(handle, move |c: &IoCompletion| {
            let io = m.get().and_then(Weak::upgrade).expect("the object is alive while operations are outstanding");
            callback(&io, c);
        })
        .unwrap(),
    );
    me.set(Arc::downgrade(&io)).unwrap();
    io
}

// ---------------------------------------------------------------------------
// File reads

/// The counters every file-read run shares: `next` hands out block indexes,
/// `done` counts completions, the last sets the latch.
struct Reads {
    n: usize,
    next: AtomicUsize,
    done: AtomicUsize,
    latch: Latch,
}

impl Reads {
    fn new(n: usize) -> Self {
        Self { n, next: AtomicUsize::new(0), done: AtomicUsize::new(0), latch: Latch::default() }
    }
    /// The next block's offset, if any is left.
    fn take(&self) -> Option<u64> {
        let i = self.next.fetch_add(1, Relaxed);
        (i < self.n).then_some((i * BLOCK) as u64)
    }
    fn completed(&self, result: u32, bytes: usize) {
        assert_eq!((result, bytes), (0, BLOCK), "a 4 KiB read inside the file failed or came back short");
        if self.done.fetch_add(1, AcqRel) + 1 == self.n {
            self.latch.set();
        }
    }
}

/// Which way the crate column re-issues from the completion.
#[derive(Clone, Copy)]
enum Reissue {
    /// Safe `read_at`: the claimed buffer is reused, its operation block is
    /// freed and a new one allocated per read.
    ReadAt,
    /// Unsafe `submit` of the claimed operation: block and buffer reused.
    Submit,
}

/// Reads every block of `path` once, `depth` at a time, through the crate. µs per read.
fn crate_reads(path: &std::path::Path, blocks: usize, depth: usize, how: Reissue) -> f64 {
    let reads = Arc::new(Reads::new(blocks));
    let r = Arc::clone(&reads);
    let handle = io::open_file(path, std::fs::OpenOptions::new().read(true)).unwrap();
    let io = self_ref_io(handle, move |io, c| {
        r.completed(c.io_result(), c.bytes_transferred());
        let Some(offset) = r.take() else { return };
        let op = c.claim::<Vec<u8>>().expect("a Vec<u8> read");
        match how {
            Reissue::ReadAt => {
                io.read_at(offset, op.into_payload()).unwrap();
            }
            // SAFETY: one ReadFile on the given handle with the given
            // OVERLAPPED, into the payload's buffer; `issue_result` returns
            // Ok exactly when a completion is queued.
            Reissue::Submit => unsafe { submit_read(io, op, offset) },
        }
    });
    let t = Instant::now();
    for _ in 0..depth {
        let offset = reads.take().expect("the file holds at least `depth` blocks");
        io.read_at(offset, vec![0u8; BLOCK]).unwrap();
    }
    reads.latch.wait("crate file reads");
    let elapsed = t.elapsed();
    io.wait();
    drop(io);
    elapsed.as_nanos() as f64 / 1000.0 / blocks as f64
}

/// # Safety
/// `io` must be bound to a file opened for overlapped reads.
unsafe fn submit_read(io: &Io, op: Operation<Vec<u8>>, offset: u64) {
    // SAFETY: exactly one ReadFile on the bound handle with the operation's
    // OVERLAPPED, into the payload's buffer, classified by `issue_result`.
    let r = unsafe {
        io.submit(op, |h, ov, buf: &mut Vec<u8>| {
            (*ov).Anonymous.Anonymous.Offset = offset as u32;
            (*ov).Anonymous.Anonymous.OffsetHigh = (offset >> 32) as u32;
            io::issue_result(ReadFile(h.as_raw_handle(), buf.as_mut_ptr(), buf.len() as u32, core::ptr::null_mut(), ov))
        })
    };
    r.unwrap();
}

/// One raw operation: its OVERLAPPED first (a completion's pointer is the
/// slot's address), then its buffer.
#[repr(C)]
struct RawOp {
    ov: OVERLAPPED,
    buf: [u8; BLOCK],
    /// Pipe runs: set while the kernel owns the slot.
    busy: AtomicBool,
    /// Pipe runs: true for a read slot.
    read: bool,
}

impl RawOp {
    fn new(read: bool) -> Box<Self> {
        Box::new(Self { ov: OVERLAPPED::default(), buf: [0; BLOCK], busy: AtomicBool::new(false), read })
    }
}

struct RawFile {
    reads: Reads,
    handle: HANDLE,
}

/// StartThreadpoolIo, then ReadFile into `op` at `offset`; CancelThreadpoolIo
/// if it failed synchronously (no completion will come), which here is a bug.
///
/// # Safety
/// `io` is bound to `handle`; `op` is not owned by the kernel and outlives the completion.
unsafe fn raw_read(io: PTP_IO, handle: HANDLE, op: *mut RawOp, offset: u64, len: u32) {
    // SAFETY: per the contract.
    unsafe {
        (*op).ov = OVERLAPPED::default();
        (*op).ov.Anonymous.Anonymous.Offset = offset as u32;
        (*op).ov.Anonymous.Anonymous.OffsetHigh = (offset >> 32) as u32;
        StartThreadpoolIo(io);
        if ReadFile(handle, (*op).buf.as_mut_ptr(), len, core::ptr::null_mut(), &mut (*op).ov) == 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(ERROR_IO_PENDING as i32) {
                CancelThreadpoolIo(io);
                panic!("raw ReadFile failed synchronously: {e}");
            }
        }
    }
}

unsafe extern "system" fn raw_file_done(
    _: PTP_CALLBACK_INSTANCE,
    ctx: *mut core::ffi::c_void,
    overlapped: *mut core::ffi::c_void,
    result: u32,
    bytes: usize,
    io: PTP_IO,
) {
    // SAFETY: ctx is the RawFile kept alive until every completion arrived
    // and the callbacks were drained.
    let f = unsafe { &*(ctx as *const RawFile) };
    f.reads.completed(result, bytes);
    if let Some(offset) = f.reads.take() {
        // SAFETY: the completion hands the slot back; it lives in the
        // caller's Vec until the run ends.
        unsafe { raw_read(io, f.handle, overlapped.cast(), offset, BLOCK as u32) };
    }
}

fn raw_reads(path: &std::path::Path, blocks: usize, depth: usize) -> f64 {
    let handle: OwnedHandle = io::open_file(path, std::fs::OpenOptions::new().read(true)).unwrap().into_owned();
    let h = handle.as_raw_handle();
    let f = RawFile { reads: Reads::new(blocks), handle: h };
    let mut ops: Vec<Box<RawOp>> = (0..depth).map(|_| RawOp::new(true)).collect();
    // SAFETY: `f` and `ops` outlive the object: every completion arrives
    // before the latch is set, then the callbacks are drained and the object closed.
    unsafe {
        let io = CreateThreadpoolIo(h, Some(raw_file_done), &f as *const _ as *mut _, core::ptr::null());
        assert_ne!(io, 0);
        let t = Instant::now();
        for op in &mut ops {
            let offset = f.reads.take().unwrap();
            raw_read(io, h, &mut **op, offset, BLOCK as u32);
        }
        f.reads.latch.wait("raw file reads");
        let elapsed = t.elapsed();
        WaitForThreadpoolIoCallbacks(io, 0);
        CloseThreadpoolIo(io);
        drop(handle);
        elapsed.as_nanos() as f64 / 1000.0 / blocks as f64
    }
}

fn file_reads(cfg: &Config, table: &mut Table) {
    let bytes: usize = if cfg.scale < 1.0 { 4 << 20 } else { 64 << 20 };
    let blocks = bytes / BLOCK;
    let path = std::env::temp_dir().join(format!("wtp-bench-io-{}", std::process::id()));
    std::fs::write(&path, (0..bytes).map(|i| (i / BLOCK) as u8).collect::<Vec<u8>>()).unwrap();
    let mib = bytes >> 20;
    for depth in [1, 32] {
        let mut cols: [Vec<f64>; 3] = Default::default();
        // The first trial warms the page cache and the pool threads and is discarded.
        for trial in 0..=cfg.trials {
            cols[0].push(crate_reads(&path, blocks, depth, Reissue::ReadAt));
            cols[1].push(crate_reads(&path, blocks, depth, Reissue::Submit));
            cols[2].push(raw_reads(&path, blocks, depth));
            if trial == 0 {
                cols.iter_mut().for_each(Vec::clear);
            }
        }
        let [read_at, submit, raw] = cols;
        let raw = Cell::trials(raw);
        let mut row = |how: &str, c: Vec<f64>| {
            let mut cells: [Option<Cell>; 5] = Default::default();
            cells[CRATE] = Some(Cell::trials(c));
            cells[RAW] = Some(raw.clone());
            table.add(
                format!("6. file reads, 4 KiB × {blocks} ({mib} MiB), queue depth {depth}: {how}"),
                "µs/read",
                cells,
            );
        };
        row("read_at (claimed buffer reused)", read_at);
        row("unsafe submit (claimed operation reused)", submit);
    }
    std::fs::remove_file(&path).unwrap();
}

// ---------------------------------------------------------------------------
// Pipe ping-pong

const MSG: [u8; 8] = *b"ping!!!!";

/// The client's read completion stamps the time the pong arrived.
struct Pong {
    stamp: AtomicU64,
    latch: Latch,
}

fn crate_ping_pong(n: usize) -> Vec<f64> {
    let (server, client) = io::pipe_pair().unwrap();
    // Server: each read completion answers with a write and reads again.
    let server = self_ref_io(server, |io, c| {
        let Some(op) = c.claim::<Vec<u8>>() else {
            return;
        }; // a write's completion
        if c.io_result() != 0 {
            return; // cancelled at the end
        }
        assert_eq!(c.bytes_transferred(), MSG.len());
        io.write(MSG).unwrap();
        io.read(op.into_payload()).unwrap();
    });
    let pong = Arc::new(Pong { stamp: AtomicU64::new(0), latch: Latch::default() });
    let p = Arc::clone(&pong);
    let client = self_ref_io(client, move |io, c| {
        let Some(op) = c.claim::<Vec<u8>>() else {
            return;
        };
        if c.io_result() != 0 {
            return;
        }
        p.stamp.store(now_ns(), Release);
        assert_eq!(c.bytes_transferred(), MSG.len());
        io.read(op.into_payload()).unwrap();
        p.latch.set();
    });
    server.read(vec![0u8; 64]).unwrap();
    client.read(vec![0u8; 64]).unwrap();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = now_ns();
        client.write(MSG).unwrap();
        pong.latch.wait("crate ping-pong");
        samples.push((pong.stamp.load(Acquire) - t0) as f64 / 1000.0);
    }
    server.run_down();
    client.run_down();
    samples
}

/// One raw pipe end: its I/O object, a read slot and a write slot.
struct RawEnd {
    handle: HANDLE,
    io: AtomicIsize,
    rd: *mut RawOp,
    wr: *mut RawOp,
    /// Started operations whose completion has not arrived.
    outstanding: AtomicUsize,
    /// Client only: where the pong's arrival is stamped.
    pong: Option<Arc<Pong>>,
}

impl RawEnd {
    /// # Safety
    /// The end's object, handle and slots are live.
    unsafe fn read(&self) {
        self.outstanding.fetch_add(1, SeqCst);
        // SAFETY: per the contract; the read slot's previous completion is the one being handled.
        unsafe { raw_read(self.io.load(Relaxed), self.handle, self.rd, 0, 64) };
    }

    /// # Safety
    /// As `read`.
    unsafe fn write(&self) {
        // The write slot's previous write was queued long ago (its data was
        // read by the other side), but its callback may not have run: wait
        // for it rather than rewrite an OVERLAPPED the pool still holds.
        // SAFETY: the slot is live.
        let busy = unsafe { &(*self.wr).busy };
        while busy.swap(true, Acquire) {
            std::thread::yield_now();
        }
        self.outstanding.fetch_add(1, SeqCst);
        // SAFETY: the slot is ours (not busy) and live.
        unsafe {
            let op = self.wr;
            (*op).ov = OVERLAPPED::default();
            (&mut (*op).buf)[..MSG.len()].copy_from_slice(&MSG);
            let io = self.io.load(Relaxed);
            StartThreadpoolIo(io);
            if WriteFile(self.handle, (*op).buf.as_ptr(), MSG.len() as u32, core::ptr::null_mut(), &mut (*op).ov) == 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(ERROR_IO_PENDING as i32) {
                    CancelThreadpoolIo(io);
                    panic!("raw WriteFile failed synchronously: {e}");
                }
            }
        }
    }
}

unsafe extern "system" fn raw_pipe_done(
    _: PTP_CALLBACK_INSTANCE,
    ctx: *mut core::ffi::c_void,
    overlapped: *mut core::ffi::c_void,
    result: u32,
    bytes: usize,
    _: PTP_IO,
) {
    // SAFETY: ctx is the RawEnd kept alive until its completions arrived and
    // its callbacks were drained.
    let end = unsafe { &*(ctx as *const RawEnd) };
    let op = overlapped.cast::<RawOp>();
    // SAFETY: one of this end's two slots, handed back by its completion.
    let read = unsafe { (*op).read };
    if !read {
        // SAFETY: as above.
        unsafe { (*op).busy.store(false, Release) };
    } else if result == 0 {
        assert_eq!(bytes, MSG.len());
        match &end.pong {
            Some(pong) => {
                pong.stamp.store(now_ns(), Release);
                // SAFETY: this end is live until its completions have all arrived.
                unsafe { end.read() };
                pong.latch.set();
            }
            // SAFETY: as above.
            None => unsafe {
                end.write();
                end.read();
            },
        }
    }
    end.outstanding.fetch_sub(1, SeqCst);
}

fn raw_ping_pong(n: usize) -> Vec<f64> {
    let (server, client) = io::pipe_pair().unwrap();
    let (server, client): (OwnedHandle, OwnedHandle) = (server.into_owned(), client.into_owned());
    let mut slots: Vec<Box<RawOp>> = vec![RawOp::new(true), RawOp::new(false), RawOp::new(true), RawOp::new(false)];
    let [s_rd, s_wr, c_rd, c_wr]: [*mut RawOp; 4] = core::array::from_fn(|i| &mut *slots[i] as *mut RawOp);
    let pong = Arc::new(Pong { stamp: AtomicU64::new(0), latch: Latch::default() });
    let end = |h: &OwnedHandle, rd, wr, pong| RawEnd {
        handle: h.as_raw_handle(),
        io: AtomicIsize::new(0),
        rd,
        wr,
        outstanding: AtomicUsize::new(0),
        pong,
    };
    let s = end(&server, s_rd, s_wr, None);
    let c = end(&client, c_rd, c_wr, Some(Arc::clone(&pong)));
    let mut samples = Vec::with_capacity(n);
    // SAFETY: the ends, slots and handles outlive the objects: every
    // operation is cancelled and its completion awaited, then the callbacks
    // are drained and the objects closed before anything is dropped.
    unsafe {
        for e in [&s, &c] {
            let io = CreateThreadpoolIo(e.handle, Some(raw_pipe_done), e as *const RawEnd as *mut _, core::ptr::null());
            assert_ne!(io, 0);
            e.io.store(io, Relaxed);
        }
        s.read();
        c.read();
        for _ in 0..n {
            let t0 = now_ns();
            c.write();
            pong.latch.wait("raw ping-pong");
            samples.push((pong.stamp.load(Acquire) - t0) as f64 / 1000.0);
        }
        for e in [&s, &c] {
            CancelIoEx(e.handle, core::ptr::null());
        }
        let deadline = Instant::now() + PATIENCE;
        while s.outstanding.load(SeqCst) + c.outstanding.load(SeqCst) != 0 {
            assert!(Instant::now() < deadline, "raw ping-pong: cancelled operations never completed");
            std::thread::sleep(Duration::from_millis(1));
        }
        for e in [&s, &c] {
            let io = e.io.load(Relaxed);
            WaitForThreadpoolIoCallbacks(io, 0);
            CloseThreadpoolIo(io);
        }
    }
    drop((server, client));
    drop(slots);
    samples
}

fn pipe_ping_pong(cfg: &Config, table: &mut Table) {
    let n = cfg.n(5_000);
    // Warm both (pool threads, first pipe instance).
    crate_ping_pong(cfg.n(50).min(n));
    raw_ping_pong(cfg.n(50).min(n));
    let mut cells: [Option<Cell>; 5] = Default::default();
    cells[CRATE] = Some(Cell::latency(crate_ping_pong(n)));
    cells[RAW] = Some(Cell::latency(raw_ping_pong(n)));
    table.add(format!("6. pipe ping-pong, 8-byte message ({n} round trips)"), "µs round trip", cells);
}
