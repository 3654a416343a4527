//! `io::AsyncIo`: reads and writes as futures with owned buffers, under
//! every executor of `support/executors.rs`. Tests that read the process's
//! operation count or allocation count run alone (`support::alone`).
#![cfg(windows)]

mod support;
use support::PATIENCE;

#[path = "support/executors.rs"]
mod executors;
use executors::{counting_waker, on_each_executor, poll_once};

use std::alloc::{GlobalAlloc, Layout, System};
use std::fs::OpenOptions;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Instant;

use windows_threadpool::io::{self, AsyncIo};

/// Counts allocations (of every thread) while `COUNTING` is set.
struct CountingAlloc;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(SeqCst) {
            ALLOCATIONS.fetch_add(1, SeqCst);
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(SeqCst) {
            ALLOCATIONS.fetch_add(1, SeqCst);
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc;

/// A file in the temp directory, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn with_contents(tag: &str, contents: &[u8]) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path =
            std::env::temp_dir().join(format!("wtp-aio-{tag}-{}-{}", std::process::id(), N.fetch_add(1, SeqCst)));
        std::fs::write(&path, contents).unwrap();
        Self(path)
    }

    fn open(&self) -> AsyncIo {
        AsyncIo::new(io::open_file(&self.0, OpenOptions::new().read(true).write(true)).unwrap()).unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i.wrapping_mul(31) ^ (i >> 8)) as u8).collect()
}

#[test]
fn file_writes_and_reads_give_counts_and_buffers_back() {
    on_each_executor(|| async {
        let file = TempFile::with_contents("rw", &pattern(4096));
        let io = file.open();
        let (n, buf) = io.write_at(b"hello".to_vec(), 10).await;
        assert_eq!((n.unwrap(), buf.as_slice()), (5, &b"hello"[..]));
        let (n, buf) = io.read_at([0u8; 7], 9).await;
        assert_eq!(n.unwrap(), 7);
        assert_eq!(&buf, &[pattern(10)[9], b'h', b'e', b'l', b'l', b'o', pattern(16)[15]]);
        // A read at the end of the file reads nothing.
        let (n, buf) = io.read_at(vec![1u8; 8], 4096).await;
        assert_eq!((n.unwrap(), buf), (0, vec![1u8; 8]));
        // A buffer can be a borrowed static slice for a write.
        let (n, _) = io.write_at(&b"xyz"[..], 4096).await;
        assert_eq!(n.unwrap(), 3);
        drop(io);
        assert_eq!(&std::fs::read(&file.0).unwrap()[4096..], b"xyz");
    });
}

#[test]
fn pipe_reads_and_writes_give_counts_and_buffers_back() {
    on_each_executor(|| async {
        let (server, client) = io::pipe_pair().unwrap();
        let (server, client) = (AsyncIo::new(server).unwrap(), AsyncIo::new(client).unwrap());
        let read = server.read(vec![0u8; 64]);
        let write = client.write(b"ping".to_vec());
        let ((rn, rbuf), (wn, wbuf)) = futures::future::join(read, write).await;
        assert_eq!((wn.unwrap(), wbuf.as_slice()), (4, &b"ping"[..]));
        let rn = rn.unwrap();
        assert_eq!(&rbuf[..rn], b"ping");
        // The writer gone, a read reads nothing.
        drop(client);
        let (n, _) = server.read(vec![0u8; 64]).await;
        assert_eq!(n.unwrap(), 0);
    });
}

/// The waker of the latest poll is the one woken, once.
#[test]
fn only_the_latest_waker_is_woken_once() {
    let (server, client) = io::pipe_pair().unwrap();
    let (server, client) = (AsyncIo::new(server).unwrap(), AsyncIo::new(client).unwrap());
    let mut read = server.read(vec![0u8; 16]);
    let (a, wa) = counting_waker();
    let (b, wb) = counting_waker();
    assert!(poll_once(&mut read, &wa).is_pending());
    assert!(poll_once(&mut read, &wb).is_pending());
    let (n, _) = futures::executor::block_on(client.write(b"abc".to_vec()));
    assert_eq!(n.unwrap(), 3);
    b.0.wait_for(1);
    let Poll::Ready((n, buf)) = poll_once(&mut read, &wb) else { panic!("woken but not ready") };
    assert_eq!(&buf[..n.unwrap()], b"abc");
    assert_eq!((a.0.get(), b.0.get()), (0, 1));
}

/// A buffer that records, when dropped, how many operation blocks were alive.
struct Recorder {
    bytes: Vec<u8>,
    blocks_at_drop: Arc<Mutex<Option<usize>>>,
}

impl AsMut<[u8]> for Recorder {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        *self.blocks_at_drop.lock().unwrap() = Some(io::live_operations());
    }
}

/// Dropping a pending read cancels it (nothing would ever complete it: the
/// writer stays silent), and the buffer is freed only after the kernel has
/// given it back: when it drops, the operation's block (freed by the
/// completion) is already gone.
#[test]
fn a_dropped_read_is_cancelled_and_its_buffer_kept_until_the_completion() {
    support::alone("a_dropped_read_is_cancelled_and_its_buffer_kept_until_the_completion", || {
        let (server, _client) = io::pipe_pair().unwrap();
        let server = AsyncIo::new(server).unwrap();
        let blocks_at_drop = Arc::new(Mutex::new(None));
        let mut read = server.read(Recorder { bytes: vec![0; 16], blocks_at_drop: Arc::clone(&blocks_at_drop) });
        let (woken, w) = counting_waker();
        assert!(poll_once(&mut read, &w).is_pending());
        assert_eq!((server.outstanding(), io::live_operations()), (1, 1));
        drop(read);
        let deadline = Instant::now() + PATIENCE;
        while server.outstanding() != 0 {
            assert!(Instant::now() < deadline, "the dropped read was not cancelled");
            std::thread::yield_now();
        }
        assert_eq!(*blocks_at_drop.lock().unwrap(), Some(0), "the buffer was freed before its completion");
        assert_eq!(woken.0.get(), 0);
    });
}

/// Reads dropped right after their first poll, racing their completions:
/// every operation settles and every block is freed, whichever side wins.
#[test]
fn reads_dropped_while_completing_all_settle() {
    support::alone("reads_dropped_while_completing_all_settle", || {
        const N: usize = 1_000;
        let file = TempFile::with_contents("race", &pattern(N * 8));
        let io = file.open();
        let (_c, w) = counting_waker();
        for i in 0..N {
            let mut read = io.read_at(vec![0u8; 8], (i * 8) as u64);
            let _ = poll_once(&mut read, &w);
            if i % 2 == 0 {
                std::thread::yield_now();
            }
            drop(read);
        }
        let deadline = Instant::now() + PATIENCE;
        while io.outstanding() != 0 {
            assert!(Instant::now() < deadline, "{} operations never settled", io.outstanding());
            std::thread::yield_now();
        }
        assert_eq!(io::live_operations(), 0);
    });
}

/// A forgotten pending future does not keep its object from dropping: the
/// drop returns at once, and the teardown it hands off cancels the read and
/// frees its block.
#[test]
fn dropping_the_object_settles_forgotten_reads() {
    support::alone("dropping_the_object_settles_forgotten_reads", || {
        let (server, _client) = io::pipe_pair().unwrap();
        let server = AsyncIo::new(server).unwrap();
        let mut read = server.read(vec![0u8; 16]);
        let (_c, w) = counting_waker();
        assert!(poll_once(&mut read, &w).is_pending());
        std::mem::forget(read);
        drop(server);
        let deadline = Instant::now() + PATIENCE;
        while io::live_operations() != 0 {
            assert!(Instant::now() < deadline, "the forgotten read was never settled");
            std::thread::yield_now();
        }
    });
}

/// A future that is never polled issues nothing.
#[test]
fn nothing_is_issued_before_the_first_poll() {
    support::alone("nothing_is_issued_before_the_first_poll", || {
        let (server, _client) = io::pipe_pair().unwrap();
        let server = AsyncIo::new(server).unwrap();
        let read = server.read(vec![0u8; 16]);
        assert_eq!((server.outstanding(), io::live_operations()), (0, 0));
        drop(read);
    });
}

/// 10,000 reads at different offsets of one file, joined.
#[test]
fn ten_thousand_concurrent_reads() {
    const N: usize = 10_000;
    const LEN: usize = 16;
    let file = Arc::new(TempFile::with_contents("many", &pattern(N * LEN)));
    on_each_executor(move || {
        let file = Arc::clone(&file);
        async move {
            let start = Instant::now();
            let io = file.open();
            let reads = (0..N).map(|i| io.read_at([0u8; LEN], (i * LEN) as u64));
            let results = futures::future::join_all(reads).await;
            let expected = pattern(N * LEN);
            for (i, (n, buf)) in results.into_iter().enumerate() {
                assert_eq!(n.unwrap(), LEN);
                assert_eq!(&buf[..], &expected[i * LEN..(i + 1) * LEN], "read {i}");
            }
            eprintln!("{N} reads: {:?}", start.elapsed());
        }
    });
}

/// Allocations one read makes, from creating the future to its output,
/// on every thread: none once the first read has left its block to the
/// object for the next (the executor's waker is reused).
#[test]
fn a_read_allocates_nothing_after_the_first() {
    support::alone("a_read_allocates_nothing_after_the_first", || {
        let file = TempFile::with_contents("alloc", &pattern(64));
        let io = file.open();
        let buf = vec![0u8; 16];
        // Warm up: the registry, the pool's threads and the kept block.
        let (_, mut buf) = futures::executor::block_on(io.read_at(buf, 0));
        let mut counts = Vec::new();
        for _ in 0..5 {
            ALLOCATIONS.store(0, SeqCst);
            COUNTING.store(true, SeqCst);
            let (n, b) = futures::executor::block_on(io.read_at(buf, 8));
            COUNTING.store(false, SeqCst);
            assert_eq!(n.unwrap(), 16);
            buf = b;
            counts.push(ALLOCATIONS.load(SeqCst));
        }
        assert_eq!(counts, [0; 5]);
    });
}

/// A read that fails for another reason than the end of its input is an
/// error (only end of file and a gone writer read 0 bytes): here one
/// cancelled with `CancelIoEx` on the object's raw handle.
#[test]
fn a_read_cancelled_through_the_raw_handle_is_an_error() {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Foundation::ERROR_OPERATION_ABORTED;
    use windows_sys::Win32::System::IO::CancelIoEx;
    let (server, _client) = io::pipe_pair().unwrap();
    let server = AsyncIo::new(server).unwrap();
    let mut read = server.read(vec![7u8; 16]);
    let (_c, w) = counting_waker();
    assert!(poll_once(&mut read, &w).is_pending());
    // SAFETY: a live handle; a null OVERLAPPED cancels all its I/O.
    let cancelled = unsafe { CancelIoEx(server.as_raw_handle(), core::ptr::null()) };
    assert_ne!(cancelled, 0, "{}", std::io::Error::last_os_error());
    let (n, buf) = futures::executor::block_on(read);
    assert_eq!(n.map_err(|e| e.raw_os_error()), Err(Some(ERROR_OPERATION_ABORTED as i32)));
    assert_eq!(buf, vec![7u8; 16], "the buffer comes back");
}
