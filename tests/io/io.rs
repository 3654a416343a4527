//! Thread-pool I/O: the behavioural matrix. Every completion is delivered
//! exactly once, every operation's storage is freed exactly once, and a
//! synchronous failure is balanced and gives the buffer back.
#![cfg(windows)]

#[cfg(feature = "trace")]
use crate::rows;
use crate::support;
use support::Gate;

use std::collections::{BTreeSet, HashMap};
use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::os::windows::io::{AsRawHandle, BorrowedHandle, FromRawHandle, OwnedHandle};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, ERROR_BROKEN_PIPE, ERROR_HANDLE_EOF, ERROR_MORE_DATA, ERROR_NOT_FOUND,
    ERROR_OPERATION_ABORTED, GENERIC_READ, GENERIC_WRITE, INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FILE_FLAG_FIRST_PIPE_INSTANCE, FILE_FLAG_OVERLAPPED, OPEN_EXISTING, PIPE_ACCESS_DUPLEX, ReadFile,
    WriteFile,
};
use windows_sys::Win32::System::IO::{GetOverlappedResult, OVERLAPPED};
use windows_sys::Win32::System::Pipes::{
    CreateNamedPipeW, PIPE_READMODE_MESSAGE, PIPE_REJECT_REMOTE_CLIENTS, PIPE_TYPE_MESSAGE, PIPE_WAIT,
};
use windows_sys::Win32::System::Threading::CreateEventW;
use windows_threadpool::io::{self, Io, IoCompletion, Operation, OperationId};
use windows_threadpool::{CallbackEnviron, Pool};

/// Bounds every wait for a completion: a lost completion fails the test
/// instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Helpers

/// A file in the temp directory, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn with_contents(tag: &str, contents: &[u8]) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!("wtp-io-{tag}-{}-{}", std::process::id(), N.fetch_add(1, SeqCst)));
        std::fs::write(&path, contents).unwrap();
        Self(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The byte at `offset` of a pattern file: varies with the offset so a read
/// from the wrong place is caught.
fn pattern_byte(offset: usize) -> u8 {
    (offset.wrapping_mul(31) ^ (offset >> 8)) as u8
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(pattern_byte).collect()
}

fn read_only() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.read(true);
    o
}

fn read_write() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.read(true).write(true);
    o
}

/// A payload that counts its drops, and remembers where it reads from.
struct Counted {
    offset: u64,
    buf: Vec<u8>,
    drops: Arc<AtomicUsize>,
}

impl Counted {
    fn new(offset: u64, len: usize, drops: &Arc<AtomicUsize>) -> Self {
        Self { offset, buf: vec![0; len], drops: Arc::clone(drops) }
    }
}

impl AsMut<[u8]> for Counted {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl AsRef<[u8]> for Counted {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
    }
}

/// What a callback saw.
struct Done<P: Send + 'static> {
    id: OperationId,
    result: u32,
    bytes: usize,
    op: Option<Operation<P>>,
}

/// A callback that claims `P` payloads and sends every completion to the test.
fn sender<P: Send + 'static>() -> (impl Fn(&IoCompletion) + Send + Sync + 'static, Receiver<Done<P>>) {
    let (tx, rx): (Sender<Done<P>>, _) = mpsc::channel();
    let cb = move |c: &IoCompletion| {
        let _ = tx.send(Done { id: c.id(), result: c.io_result(), bytes: c.bytes_transferred(), op: c.claim::<P>() });
    };
    (cb, rx)
}

/// A callback that claims nothing and only counts.
fn counter() -> (impl Fn(&IoCompletion) + Send + Sync + 'static, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    (
        move |_: &IoCompletion| {
            c.fetch_add(1, SeqCst);
        },
        calls,
    )
}

fn recv<P: Send + 'static>(rx: &Receiver<Done<P>>) -> Done<P> {
    rx.recv_timeout(PATIENCE).expect("a completion was not delivered")
}

fn recv_n<P: Send + 'static>(rx: &Receiver<Done<P>>, n: usize) -> Vec<Done<P>> {
    (0..n).map(|_| recv(rx)).collect()
}

/// A pipe whose server end is bound to an object with a `sender::<P>()`
/// callback, and whose client end is bound to a write-only object.
struct Pipe<P: Send + 'static> {
    server: Io,
    rx: Receiver<Done<P>>,
    client: Io,
    writes: Arc<AtomicUsize>,
}

/// Brings both ends to rest before they drop: a test done with a pipe may
/// still have completions in flight (a write's, say), which the `fail-fast`
/// feature would report as a drain owed at drop.
impl<P: Send + 'static> Drop for Pipe<P> {
    fn drop(&mut self) {
        self.client.stop_and_drain();
        self.server.stop_and_drain();
    }
}

fn pipe<P: Send + 'static>() -> Pipe<P> {
    let (s, c) = io::pipe_pair().unwrap();
    let (cb, rx) = sender::<P>();
    let server = Io::new(s, cb).unwrap();
    let (wcb, writes) = counter();
    let client = Io::new(c, wcb).unwrap();
    Pipe { server, rx, client, writes }
}

fn assert_os_error(e: &std::io::Error, code: u32) {
    assert_eq!(e.raw_os_error(), Some(code as i32), "{e:?}");
}

// ---------------------------------------------------------------------------
// The matrix

#[test]
fn immediate_failure_is_balanced_and_returns_the_buffer() {
    let file = TempFile::with_contents("fail", &pattern(4096));
    let (cb, calls) = counter();
    let io = Io::new(io::open_file(&file.0, &read_only()).unwrap(), cb).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let mut buf = Counted::new(0, 64, &drops);
    buf.buf.fill(7);
    let addr = buf.buf.as_ptr();

    let err = io.write_at(0, buf).expect_err("writing through a read-only handle fails synchronously");
    assert_os_error(err.error(), ERROR_ACCESS_DENIED);
    assert_eq!(io.outstanding(), 0, "the start was balanced");
    let buf = err.into_payload();
    assert_eq!((buf.buf.as_ptr(), &buf.buf[..]), (addr, &[7u8; 64][..]), "the same buffer came back untouched");
    assert_eq!(drops.load(SeqCst), 0, "the payload was given back, not dropped");

    // The object still works, and the failed operation never reaches the callback.
    io.read_at(0, vec![0u8; 16]).unwrap();
    io.wait();
    drop(io);
    assert_eq!(calls.load(SeqCst), 1, "only the read completed");
    drop(buf);
    assert_eq!(drops.load(SeqCst), 1);
}

/// Only the raw value: a `BorrowedHandle` could be duplicated safely into a
/// child process (see `Io`'s `AsRawHandle`).
#[test]
fn an_io_object_lends_only_its_raw_handle() {
    let (s, _c) = io::pipe_pair().unwrap();
    let raw = s.as_raw_handle();
    let io = Io::new(s, |_: &IoCompletion| {}).unwrap();
    assert_eq!(io.as_raw_handle(), raw);
}

#[test]
fn immediate_failure_on_a_broken_pipe() {
    let (s, c) = io::pipe_pair().unwrap();
    drop(c);
    let (cb, calls) = counter();
    let io = Io::new(s, cb).unwrap();
    let err = io.read(vec![1u8; 8]).expect_err("reading a pipe whose other end is closed fails synchronously");
    assert_os_error(err.error(), ERROR_BROKEN_PIPE);
    assert_eq!(err.into_payload(), vec![1u8; 8]);
    assert_eq!(io.outstanding(), 0);
    io.run_down();
    drop(io);
    assert_eq!(calls.load(SeqCst), 0);
}

#[test]
fn oversized_buffers_are_refused_before_starting() {
    let (cb, calls) = counter();
    let file = TempFile::with_contents("big", b"x");
    let io = Io::new(io::open_file(&file.0, &read_write()).unwrap(), cb).unwrap();
    // Zeroed pages are only reserved, not touched: nothing reads or writes them.
    let big = vec![0u8; u32::MAX as usize + 1];
    let err = io.read_at(0, big).expect_err("a buffer over u32::MAX bytes");
    assert_eq!(err.error().kind(), ErrorKind::InvalidInput);
    assert_eq!(err.error().raw_os_error(), None, "told apart from an OS ERROR_INVALID_PARAMETER");
    assert_eq!(err.into_payload().len(), u32::MAX as usize + 1);
    assert_eq!(io.outstanding(), 0);
    drop(io);
    assert_eq!(calls.load(SeqCst), 0);
}

#[test]
fn immediate_success_still_delivers_exactly_one_completion() {
    let (s, c) = io::pipe_pair().unwrap();
    let (cb, rx) = sender::<Vec<u8>>();
    let client = Io::new(c, cb).unwrap();
    let mut returned = None;
    // SAFETY: one WriteFile on the handle with the OVERLAPPED, from the
    // payload's buffer; `issue_result` classifies it.
    let id = unsafe {
        client.submit(Operation::new(b"ping".to_vec()), |h, ov, p: &mut Vec<u8>| {
            let r = WriteFile(h.as_raw_handle(), p.as_ptr(), p.len() as u32, core::ptr::null_mut(), ov);
            let result = io::issue_result(r);
            returned = Some(r);
            result
        })
    }
    .unwrap();
    assert_eq!(returned, Some(1), "a write into an empty pipe buffer completes synchronously");
    let d = recv(&rx);
    assert_eq!((d.id, d.result, d.bytes), (id, 0, 4));
    assert_eq!(d.op.unwrap().into_payload(), b"ping");
    // A hundred more through the safe path: one completion each, none extra.
    let ids: BTreeSet<_> = (0..100u8).map(|i| client.write(vec![i; 3]).unwrap()).collect();
    let got: BTreeSet<_> = recv_n(&rx, 100).into_iter().map(|d| (d.id, d.result, d.bytes)).collect();
    assert_eq!(got, ids.iter().map(|&id| (id, 0, 3)).collect());
    client.wait();
    assert!(rx.try_recv().is_err(), "a synchronous success was delivered twice");
    assert_eq!(client.outstanding(), 0);
    drop(s);
}

#[test]
fn a_pending_read_completes_when_data_arrives() {
    let p = pipe::<Vec<u8>>();
    let id = p.server.read(vec![0u8; 32]).unwrap();
    assert_eq!(p.server.outstanding(), 1);
    assert!(p.rx.try_recv().is_err(), "nothing was written, so nothing can have completed");
    p.client.write(b"hello".to_vec()).unwrap();
    let d = recv(&p.rx);
    assert_eq!((d.id, d.result, d.bytes), (id, 0, 5));
    let buf = d.op.expect("a Vec<u8> payload").into_payload();
    assert_eq!(&buf[..5], b"hello");
    assert_eq!(buf.len(), 32);
    p.server.wait();
    assert_eq!(p.server.outstanding(), 0);
    p.client.wait();
}

#[test]
fn cancelling_one_operation_leaves_the_others() {
    let p = pipe::<Vec<u8>>();
    let a = p.server.read(vec![0u8; 8]).unwrap();
    let b = p.server.read(vec![0u8; 8]).unwrap();
    p.server.cancel(a).unwrap();
    let d = recv(&p.rx);
    assert_eq!((d.id, d.result, d.bytes), (a, ERROR_OPERATION_ABORTED, 0));
    assert!(p.rx.try_recv().is_err(), "b was not cancelled and has no data");
    let err = p.server.cancel(a).expect_err("a has completed");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(err.raw_os_error(), None, "told apart from the OS ERROR_NOT_FOUND");
    p.client.write(b"12345678".to_vec()).unwrap();
    let d = recv(&p.rx);
    assert_eq!((d.id, d.result, d.bytes), (b, 0, 8));
    assert_eq!(d.op.unwrap().into_payload(), b"12345678");
    p.server.wait();
    assert!(p.rx.try_recv().is_err());
}

#[test]
fn cancel_all_cancels_every_outstanding_operation() {
    let p = pipe::<Vec<u8>>();
    p.server.cancel_all().expect("nothing outstanding is success");
    let ids: BTreeSet<_> = (0..16).map(|_| p.server.read(vec![0u8; 8]).unwrap()).collect();
    assert_eq!(p.server.outstanding(), 16);
    p.server.cancel_all().unwrap();
    let got: BTreeSet<_> = recv_n(&p.rx, 16).into_iter().map(|d| (d.id, d.result)).collect();
    assert_eq!(got, ids.iter().map(|&id| (id, ERROR_OPERATION_ABORTED)).collect());
    p.server.wait();
    assert_eq!(p.server.outstanding(), 0);
}

#[test]
fn run_down_with_operations_outstanding() {
    let (s, c) = io::pipe_pair().unwrap();
    let (cb, calls) = counter();
    let io = Io::new(s, cb).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    for _ in 0..64 {
        io.read(Counted::new(0, 8, &drops)).unwrap();
    }
    assert_eq!(io.outstanding(), 64);
    io.run_down();
    // run_down returned: every completion was delivered and its storage freed.
    assert_eq!(calls.load(SeqCst), 64);
    assert_eq!(drops.load(SeqCst), 64);
    assert_eq!(io.outstanding(), 0);
    io.run_down();
    assert_eq!(calls.load(SeqCst), 64, "a second rundown has nothing to deliver");
    drop(io);
    drop(c);
    assert_eq!(calls.load(SeqCst), 64);
}

#[test]
fn run_down_is_idempotent_and_the_object_stays_usable() {
    let p = pipe::<Vec<u8>>();
    p.server.run_down();
    p.server.run_down();
    for _ in 0..4 {
        p.server.read(vec![0u8; 4]).unwrap();
    }
    p.server.run_down();
    p.server.run_down();
    let aborted = recv_n(&p.rx, 4);
    assert!(aborted.iter().all(|d| d.result == ERROR_OPERATION_ABORTED));
    let id = p.server.read(vec![0u8; 4]).unwrap();
    p.client.write(b"abcd".to_vec()).unwrap();
    let d = recv(&p.rx);
    assert_eq!((d.id, d.result, d.bytes), (id, 0, 4));
    p.server.run_down();
    assert!(p.rx.try_recv().is_err());
}

#[test]
fn five_hundred_twelve_file_reads_at_distinct_offsets() {
    const BLOCK: usize = 256;
    const N: usize = 512;
    let contents = pattern(BLOCK * N);
    let file = TempFile::with_contents("512", &contents);
    let (cb, rx) = sender::<Counted>();
    let io = Io::new(io::open_file(&file.0, &read_only()).unwrap(), cb).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    // Submit in a scrambled order so offsets and addresses do not line up.
    let mut ids = HashMap::new();
    for k in 0..N {
        let i = (k * 389) % N;
        let offset = (i * BLOCK) as u64;
        let id = io.read_at(offset, Counted::new(offset, BLOCK, &drops)).unwrap();
        assert!(ids.insert(id, offset).is_none(), "ids of outstanding operations are unique");
    }
    let mut seen = BTreeSet::new();
    for d in recv_n(&rx, N) {
        assert_eq!((d.result, d.bytes), (0, BLOCK));
        let c = d.op.expect("a Counted payload").into_payload();
        assert_eq!(ids.get(&d.id), Some(&c.offset), "the completion carries its own operation's payload");
        let o = c.offset as usize;
        assert!(c.buf == contents[o..o + BLOCK], "wrong contents at offset {o}");
        assert!(seen.insert(o), "offset {o} completed twice");
    }
    io.wait();
    assert_eq!(seen.len(), N);
    assert!(rx.try_recv().is_err());
    assert_eq!(drops.load(SeqCst), N, "each payload dropped once");
}

#[test]
fn two_hundred_fifty_six_outstanding_pipe_reads_completed_by_writes() {
    const N: usize = 256;
    const MSG: usize = 16;
    let p = pipe::<Vec<u8>>();
    let ids: BTreeSet<_> = (0..N).map(|_| p.server.read(vec![0u8; MSG]).unwrap()).collect();
    assert_eq!(ids.len(), N);
    assert_eq!(p.server.outstanding(), N, "no data yet: every read is pending");
    let messages: Vec<Vec<u8>> = (0..N)
        .map(|i| (0..MSG).map(|j| if j < 2 { (i >> (8 * j)) as u8 } else { pattern_byte(i * MSG + j) }).collect())
        .collect();
    for m in &messages {
        p.client.write(m.clone()).unwrap();
    }
    let mut got = BTreeSet::new();
    let mut got_ids = BTreeSet::new();
    for d in recv_n(&p.rx, N) {
        assert_eq!((d.result, d.bytes), (0, MSG), "each write satisfies one pending read");
        assert!(got_ids.insert(d.id));
        got.insert(d.op.unwrap().into_payload());
    }
    assert_eq!(got_ids, ids);
    assert_eq!(got, messages.into_iter().collect(), "every message arrived once, intact");
    p.server.wait();
    p.client.wait();
    assert_eq!(p.writes.load(SeqCst), N);
    assert!(p.rx.try_recv().is_err());
}

#[test]
fn eight_threads_submitting_concurrently() {
    const THREADS: usize = 8;
    const PER: usize = 128;
    const BLOCK: usize = 64;
    let contents = pattern(BLOCK * THREADS * PER);
    let file = TempFile::with_contents("threads", &contents);
    let (cb, rx) = sender::<Counted>();
    let io = Arc::new(Io::new(io::open_file(&file.0, &read_only()).unwrap(), cb).unwrap());
    let drops = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (io, barrier, drops) = (Arc::clone(&io), Arc::clone(&barrier), Arc::clone(&drops));
            std::thread::spawn(move || {
                barrier.wait();
                (0..PER)
                    .map(|k| {
                        let offset = ((t * PER + k) * BLOCK) as u64;
                        io.read_at(offset, Counted::new(offset, BLOCK, &drops)).unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let ids: Vec<OperationId> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let generations: BTreeSet<_> = ids.iter().map(|id| id.generation()).collect();
    assert_eq!(generations.len(), THREADS * PER, "generations never repeat");
    let mut seen = BTreeSet::new();
    for d in recv_n(&rx, THREADS * PER) {
        assert_eq!((d.result, d.bytes), (0, BLOCK));
        let c = d.op.unwrap().into_payload();
        let o = c.offset as usize;
        assert!(c.buf == contents[o..o + BLOCK], "wrong contents at offset {o}");
        assert!(seen.insert(o), "offset {o} completed twice");
    }
    io.wait();
    assert_eq!(seen.len(), THREADS * PER);
    assert_eq!(drops.load(SeqCst), THREADS * PER);
    assert_eq!(io.outstanding(), 0);
}

/// Reads at and past the end of a file fail with `ERROR_HANDLE_EOF`, at once
/// or through the completion. Windows may refuse at once: Microsoft's
/// "Testing for the End of a File" ("An asynchronous read operation can
/// encounter the end of a file during the initiating call to ReadFile"); not
/// measured, so either outcome passes there.
#[test]
fn reads_past_end_of_file_are_errors() {
    let contents = pattern(100);
    let file = TempFile::with_contents("eof", &contents);
    let (cb, rx) = sender::<Vec<u8>>();
    let io = Io::new(io::open_file(&file.0, &read_only()).unwrap(), cb).unwrap();
    let wine = support::on_wine();
    for offset in [100u64, 1000, 1 << 40] {
        match io.read_at(offset, vec![0u8; 64]) {
            Ok(id) => {
                let d = recv(&rx);
                assert_eq!((d.id, d.result, d.bytes), (id, ERROR_HANDLE_EOF, 0), "offset {offset}");
            }
            Err(e) => {
                // Windows usually refuses a read past the end synchronously.
                assert!(!wine, "Wine reports end of file through the completion (offset {offset})");
                assert_os_error(e.error(), ERROR_HANDLE_EOF);
                assert_eq!(e.into_payload(), vec![0u8; 64]);
            }
        }
    }
    // A read that straddles the end transfers what there is.
    let id = io.read_at(90, vec![0u8; 64]).unwrap();
    let d = recv(&rx);
    assert_eq!((d.id, d.result, d.bytes), (id, 0, 10));
    assert_eq!(d.op.unwrap().into_payload()[..10], contents[90..]);
    io.wait();
    assert_eq!(io.outstanding(), 0);
}

#[test]
fn zero_length_reads_and_writes() {
    let file = TempFile::with_contents("zero", &pattern(100));
    let (cb, rx) = sender::<Vec<u8>>();
    let io = Io::new(io::open_file(&file.0, &read_only()).unwrap(), cb).unwrap();
    let id = io.read_at(0, Vec::new()).unwrap();
    let d = recv(&rx);
    assert_eq!((d.id, d.result, d.bytes), (id, 0, 0));
    assert!(d.op.unwrap().into_payload().is_empty());
    io.wait();

    let (cb, wrx) = sender::<Vec<u8>>();
    let (s, c) = io::pipe_pair().unwrap();
    let client = Io::new(c, cb).unwrap();
    let id = client.write(Vec::new()).unwrap();
    let d = recv(&wrx);
    assert_eq!((d.id, d.result, d.bytes), (id, 0, 0));
    client.wait();
    drop(s);
}

/// A second payload type.
struct Tagged {
    tag: &'static str,
    buf: [u8; 8],
}

impl AsMut<[u8]> for Tagged {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

enum Claimed {
    Vec(Vec<u8>),
    Tagged(Tagged),
}

#[test]
fn two_payload_types_on_one_object() {
    let (s, c) = io::pipe_pair().unwrap();
    let (tx, rx) = mpsc::channel();
    let server = Io::new(s, move |c: &IoCompletion| {
        assert!(c.claim::<String>().is_none(), "a payload of another type is not claimable");
        let claimed = if let Some(op) = c.claim::<Vec<u8>>() {
            Claimed::Vec(op.into_payload())
        } else if let Some(op) = c.claim::<Tagged>() {
            Claimed::Tagged(op.into_payload())
        } else {
            panic!("unclaimable completion {c:?}");
        };
        let again = c.claim::<Vec<u8>>().is_some() || c.claim::<Tagged>().is_some();
        tx.send((c.id(), claimed, again)).unwrap();
    })
    .unwrap();
    let (wcb, _writes) = counter();
    let client = Io::new(c, wcb).unwrap();
    // Pending reads are satisfied in the order they were issued.
    let a = server.read(vec![0u8; 8]).unwrap();
    let b = server.read(Tagged { tag: "tagged", buf: [0; 8] }).unwrap();
    client.write(b"first..!".to_vec()).unwrap();
    client.write(b"second.!".to_vec()).unwrap();
    let mut got: HashMap<_, _> = (0..2)
        .map(|_| {
            let (id, claimed, again) = rx.recv_timeout(PATIENCE).unwrap();
            assert!(!again, "an operation was claimed twice");
            (id, claimed)
        })
        .collect();
    match got.remove(&a) {
        Some(Claimed::Vec(v)) => assert_eq!(v, b"first..!"),
        _ => panic!("a should complete with its Vec<u8>"),
    }
    match got.remove(&b) {
        Some(Claimed::Tagged(t)) => assert_eq!((t.tag, &t.buf), ("tagged", b"second.!")),
        _ => panic!("b should complete with its Tagged"),
    }
    server.wait();
    client.wait();
}

#[test]
fn unclaimed_completions_free_their_storage() {
    let out = support::child("io::unclaimed_completions_free_their_storage", &[], || {
        assert_eq!(io::live_operations(), 0);
        let file = TempFile::with_contents("leak", &pattern(4096));
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let io = Io::new(io::open_file(&file.0, &read_only()).unwrap(), move |c: &IoCompletion| {
            // Claim the operations at even offsets, leave the rest.
            if c.id().generation().is_multiple_of(2) {
                tx.send(c.claim::<Counted>().unwrap()).unwrap();
            }
        })
        .unwrap();
        let mut even = 0;
        for i in 0..100u64 {
            let id = io.read_at(i * 16, Counted::new(i * 16, 16, &drops)).unwrap();
            even += usize::from(id.generation().is_multiple_of(2));
        }
        io.wait();
        assert_eq!(drops.load(SeqCst), 100 - even, "unclaimed payloads were dropped when their callbacks returned");
        let claimed: Vec<Operation<Counted>> = rx.try_iter().collect();
        assert_eq!(claimed.len(), even);
        assert_eq!(io::live_operations(), even, "only the claimed blocks are alive");
        drop(claimed);
        assert_eq!(io::live_operations(), 0);
        assert_eq!(drops.load(SeqCst), 100);

        // A synchronous failure gives the block back and frees it once.
        let ro = Io::new(io::open_file(&file.0, &read_only()).unwrap(), |_: &IoCompletion| {}).unwrap();
        let e = ro.write_at(0, vec![1u8; 4]).unwrap_err();
        assert_eq!(io::live_operations(), 0, "the block was freed when the buffer came back");
        drop(e);
        // Through the raw seam, the operation itself comes back.
        // SAFETY: issues nothing and says so.
        let e =
            unsafe { ro.submit(Operation::new(Counted::new(0, 4, &drops)), |_, _, _| Err(ErrorKind::Other.into())) }
                .unwrap_err();
        assert_eq!(io::live_operations(), 1);
        drop(e);
        assert_eq!(io::live_operations(), 0);
        assert_eq!(drops.load(SeqCst), 101);
        drop((io, ro));
        assert_eq!(io::live_operations(), 0);
    });
    out.assert_completed();
}

#[test]
fn a_claimed_operation_can_be_submitted_again() {
    let file = TempFile::with_contents("reuse", &pattern(1024));
    let (cb, rx) = sender::<Vec<u8>>();
    let io = Io::new(io::open_file(&file.0, &read_only()).unwrap(), cb).unwrap();
    io.read_at(0, vec![0u8; 16]).unwrap();
    let mut op = recv(&rx).op.unwrap();
    let buffer = op.payload().as_ptr();
    let mut returned = Vec::new();
    for i in 1..4u64 {
        // SAFETY: one ReadFile into the payload, on the handle, with the OVERLAPPED.
        let id = unsafe {
            io.submit(op, |h, ov, buf: &mut Vec<u8>| {
                (*ov).Anonymous.Anonymous.Offset = (i * 100) as u32;
                let r = windows_sys::Win32::Storage::FileSystem::ReadFile(
                    h.as_raw_handle(),
                    buf.as_mut_ptr(),
                    buf.len() as u32,
                    core::ptr::null_mut(),
                    ov,
                );
                let result = io::issue_result(r);
                returned.push(r);
                result
            })
        }
        .unwrap();
        let d = recv(&rx);
        assert_eq!((d.id, d.result, d.bytes), (id, 0, 16));
        op = d.op.unwrap();
        assert_eq!(op.payload().as_ptr(), buffer, "the same buffer travels with the operation");
        assert_eq!(op.payload()[..], pattern(1024)[i as usize * 100..][..16]);
    }
    if support::on_wine() {
        // Windows may complete a cached read synchronously (a completion still
        // arrives: Wine's `test_kernel32_tp_io` shows it for a pipe read).
        assert_eq!(returned, [0, 0, 0], "Wine answers every file read on a bound handle with ERROR_IO_PENDING");
    }
    io.wait();
}

/// Reads into the payload of `op` through the raw seam.
fn resubmit_read(io: &Io, op: Operation<Vec<u8>>) -> OperationId {
    // SAFETY: one ReadFile into the payload, on the handle, with the OVERLAPPED.
    unsafe {
        io.submit(op, |h, ov, buf: &mut Vec<u8>| {
            let r = windows_sys::Win32::Storage::FileSystem::ReadFile(
                h.as_raw_handle(),
                buf.as_mut_ptr(),
                buf.len() as u32,
                core::ptr::null_mut(),
                ov,
            );
            io::issue_result(r)
        })
    }
    .unwrap()
}

#[test]
fn a_stale_generation_at_a_live_address_is_rejected() {
    let p = pipe::<Vec<u8>>();
    let a = p.server.read(vec![0u8; 8]).unwrap();
    p.client.write(b"aaaaaaaa".to_vec()).unwrap();
    let d = recv(&p.rx);
    assert_eq!(d.id, a);
    // Submitting the claimed block again puts a new operation at a's address.
    let b = resubmit_read(&p.server, d.op.unwrap());
    assert_eq!(b.overlapped_address(), a.overlapped_address());
    assert!(b.generation() > a.generation());
    let err = p.server.cancel(a).expect_err("a's id is stale");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    // Had the stale cancel reached b, b would complete aborted.
    p.client.write(b"bbbbbbbb".to_vec()).unwrap();
    let d = recv(&p.rx);
    assert_eq!((d.id, d.result, d.bytes), (b, 0, 8), "the live operation was cancelled through a stale id");
    assert_eq!(d.op.unwrap().into_payload(), b"bbbbbbbb");
    // And the current id does cancel it.
    let c = resubmit_read(&p.server, Operation::new(vec![0u8; 8]));
    p.server.cancel(c).unwrap();
    assert_eq!(recv(&p.rx).result, ERROR_OPERATION_ABORTED);
    p.server.wait();
}

#[test]
fn an_id_of_another_object_is_rejected() {
    let x = pipe::<Vec<u8>>();
    let y = pipe::<Vec<u8>>();
    let id = x.server.read(vec![0u8; 8]).unwrap();
    let _other = y.server.read(vec![0u8; 8]).unwrap();
    assert_eq!(y.server.cancel(id).unwrap_err().kind(), ErrorKind::NotFound);
    assert!(y.rx.try_recv().is_err() && x.rx.try_recv().is_err());
    x.server.cancel(id).unwrap();
    let d = recv(&x.rx);
    assert_eq!((d.id, d.result), (id, ERROR_OPERATION_ABORTED));
    y.server.stop_and_drain();
}

#[test]
fn drop_cancels_outstanding_operations_and_frees_everything() {
    let (s, c) = io::pipe_pair().unwrap();
    let state = Arc::new(AtomicUsize::new(0));
    let st = Arc::clone(&state);
    let io = Io::new(s, move |c: &IoCompletion| {
        assert_eq!(c.io_result(), ERROR_OPERATION_ABORTED);
        st.fetch_add(1, SeqCst);
    })
    .unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    for _ in 0..32 {
        io.read(Counted::new(0, 8, &drops)).unwrap();
    }
    support::teardown_owing("Io", || drop(io));
    assert_eq!(state.load(SeqCst), 32, "every completion was delivered before drop returned");
    assert_eq!(drops.load(SeqCst), 32, "every payload was freed");
    assert_eq!(Arc::strong_count(&state), 1, "the callback was freed");
    drop(c);
}

#[test]
fn a_synchronous_more_data_still_completes() {
    // A message-mode pipe: a read shorter than the message reports
    // ERROR_MORE_DATA synchronously, yet a completion is queued.
    let name: Vec<u16> = format!(r"\\.\pipe\wtp-io-msg-{}", std::process::id()).encode_utf16().chain(Some(0)).collect();
    // SAFETY: plain Win32 calls with a NUL-terminated name; handles are checked.
    let (server, client) = unsafe {
        let s = CreateNamedPipeW(
            name.as_ptr(),
            PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED | FILE_FLAG_FIRST_PIPE_INSTANCE,
            PIPE_TYPE_MESSAGE | PIPE_READMODE_MESSAGE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
            1,
            4096,
            4096,
            0,
            core::ptr::null(),
        );
        assert_ne!(s, INVALID_HANDLE_VALUE);
        let c = CreateFileW(
            name.as_ptr(),
            GENERIC_READ | GENERIC_WRITE,
            0,
            core::ptr::null(),
            OPEN_EXISTING,
            FILE_FLAG_OVERLAPPED,
            core::ptr::null_mut(),
        );
        assert_ne!(c, INVALID_HANDLE_VALUE);
        (OwnedHandle::from_raw_handle(s), OwnedHandle::from_raw_handle(c))
    };
    let (cb, rx) = sender::<Vec<u8>>();
    // SAFETY: opened overlapped just above, never bound, no skip-on-success.
    let io = Io::new(unsafe { io::OverlappedHandle::assume_overlapped(server) }, cb).unwrap();
    // Write one 50-byte message from the unbound client end, and wait for it.
    let message: Vec<u8> = (0..50).collect();
    // SAFETY: the OVERLAPPED, event and buffer outlive the write, which is waited for.
    unsafe {
        let event = OwnedHandle::from_raw_handle(CreateEventW(core::ptr::null(), 1, 0, core::ptr::null()));
        let mut ov = OVERLAPPED { hEvent: event.as_raw_handle(), ..Default::default() };
        let r = WriteFile(client.as_raw_handle(), message.as_ptr(), 50, core::ptr::null_mut(), &mut ov);
        assert!(io::issue_result(r).is_ok());
        let mut n = 0;
        assert_ne!(GetOverlappedResult(client.as_raw_handle(), &ov, &mut n, 1), 0);
        assert_eq!(n, 50);
    }
    let id = io.read(vec![0u8; 10]).expect("ERROR_MORE_DATA is not a synchronous failure");
    let d = recv(&rx);
    assert_eq!((d.id, d.result, d.bytes), (id, ERROR_MORE_DATA, 10));
    assert_eq!(d.op.unwrap().into_payload(), message[..10]);
    let id = io.read(vec![0u8; 64]).unwrap();
    let d = recv(&rx);
    assert_eq!((d.id, d.result, d.bytes), (id, 0, 40), "the rest of the message");
    assert_eq!(d.op.unwrap().into_payload()[..40], message[10..]);
    io.wait();
    assert!(rx.try_recv().is_err());
}

#[test]
fn objects_on_a_private_pool() {
    let pool = Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    let env = CallbackEnviron::new().with_pool(&pool);
    let file = TempFile::with_contents("pool", &pattern(256));
    let (cb, rx) = sender::<Vec<u8>>();
    let io = Io::new_in(io::open_file(&file.0, &read_only()).unwrap(), cb, &env).unwrap();
    drop(env);
    drop(pool); // the object keeps the pool open
    let ids: BTreeSet<_> = (0..8u64).map(|i| io.read_at(i * 32, vec![0u8; 32]).unwrap()).collect();
    let done = recv_n(&rx, 8);
    assert_eq!(done.iter().map(|d| d.id).collect::<BTreeSet<_>>(), ids);
    for d in done {
        assert_eq!((d.result, d.bytes), (0, 32));
    }
}

#[test]
fn run_down_while_another_thread_submits() {
    let (s, c) = io::pipe_pair().unwrap();
    let (cb, calls) = counter();
    let io = Arc::new(Io::new(s, cb).unwrap());
    let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(2));
    let submitter = {
        let (io, finished, barrier) = (Arc::clone(&io), Arc::clone(&finished), Arc::clone(&barrier));
        std::thread::spawn(move || {
            barrier.wait();
            let issued = (0..2000).filter(|_| io.read(vec![0u8; 4]).is_ok()).count();
            finished.store(true, SeqCst);
            issued
        })
    };
    // Each rundown must return although reads keep being issued (a read
    // issued after its cancel would otherwise keep it waiting forever).
    barrier.wait();
    let mut rundowns = 0;
    while !finished.load(SeqCst) {
        io.run_down();
        rundowns += 1;
    }
    let issued = submitter.join().unwrap();
    io.run_down();
    assert_eq!(io.outstanding(), 0);
    assert_eq!(calls.load(SeqCst), issued, "every issued read was delivered exactly once");
    assert!(rundowns > 0);
    drop(c);
}

#[test]
fn a_callback_may_issue_on_its_own_object_during_run_down() {
    let (s, c) = io::pipe_pair().unwrap();
    let me: Arc<std::sync::OnceLock<std::sync::Weak<Io>>> = Arc::default();
    let (entered, gate) = (Arc::new(Gate::default()), Arc::new(Gate::default()));
    let (tx, rx) = mpsc::channel();
    let io = {
        let (me, entered, gate) = (Arc::clone(&me), Arc::clone(&entered), Arc::clone(&gate));
        Arc::new(
            Io::new(s, move |c: &IoCompletion| {
                tx.send(c.io_result()).unwrap();
                if c.io_result() == 0 {
                    entered.open();
                    gate.wait();
                    let io = me.get().unwrap().upgrade().unwrap();
                    io.read(vec![0u8; 4]).unwrap();
                }
            })
            .unwrap(),
        )
    };
    me.set(Arc::downgrade(&io)).unwrap();
    let (cb, _writes) = counter();
    let client = Io::new(c, cb).unwrap();
    io.read(vec![0u8; 4]).unwrap();
    client.write(b"data".to_vec()).unwrap();
    entered.wait();
    // The rundown starts while the callback is blocked, and must let the
    // callback's new read through, then cancel it. The delay only gives the
    // rundown time to get ahead of the gate; the assertions do not depend on it.
    let opener = {
        let gate = Arc::clone(&gate);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            gate.open();
        })
    };
    io.run_down();
    opener.join().unwrap();
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), [0, ERROR_OPERATION_ABORTED]);
    assert_eq!(io.outstanding(), 0);
}

#[test]
fn a_panicking_issue_closure_aborts_the_process() {
    let out = support::child("io::a_panicking_issue_closure_aborts_the_process", &[], || {
        let (s, _c) = io::pipe_pair().unwrap();
        let io = Io::new(s, |_: &IoCompletion| {}).unwrap();
        // SAFETY: issues nothing; it panics, which must abort the process.
        let _ = unsafe { io.submit(Operation::new(()), |_, _, _| panic!("boom from an issue closure")) };
        // Only reached if the panic did not abort: the child then exits CHILD_DONE.
    });
    support::assert_panicked_and_aborted(&out, support::AbortKind::Explicit, "boom from an issue closure");
}

#[test]
fn panicking_io_callback_aborts_the_process() {
    let out = support::child("io::panicking_io_callback_aborts_the_process", &[], || {
        let file = TempFile::with_contents("panic", b"0123456789");
        let io = Io::new(io::open_file(&file.0, &read_only()).unwrap(), |_: &IoCompletion| {
            panic!("boom from an io callback")
        })
        .unwrap();
        io.read_at(0, vec![0u8; 4]).unwrap();
        io.wait();
        // Only reached if the panic did not abort: the child then exits CHILD_DONE.
    });
    support::assert_panicked_and_aborted(&out, support::AbortKind::CannotUnwind, "boom from an io callback");
}

// ---------------------------------------------------------------------------
// Public API coverage

/// A write completes with the bytes it carried, and they land at its offset.
#[test]
fn write_at_writes_at_its_offset() {
    let file = TempFile::with_contents("write-at", b"0123456789");
    let (tx, rx) = std::sync::mpsc::channel();
    let io = Io::new(io::open_file(&file.0, &read_write()).unwrap(), move |c: &IoCompletion| {
        tx.send((c.io_result(), c.bytes_transferred(), c.error().is_none())).unwrap()
    })
    .unwrap();
    io.write_at(3, b"abcd".to_vec()).map_err(|e| e.into_parts().0).unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), (0, 4, true));
    io.wait();
    drop(io);
    assert_eq!(std::fs::read(&file.0).unwrap(), b"012abcd789");
}

/// The flags reach `CreateFileW`: `FILE_FLAG_DELETE_ON_CLOSE` deletes the
/// file when the handle closes, and the handle is still overlapped (a read
/// completes through the pool).
#[test]
fn open_file_with_flags_passes_its_flags() {
    use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_DELETE_ON_CLOSE;
    let file = TempFile::with_contents("flags", b"flagged");
    let (tx, rx) = std::sync::mpsc::channel();
    let io = Io::new(
        io::open_file_with_flags(&file.0, &read_write(), FILE_FLAG_DELETE_ON_CLOSE).unwrap(),
        move |c: &IoCompletion| tx.send(c.claim::<Vec<u8>>().map(Operation::into_payload)).unwrap(),
    )
    .unwrap();
    io.read_at(0, vec![0u8; 7]).map_err(|e| e.into_parts().0).unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap().as_deref(), Some(&b"flagged"[..]));
    assert!(file.0.exists(), "deleted before the handle closed");
    drop(io);
    assert!(!file.0.exists(), "FILE_FLAG_DELETE_ON_CLOSE did not reach CreateFileW");
}

/// A cancelled read completes with `ERROR_OPERATION_ABORTED`, which `error`
/// returns as `Some`.
#[test]
fn a_completion_error_is_some() {
    let (server, _client) = io::pipe_pair().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let io = Io::new(server, move |c: &IoCompletion| {
        tx.send((c.io_result(), c.error().and_then(|e| e.raw_os_error()))).unwrap()
    })
    .unwrap();
    // Nothing is written to the pipe: the read stays pending until cancelled.
    let id = io.read(vec![0u8; 8]).map_err(|e| e.into_parts().0).unwrap();
    io.cancel(id).unwrap();
    let aborted = ERROR_OPERATION_ABORTED;
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), (aborted, Some(aborted as i32)));
    io.wait();
}

/// `into_owned` gives back the handle it wrapped, still open and usable.
#[test]
fn overlapped_handle_into_owned_keeps_the_handle_open() {
    use std::os::windows::io::AsRawHandle;
    let file = TempFile::with_contents("owned", b"x");
    let h = io::open_file(&file.0, &read_only()).unwrap();
    let owned = h.into_owned();
    let f = std::fs::File::from(owned);
    assert!(!f.as_raw_handle().is_null());
    assert_eq!(f.metadata().unwrap().len(), 1, "the handle is still open on the file");
}

#[test]
fn as_raw_is_the_live_io_object() {
    let file = TempFile::with_contents("raw", b"r");
    let a = Io::new(io::open_file(&file.0, &read_only()).unwrap(), |_: &IoCompletion| {}).unwrap();
    let b = Io::new(io::open_file(&file.0, &read_only()).unwrap(), |_: &IoCompletion| {}).unwrap();
    assert_ne!(a.as_raw(), 0);
    assert_ne!(a.as_raw(), b.as_raw(), "each object has its own TP_IO");
    assert_eq!(a.as_raw(), a.as_raw(), "stable for the object's life");
    // SAFETY: `a.as_raw()` is live; no operation is outstanding, so the drain returns at once.
    unsafe { windows_sys::Win32::System::Threading::WaitForThreadpoolIoCallbacks(a.as_raw(), 0) };
}

/// One overlapped call on `handle`, issued outside any object with its own
/// event, and waited for. The `OVERLAPPED` is returned so it outlives any
/// completion packet still queued for it.
fn foreign_io(handle: &OwnedHandle, write: bool, offset: u32, buf: &mut [u8]) -> (Box<OVERLAPPED>, OwnedHandle) {
    // SAFETY: default attributes, manual reset, unsignalled, unnamed; checked.
    let event = unsafe { CreateEventW(core::ptr::null(), 1, 0, core::ptr::null()) };
    assert!(!event.is_null());
    // SAFETY: a fresh handle nothing else owns.
    let event = unsafe { OwnedHandle::from_raw_handle(event) };
    let mut ov = Box::new(OVERLAPPED { hEvent: event.as_raw_handle(), ..Default::default() });
    ov.Anonymous.Anonymous.Offset = offset;
    let (h, len, mut n) = (handle.as_raw_handle(), buf.len() as u32, 0);
    // SAFETY: `ov`, its event and `buf` outlive the call, which is waited for.
    unsafe {
        let r = if write {
            WriteFile(h, buf.as_ptr(), len, core::ptr::null_mut(), &mut *ov)
        } else {
            ReadFile(h, buf.as_mut_ptr(), len, core::ptr::null_mut(), &mut *ov)
        };
        assert!(io::issue_result(r).is_ok(), "foreign I/O: {}", std::io::Error::last_os_error());
        assert_ne!(GetOverlappedResult(h, &*ov, &mut n, 1), 0);
    }
    assert_eq!(n, len);
    (ov, event)
}

/// Waits until the pool has taken every completion packet queued before
/// this call: an operation on a second object completes after them (Wine
/// has one completion port for all I/O objects, first in, first out).
fn flush_completions() {
    let file = TempFile::with_contents("flush", &pattern(64));
    let (cb, rx) = sender::<Vec<u8>>();
    let probe = Io::new(io::open_file(&file.0, &read_only()).unwrap(), cb).unwrap();
    let id = probe.read_at(0, vec![0u8; 8]).unwrap();
    assert_eq!(recv(&rx).id, id);
    probe.wait();
}

/// Overlapped I/O on a duplicate of the bound handle (`handle()` then
/// `try_clone_to_owned`) sends its completions to the object's port, with no
/// `StartThreadpoolIo` behind them. Under Wine 8 the pool drops such a packet
/// when no start is pending, and otherwise pairs it with a pending start of
/// the object's, delivers it to the trampoline, and later drops the started
/// operation's own packet (`docs/wine.md`). The trampoline must ignore the
/// foreign completion: the callback never sees it and `outstanding` stays.
/// On Windows the packets always arrive (the binding belongs to the file
/// object; Microsoft's `StartThreadpoolIo` says only that an unstarted
/// completion corrupts memory); not measured.
/// Runs in a child process, which leaves with the lost operation still
/// outstanding (a rundown would wait for it forever).
#[test]
fn foreign_completions_on_a_duplicate_handle_are_ignored() {
    const NAME: &str = "io::foreign_completions_on_a_duplicate_handle_are_ignored";
    let scenario = || {
        let (server, client) = io::pipe_pair().unwrap();
        let (cb, rx) = sender::<Vec<u8>>();
        let io = Io::new(server, cb).unwrap();
        // SAFETY: the test deliberately issues foreign I/O on a duplicate
        // in this process, where no foreign OVERLAPPED can alias a live
        // operation (the scenario the crate's guard must survive).
        let dup = unsafe { BorrowedHandle::borrow_raw(io.as_raw_handle()) }.try_clone_to_owned().unwrap();
        let client = Io::new(client, |_: &IoCompletion| {}).unwrap();
        let mut keep = Vec::new();
        let mut foreign = BTreeSet::new();
        let mut note = |(ov, ev): (Box<OVERLAPPED>, OwnedHandle)| {
            foreign.insert(&*ov as *const OVERLAPPED as u64);
            keep.push((ov, ev));
        };

        // No start pending: 8 foreign writes into the client's buffer.
        for _ in 0..8 {
            note(foreign_io(&dup, true, 0, &mut [1u8; 4]));
        }
        flush_completions();
        assert!(rx.try_recv().is_err(), "a foreign completion reached the callback");
        assert_eq!(io.outstanding(), 0);

        // A start pending: the object's own read waits for data while a
        // foreign write completes.
        io.read(vec![0u8; 4]).unwrap();
        note(foreign_io(&dup, true, 0, &mut [2u8; 4]));
        flush_completions();
        if support::on_wine() {
            // The foreign packet took the start: once its callback has run
            // (Wine's drain waits for pending starts too, and none is left),
            // the object's own read is the one whose completion is lost.
            // SAFETY: a live I/O object; FALSE cancels nothing.
            unsafe { windows_sys::Win32::System::Threading::WaitForThreadpoolIoCallbacks(io.as_raw(), 0) };
            client.write(b"data".to_vec()).unwrap();
            client.wait();
            flush_completions();
            assert!(rx.try_recv().is_err(), "Wine delivered the read the foreign packet displaced");
            assert_eq!(io.outstanding(), 1, "the displaced read never completes");
        } else {
            assert!(rx.try_recv().is_err(), "a foreign completion reached the callback");
        }
        // The lost read keeps `io` from ever running down.
        core::mem::forget(io);
        (foreign, keep)
    };
    #[cfg(not(feature = "trace"))]
    support::child(NAME, &[], || drop(scenario())).assert_completed();
    #[cfg(feature = "trace")]
    support::traced_child(NAME, "io", || {
        let (foreign, keep) = scenario();
        let rows = rows::rows(&windows_threadpool::trace::dump());
        let on = |event: &str| {
            rows.iter().filter(|r| r.is("io", event) && foreign.contains(&r.slot("overlapped").unwrap())).count()
        };
        let ignored = rows.iter().filter(|r| r.is("io", "trampoline-foreign")).count();
        assert_eq!(on("trampoline-left"), 0, "a foreign completion was delivered: {rows:#?}");
        assert_eq!(ignored, on("trampoline-entered"), "every foreign completion that arrived was ignored");
        if support::on_wine() {
            assert_eq!(ignored, 1, "Wine delivers exactly the packet that found a start pending: {rows:#?}");
        }
        drop(keep);
    });
}

/// Teardown follows the order `CloseThreadpoolIo` documents: every
/// operation has completed (rundown) and the handle is closed before the
/// object is.
#[cfg(feature = "trace")]
#[test]
fn teardown_closes_the_handle_before_the_io_object() {
    support::traced_child("io::teardown_closes_the_handle_before_the_io_object", "io,syscall", || {
        let (s, c) = io::pipe_pair().unwrap();
        let (cb, calls) = counter();
        let io = Io::new(s, cb).unwrap();
        let (raw, handle) = (io.as_raw() as u64, io.as_raw_handle() as u64);
        for _ in 0..4 {
            io.read(vec![0u8; 8]).unwrap();
        }
        support::teardown_owing("Io", || drop(io));
        assert_eq!(calls.load(SeqCst), 4);
        drop(c);
        let rows = rows::rows(&windows_threadpool::trace::dump());
        let find = |target: &str, event: &str, slot: &str, value: u64| {
            rows.iter()
                .position(|r| r.is(target, event) && r.slot(slot) == Some(value))
                .unwrap_or_else(|| panic!("no {target} {event} {slot}={value:#x}: {rows:#?}"))
        };
        let ended = find("io", "rundown-ended", "io", raw);
        let handle_closed = find("syscall-leave", "CloseHandle", "handle", handle);
        let io_closed = find("syscall-enter", "CloseThreadpoolIo", "io", raw);
        assert!(ended < handle_closed, "the handle was closed before the rundown ended");
        assert!(handle_closed < io_closed, "CloseThreadpoolIo ran before the handle was closed");
        let delivered = rows[..handle_closed].iter().filter(|r| r.is("io", "trampoline-left")).count();
        assert_eq!(delivered, 4, "every completion was delivered before the handle was closed");
    });
}

/// `read_at` records its offset in the operation's `OVERLAPPED` where
/// `ReadFile` would have put it, high half included (a pipe ignores offsets,
/// so any offset reads the next bytes).
#[test]
fn an_operations_overlapped_records_its_offset() {
    let p = pipe::<Vec<u8>>();
    let offset = (3u64 << 32) + 5;
    let id = p.server.read_at(offset, vec![0u8; 4]).unwrap();
    p.client.write(b"abcd".to_vec()).unwrap();
    let d = recv(&p.rx);
    assert_eq!((d.id, d.result), (id, 0));
    let op = d.op.expect("the read's operation");
    // SAFETY: both views are plain u32s over an initialised OVERLAPPED (any bits are valid); read_at wrote these.
    let (low, high) =
        unsafe { (op.overlapped().Anonymous.Anonymous.Offset, op.overlapped().Anonymous.Anonymous.OffsetHigh) };
    assert_eq!((low, high), (5, 3));
    assert_eq!(op.payload().as_slice(), b"abcd");
}

/// `CancelIoEx(handle, NULL)` with nothing to cancel: Windows documents
/// `ERROR_NOT_FOUND` (`CancelIoEx`: "If this function cannot find a request to
/// cancel, the return value is 0"), which `Io::cancel_all` reports as success.
/// Wine's conformance test `dlls/ntdll/tests/pipe.c` `test_cancelio` asserts
/// `STATUS_NOT_FOUND` from `NtCancelIoFileEx(pipe, NULL, ..)` on Windows.
/// Wine 8 succeeds; Wine 10 fails as Windows does.
#[test]
fn raw_cancel_all_with_nothing_outstanding_differs_on_wine() {
    let (s, _c) = io::pipe_pair().unwrap();
    // SAFETY: a live handle; a null OVERLAPPED names all its I/O.
    let r = unsafe { windows_sys::Win32::System::IO::CancelIoEx(s.as_raw_handle(), core::ptr::null()) };
    let err = std::io::Error::last_os_error();
    if support::wine_before(10) {
        assert_ne!(r, 0, "Wine 8 now fails a cancel with nothing to cancel ({err}): update docs/wine.md");
    } else {
        assert_eq!(r, 0, "a cancel with nothing to cancel succeeded");
        assert_os_error(&err, ERROR_NOT_FOUND);
    }
}
