//! A named-pipe server in the test's own process, answering each client as
//! `examples/pipe_service.rs`'s `answer_pipe` does (each read answered
//! `pong: ` and what it read, until the client closes), and the clients the
//! hostile-pipe scenarios (`hostile_pipe.rs`) meet it with: a well-behaved
//! one on the pool ([`ping`]) and raw `std` handles ([`RawPipe`]). Include
//! it beside `support` and `rounds`.
#![allow(dead_code)]

use std::fs::File;
use std::io;
use std::os::windows::fs::OpenOptionsExt as _;
use std::os::windows::io::{AsRawHandle as _, FromRawHandle as _, OwnedHandle};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

use futures::future::{Either, select};
use windows_sys::Win32::Foundation::{ERROR_IO_PENDING, ERROR_OPERATION_ABORTED, ERROR_PIPE_BUSY, WAIT_OBJECT_0};
use windows_sys::Win32::Storage::FileSystem::{FILE_FLAG_OVERLAPPED, ReadFile, WriteFile};
use windows_sys::Win32::System::IO::{CancelIoEx, GetOverlappedResult, OVERLAPPED};
use windows_sys::Win32::System::Threading::{CreateEventW, WaitForSingleObject};
use windows_threadpool::pipe::{PipeListener, PipeStream};
use windows_threadpool::{task, time};

use crate::rounds::{PROMPTLY, until};
use crate::support;

/// The server's counters.
#[derive(Debug, Default)]
pub struct PipeStats {
    pub accepted: AtomicU64,
    /// Accepts that failed: none should (a client that came and went is
    /// skipped by the accept itself); each is counted, the loop goes on.
    pub accept_errors: AtomicU64,
    pub last_accept_error: std::sync::Mutex<Option<String>>,
    /// Reads answered.
    pub requests: AtomicU64,
    /// Answers being written now (a client that does not read keeps one
    /// in flight).
    pub writing: AtomicU64,
    /// Connections ended by the client's close seen by a read (`Ok(0)`).
    pub closed: AtomicU64,
    /// Connections ended by the client's close seen by a write
    /// (`BrokenPipe`).
    pub broken: AtomicU64,
    /// Connections ended by another error.
    pub failed: AtomicU64,
    /// Clients the scenarios' raw clients opened (each took an instance of
    /// the server's, accepted or skipped as gone).
    pub opened: AtomicU64,
}

impl PipeStats {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(SeqCst)
    }

    pub fn ended(&self) -> u64 {
        Self::get(&self.closed) + Self::get(&self.broken) + Self::get(&self.failed)
    }
}

/// The server on a pipe name of its own, stopped by [`PipeServer::stop`].
pub struct PipeServer {
    pub name: Arc<str>,
    pub stats: Arc<PipeStats>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: task::JoinHandle<()>,
}

impl PipeServer {
    /// Binds a new name and accepts on a pool task: each accepted stream
    /// is answered by a task of its own; an accept error is counted and
    /// never ends the loop.
    pub fn start() -> Self {
        let name: Arc<str> = crate::support::unique_pipe_name().into();
        let listener = PipeListener::bind(&*name).unwrap();
        let stats = Arc::new(PipeStats::default());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let s = stats.clone();
        let served = task::spawn(async move {
            let mut stopped = pin!(stopped);
            loop {
                match select(pin!(listener.accept()), stopped.as_mut()).await {
                    Either::Left((Ok(stream), _)) => {
                        s.accepted.fetch_add(1, SeqCst);
                        drop(task::spawn(answer(stream, s.clone())));
                    }
                    Either::Left((Err(e), _)) => {
                        s.accept_errors.fetch_add(1, SeqCst);
                        *s.last_accept_error.lock().unwrap() = Some(e.to_string());
                    }
                    Either::Right(_) => return,
                }
            }
        });
        Self { name, stats, stop: Some(stop), served }
    }

    pub fn accepted(&self) -> u64 {
        PipeStats::get(&self.stats.accepted)
    }

    /// Stops accepting (the listener is dropped) and waits (at most
    /// [`support::PATIENCE`]) until every connection it accepted has ended;
    /// checks that no accept failed.
    pub async fn stop(mut self) {
        drop(self.stop.take());
        (&mut self.served).await.expect("the accept loop panicked");
        let stats = self.stats.clone();
        until("the pipe server's connections ended", support::PATIENCE, move || {
            stats.ended() == PipeStats::get(&stats.accepted)
        })
        .await;
        assert_eq!(PipeStats::get(&self.stats.accept_errors), 0, "{:?}", self.stats);
    }
}

/// `answer_pipe` of `examples/pipe_service.rs`, counted: how the
/// connection ended.
async fn answer(stream: PipeStream, stats: Arc<PipeStats>) {
    let end = answer_pipe(&stream, &stats).await;
    drop(stream);
    let counter = match &end {
        Ok(()) => &stats.closed,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => &stats.broken,
        Err(_) => &stats.failed,
    };
    counter.fetch_add(1, SeqCst);
}

async fn answer_pipe(stream: &PipeStream, stats: &PipeStats) -> io::Result<()> {
    let mut buf = vec![0u8; 4096];
    loop {
        let (n, back) = stream.read(buf).await;
        let n = n?;
        if n == 0 {
            return Ok(());
        }
        stats.requests.fetch_add(1, SeqCst);
        let reply = [b"pong: ", &back[..n]].concat();
        stats.writing.fetch_add(1, SeqCst);
        let (sent, _) = stream.write_all(reply).await;
        stats.writing.fetch_sub(1, SeqCst);
        sent?;
        buf = back;
    }
}

/// A well-behaved client on the pool: connects, sends `ping`, reads
/// `pong: ping`, closes.
pub async fn ping(name: &str) -> io::Result<()> {
    let client = PipeStream::connect(name).await?;
    let (sent, _) = client.write_all(b"ping".to_vec()).await;
    sent?;
    let (mut got, mut buf) = (Vec::new(), vec![0u8; 64]);
    // At most 10 reads: each returns a byte or more, or ends the loop.
    while got.len() < b"pong: ping".len() {
        let (n, back) = client.read(buf).await;
        match n? {
            0 => break,
            n => got.extend_from_slice(&back[..n]),
        }
        buf = back;
    }
    assert_eq!(got, b"pong: ping", "{:?}", String::from_utf8_lossy(&got));
    Ok(())
}

/// [`ping`] answered within [`PROMPTLY`]; its time.
pub async fn promptly(name: &str, stats: &PipeStats, during: &str) -> Duration {
    let t = Instant::now();
    match time::timeout(PROMPTLY, ping(name)).await {
        Ok(Ok(())) => t.elapsed(),
        Ok(Err(e)) => panic!("ping {during}: {e} ({stats:?})"),
        Err(_) => panic!("ping {during}: not answered within {PROMPTLY:?} ({stats:?})"),
    }
}

/// Opens `name` as a client with `std` (synchronously), waiting out
/// `ERROR_PIPE_BUSY` (a client that arrives while the server's listening
/// instance has just been taken and the next is not open yet) for at most
/// [`support::PATIENCE`]; the handle and how many tries found it busy.
pub fn open(name: &str, flags: u32) -> (File, usize) {
    let deadline = Instant::now() + support::PATIENCE;
    let mut busy = 0;
    loop {
        match std::fs::OpenOptions::new().read(true).write(true).custom_flags(flags).open(name) {
            Ok(file) => return (file, busy),
            Err(e) if e.raw_os_error() == Some(ERROR_PIPE_BUSY as i32) && Instant::now() < deadline => {
                busy += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("opening {name} ({busy} tries found it busy): {e}"),
        }
    }
}

/// A raw client's end opened for overlapped I/O, so that each read or
/// write gives up after a while (cancelled, and waited for): a blocking
/// write to a pipe whose server does not read would never return, and a
/// handle with a blocking operation in flight cannot be closed from
/// another thread.
pub struct RawPipe {
    file: File,
    /// Signalled by each operation's completion.
    event: OwnedHandle,
}

impl RawPipe {
    /// Opens `name` ([`open`]); how many tries found it busy.
    pub fn open(name: &str) -> (Self, usize) {
        let (file, busy) = open(name, FILE_FLAG_OVERLAPPED);
        // SAFETY: no pointers (default security, no name); a manual-reset
        // event, which each read and write resets as it starts.
        let event = unsafe { CreateEventW(core::ptr::null(), 1, 0, core::ptr::null()) };
        assert!(!event.is_null(), "CreateEventW: {}", io::Error::last_os_error());
        // SAFETY: a fresh handle that nothing else owns.
        let event = unsafe { OwnedHandle::from_raw_handle(event) };
        (Self { file, event }, busy)
    }

    /// Writes what fits of `buf` within `patience`: `Some(bytes)`, or
    /// `None` if the write was still in flight then (it is cancelled).
    ///
    /// `&mut self`: one operation at a time, so the shared event is
    /// signalled only by this one's completion.
    pub fn write(&mut self, buf: &[u8], patience: Duration) -> io::Result<Option<usize>> {
        let h = self.file.as_raw_handle();
        let mut ov = self.overlapped();
        // SAFETY: `buf` and `ov` outlive the write: `finish` returns only
        // once it has completed (or been cancelled and completed), since
        // the exclusive borrow leaves no other operation to signal the
        // event.
        let ok = unsafe { WriteFile(h, buf.as_ptr(), buf.len() as u32, core::ptr::null_mut(), &raw mut ov) };
        self.finish(ok, &raw mut ov, patience)
    }

    /// Reads into `buf` within `patience`: `Some(bytes)` (0 once the server
    /// closed), or `None` if nothing came (the read is cancelled).
    /// `&mut self` as for [`write`](Self::write).
    pub fn read(&mut self, buf: &mut [u8], patience: Duration) -> io::Result<Option<usize>> {
        let h = self.file.as_raw_handle();
        let mut ov = self.overlapped();
        // SAFETY: as in `write`: `buf` and `ov` are not used again nor
        // dropped until `finish` has seen the read complete.
        let ok = unsafe { ReadFile(h, buf.as_mut_ptr(), buf.len() as u32, core::ptr::null_mut(), &raw mut ov) };
        match self.finish(ok, &raw mut ov, patience) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(Some(0)),
            other => other,
        }
    }

    fn overlapped(&self) -> OVERLAPPED {
        // SAFETY: all-zero is a valid OVERLAPPED (offset 0, no event).
        let mut ov: OVERLAPPED = unsafe { core::mem::zeroed() };
        ov.hEvent = self.event.as_raw_handle();
        ov
    }

    /// Waits for the operation `ov` describes (started with result `ok`)
    /// for at most `patience`, cancels it if still in flight, and waits
    /// until it has completed. `ov` is a pointer, not a reference: the
    /// kernel writes its `Internal` and `InternalHigh` as it completes.
    /// `&mut self`: the event is signalled only by this operation.
    fn finish(&mut self, ok: i32, ov: *mut OVERLAPPED, patience: Duration) -> io::Result<Option<usize>> {
        if ok == 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(ERROR_IO_PENDING as i32) {
                return Err(e); // nothing in flight
            }
        }
        let h = self.file.as_raw_handle();
        let ms = patience.as_millis().min(u128::from(u32::MAX - 1)) as u32;
        // SAFETY: an event handle this client owns.
        if unsafe { WaitForSingleObject(self.event.as_raw_handle(), ms) } != WAIT_OBJECT_0 {
            // SAFETY: `ov` points to the operation's own OVERLAPPED, live on
            // the caller's stack, on this handle; one that has completed
            // meanwhile is not found, which is harmless.
            unsafe { CancelIoEx(h, ov) };
        }
        let mut n = 0u32;
        // SAFETY: `ov` is live as above. The event was reset as this
        // operation started (`hEvent` set, so the start resets it) and the
        // exclusive borrow of `self` leaves no other operation on this
        // handle to signal it, so it is signalled only by this operation's
        // completion: the waiting (`bWait`) call returns only after that,
        // when the kernel no longer uses the buffer or `ov`.
        if unsafe { GetOverlappedResult(h, ov, &mut n, 1) } != 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(ERROR_OPERATION_ABORTED as i32) { Ok(None) } else { Err(e) }
    }
}
