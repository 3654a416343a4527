//! The socket family: Winsock's overlapped calls, each an [`AsyncOp`].

use std::io;
use std::net::SocketAddr;
use std::os::windows::io::{AsRawSocket, OwnedSocket};

use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::Networking::WinSock::{
    MSG_PEEK, SO_UPDATE_ACCEPT_CONTEXT, SO_UPDATE_CONNECT_CONTEXT, SOCKADDR, SOCKADDR_STORAGE, SOCKET, SOCKET_ERROR,
    SOL_SOCKET, WSA_IO_PENDING, WSABUF, WSAEMSGSIZE, WSARecv, WSARecvFrom, WSASend, WSASendTo,
};
use windows_sys::Win32::System::IO::OVERLAPPED;

use super::{AsyncOp, BufPtr, BufferFor, Issued, stream_parts};
use crate::sys::winsock::{self as sys, completion_error, last_error};

/// What an overlapped Winsock call is, for [`classify`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Call {
    Receive,
    Other,
}

/// Classifies an overlapped Winsock call that returned `ok` (success) or
/// failed with the thread's last error; `bytes` is what a success
/// transferred. The one place that decides whether a completion comes:
/// - a success queues one unless skip-on-success is set (`inline`), and
///   then is finished here;
/// - `WSA_IO_PENDING` queues one;
/// - a receive's `WSAEMSGSIZE` (the datagram was truncated into the
///   buffer) is a warning status, `STATUS_BUFFER_OVERFLOW`: the receive ran,
///   and its completion follows, carrying the same error. Only datagram
///   sockets truncate, and they never have skip-on-success
///   ([`Transport::Datagram`](crate::net::bind::Transport::Datagram) says why: with it, whether a completion
///   follows is not reliable), so no inline case exists. A send's
///   `WSAEMSGSIZE` is a plain failure;
/// - any other error is a synchronous failure, with no completion.
fn classify(ok: bool, bytes: u32, inline: bool, call: Call) -> io::Result<Issued> {
    if ok {
        return Ok(if inline { Issued::Completed(bytes as usize) } else { Issued::Queued });
    }
    let e = last_error();
    match e.raw_os_error() {
        Some(WSA_IO_PENDING) => Ok(Issued::Queued),
        Some(WSAEMSGSIZE) if call == Call::Receive => Ok(Issued::Queued),
        _ => Err(e),
    }
}

fn socket(handle: HANDLE) -> SOCKET {
    handle as SOCKET
}

/// The buffer's start and length as one `WSABUF`.
fn wsabuf((ptr, len): (BufPtr, u32)) -> WSABUF {
    WSABUF { len, buf: ptr.0 }
}

/// A stream receive (`WSARecv`) into `buf`, with the flags it is given
/// (none, or `MSG_PEEK`).
pub(crate) struct Recv<B> {
    pub(crate) buf: B,
    pub(crate) parts: (BufPtr, u32),
    pub(crate) flags: u32,
    pub(crate) inline: bool,
}

impl<B> Recv<B> {
    pub(crate) fn new(buf: B, inline: bool) -> Self {
        Self { buf, parts: (BufPtr::NULL, 0), flags: 0, inline }
    }

    /// A receive that leaves the bytes it copies in the socket for the next
    /// one (`MSG_PEEK`).
    pub(crate) fn peek(buf: B, inline: bool) -> Self {
        Self { flags: MSG_PEEK as u32, ..Self::new(buf, inline) }
    }
}

impl<B: AsMut<[u8]> + Send + 'static> AsyncOp for Recv<B> {
    type Output = (io::Result<usize>, B);

    fn prepare(&mut self) -> io::Result<()> {
        let (ptr, len) = stream_parts::<B, false>(&mut self.buf);
        self.parts = (BufPtr(ptr), len);
        Ok(())
    }

    unsafe fn issue(this: *mut Self, handle: HANDLE, ov: *mut OVERLAPPED) -> io::Result<Issued> {
        // SAFETY: read before the receive is issued (the caller's contract).
        let (buf, inline) = unsafe { (wsabuf((*this).parts), (*this).inline) };
        // Written by Winsock before it returns; read only for a success it
        // completed inline. A local, never the operation: a queued receive
        // may be finished and freed before the call returns.
        let mut bytes = 0;
        // SAFETY: the buffer and flags live in `*this`, in place until the
        // completion (the caller's contract); Winsock copies the WSABUF.
        let r = unsafe { WSARecv(socket(handle), &buf, 1, &mut bytes, &raw mut (*this).flags, ov, None) };
        classify(r != SOCKET_ERROR, bytes, inline, Call::Receive)
    }

    fn finish(self, result: io::Result<usize>) -> Self::Output {
        (result.map_err(completion_error), self.buf)
    }
}

/// A zero-byte stream receive (`WSARecv` of an empty buffer): completes
/// once data is there to read, or the peer has shut down or reset, and
/// holds no buffer meanwhile (as IOCP servers wait for an idle
/// connection's next request).
pub(crate) struct Readable(Recv<[u8; 0]>);

impl Readable {
    pub(crate) fn new(inline: bool) -> Self {
        Self(Recv::new([], inline))
    }
}

impl AsyncOp for Readable {
    type Output = io::Result<()>;

    fn prepare(&mut self) -> io::Result<()> {
        self.0.prepare()
    }

    unsafe fn issue(this: *mut Self, handle: HANDLE, ov: *mut OVERLAPPED) -> io::Result<Issued> {
        // SAFETY: a raw projection of the caller's pointer; the contract is
        // forwarded.
        unsafe { Recv::issue(&raw mut (*this).0, handle, ov) }
    }

    fn finish(self, result: io::Result<usize>) -> Self::Output {
        self.0.finish(result).0.map(drop)
    }
}

/// A stream send (`WSASend`) of `buf[start..]`.
pub(crate) struct Transmit<B> {
    pub(crate) buf: B,
    pub(crate) start: usize,
    pub(crate) parts: (BufPtr, u32),
    pub(crate) inline: bool,
}

impl<B> Transmit<B> {
    pub(crate) fn new(buf: B, start: usize, inline: bool) -> Self {
        Self { buf, start, parts: (BufPtr::NULL, 0), inline }
    }
}

/// The part of a send's buffer from `start`, clamped to the buffer.
struct Tail<'a, B>(&'a B, usize);

impl<B: AsRef<[u8]>> BufferFor<true> for Tail<'_, B> {
    fn raw_parts(&mut self) -> (*mut u8, usize) {
        let s = self.0.as_ref();
        let s = &s[self.1.min(s.len())..];
        // The kernel only reads through a send's pointer.
        (s.as_ptr().cast_mut(), s.len())
    }
}

impl<B: AsRef<[u8]> + Send + 'static> AsyncOp for Transmit<B> {
    type Output = (io::Result<usize>, B);

    fn prepare(&mut self) -> io::Result<()> {
        let (ptr, len) = stream_parts::<_, true>(&mut Tail(&self.buf, self.start));
        self.parts = (BufPtr(ptr), len);
        Ok(())
    }

    unsafe fn issue(this: *mut Self, handle: HANDLE, ov: *mut OVERLAPPED) -> io::Result<Issued> {
        // SAFETY: read before the send is issued (the caller's contract).
        let (buf, inline) = unsafe { (wsabuf((*this).parts), (*this).inline) };
        let mut bytes = 0; // as in `Recv::issue`
        // SAFETY: as for `Recv`; the kernel only reads the buffer.
        let r = unsafe { WSASend(socket(handle), &buf, 1, &mut bytes, 0, ov, None) };
        classify(r != SOCKET_ERROR, bytes, inline, Call::Other)
    }

    fn finish(self, result: io::Result<usize>) -> Self::Output {
        (result.map_err(completion_error), self.buf)
    }
}

/// Room for each of `AcceptEx`'s two addresses (its documented minimum is
/// the address's size plus 16 bytes).
const ACCEPT_ADDRESS_LEN: u32 = (size_of::<SOCKADDR_STORAGE>() + 16) as u32;

/// `AcceptEx`'s output buffer: the two addresses, aligned as the
/// `SOCKADDR`s `GetAcceptExSockaddrs` points into it are.
#[repr(C, align(8))]
pub(crate) struct AcceptAddresses(pub(crate) [u8; 2 * ACCEPT_ADDRESS_LEN as usize]);

/// An accept (`AcceptEx`) on a listener: the connection arrives on a socket
/// made for it by `prepare`, and the operation ends with that socket, made
/// ready for use, and the peer's address; the caller binds it to the pool.
pub(crate) struct Accept {
    pub(crate) listener: SOCKET,
    pub(crate) family: u16,
    pub(crate) accepted: Option<OwnedSocket>,
    pub(crate) addresses: AcceptAddresses,
    pub(crate) inline: bool,
}

impl AsyncOp for Accept {
    type Output = io::Result<(OwnedSocket, SocketAddr)>;

    fn prepare(&mut self) -> io::Result<()> {
        use windows_sys::Win32::Networking::WinSock::SOCK_STREAM;
        self.accepted = Some(sys::new_socket(self.family, SOCK_STREAM, 0)?);
        Ok(())
    }

    unsafe fn issue(this: *mut Self, handle: HANDLE, ov: *mut OVERLAPPED) -> io::Result<Issued> {
        let ws = sys::winsock()?;
        // SAFETY: read before the accept is issued (the caller's contract).
        let (accepted, inline) = unsafe {
            let accepted = (*this).accepted.as_ref().map_or(0, |s| s.as_raw_socket() as SOCKET);
            (accepted, (*this).inline)
        };
        let mut bytes = 0; // as in `Recv::issue`
        // SAFETY: the address buffer lives in `*this`, in place until the
        // completion; `accepted` is a new, unbound socket of the family.
        let ok = unsafe {
            (ws.accept_ex)(
                socket(handle),
                accepted,
                (&raw mut (*this).addresses).cast(),
                0,
                ACCEPT_ADDRESS_LEN,
                ACCEPT_ADDRESS_LEN,
                &mut bytes,
                ov,
            )
        };
        classify(ok != 0, bytes, inline, Call::Other)
    }

    fn finish(mut self, result: io::Result<usize>) -> Self::Output {
        result.map_err(completion_error)?;
        let accepted = self.accepted.take().expect("prepared before it was issued");
        let s = accepted.as_raw_socket() as SOCKET;
        // Gives the accepted socket the listener's properties, so that
        // `getpeername`, `shutdown` and the rest work on it.
        sys::set_option(s, SOL_SOCKET, SO_UPDATE_ACCEPT_CONTEXT, self.listener)?;
        let ws = sys::winsock()?;
        let (mut local, mut remote) = (core::ptr::null_mut::<SOCKADDR>(), core::ptr::null_mut::<SOCKADDR>());
        let (mut local_len, mut remote_len) = (0i32, 0i32);
        // SAFETY: the buffer is the one `AcceptEx` filled, with the lengths
        // it was given; the pointers it returns point into it.
        let peer = unsafe {
            (ws.accept_ex_sockaddrs)(
                (&raw const self.addresses).cast(),
                0,
                ACCEPT_ADDRESS_LEN,
                ACCEPT_ADDRESS_LEN,
                &mut local,
                &mut local_len,
                &mut remote,
                &mut remote_len,
            );
            if remote.is_null() {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "AcceptEx gave no peer address"));
            }
            sys::from_raw(remote, remote_len)?
        };
        Ok((accepted, peer))
    }
}

/// A connect (`ConnectEx`) of a bound socket to an address.
pub(crate) struct Connect {
    pub(crate) to: SOCKADDR_STORAGE,
    pub(crate) to_len: i32,
    pub(crate) socket: SOCKET,
    pub(crate) inline: bool,
}

impl AsyncOp for Connect {
    type Output = io::Result<()>;

    unsafe fn issue(this: *mut Self, handle: HANDLE, ov: *mut OVERLAPPED) -> io::Result<Issued> {
        let ws = sys::winsock()?;
        // SAFETY: read before the connect is issued (the caller's contract).
        let (to_len, inline) = unsafe { ((*this).to_len, (*this).inline) };
        let mut bytes = 0; // as in `Recv::issue`
        // SAFETY: the address lives in `*this`, in place until the
        // completion; no data is sent with the connect.
        let ok = unsafe {
            (ws.connect_ex)(
                socket(handle),
                (&raw const (*this).to).cast(),
                to_len,
                core::ptr::null(),
                0,
                &mut bytes,
                ov,
            )
        };
        classify(ok != 0, bytes, inline, Call::Other)
    }

    fn finish(self, result: io::Result<usize>) -> Self::Output {
        result.map_err(completion_error)?;
        // Gives the socket its connected state for `getpeername`, `shutdown`.
        // SAFETY: the option takes no value.
        sys::check(unsafe {
            windows_sys::Win32::Networking::WinSock::setsockopt(
                self.socket,
                SOL_SOCKET,
                SO_UPDATE_CONNECT_CONTEXT,
                core::ptr::null(),
                0,
            )
        })
    }
}

/// A datagram receive (`WSARecvFrom`) into `buf`, with its sender.
pub(crate) struct RecvFrom<B> {
    pub(crate) recv: Recv<B>,
    pub(crate) from: SOCKADDR_STORAGE,
    pub(crate) from_len: i32,
}

impl<B> RecvFrom<B> {
    pub(crate) fn new(buf: B, inline: bool) -> Self {
        Self { recv: Recv::new(buf, inline), from: SOCKADDR_STORAGE::default(), from_len: 0 }
    }
}

impl<B: AsMut<[u8]> + Send + 'static> AsyncOp for RecvFrom<B> {
    type Output = (io::Result<(usize, SocketAddr)>, B);

    fn prepare(&mut self) -> io::Result<()> {
        self.from_len = size_of::<SOCKADDR_STORAGE>() as i32;
        self.recv.prepare()
    }

    unsafe fn issue(this: *mut Self, handle: HANDLE, ov: *mut OVERLAPPED) -> io::Result<Issued> {
        // SAFETY: read before the receive is issued (the caller's contract).
        let (buf, inline) = unsafe { (wsabuf((*this).recv.parts), (*this).recv.inline) };
        let mut bytes = 0; // as in `Recv::issue`
        // SAFETY: as for `Recv`, and the sender's address and its length live
        // in `*this` too.
        let ret = unsafe {
            WSARecvFrom(
                socket(handle),
                &buf,
                1,
                &mut bytes,
                &raw mut (*this).recv.flags,
                (&raw mut (*this).from).cast(),
                &raw mut (*this).from_len,
                ov,
                None,
            )
        };
        classify(ret != SOCKET_ERROR, bytes, inline, Call::Receive)
    }

    fn finish(self, result: io::Result<usize>) -> Self::Output {
        let from = (&raw const self.from).cast::<SOCKADDR>();
        // SAFETY: a completed receive wrote `from_len` bytes of the sender's
        // address into `from`, which has room for any.
        let result =
            result.map_err(completion_error).and_then(|n| Ok((n, unsafe { sys::from_raw(from, self.from_len) }?)));
        (result, self.recv.buf)
    }
}

/// A datagram send (`WSASendTo`) of `buf` to an address.
pub(crate) struct SendTo<B> {
    pub(crate) send: Transmit<B>,
    pub(crate) to: SOCKADDR_STORAGE,
    pub(crate) to_len: i32,
    /// Why the destination is unusable, given back by `prepare`.
    pub(crate) refused: Option<io::Error>,
}

impl<B: AsRef<[u8]> + Send + 'static> AsyncOp for SendTo<B> {
    type Output = (io::Result<usize>, B);

    fn prepare(&mut self) -> io::Result<()> {
        if let Some(e) = self.refused.take() {
            return Err(e);
        }
        self.send.prepare()
    }

    unsafe fn issue(this: *mut Self, handle: HANDLE, ov: *mut OVERLAPPED) -> io::Result<Issued> {
        // SAFETY: read before the send is issued (the caller's contract).
        let (buf, inline, to_len) = unsafe { (wsabuf((*this).send.parts), (*this).send.inline, (*this).to_len) };
        let mut bytes = 0; // as in `Recv::issue`
        // SAFETY: as for `Transmit`, and the address lives in `*this` too.
        let ret = unsafe {
            WSASendTo(socket(handle), &buf, 1, &mut bytes, 0, (&raw const (*this).to).cast(), to_len, ov, None)
        };
        classify(ret != SOCKET_ERROR, bytes, inline, Call::Other)
    }

    fn finish(self, result: io::Result<usize>) -> Self::Output {
        self.send.finish(result)
    }
}
