//! The raw `windows-sys` column of the socket table, shared by its socket
//! rows (`net_workload`) and its pipe rows (`pipe_workload`): overlapped
//! handles (std's sockets, named-pipe instances) bound to a `TP_IO` each,
//! with `FILE_SKIP_COMPLETION_PORT_ON_SUCCESS`; every connection end is a
//! state machine advanced by its completion callback (and, for operations
//! that complete at once, inline by whoever issued them).

use std::io;
use std::net::SocketAddr;
use std::os::windows::io::{AsRawHandle, AsRawSocket, OwnedHandle, OwnedSocket};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use windows_sys::Win32::Foundation::{ERROR_BROKEN_PIPE, ERROR_IO_PENDING, ERROR_PIPE_CONNECTED, HANDLE};
use windows_sys::Win32::Networking::WinSock::{
    AF_INET, IN_ADDR, IN_ADDR_0, SD_SEND, SOCKADDR, SOCKADDR_IN, SOCKADDR_STORAGE, SOCKET, WSABUF, WSAGetLastError,
    WSARecv, WSARecvFrom, WSASend, WSASendTo, shutdown,
};
use windows_sys::Win32::Storage::FileSystem::{ReadFile, SetFileCompletionNotificationModes, WriteFile};
use windows_sys::Win32::System::IO::OVERLAPPED;
use windows_sys::Win32::System::Pipes::ConnectNamedPipe;
use windows_sys::Win32::System::Threading::{
    CancelThreadpoolIo, CloseThreadpoolIo, CreateThreadpoolIo, PTP_CALLBACK_INSTANCE, PTP_IO, StartThreadpoolIo,
    WaitForThreadpoolIoCallbacks,
};

use crate::net_workload::{LIMIT, MSG, eof, us};

/// `FILE_SKIP_COMPLETION_PORT_ON_SUCCESS | FILE_SKIP_SET_EVENT_ON_HANDLE`.
const SKIP_ON_SUCCESS: u8 = 1 | 2;

/// What a connection end does.
pub enum Role {
    /// Echoes what it reads: until end of file, or (UDP) `left` datagrams.
    Echo { left: Option<usize> },
    /// Sends [`MSG`] bytes and reads them back, `left` times, timing each.
    Ping { left: usize, t0: Instant, samples: Vec<f64> },
    /// Reads until `left` bytes have arrived.
    Sink { left: usize },
    /// Writes `left` bytes in writes of the buffer's length.
    Source { left: usize },
}

impl Role {
    /// A ping of `trips` round trips.
    pub fn ping(trips: usize) -> Self {
        Role::Ping { left: trips, t0: Instant::now(), samples: Vec::with_capacity(trips) }
    }
}

/// The handle a connection end runs on, and how it was made.
pub enum End {
    /// A TCP socket (std's, overlapped).
    Tcp(OwnedSocket),
    /// A UDP socket whose datagrams go to the address.
    Udp(OwnedSocket, SocketAddr),
    /// An overlapped named-pipe instance that first waits for its client
    /// (`ConnectNamedPipe`).
    PipeServer(OwnedHandle),
    /// A connected overlapped pipe end.
    Pipe(OwnedHandle),
}

/// What keeps the handle open.
enum Owner {
    Socket(OwnedSocket),
    Handle(OwnedHandle),
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Tcp,
    Udp,
    Pipe,
}

#[derive(Clone, Copy)]
enum Step {
    /// A pipe server's wait for its client.
    Connect,
    Recv {
        from: usize,
        to: usize,
    },
    Send {
        from: usize,
        to: usize,
    },
}

/// What comes after an operation.
enum Next {
    Op(Step),
    Done(io::Result<()>),
}

struct Udp {
    /// Where sends go.
    peer: SOCKADDR_STORAGE,
    /// Where the last datagram came from (written by `WSARecvFrom`).
    from: SOCKADDR_STORAGE,
    from_len: i32,
}

struct State {
    role: Role,
    step: Step,
    /// A pipe server that has not connected yet.
    listening: bool,
    buf: Vec<u8>,
    ov: OVERLAPPED,
    flags: u32,
    udp: Option<Udp>,
    outcome: Option<io::Result<()>>,
    /// `None` once a pipe end closed its handle at its end (its peer's read
    /// then sees end of file).
    owner: Option<Owner>,
}

impl State {
    fn first(&mut self) -> Next {
        if std::mem::take(&mut self.listening) {
            return Next::Op(Step::Connect);
        }
        let cap = self.buf.len();
        match &mut self.role {
            Role::Echo { .. } | Role::Sink { .. } => Next::Op(Step::Recv { from: 0, to: cap }),
            Role::Ping { t0, .. } => {
                *t0 = Instant::now();
                Next::Op(Step::Send { from: 0, to: MSG })
            }
            Role::Source { left } => Next::Op(Step::Send { from: 0, to: cap.min(*left) }),
        }
    }

    /// The next step after the current one moved `n` bytes.
    fn after(&mut self, n: usize) -> Next {
        let cap = self.buf.len();
        let udp = self.udp.is_some();
        match (&mut self.role, self.step) {
            (_, Step::Connect) => self.first(),
            (_, Step::Send { from, to }) if from + n < to && !udp => Next::Op(Step::Send { from: from + n, to }),
            (Role::Echo { left }, Step::Send { .. }) => match left {
                Some(0) => Next::Done(Ok(())),
                _ => Next::Op(Step::Recv { from: 0, to: cap }),
            },
            (Role::Echo { left }, Step::Recv { .. }) => {
                if n == 0 && !udp {
                    return Next::Done(Ok(()));
                }
                if let Some(left) = left {
                    *left -= 1;
                }
                if let Some(u) = &mut self.udp {
                    u.peer = u.from;
                }
                Next::Op(Step::Send { from: 0, to: n })
            }
            (Role::Ping { .. }, Step::Send { .. }) => Next::Op(Step::Recv { from: 0, to: MSG }),
            (Role::Ping { .. }, Step::Recv { .. }) if n == 0 => Next::Done(Err(eof())),
            (Role::Ping { .. }, Step::Recv { from, to }) if from + n < to && !udp => {
                Next::Op(Step::Recv { from: from + n, to })
            }
            (Role::Ping { left, t0, samples }, Step::Recv { .. }) => {
                samples.push(us(*t0));
                *left -= 1;
                if *left == 0 {
                    return Next::Done(Ok(()));
                }
                *t0 = Instant::now();
                Next::Op(Step::Send { from: 0, to: MSG })
            }
            (Role::Sink { .. }, Step::Recv { .. }) if n == 0 => Next::Done(Err(eof())),
            (Role::Sink { left }, Step::Recv { .. }) => {
                *left = left.saturating_sub(n);
                if *left == 0 { Next::Done(Ok(())) } else { Next::Op(Step::Recv { from: 0, to: cap }) }
            }
            (Role::Source { left }, Step::Send { to, .. }) => {
                *left -= to;
                if *left == 0 { Next::Done(Ok(())) } else { Next::Op(Step::Send { from: 0, to: cap.min(*left) }) }
            }
            (Role::Source { .. }, Step::Recv { .. }) => unreachable!("a source only sends"),
            (Role::Sink { .. }, Step::Send { .. }) => unreachable!("a sink only reads"),
        }
    }
}

/// Counts connection ends still running.
pub struct Done {
    left: Mutex<usize>,
    cv: Condvar,
}

impl Done {
    pub fn new(n: usize) -> Arc<Self> {
        Arc::new(Self { left: Mutex::new(n), cv: Condvar::new() })
    }

    fn finish(&self) {
        *self.left.lock().unwrap() -= 1;
        self.cv.notify_all();
    }

    pub fn wait(&self) -> io::Result<()> {
        let (left, timeout) = self.cv.wait_timeout_while(self.left.lock().unwrap(), LIMIT, |left| *left > 0).unwrap();
        if timeout.timed_out() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, format!("{} ends still running", *left)));
        }
        Ok(())
    }
}

/// One connection end: a handle, its `TP_IO`, and its role's state.
pub struct Conn {
    handle: HANDLE,
    kind: Kind,
    io: PTP_IO,
    state: Mutex<State>,
    done: Arc<Done>,
}

// SAFETY: `io` and `handle` are thread-pool and kernel objects, usable from
// any thread; the rest is Send + Sync.
unsafe impl Send for Conn {}
// SAFETY: as above; the state is behind a mutex.
unsafe impl Sync for Conn {}

unsafe extern "system" fn on_io(
    _: PTP_CALLBACK_INSTANCE,
    ctx: *mut core::ffi::c_void,
    _: *mut core::ffi::c_void,
    result: u32,
    bytes: usize,
    _: PTP_IO,
) {
    // SAFETY: ctx is the `Conn`, which outlives its TP_IO's callbacks
    // (its drop waits for them before closing it).
    let conn = unsafe { &*(ctx as *const Conn) };
    let mut st = conn.state.lock().unwrap();
    let outcome = conn.settle(&st, if result == 0 { Ok(bytes) } else { Err(result as i32) });
    conn.advance(&mut st, Some(outcome));
}

fn sockaddr(a: SocketAddr) -> SOCKADDR_STORAGE {
    let SocketAddr::V4(a) = a else { panic!("the bench uses 127.0.0.1") };
    let sin = SOCKADDR_IN {
        sin_family: AF_INET,
        sin_port: a.port().to_be(),
        sin_addr: IN_ADDR { S_un: IN_ADDR_0 { S_addr: u32::from_ne_bytes(a.ip().octets()) } },
        sin_zero: [0; 8],
    };
    // SAFETY: all-zero is a valid SOCKADDR_STORAGE.
    let mut s: SOCKADDR_STORAGE = unsafe { core::mem::zeroed() };
    // SAFETY: SOCKADDR_STORAGE is larger than SOCKADDR_IN and as aligned.
    unsafe { core::ptr::write((&raw mut s).cast::<SOCKADDR_IN>(), sin) };
    s
}

impl Conn {
    /// Binds `end` (an overlapped handle) to a new `TP_IO`, with
    /// skip-on-success; `cap` is its buffer's size.
    pub fn new(end: End, role: Role, cap: usize, done: &Arc<Done>) -> io::Result<Arc<Self>> {
        let (kind, owner, peer, listening) = match end {
            End::Tcp(s) => (Kind::Tcp, Owner::Socket(s), None, false),
            End::Udp(s, peer) => (Kind::Udp, Owner::Socket(s), Some(peer), false),
            End::PipeServer(h) => (Kind::Pipe, Owner::Handle(h), None, true),
            End::Pipe(h) => (Kind::Pipe, Owner::Handle(h), None, false),
        };
        let handle = match &owner {
            Owner::Socket(s) => s.as_raw_socket() as HANDLE,
            Owner::Handle(h) => h.as_raw_handle(),
        };
        // SAFETY: a valid handle.
        if unsafe { SetFileCompletionNotificationModes(handle, SKIP_ON_SUCCESS) } == 0 {
            return Err(io::Error::last_os_error());
        }
        let udp = peer.map(|p| Udp {
            peer: sockaddr(p),
            from: sockaddr(p),
            from_len: core::mem::size_of::<SOCKADDR_STORAGE>() as i32,
        });
        let state = State {
            role,
            step: Step::Recv { from: 0, to: 0 },
            listening,
            buf: vec![1u8; cap],
            // SAFETY: all-zero is a valid OVERLAPPED.
            ov: unsafe { core::mem::zeroed() },
            flags: 0,
            udp,
            outcome: None,
            owner: Some(owner),
        };
        let mut conn = Arc::new(Conn { handle, kind, io: 0, state: Mutex::new(state), done: done.clone() });
        let ctx = Arc::as_ptr(&conn) as *mut core::ffi::c_void;
        // SAFETY: the Conn outlives the TP_IO (closed in its drop).
        let io = unsafe { CreateThreadpoolIo(handle, Some(on_io), ctx, core::ptr::null()) };
        if io == 0 {
            return Err(io::Error::last_os_error());
        }
        Arc::get_mut(&mut conn).expect("not shared yet").io = io;
        Ok(conn)
    }

    pub fn start(&self) {
        let mut st = self.state.lock().unwrap();
        self.advance(&mut st, None);
    }

    /// The outcome of `st.step` from its Win32 error code: a pipe's read
    /// after its peer closed is end of file, and a wait for a client that
    /// had already come is a success.
    fn settle(&self, st: &State, r: Result<usize, i32>) -> io::Result<usize> {
        match (self.kind, st.step, r) {
            (_, _, Ok(n)) => Ok(n),
            (Kind::Pipe, Step::Recv { .. }, Err(e)) if e == ERROR_BROKEN_PIPE as i32 => Ok(0),
            (Kind::Pipe, Step::Connect, Err(e)) if e == ERROR_PIPE_CONNECTED as i32 => Ok(0),
            (_, _, Err(e)) => Err(io::Error::from_raw_os_error(e)),
        }
    }

    /// Feeds the outcome of the operation that completed (`None`: none
    /// yet) to the role and issues the next, for as long as operations
    /// complete at once.
    fn advance(&self, st: &mut State, mut outcome: Option<io::Result<usize>>) {
        loop {
            let next = match outcome.take() {
                None => st.first(),
                Some(Err(e)) => Next::Done(Err(e)),
                Some(Ok(n)) => st.after(n),
            };
            match next {
                Next::Done(r) => {
                    if matches!(st.role, Role::Ping { .. } | Role::Source { .. }) {
                        // The peer's echo or sink reads end of file.
                        match self.kind {
                            Kind::Tcp => {
                                // SAFETY: a valid socket.
                                unsafe { shutdown(self.handle as SOCKET, SD_SEND) };
                            }
                            // Nothing is in flight on it: closing it before
                            // its TP_IO is the order the pool asks for.
                            Kind::Pipe => drop(st.owner.take()),
                            Kind::Udp => {}
                        }
                    }
                    st.outcome = Some(r);
                    self.done.finish();
                    return;
                }
                Next::Op(step) => {
                    st.step = step;
                    match self.issue(st) {
                        None => return,
                        Some(r) => outcome = Some(self.settle(st, r)),
                    }
                }
            }
        }
    }

    /// Issues `st.step`: `None` if it is pending (its callback follows),
    /// else its outcome as bytes or a Win32 error code (no callback follows).
    fn issue(&self, st: &mut State) -> Option<Result<usize, i32>> {
        st.ov = OVERLAPPED::default();
        st.flags = 0;
        let mut n = 0u32;
        let (from, to) = match st.step {
            Step::Recv { from, to } | Step::Send { from, to } => (from, to),
            Step::Connect => (0, 0),
        };
        let len = (to - from) as u32;
        let data = st.buf[from..].as_mut_ptr();
        let wsabuf = WSABUF { len, buf: data };
        let socket = self.handle as SOCKET;
        // SAFETY: the buffer, OVERLAPPED, flags and addresses live in the
        // state, which outlives the operation (nothing else touches them
        // until its completion: the next step is issued from there); the
        // handle is open (a pipe end closes it only once done).
        let ok = unsafe {
            StartThreadpoolIo(self.io);
            match (self.kind, st.step, &mut st.udp) {
                (Kind::Pipe, Step::Connect, _) => ConnectNamedPipe(self.handle, &mut st.ov) != 0,
                (Kind::Pipe, Step::Recv { .. }, _) => ReadFile(self.handle, data, len, &mut n, &mut st.ov) != 0,
                (Kind::Pipe, Step::Send { .. }, _) => WriteFile(self.handle, data, len, &mut n, &mut st.ov) != 0,
                (_, Step::Connect, _) => unreachable!("only a pipe server waits for its client"),
                (_, Step::Recv { .. }, None) => {
                    WSARecv(socket, &wsabuf, 1, &mut n, &mut st.flags, &mut st.ov, None) == 0
                }
                (_, Step::Send { .. }, None) => WSASend(socket, &wsabuf, 1, &mut n, 0, &mut st.ov, None) == 0,
                (_, Step::Recv { .. }, Some(u)) => {
                    u.from_len = core::mem::size_of::<SOCKADDR_STORAGE>() as i32;
                    WSARecvFrom(
                        socket,
                        &wsabuf,
                        1,
                        &mut n,
                        &mut st.flags,
                        (&raw mut u.from).cast::<SOCKADDR>(),
                        &mut u.from_len,
                        &mut st.ov,
                        None,
                    ) == 0
                }
                (_, Step::Send { .. }, Some(u)) => {
                    WSASendTo(
                        socket,
                        &wsabuf,
                        1,
                        &mut n,
                        0,
                        (&raw const u.peer).cast::<SOCKADDR>(),
                        core::mem::size_of::<SOCKADDR_IN>() as i32,
                        &mut st.ov,
                        None,
                    ) == 0
                }
            }
        };
        if ok {
            // Completed at once: with the skip flag no callback follows.
            // SAFETY: balances the StartThreadpoolIo above.
            unsafe { CancelThreadpoolIo(self.io) };
            return Some(Ok(n as usize));
        }
        let e = match self.kind {
            Kind::Pipe => io::Error::last_os_error().raw_os_error().unwrap_or(0),
            // SAFETY: no preconditions.
            Kind::Tcp | Kind::Udp => unsafe { WSAGetLastError() },
        };
        // (`WSA_IO_PENDING` is the same code.)
        if e == ERROR_IO_PENDING as i32 {
            return None;
        }
        // SAFETY: failed at once: no callback follows.
        unsafe { CancelThreadpoolIo(self.io) };
        Some(Err(e))
    }

    pub fn outcome(&self) -> io::Result<()> {
        self.state.lock().unwrap().outcome.take().unwrap_or_else(|| Err(io::Error::other("still running")))
    }

    pub fn samples(&self) -> Vec<f64> {
        match &mut self.state.lock().unwrap().role {
            Role::Ping { samples, .. } => std::mem::take(samples),
            _ => Vec::new(),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if self.io == 0 {
            return;
        }
        // SAFETY: every end is done (no operation pending) before its
        // last reference goes; this waits for a callback still returning.
        unsafe {
            WaitForThreadpoolIoCallbacks(self.io, 0);
            CloseThreadpoolIo(self.io);
        }
    }
}

/// Starts every end, waits for all, and checks their outcomes.
pub fn run_all(ends: &[Arc<Conn>], done: &Done) -> io::Result<()> {
    ends.iter().for_each(|e| e.start());
    done.wait()?;
    ends.iter().try_for_each(|e| e.outcome())
}
