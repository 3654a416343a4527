//! Process-level counts and create/arm/drop cycles for the leak checks (`tests/objects/leaks.rs`,
//! `tests/leak_stress.rs`) and the lifecycle models (`tests/objects/lifecycle.rs`):
//! open handles and private bytes (`process.rs`), live contexts and I/O
//! operation blocks.
#![allow(dead_code)]

pub use process::{POOL_HANDLE_SLACK, PRIVATE_BYTES_SLACK, handle_count, private_bytes};
// For the HTTP tests (support/hostile.rs), which count threads and commit too.
#[allow(unused_imports)]
pub use process::{committed_private_bytes, heap_free_bytes, thread_ids};

#[path = "process.rs"]
mod process;

/// What must come back to its value after a leak check or a lifecycle case.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Counts {
    pub contexts: usize,
    pub operations: usize,
    /// Handles other than threads ([`handle_count`]).
    pub handles: usize,
}

impl Counts {
    pub fn now() -> Self {
        Self {
            contexts: windows_threadpool::live_contexts(),
            operations: windows_threadpool::io::live_operations(),
            handles: handle_count(),
        }
    }

    /// Whether `self` is back to `before`: contexts and operation blocks
    /// exactly, handles within [`POOL_HANDLE_SLACK`].
    pub fn back_to(&self, before: &Self) -> bool {
        self.contexts == before.contexts
            && self.operations == before.operations
            && self.handles <= before.handles + POOL_HANDLE_SLACK
    }

    /// The counts once they are back to `before` ([`Self::back_to`]), or
    /// after `patience` (a teardown handed to another thread finishes on its
    /// own time).
    pub fn settled(before: &Self, patience: std::time::Duration) -> Self {
        let deadline = std::time::Instant::now() + patience;
        loop {
            let now = Self::now();
            if now.back_to(before) || std::time::Instant::now() > deadline {
                return now;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

// ---- create/arm/drop cycles --------------------------------------------------

use std::sync::mpsc;
use std::time::{Duration, Instant};

use windows_threadpool::cleanup_group::CleanupGroup;
use windows_threadpool::io::{AsyncIo, Io, open_file, pipe_pair};
use windows_threadpool::net::{TcpListener, TcpStream, UdpSocket};
use windows_threadpool::{Deadline, Event, PeriodicTimer, Timer, Wait, Work, task, time, wait};

/// How long a cycle waits for its callback.
const PATIENCE: Duration = Duration::from_secs(30);

/// Live blocks of the Rust heap may differ by this much across a check
/// where [`CountingAlloc`] counts them: the pool's threads come and go
/// during a check, each with its thread-local state. A block leaked per
/// cycle exceeds it within 64 cycles.
pub const HEAP_BLOCK_SLACK: isize = 64;

/// Counts the Rust heap's live blocks; a binary that installs it as its
/// `#[global_allocator]` (`tests/leak_stress.rs`) gets [`check`]'s exact
/// heap check.
pub struct CountingAlloc;

static LIVE_BLOCKS: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);
static COUNTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

// SAFETY: every call is forwarded to `System` unchanged; only counters move.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        use std::sync::atomic::Ordering::Relaxed;
        if !COUNTING.load(Relaxed) {
            COUNTING.store(true, Relaxed);
        }
        LIVE_BLOCKS.fetch_add(1, Relaxed);
        // SAFETY: the caller's layout contract, passed on.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        LIVE_BLOCKS.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with `layout`.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on; a block stays one block.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

/// The Rust heap's live blocks, where [`CountingAlloc`] is installed.
pub fn heap_blocks() -> Option<isize> {
    use std::sync::atomic::Ordering::Relaxed;
    COUNTING.load(Relaxed).then(|| LIVE_BLOCKS.load(Relaxed))
}

/// What Wine 8 keeps beyond a socket kind's raw baseline, per cycle: its
/// heap grows in 1 MiB steps under the sockets' completion path with the
/// crate's heap, contexts, operation blocks and handles back (docs/wine.md).
pub const WINE_SOCKET_BYTES_PER_CYCLE: usize = 128;

/// One object type's create/arm/drop cycle.
pub struct Kind {
    pub name: &'static str,
    pub cycle: fn(),
    /// Private bytes the platform may keep per cycle beyond the raw
    /// baseline (only under Wine, only the socket kinds).
    pub allowance: usize,
    /// The same cycle through the raw API, where the platform itself keeps
    /// memory per cycle: the crate's growth is compared with it, measured
    /// in the same process. Under Wine 8 every closed `TP_IO` keeps about
    /// 180 to 210 bytes (measured with raw `windows-sys` calls; docs/wine.md).
    pub raw: Option<fn()>,
}

/// Every object type and async future, one cycle each.
pub fn kinds() -> Vec<Kind> {
    let k = |name, cycle| Kind { name, cycle, raw: None, allowance: 0 };
    let with_raw = |name, cycle, raw| Kind { name, cycle, raw: Some(raw), allowance: 0 };
    let socket = |name, cycle, raw| Kind {
        allowance: if crate::support::on_wine() { WINE_SOCKET_BYTES_PER_CYCLE } else { 0 },
        ..with_raw(name, cycle, raw)
    };
    vec![
        k("work", work_cycle as fn()),
        k("timer", timer_cycle),
        k("periodic_timer", periodic_cycle),
        k("wait", wait_cycle),
        with_raw("io", io_cycle as fn(), raw_io_cycle as fn()),
        k("cleanup_group", group_cycle),
        k("time_sleep", sleep_cycle),
        k("wait_signalled", signalled_cycle),
        with_raw("async_io_read_at", async_read_cycle, raw_file_read_cycle),
        k("task_spawn", spawn_cycle),
        socket("tcp", tcp_cycle, raw_tcp_cycle),
        socket("udp", udp_cycle, raw_udp_cycle),
        with_raw("pipe", pipe_cycle, raw_io_cycle),
    ]
}

fn recv(rx: &mpsc::Receiver<()>, what: &str) {
    rx.recv_timeout(PATIENCE).unwrap_or_else(|e| panic!("{what}: no callback within {PATIENCE:?}: {e}"));
}

fn work_cycle() {
    let (tx, rx) = mpsc::channel();
    let w = Work::new(move |_| tx.send(()).unwrap()).unwrap();
    w.submit();
    recv(&rx, "work");
    w.wait();
}

fn timer_cycle() {
    let (tx, rx) = mpsc::channel();
    let t = Timer::new(move |_| tx.send(()).unwrap()).unwrap();
    t.arm(Duration::ZERO);
    recv(&rx, "timer");
    t.stop_and_drain();
}

fn periodic_cycle() {
    let (tx, rx) = mpsc::channel();
    let t = PeriodicTimer::new(Duration::from_millis(1), move |_| {
        let _ = tx.send(());
    })
    .unwrap();
    t.arm(Duration::ZERO);
    recv(&rx, "periodic timer");
    t.stop_and_drain();
}

fn wait_cycle() {
    let (tx, rx) = mpsc::channel();
    let event = Event::auto_reset().unwrap();
    let w = Wait::new(event.try_clone().unwrap().into(), move |_| tx.send(()).unwrap()).unwrap();
    w.arm(Deadline::NEVER);
    event.set().unwrap();
    recv(&rx, "wait");
    w.stop_and_drain();
}

fn io_cycle() {
    let (server, client) = pipe_pair().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = Io::new(server, move |_| tx.send(()).unwrap()).unwrap();
    let writer = Io::new(client, |_| {}).unwrap();
    reader.read(vec![0u8; 1]).map_err(|e| e.into_parts().0).unwrap();
    writer.write(vec![1u8]).map_err(|e| e.into_parts().0).unwrap();
    recv(&rx, "io");
    writer.wait();
    reader.wait();
}

/// `io_cycle` with raw calls: two `TP_IO`s on a pipe pair, one read and one
/// write, the read's completion awaited, both drained and closed.
fn raw_io_cycle() {
    use std::os::windows::io::IntoRawHandle;
    let (server, client) = pipe_pair().unwrap();
    let (s, c) = (server.into_owned().into_raw_handle(), client.into_owned().into_raw_handle());
    let (tx, rx) = mpsc::channel::<()>();
    let (wtx, wrx) = mpsc::channel::<()>();
    // SAFETY: both handles are open and overlapped; the senders outlive their
    // I/O objects (drained and closed before they are dropped); the buffers
    // and OVERLAPPEDs outlive their operations: both completions are awaited
    // (and a panic before that aborts rather than unwind past them).
    unsafe {
        let read = raw::io(s, Some(raw::send_completion), (&raw const tx).cast_mut().cast());
        let write = raw::io(c, Some(raw::send_completion), (&raw const wtx).cast_mut().cast());
        let (mut rov, mut wov) = (raw::overlapped(), raw::overlapped());
        let (mut rbuf, wbuf) = ([0u8; 1], [1u8; 1]);
        let pending = raw::AbortOnUnwind;
        raw::start_read(read, s, &mut rbuf, &mut rov);
        raw::start_write(write, c, &wbuf, &mut wov);
        recv(&rx, "raw io read");
        recv(&wrx, "raw io write");
        raw::close(write, c);
        raw::close(read, s);
        core::mem::forget(pending);
    }
}

/// `async_read_cycle` with raw calls: a `TP_IO` on the scratch file opened
/// for overlapped reads, one 4-byte read at offset 0 awaited, drained, closed.
fn raw_file_read_cycle() {
    use std::os::windows::ffi::OsStrExt;
    use windows_sys::Win32::Foundation::{GENERIC_READ, INVALID_HANDLE_VALUE};
    use windows_sys::Win32::Storage::FileSystem::{CreateFileW, FILE_FLAG_OVERLAPPED, FILE_SHARE_READ, OPEN_EXISTING};
    let path: Vec<u16> = scratch_file().as_os_str().encode_wide().chain(Some(0)).collect();
    let (tx, rx) = mpsc::channel::<()>();
    // SAFETY: `path` is NUL-terminated; the handle is ours and closed below;
    // `tx`, the buffer and the OVERLAPPED outlive the read (completed, then
    // drained before the I/O object is closed).
    unsafe {
        let f = CreateFileW(
            path.as_ptr(),
            GENERIC_READ,
            FILE_SHARE_READ,
            core::ptr::null(),
            OPEN_EXISTING,
            FILE_FLAG_OVERLAPPED,
            core::ptr::null_mut(),
        );
        assert_ne!(f, INVALID_HANDLE_VALUE, "CreateFileW: {}", std::io::Error::last_os_error());
        let io = raw::io(f, Some(raw::send_completion), (&raw const tx).cast_mut().cast());
        let mut ov = raw::overlapped();
        let mut buf = [0u8; 4];
        let pending = raw::AbortOnUnwind;
        raw::start_read(io, f, &mut buf, &mut ov);
        recv(&rx, "raw file read");
        raw::close(io, f);
        core::mem::forget(pending);
        assert_eq!(&buf, b"leak");
    }
}

/// The listener every `tcp` cycle connects to (one per process, kept).
fn tcp_listener() -> &'static TcpListener {
    static LISTENER: std::sync::OnceLock<TcpListener> = std::sync::OnceLock::new();
    LISTENER.get_or_init(|| TcpListener::bind("127.0.0.1:0").unwrap())
}

/// Reads until `want` bytes have arrived or the peer shut down (at most
/// `want + 1` reads: each returns at least one byte, or ends the loop).
async fn read_up_to(s: &TcpStream, want: usize) -> Vec<u8> {
    let mut got = Vec::with_capacity(want);
    while got.len() < want {
        let (n, buf) = s.read(vec![0u8; want - got.len()]).await;
        match n.unwrap() {
            0 => break,
            n => got.extend_from_slice(&buf[..n]),
        }
    }
    got
}

/// Connect and accept, one small write and read each way, then the server
/// side closes first and the client reads the end of file before it
/// closes: the accepted socket, not the client's ephemeral port, is the one
/// left in `TIME_WAIT`, so the long version does not run out of ports.
fn tcp_cycle() {
    let listener = tcp_listener();
    let addr = listener.local_addr().unwrap();
    let cycle = async {
        let (client, accepted) = futures::join!(TcpStream::connect(addr), listener.accept());
        let (client, (server, _)) = (client.unwrap(), accepted.unwrap());
        let (sent, _) = client.write_all(b"ping".to_vec()).await;
        sent.unwrap();
        assert_eq!(read_up_to(&server, 4).await, b"ping");
        let (sent, _) = server.write_all(b"pong".to_vec()).await;
        sent.unwrap();
        assert_eq!(read_up_to(&client, 4).await, b"pong");
        drop(server);
        let (n, _) = client.read(vec![0u8; 1]).await;
        assert_eq!(n.unwrap(), 0, "the end of file after the server's close");
    };
    task::block_on(time::timeout(PATIENCE, cycle)).expect("a tcp cycle took longer than PATIENCE");
}

/// A named-pipe connection on a kept listener: a request and an answer,
/// the server's end dropped and the client's end of file read. Its
/// baseline is `raw_io_cycle`: the same two `TP_IO`s on a pipe's two ends.
fn pipe_cycle() {
    use windows_threadpool::pipe::{PipeListener, PipeStream};
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static LISTENER: std::sync::OnceLock<PipeListener> = std::sync::OnceLock::new();
    let name = NAME.get_or_init(|| format!(r"\\.\pipe\windows-threadpool-leak-{}", std::process::id()));
    let listener = LISTENER.get_or_init(|| PipeListener::bind(name).unwrap());
    let cycle = async {
        let (accepted, client) = futures::join!(listener.accept(), PipeStream::connect(name));
        let (server, client) = (accepted.unwrap(), client.unwrap());
        let (sent, _) = client.write_all(b"ping".to_vec()).await;
        sent.unwrap();
        let (n, _) = server.read(vec![0u8; 4]).await;
        assert_eq!(n.unwrap(), 4);
        let (sent, _) = server.write_all(b"pong".to_vec()).await;
        sent.unwrap();
        let (n, _) = client.read(vec![0u8; 4]).await;
        assert_eq!(n.unwrap(), 4);
        drop(server);
        let (n, _) = client.read(vec![0u8; 1]).await;
        assert_eq!(n.unwrap(), 0, "the end of file after the server's close");
    };
    task::block_on(time::timeout(PATIENCE, cycle)).expect("a pipe cycle took longer than PATIENCE");
}

/// Two sockets bound, a datagram each way, both dropped.
fn udp_cycle() {
    let cycle = async {
        let (a, b) = (UdpSocket::bind("127.0.0.1:0").unwrap(), UdpSocket::bind("127.0.0.1:0").unwrap());
        let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let (sent, _) = a.send_to(b"ping".to_vec(), b_addr).await;
        assert_eq!(sent.unwrap(), 4);
        let (got, buf) = b.recv_from(vec![0u8; 16]).await;
        assert_eq!(got.unwrap(), (4, a_addr));
        assert_eq!(&buf[..4], b"ping");
        let (sent, _) = b.send_to(b"pong".to_vec(), a_addr).await;
        assert_eq!(sent.unwrap(), 4);
        let (got, _) = a.recv_from(vec![0u8; 16]).await;
        assert_eq!(got.unwrap(), (4, b_addr));
    };
    task::block_on(time::timeout(PATIENCE, cycle)).expect("a udp cycle took longer than PATIENCE");
}

/// `tcp_cycle` with raw calls on the same number of sockets and `TP_IO`s:
/// `std` connects and accepts (on a `std` listener kept, as the crate's
/// is), then each stream is bound to a `TP_IO` and the same sends and
/// receives go through it (`WSASend`/`WSARecv`, no skip flag: every one
/// completes through the callback); the server side is closed first and
/// the client's receive of the end of file awaited.
fn raw_tcp_cycle() {
    use std::os::windows::io::AsRawSocket;
    static LISTENER: std::sync::OnceLock<std::net::TcpListener> = std::sync::OnceLock::new();
    let listener = LISTENER.get_or_init(|| std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    let (c, s) = (client.as_raw_socket() as usize, server.as_raw_socket() as usize);
    let (ctx, crx) = mpsc::channel::<()>();
    let (stx, srx) = mpsc::channel::<()>();
    // SAFETY: both sockets are open and overlapped (std creates them so)
    // and outlive their I/O objects (closed first); the senders outlive
    // the I/O objects; the buffers and OVERLAPPEDs outlive their
    // operations: every completion is awaited before the I/O object is
    // closed (and a panic before that aborts rather than unwind past them).
    unsafe {
        let cio = raw::io(c as _, Some(raw::send_completion), (&raw const ctx).cast_mut().cast());
        let sio = raw::io(s as _, Some(raw::send_completion), (&raw const stx).cast_mut().cast());
        let mut ops = [const { raw::SocketOp::new() }; 5];
        let (mut sbuf, mut cbuf, mut eof) = ([0u8; 4], [0u8; 4], [0u8; 1]);
        let pending = raw::AbortOnUnwind;
        let [ping_recv, ping_send, pong_recv, pong_send, eof_recv] = &mut ops;
        raw::start_recv(sio, s, &mut sbuf, ping_recv);
        raw::start_send(cio, c, b"ping", ping_send);
        recv(&srx, "raw tcp receive");
        recv(&crx, "raw tcp send");
        raw::start_recv(cio, c, &mut cbuf, pong_recv);
        raw::start_send(sio, s, b"pong", pong_send);
        recv(&crx, "raw tcp receive");
        recv(&srx, "raw tcp send");
        raw::close_io(sio);
        drop(server);
        raw::start_recv(cio, c, &mut eof, eof_recv);
        recv(&crx, "raw tcp end of file");
        raw::close_io(cio);
        core::mem::forget(pending);
    }
    drop(client);
}

/// `udp_cycle` with raw calls: two `std` sockets bound (and connected to
/// each other, so `WSASend`/`WSARecv` serve), each bound to a `TP_IO`, a
/// datagram each way through them, both drained and closed.
fn raw_udp_cycle() {
    use std::os::windows::io::AsRawSocket;
    let (a, b) = (std::net::UdpSocket::bind("127.0.0.1:0").unwrap(), std::net::UdpSocket::bind("127.0.0.1:0").unwrap());
    a.connect(b.local_addr().unwrap()).unwrap();
    b.connect(a.local_addr().unwrap()).unwrap();
    let (sa, sb) = (a.as_raw_socket() as usize, b.as_raw_socket() as usize);
    let (atx, arx) = mpsc::channel::<()>();
    let (btx, brx) = mpsc::channel::<()>();
    // SAFETY: as in `raw_tcp_cycle`.
    unsafe {
        let aio = raw::io(sa as _, Some(raw::send_completion), (&raw const atx).cast_mut().cast());
        let bio = raw::io(sb as _, Some(raw::send_completion), (&raw const btx).cast_mut().cast());
        let mut ops = [const { raw::SocketOp::new() }; 4];
        let (mut abuf, mut bbuf) = ([0u8; 16], [0u8; 16]);
        let pending = raw::AbortOnUnwind;
        let [ping_recv, ping_send, pong_recv, pong_send] = &mut ops;
        raw::start_recv(bio, sb, &mut bbuf, ping_recv);
        raw::start_send(aio, sa, b"ping", ping_send);
        recv(&brx, "raw udp receive");
        recv(&arx, "raw udp send");
        raw::start_recv(aio, sa, &mut abuf, pong_recv);
        raw::start_send(bio, sb, b"pong", pong_send);
        recv(&arx, "raw udp receive");
        recv(&brx, "raw udp send");
        raw::close_io(bio);
        raw::close_io(aio);
        core::mem::forget(pending);
    }
}

/// The raw thread-pool I/O calls of the baselines.
mod raw {
    use core::ffi::c_void;
    use std::sync::mpsc;
    use windows_sys::Win32::Foundation::{CloseHandle, ERROR_IO_PENDING, GetLastError, HANDLE};
    use windows_sys::Win32::Networking::WinSock::{SOCKET, WSA_IO_PENDING, WSABUF, WSAGetLastError, WSARecv, WSASend};
    use windows_sys::Win32::Storage::FileSystem::{ReadFile, WriteFile};
    use windows_sys::Win32::System::IO::OVERLAPPED;
    use windows_sys::Win32::System::Threading::{
        CancelThreadpoolIo, CloseThreadpoolIo, CreateThreadpoolIo, PTP_CALLBACK_INSTANCE, PTP_IO,
        PTP_WIN32_IO_CALLBACK, StartThreadpoolIo, WaitForThreadpoolIoCallbacks,
    };

    /// A completion callback whose context is a `&mpsc::Sender<()>`.
    pub unsafe extern "system" fn send_completion(
        _: PTP_CALLBACK_INSTANCE,
        ctx: *mut c_void,
        _: *mut c_void,
        _: u32,
        _: usize,
        _: PTP_IO,
    ) {
        // SAFETY: the cycle keeps the sender alive until the I/O object is drained.
        let tx = unsafe { &*ctx.cast::<mpsc::Sender<()>>() };
        let _ = tx.send(());
    }

    /// Held while an operation on stack memory may still complete: a panic
    /// then aborts, since unwinding would free that memory under the I/O.
    pub struct AbortOnUnwind;

    impl Drop for AbortOnUnwind {
        fn drop(&mut self) {
            eprintln!("a raw leak baseline failed with I/O outstanding on its stack; aborting");
            std::process::abort();
        }
    }

    pub fn overlapped() -> OVERLAPPED {
        // SAFETY: all-zero is a valid OVERLAPPED (offset 0, no event).
        unsafe { core::mem::zeroed() }
    }

    /// # Safety
    /// `h` is an open overlapped handle; `ctx` is what `cb` expects.
    pub unsafe fn io(h: HANDLE, cb: PTP_WIN32_IO_CALLBACK, ctx: *mut c_void) -> PTP_IO {
        // SAFETY: guaranteed by the caller; no environment: the default pool.
        let io = unsafe { CreateThreadpoolIo(h, cb, ctx, core::ptr::null()) };
        assert_ne!(io, 0, "CreateThreadpoolIo: {}", std::io::Error::last_os_error());
        io
    }

    /// Checks an overlapped call's result: issued (done or pending), or the
    /// start is cancelled and the test fails.
    unsafe fn issued(io: PTP_IO, ok: i32, what: &str) {
        // SAFETY: no preconditions.
        if ok == 0 && unsafe { GetLastError() } != ERROR_IO_PENDING {
            let e = std::io::Error::last_os_error();
            // SAFETY: `io` was started and nothing was issued.
            unsafe { CancelThreadpoolIo(io) };
            panic!("{what}: {e}");
        }
    }

    /// # Safety
    /// `io` is bound to `h`; `buf` and `ov` outlive the operation.
    pub unsafe fn start_read(io: PTP_IO, h: HANDLE, buf: &mut [u8], ov: &mut OVERLAPPED) {
        // SAFETY: guaranteed by the caller.
        unsafe {
            StartThreadpoolIo(io);
            let ok = ReadFile(h, buf.as_mut_ptr(), buf.len() as u32, core::ptr::null_mut(), ov);
            issued(io, ok, "ReadFile");
        }
    }

    /// # Safety
    /// As for [`start_read`].
    pub unsafe fn start_write(io: PTP_IO, h: HANDLE, buf: &[u8], ov: &mut OVERLAPPED) {
        // SAFETY: guaranteed by the caller.
        unsafe {
            StartThreadpoolIo(io);
            let ok = WriteFile(h, buf.as_ptr(), buf.len() as u32, core::ptr::null_mut(), ov);
            issued(io, ok, "WriteFile");
        }
    }

    /// An overlapped Winsock operation's state: what must outlive it.
    pub struct SocketOp {
        ov: OVERLAPPED,
        flags: u32,
    }

    impl SocketOp {
        pub const fn new() -> Self {
            // SAFETY: all-zero is a valid OVERLAPPED (no event).
            Self { ov: unsafe { core::mem::zeroed() }, flags: 0 }
        }
    }

    /// Checks a Winsock overlapped call's result, as [`issued`] does.
    unsafe fn wsa_issued(io: PTP_IO, r: i32, what: &str) {
        // SAFETY: no preconditions.
        if r != 0 && unsafe { WSAGetLastError() } != WSA_IO_PENDING {
            let e = std::io::Error::last_os_error();
            // SAFETY: `io` was started and nothing was issued.
            unsafe { CancelThreadpoolIo(io) };
            panic!("{what}: {e}");
        }
    }

    /// # Safety
    /// `io` is bound to the overlapped socket `s`; `buf` and `op` outlive
    /// the operation.
    pub unsafe fn start_recv(io: PTP_IO, s: SOCKET, buf: &mut [u8], op: &mut SocketOp) {
        // Winsock copies the WSABUF array before the call returns.
        let wsabuf = WSABUF { len: buf.len() as u32, buf: buf.as_mut_ptr() };
        // SAFETY: guaranteed by the caller.
        unsafe {
            StartThreadpoolIo(io);
            let r = WSARecv(s, &wsabuf, 1, core::ptr::null_mut(), &mut op.flags, &mut op.ov, None);
            wsa_issued(io, r, "WSARecv");
        }
    }

    /// # Safety
    /// As for [`start_recv`].
    pub unsafe fn start_send(io: PTP_IO, s: SOCKET, buf: &'static [u8], op: &mut SocketOp) {
        let wsabuf = WSABUF { len: buf.len() as u32, buf: buf.as_ptr().cast_mut() };
        // SAFETY: guaranteed by the caller; WSASend does not write the buffer.
        unsafe {
            StartThreadpoolIo(io);
            let r = WSASend(s, &wsabuf, 1, core::ptr::null_mut(), 0, &mut op.ov, None);
            wsa_issued(io, r, "WSASend");
        }
    }

    /// Drains `io` and closes it (its socket is closed by its owner).
    ///
    /// # Safety
    /// `io` is open and not used after.
    pub unsafe fn close_io(io: PTP_IO) {
        // SAFETY: guaranteed by the caller.
        unsafe {
            WaitForThreadpoolIoCallbacks(io, 0);
            CloseThreadpoolIo(io);
        }
    }

    /// Drains `io`, closes it, then closes `h`.
    ///
    /// # Safety
    /// `io` is open and bound to the open handle `h`; neither is used after.
    pub unsafe fn close(io: PTP_IO, h: HANDLE) {
        // SAFETY: guaranteed by the caller.
        unsafe {
            WaitForThreadpoolIoCallbacks(io, 0);
            CloseThreadpoolIo(io);
            CloseHandle(h);
        }
    }
}

fn group_cycle() {
    let mut group = CleanupGroup::new().unwrap();
    let (tx, rx) = mpsc::channel();
    let (t1, t2, t3) = (tx.clone(), tx.clone(), tx);
    let work = group.create_work(move |_| t1.send(()).unwrap()).unwrap();
    let timer = group.create_timer(move |_| t2.send(()).unwrap()).unwrap();
    let event = Event::auto_reset().unwrap();
    let wait = group.create_wait(event.try_clone().unwrap().into(), move |_| t3.send(()).unwrap()).unwrap();
    work.submit();
    timer.arm(Duration::ZERO);
    wait.arm(Deadline::NEVER);
    event.set().unwrap();
    for _ in 0..3 {
        recv(&rx, "cleanup group member");
    }
    group.close_members();
}

fn sleep_cycle() {
    task::block_on(time::sleep(Duration::from_micros(1)));
    // A sleep dropped before it completes leaves nothing behind either.
    let mut s = std::pin::pin!(time::sleep(Duration::from_secs(3600)));
    let waker = std::task::Waker::noop();
    assert!(s.as_mut().poll(&mut std::task::Context::from_waker(waker)).is_pending());
}

fn signalled_cycle() {
    let event = Event::manual_reset().unwrap();
    event.set().unwrap();
    let r = task::block_on(wait::signalled(event.try_clone().unwrap(), PATIENCE)).unwrap();
    assert_eq!(r, wait::WaitResult::Signalled);
}

fn async_read_cycle() {
    let path = scratch_file();
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    let aio = AsyncIo::new(open_file(path, &o).unwrap()).unwrap();
    let (r, buf) = task::block_on(aio.read_at(vec![0u8; 4], 0));
    assert_eq!((r.unwrap(), &buf[..]), (4, &b"leak"[..]));
}

fn spawn_cycle() {
    assert_eq!(task::block_on(task::spawn(async { 7 })).unwrap(), 7);
}

/// A 4-byte file read by `async_read_cycle` (one per process).
fn scratch_file() -> &'static std::path::Path {
    static PATH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let p = std::env::temp_dir().join(format!("wtp-leak-{}", std::process::id()));
        std::fs::write(&p, b"leak").unwrap();
        p
    })
}

use std::future::Future;

/// What one leak check measured.
#[derive(Debug)]
pub struct Report {
    pub cycles: usize,
    pub before: Counts,
    pub after: Counts,
    pub bytes_before: usize,
    pub bytes_after: usize,
    /// What the raw baseline grew by over as many cycles (0 without one).
    pub baseline: usize,
    /// The kind's allowance over as many cycles.
    pub allowance: usize,
    /// Live Rust heap blocks before and after, where counted.
    pub heap: Option<(isize, isize)>,
    pub elapsed: Duration,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cycles in {:.2}s: contexts {} -> {}, operation blocks {} -> {}, handles {} -> {}, private bytes {} -> {} ({:+}; raw baseline {:+}, allowance {}){}",
            self.cycles,
            self.elapsed.as_secs_f64(),
            self.before.contexts,
            self.after.contexts,
            self.before.operations,
            self.after.operations,
            self.before.handles,
            self.after.handles,
            self.bytes_before,
            self.bytes_after,
            self.bytes_after as i64 - self.bytes_before as i64,
            self.baseline,
            self.allowance,
            self.heap.map_or(String::new(), |(b, a)| format!(", heap blocks {b} -> {a}"))
        )
    }
}

/// Runs a warm-up round of `cycles / 10` (at least 50) cycles of `kind`,
/// measures, runs `cycles` cycles, waits until the counts are back (or
/// [`PATIENCE`]), measures again, and asserts: contexts and operation blocks
/// exactly back, handles within [`POOL_HANDLE_SLACK`], private bytes within
/// [`PRIVATE_BYTES_SLACK`] of what the kind's raw baseline (if any) grew by
/// over as many cycles, measured first in this process.
pub fn check(kind: &Kind, cycles: usize) -> Report {
    let baseline = kind.raw.map_or(0, |raw| {
        for _ in 0..(cycles / 10).max(50) {
            raw();
        }
        let before = private_bytes();
        for _ in 0..cycles {
            raw();
        }
        private_bytes().saturating_sub(before)
    });
    for _ in 0..(cycles / 10).max(50) {
        (kind.cycle)();
    }
    let before = Counts::settled(&Counts::now(), Duration::ZERO);
    let bytes_before = private_bytes();
    let heap_before = heap_blocks();
    let t = Instant::now();
    for _ in 0..cycles {
        (kind.cycle)();
    }
    let elapsed = t.elapsed();
    let after = Counts::settled(&before, PATIENCE);
    let bytes_after = private_bytes();
    let heap = heap_before.zip(heap_blocks());
    let allowance = kind.allowance * cycles;
    let r = Report { cycles, before, after, bytes_before, bytes_after, baseline, allowance, heap, elapsed };
    if let Some((b, a)) = heap {
        assert!(a <= b + HEAP_BLOCK_SLACK, "{}: Rust heap blocks leaked: {r}", kind.name);
    }
    assert!(
        after.contexts == before.contexts && after.operations == before.operations,
        "{}: contexts or operation blocks did not come back: {r}",
        kind.name
    );
    assert!(after.handles <= before.handles + POOL_HANDLE_SLACK, "{}: handles leaked: {r}", kind.name);
    assert!(
        bytes_after <= bytes_before + baseline + allowance + PRIVATE_BYTES_SLACK,
        "{}: private bytes grew beyond the raw baseline: {r}",
        kind.name
    );
    r
}
