//! The raw `windows-sys` column of the socket table, shared by its socket
//! rows (`net_workload`) and its pipe rows (`pipe_workload`): overlapped
//! handles (std's sockets, named-pipe instances) bound to a `TP_IO` each,
//! with `FILE_SKIP_COMPLETION_PORT_ON_SUCCESS` where the handle allows it
//! (pipes; sockets of an IFS provider); every connection end is a state
//! machine advanced by its completion callback (and, for operations that
//! complete at once with the skip flag, inline by whoever issued them).
//!
//! An end is started only inside an [`Ends`], whose drop (on every return,
//! early or not) cancels and closes every end and waits, bounded, for each
//! pending operation's callback; an end whose callback does not come in
//! time is leaked, since the kernel may still write its buffer and
//! `OVERLAPPED`. So a [`Conn`] is freed only with no operation pending and
//! no callback running.

use std::io;
use std::net::SocketAddr;
use std::ops::Deref;
use std::os::windows::io::{AsRawHandle, AsRawSocket, OwnedHandle, OwnedSocket};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::{
    ERROR_BROKEN_PIPE, ERROR_IO_PENDING, ERROR_MORE_DATA, ERROR_PIPE_CONNECTED, HANDLE,
};
use windows_sys::Win32::Networking::WinSock::{
    AF_INET, IN_ADDR, IN_ADDR_0, SD_SEND, SO_PROTOCOL_INFOW, SOCKADDR, SOCKADDR_IN, SOCKADDR_STORAGE, SOCKET,
    SOCKET_ERROR, SOL_SOCKET, WSABUF, WSAEMSGSIZE, WSAGetLastError, WSAPROTOCOL_INFOW, WSARecv, WSARecvFrom, WSASend,
    WSASendTo, XP1_IFS_HANDLES, getsockopt, shutdown,
};
use windows_sys::Win32::Storage::FileSystem::{ReadFile, SetFileCompletionNotificationModes, WriteFile};
use windows_sys::Win32::System::IO::{CancelIoEx, OVERLAPPED};
use windows_sys::Win32::System::Pipes::ConnectNamedPipe;
use windows_sys::Win32::System::Threading::{
    CancelThreadpoolIo, CloseThreadpoolIo, CreateThreadpoolIo, PTP_CALLBACK_INSTANCE, PTP_IO, StartThreadpoolIo,
    WaitForThreadpoolIoCallbacks,
};

use crate::net_workload::{LIMIT, MSG, eof, us};

/// `FILE_SKIP_COMPLETION_PORT_ON_SUCCESS | FILE_SKIP_SET_EVENT_ON_HANDLE`.
const SKIP_ON_SUCCESS: u8 = 1 | 2;

/// How long [`Ends`]' drop waits for the callbacks of cancelled operations.
const STOP_LIMIT: Duration = Duration::from_secs(10);

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
    /// An operation was issued and its callback has not run yet.
    pending: bool,
    /// `Conn::start` has run: a second start would issue an operation
    /// beside the pending one, on the same `ov` and buffer.
    started: bool,
    /// `None` once the handle is closed: a pipe end closes it once done
    /// (its peer's read then sees end of file), [`Ends`] once stopping.
    /// No operation is issued after.
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

    fn wait(&self) -> io::Result<()> {
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
    /// A synchronous success queues no completion (the skip flag is set).
    inline: bool,
    io: PTP_IO,
    state: Mutex<State>,
    /// Signalled when an operation's callback has run with none issued after.
    idle: Condvar,
    done: Arc<Done>,
}

// SAFETY: `handle` and `io` are kernel and pool objects, valid on any thread
// and only read after `new`. The rest is in `state`, behind the mutex. While
// an operation is in flight (`pending`) the kernel writes `ov`,
// `buf[from..to]`, `flags` and (UDP) `udp.from`/`from_len` with no lock:
// Rust code does not read or write those fields until the operation's
// callback has cleared `pending` (only the next `issue` does, from that
// callback or inline after a synchronous completion), and the `Arc`
// allocation keeps their addresses until that callback has returned (`Ends`
// frees a started `Conn` only after `quiesce`, else leaks it). The other
// fields, raw pointers included, are touched only under the mutex.
unsafe impl Send for Conn {}
// SAFETY: as above: shared access reads `handle`/`io` or takes the mutex,
// and leaves the kernel-owned fields alone while `pending`.
unsafe impl Sync for Conn {}

unsafe extern "system" fn on_io(
    _: PTP_CALLBACK_INSTANCE,
    ctx: *mut core::ffi::c_void,
    _: *mut core::ffi::c_void,
    result: u32,
    bytes: usize,
    _: PTP_IO,
) {
    // SAFETY: ctx is the `Conn`, and this callback is for an operation it
    // issued: `Ends` frees a started `Conn` only after this callback has
    // returned (or leaks it), and an unstarted one has no callbacks.
    let conn = unsafe { &*(ctx as *const Conn) };
    let mut st = conn.state.lock().unwrap();
    st.pending = false;
    let outcome = conn.settle(&st, if result == 0 { Ok(bytes) } else { Err(result as i32) });
    conn.advance(&mut st, Some(outcome));
    if !st.pending {
        conn.idle.notify_all();
    }
}

/// Whether `socket`'s provider hands out real file handles
/// (`XP1_IFS_HANDLES`): the condition Microsoft documents for
/// skip-on-success on a socket (the crate's `sys::winsock::ifs_provider`).
fn ifs_provider(socket: &OwnedSocket) -> io::Result<bool> {
    // SAFETY: all-zero is a valid value of this plain-data struct.
    let mut info: WSAPROTOCOL_INFOW = unsafe { core::mem::zeroed() };
    let mut len = core::mem::size_of::<WSAPROTOCOL_INFOW>() as i32;
    let s = socket.as_raw_socket() as SOCKET;
    // SAFETY: `info` has room for `len` bytes, the option's type.
    if unsafe { getsockopt(s, SOL_SOCKET, SO_PROTOCOL_INFOW, (&raw mut info).cast(), &mut len) } == SOCKET_ERROR {
        // SAFETY: no preconditions.
        return Err(io::Error::from_raw_os_error(unsafe { WSAGetLastError() }));
    }
    Ok(info.dwServiceFlags1 & XP1_IFS_HANDLES != 0)
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
    /// skip-on-success where allowed; `cap` is its buffer's size.
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
        // Pipes are file handles; a socket only if its provider is IFS.
        // (UDP too: a truncated datagram, whose completion is queued though
        // the receive fails at once, is taken as pending, see `issue`.)
        let inline = match &owner {
            Owner::Socket(s) => ifs_provider(s)?,
            Owner::Handle(_) => true,
        };
        // SAFETY: a valid handle.
        if inline && unsafe { SetFileCompletionNotificationModes(handle, SKIP_ON_SUCCESS) } == 0 {
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
            pending: false,
            started: false,
            owner: Some(owner),
        };
        let conn =
            Conn { handle, kind, inline, io: 0, state: Mutex::new(state), idle: Condvar::new(), done: done.clone() };
        let mut conn = Arc::new(conn);
        let ctx = Arc::as_ptr(&conn) as *mut core::ffi::c_void;
        // SAFETY: the Conn outlives the TP_IO (closed in its drop).
        let io = unsafe { CreateThreadpoolIo(handle, Some(on_io), ctx, core::ptr::null()) };
        if io == 0 {
            return Err(io::Error::last_os_error());
        }
        Arc::get_mut(&mut conn).expect("not shared yet").io = io;
        Ok(conn)
    }

    /// Only through [`Ends`], which makes the pending operation safe to
    /// drop.
    fn start(&self) {
        let mut st = self.state.lock().unwrap();
        // Before any StartThreadpoolIo, which a panic would leave unbalanced.
        assert!(!std::mem::replace(&mut st.started, true), "an end is started once");
        self.advance(&mut st, None);
    }

    /// Closes the handle, cancelling a pending operation (its callback
    /// still follows, with an error), and stops issuing more.
    fn stop(&self) {
        // Also after a panic under the lock: the pending operation must
        // still be cancelled and waited for.
        let mut st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(owner) = st.owner.take() {
            if st.pending {
                // SAFETY: the handle is open (`owner` holds it); a null
                // OVERLAPPED cancels every operation on it.
                unsafe { CancelIoEx(self.handle, core::ptr::null()) };
            }
            drop(owner);
        }
    }

    /// After [`stop`](Self::stop): waits until no operation is pending and
    /// no callback runs, or `deadline` passes (`false`).
    fn quiesce(&self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        let st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (st, _) =
            self.idle.wait_timeout_while(st, left, |st| st.pending).unwrap_or_else(std::sync::PoisonError::into_inner);
        if st.pending {
            return false;
        }
        drop(st);
        // SAFETY: a TP_IO of this Conn, open until its drop; this is not
        // one of its callbacks. Waits for a callback still returning.
        unsafe { WaitForThreadpoolIoCallbacks(self.io, 0) };
        true
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
                    if st.owner.is_some() && matches!(st.role, Role::Ping { .. } | Role::Source { .. }) {
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
                Next::Op(_) if st.owner.is_none() => {
                    outcome = Some(Err(io::Error::new(io::ErrorKind::Interrupted, "stopped")));
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
    /// Only while the handle is open (`st.owner`).
    fn issue(&self, st: &mut State) -> Option<Result<usize, i32>> {
        st.ov = OVERLAPPED::default();
        st.flags = 0;
        let mut n = 0u32;
        let (from, to) = match st.step {
            Step::Recv { from, to } | Step::Send { from, to } => (from, to),
            Step::Connect => (0, 0),
        };
        let len = (to - from) as u32;
        let data = st.buf[from..to].as_mut_ptr();
        let wsabuf = WSABUF { len, buf: data };
        let socket = self.handle as SOCKET;
        // Before StartThreadpoolIo, which a panic would leave unbalanced.
        assert!(
            self.kind == Kind::Pipe || !matches!(st.step, Step::Connect),
            "only a pipe server waits for its client"
        );
        // SAFETY: the buffer, OVERLAPPED, flags and addresses live in the
        // state, which is freed only once the operation's callback has
        // returned (`Ends`), and nothing else touches them until then (the
        // next step is issued from there); the handle is open (`st.owner`).
        let ok = unsafe {
            StartThreadpoolIo(self.io);
            match (self.kind, st.step, &mut st.udp) {
                (Kind::Pipe, Step::Connect, _) => ConnectNamedPipe(self.handle, &mut st.ov) != 0,
                (Kind::Pipe, Step::Recv { .. }, _) => ReadFile(self.handle, data, len, &mut n, &mut st.ov) != 0,
                (Kind::Pipe, Step::Send { .. }, _) => WriteFile(self.handle, data, len, &mut n, &mut st.ov) != 0,
                (_, Step::Connect, _) => unreachable!("asserted above"),
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
        if ok && self.inline {
            // Completed at once: with the skip flag no callback follows.
            // SAFETY: balances the StartThreadpoolIo above.
            unsafe { CancelThreadpoolIo(self.io) };
            return Some(Ok(n as usize));
        }
        if ok {
            st.pending = true;
            return None;
        }
        let e = match self.kind {
            Kind::Pipe => io::Error::last_os_error().raw_os_error().unwrap_or(0),
            // SAFETY: no preconditions.
            Kind::Tcp | Kind::Udp => unsafe { WSAGetLastError() },
        };
        // (`WSA_IO_PENDING` is the same code.)
        if e == ERROR_IO_PENDING as i32 {
            st.pending = true;
            return None;
        }
        // A synchronous ERROR_MORE_DATA / WSAEMSGSIZE (a message or
        // datagram larger than the buffer) is a warning that still queues a
        // completion, skip flag or not: pending, so the callback reports it
        // (an error ending the role). Cancelling here would unbalance the
        // pool and let the late callback run `advance` again, on a settled
        // end. The bench's pipes are byte-mode and its UDP sockets connected
        // to each other, whose datagrams are MSG bytes, so neither is
        // expected.
        if e == ERROR_MORE_DATA as i32 || e == WSAEMSGSIZE {
            st.pending = true;
            return None;
        }
        // SAFETY: failed at once with an error: no callback follows.
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
        // The handle first, then the TP_IO: the order the pool asks for.
        drop(self.state.get_mut().unwrap_or_else(|e| e.into_inner()).owner.take());
        if self.io == 0 {
            return;
        }
        // SAFETY: no operation is pending and no callback runs: an
        // unstarted Conn issued none, and `Ends` drops a started one only
        // after `quiesce` (else leaks it).
        unsafe {
            WaitForThreadpoolIoCallbacks(self.io, 0);
            CloseThreadpoolIo(self.io);
        }
    }
}

/// Started connection ends; see the module docs for its drop.
pub struct Ends(Vec<Arc<Conn>>);

impl Ends {
    pub fn with_capacity(n: usize) -> Self {
        Self(Vec::with_capacity(n))
    }

    /// Starts `conn` and keeps it.
    pub fn start(&mut self, conn: Arc<Conn>) {
        // Kept first, so a panic in `start` still stops it.
        self.0.push(conn);
        self.0.last().expect("just pushed").start();
    }

    /// Waits for every end, then checks their outcomes.
    pub fn wait(&self, done: &Done) -> io::Result<()> {
        done.wait()?;
        self.0.iter().try_for_each(|e| e.outcome())
    }
}

impl Deref for Ends {
    type Target = [Arc<Conn>];

    fn deref(&self) -> &[Arc<Conn>] {
        &self.0
    }
}

impl Drop for Ends {
    fn drop(&mut self) {
        // Every end first, so no end waits on a peer not yet closed.
        self.0.iter().for_each(|e| e.stop());
        let deadline = Instant::now() + STOP_LIMIT;
        for end in self.0.drain(..) {
            if !end.quiesce(deadline) {
                eprintln!("bench: a raw end's cancelled operation did not complete; leaking it");
                std::mem::forget(end);
            }
        }
    }
}

/// Starts every end, waits for all, and checks their outcomes; the ends
/// come back for their samples.
pub fn run_all(conns: impl IntoIterator<Item = Arc<Conn>>, done: &Done) -> io::Result<Ends> {
    let mut ends = Ends::with_capacity(2);
    conns.into_iter().for_each(|c| ends.start(c));
    ends.wait(done)?;
    Ok(ends)
}

/// `trips` round trips of [`MSG`] bytes from `client` to `server`, which
/// echoes until end of file or (UDP) `echoes` datagrams: µs each.
pub fn ping_pong(server: End, client: End, echoes: Option<usize>, trips: usize) -> io::Result<Vec<f64>> {
    let done = Done::new(2);
    let ends = [
        Conn::new(server, Role::Echo { left: echoes }, MSG, &done)?,
        Conn::new(client, Role::ping(trips), MSG, &done)?,
    ];
    let ends = run_all(ends, &done)?;
    Ok(ends[1].samples())
}

/// `total` bytes from `client` to `server` in operations of `chunk`:
/// seconds from the start of both ends to the last byte read.
pub fn stream(server: End, client: End, total: usize, chunk: usize) -> io::Result<f64> {
    let done = Done::new(2);
    let ends = [
        Conn::new(server, Role::Sink { left: total }, chunk, &done)?,
        Conn::new(client, Role::Source { left: total }, chunk, &done)?,
    ];
    let t = Instant::now();
    let _ends = run_all(ends, &done)?;
    Ok(t.elapsed().as_secs_f64())
}
