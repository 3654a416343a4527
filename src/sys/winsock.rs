//! Winsock underneath the sockets: start-up, extension functions, socket
//! creation, options, addresses and error codes. Binding a socket to the
//! pool is `crate::net`'s.

use core::ffi::c_void;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::windows::io::{AsRawSocket, FromRawSocket, OwnedSocket, RawSocket};
use std::sync::OnceLock;

use windows_sys::Win32::Foundation::{
    ERROR_ADDRESS_ALREADY_ASSOCIATED, ERROR_CONNECTION_ABORTED, ERROR_CONNECTION_ACTIVE, ERROR_CONNECTION_INVALID,
    ERROR_CONNECTION_REFUSED, ERROR_GRACEFUL_DISCONNECT, ERROR_HOST_DOWN, ERROR_HOST_UNREACHABLE, ERROR_MORE_DATA,
    ERROR_NETNAME_DELETED, ERROR_NETWORK_UNREACHABLE, ERROR_NO_SYSTEM_RESOURCES, ERROR_PIPE_NOT_CONNECTED,
    ERROR_PORT_UNREACHABLE, ERROR_PROTOCOL_UNREACHABLE, ERROR_REQUEST_ABORTED, ERROR_SEM_TIMEOUT, ERROR_UNEXP_NET_ERR,
    NTSTATUS, STATUS_ADDRESS_ALREADY_ASSOCIATED, STATUS_BUFFER_OVERFLOW, STATUS_CONNECTION_ABORTED,
    STATUS_CONNECTION_ACTIVE, STATUS_CONNECTION_INVALID, STATUS_CONNECTION_REFUSED, STATUS_CONNECTION_RESET,
    STATUS_GRACEFUL_DISCONNECT, STATUS_HOST_DOWN, STATUS_HOST_UNREACHABLE, STATUS_INSUFFICIENT_RESOURCES,
    STATUS_IO_TIMEOUT, STATUS_NETWORK_UNREACHABLE, STATUS_PIPE_DISCONNECTED, STATUS_PORT_UNREACHABLE,
    STATUS_PROTOCOL_UNREACHABLE, STATUS_REQUEST_ABORTED,
};
use windows_sys::Win32::Networking::WinSock::{
    AF_INET, AF_INET6, INVALID_SOCKET, IPPROTO, LPFN_ACCEPTEX, LPFN_CONNECTEX, LPFN_GETACCEPTEXSOCKADDRS,
    SIO_GET_EXTENSION_FUNCTION_POINTER, SO_PROTOCOL_INFOW, SOCKADDR, SOCKADDR_IN, SOCKADDR_IN6, SOCKADDR_STORAGE,
    SOCKET, SOCKET_ERROR, SOL_SOCKET, WINSOCK_SOCKET_TYPE, WSA_FLAG_NO_HANDLE_INHERIT, WSA_FLAG_OVERLAPPED, WSADATA,
    WSAEADDRINUSE, WSAECONNABORTED, WSAECONNREFUSED, WSAECONNRESET, WSAEDISCON, WSAEHOSTDOWN, WSAEHOSTUNREACH,
    WSAEINTR, WSAEISCONN, WSAEMSGSIZE, WSAENETRESET, WSAENETUNREACH, WSAENOBUFS, WSAENOTCONN, WSAESHUTDOWN,
    WSAETIMEDOUT, WSAGetLastError, WSAID_ACCEPTEX, WSAID_CONNECTEX, WSAID_GETACCEPTEXSOCKADDRS, WSAIoctl,
    WSAPROTOCOL_INFOW, WSASocketW, WSAStartup, XP1_IFS_HANDLES, getsockopt, setsockopt,
};

/// What the process learns from Winsock once.
pub(crate) struct Winsock {
    pub(crate) accept_ex: unsafe extern "system" fn(
        SOCKET,
        SOCKET,
        *mut c_void,
        u32,
        u32,
        u32,
        *mut u32,
        *mut windows_sys::Win32::System::IO::OVERLAPPED,
    ) -> windows_sys::core::BOOL,
    pub(crate) connect_ex: unsafe extern "system" fn(
        SOCKET,
        *const SOCKADDR,
        i32,
        *const c_void,
        u32,
        *mut u32,
        *mut windows_sys::Win32::System::IO::OVERLAPPED,
    ) -> windows_sys::core::BOOL,
    pub(crate) accept_ex_sockaddrs: unsafe extern "system" fn(
        *const c_void,
        u32,
        u32,
        u32,
        *mut *mut SOCKADDR,
        *mut i32,
        *mut *mut SOCKADDR,
        *mut i32,
    ),
}

/// Winsock, started once per process (`WSAStartup`, never cleaned up, as
/// std does), with its extension functions looked up.
pub(crate) fn winsock() -> io::Result<&'static Winsock> {
    static WINSOCK: OnceLock<Result<Winsock, i32>> = OnceLock::new();
    WINSOCK.get_or_init(start).as_ref().map_err(|&code| io::Error::from_raw_os_error(code))
}

fn start() -> Result<Winsock, i32> {
    let mut data = WSADATA::default();
    // SAFETY: `data` is a valid out-parameter.
    let r = unsafe { WSAStartup(0x0202, &mut data) };
    if r != 0 {
        return Err(r);
    }
    // The extension functions are the provider's; any TCP socket asks it.
    let probe = new_socket(AF_INET, windows_sys::Win32::Networking::WinSock::SOCK_STREAM, 0).map_err(code)?;
    let s = probe.as_raw_socket() as SOCKET;
    // SAFETY: each GUID names a function of exactly the type it is read as.
    unsafe {
        let accept: LPFN_ACCEPTEX = extension(s, WSAID_ACCEPTEX)?;
        let connect: LPFN_CONNECTEX = extension(s, WSAID_CONNECTEX)?;
        let sockaddrs: LPFN_GETACCEPTEXSOCKADDRS = extension(s, WSAID_GETACCEPTEXSOCKADDRS)?;
        let missing = windows_sys::Win32::Networking::WinSock::WSAEOPNOTSUPP;
        Ok(Winsock {
            accept_ex: accept.ok_or(missing)?,
            connect_ex: connect.ok_or(missing)?,
            accept_ex_sockaddrs: sockaddrs.ok_or(missing)?,
        })
    }
}

fn code(e: io::Error) -> i32 {
    e.raw_os_error().unwrap_or(windows_sys::Win32::Networking::WinSock::WSASYSNOTREADY)
}

/// # Safety
/// `F` is the function pointer type of the extension `guid` names.
unsafe fn extension<F: Copy>(s: SOCKET, guid: windows_sys::core::GUID) -> Result<Option<F>, i32> {
    let mut f: Option<F> = None;
    // SAFETY: the output of this code for `guid` is a pointer to a function
    // of type `F` (the caller's contract), or null, which is `None`.
    let bytes = unsafe { ioctl(s, SIO_GET_EXTENSION_FUNCTION_POINTER, &guid, &mut f) }.map_err(code)?;
    if bytes as usize != size_of::<Option<F>>() {
        return Err(windows_sys::Win32::Networking::WinSock::WSAEOPNOTSUPP);
    }
    Ok(f)
}

/// A synchronous `WSAIoctl` of `code` (no `OVERLAPPED`), with `input` as
/// its input and `output` as its output (none when `O` has no size);
/// returns the bytes it wrote to `output`.
///
/// # Safety
/// `I` has no padding (its bytes go to the provider as they are), and every
/// bit pattern of `O`'s size is a valid `O`, including a mix of its earlier
/// bytes and those `code` writes (a call may write fewer).
pub(crate) unsafe fn ioctl<I: Copy, O: Copy>(s: SOCKET, code: u32, input: &I, output: &mut O) -> io::Result<u32> {
    const { assert!(size_of::<I>() <= u32::MAX as usize && size_of::<O>() <= u32::MAX as usize) };
    let out: *mut c_void = if size_of::<O>() == 0 { core::ptr::null_mut() } else { (&raw mut *output).cast() };
    let mut bytes = 0u32;
    // SAFETY: the input is `size_of::<I>()` readable bytes and the output
    // has room for `size_of::<O>()` bytes, of a type any written bytes are
    // valid for (the caller's contract); no `OVERLAPPED`, so the call
    // completes before it returns.
    check(unsafe {
        WSAIoctl(
            s,
            code,
            (&raw const *input).cast(),
            size_of::<I>() as u32,
            out,
            size_of::<O>() as u32,
            &mut bytes,
            core::ptr::null_mut(),
            None,
        )
    })?;
    Ok(bytes)
}

/// Whether `socket`'s provider hands out real file handles
/// (`XP1_IFS_HANDLES` in `SO_PROTOCOL_INFOW`): the condition Microsoft
/// documents for skip-on-success on a socket.
pub(crate) fn ifs_provider(socket: &OwnedSocket) -> io::Result<bool> {
    let s = socket.as_raw_socket() as SOCKET;
    let mut info = core::mem::MaybeUninit::<WSAPROTOCOL_INFOW>::zeroed();
    let mut len = size_of::<WSAPROTOCOL_INFOW>() as i32;
    // SAFETY: `info` has room for `len` bytes, the option's type.
    check(unsafe { getsockopt(s, SOL_SOCKET, SO_PROTOCOL_INFOW, info.as_mut_ptr().cast(), &mut len) })?;
    // SAFETY: zeroed is a valid value of this plain-data struct, and the
    // call filled it.
    Ok(unsafe { info.assume_init() }.dwServiceFlags1 & XP1_IFS_HANDLES != 0)
}

/// The calling thread's last Winsock error.
pub(crate) fn last_error() -> io::Error {
    // SAFETY: no preconditions.
    io::Error::from_raw_os_error(unsafe { WSAGetLastError() })
}

/// `Ok` for a Winsock call's `0`, its last error for `SOCKET_ERROR`.
pub(crate) fn check(r: i32) -> io::Result<()> {
    if r == SOCKET_ERROR { Err(last_error()) } else { Ok(()) }
}

/// A completion's Win32 status as the Winsock error that
/// `WSAGetOverlappedResult` reports for it, so that a completed operation's
/// error is the one a synchronous call would have given (and std's error
/// kinds apply: `WSAECONNRESET` is `ConnectionReset`). A status of no row
/// passes through unchanged.
pub(crate) fn completion_error(e: io::Error) -> io::Error {
    match e.raw_os_error().and_then(|code| winsock_error(code as u32)) {
        Some(wsa) => io::Error::from_raw_os_error(wsa),
        None => e,
    }
}

fn winsock_error(win32: u32) -> Option<i32> {
    COMPLETION_ERRORS.iter().find(|row| row.win32 == win32).map(|row| row.winsock)
}

/// One row of [`COMPLETION_ERRORS`].
pub(crate) struct CompletionError {
    /// The status the driver completes the operation with (the unit test
    /// checks the row's Win32 error against it).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) status: NTSTATUS,
    /// What the pool hands the callback for it (`RtlNtStatusToDosError`).
    pub(crate) win32: u32,
    /// What Winsock reports for the status.
    pub(crate) winsock: i32,
}

const fn row(status: NTSTATUS, win32: u32, winsock: i32) -> CompletionError {
    CompletionError { status, win32, winsock }
}

/// Completion statuses as Winsock reports them. A pool callback sees the
/// Win32 error of the operation's `NTSTATUS`; Winsock maps the status. The
/// status-to-Winsock column is Wine's `dlls/ws2_32/socket.c`
/// (`NtStatusToWSAError`, the same pairs as the msafd table libuv keeps in
/// `src/win/winsock.c`), except two statuses that table lacks, taken from
/// Microsoft's texts for the codes: `STATUS_CONNECTION_INVALID` ("a
/// nonexistent transport connection", `WSAENOTCONN`) and
/// `STATUS_ADDRESS_ALREADY_ASSOCIATED` ("already has an address associated
/// with it", `WSAEADDRINUSE`). The status-to-Win32 column is
/// `RtlNtStatusToDosError`'s, which the unit test checks on the system it
/// runs on.
///
/// Statuses that share a Win32 error take the row of the one a socket
/// completes with (`STATUS_LOCAL_DISCONNECT` and `STATUS_REMOTE_DISCONNECT`
/// give `ERROR_NETNAME_DELETED` too). `ERROR_UNEXP_NET_ERR` has no row: it
/// comes from `STATUS_INVALID_CONNECTION` (`WSAENOTCONN`) and from
/// `STATUS_UNEXPECTED_NETWORK_ERROR` (`WSAENETDOWN`) alike, so it stays as
/// it is rather than be given a meaning it may not have.
pub(crate) const COMPLETION_ERRORS: &[CompletionError] = &[
    row(STATUS_CONNECTION_RESET, ERROR_NETNAME_DELETED, WSAECONNRESET),
    row(STATUS_CONNECTION_REFUSED, ERROR_CONNECTION_REFUSED, WSAECONNREFUSED),
    row(STATUS_CONNECTION_ABORTED, ERROR_CONNECTION_ABORTED, WSAECONNABORTED),
    row(STATUS_CONNECTION_ACTIVE, ERROR_CONNECTION_ACTIVE, WSAEISCONN),
    row(STATUS_GRACEFUL_DISCONNECT, ERROR_GRACEFUL_DISCONNECT, WSAEDISCON),
    row(STATUS_NETWORK_UNREACHABLE, ERROR_NETWORK_UNREACHABLE, WSAENETUNREACH),
    row(STATUS_HOST_UNREACHABLE, ERROR_HOST_UNREACHABLE, WSAEHOSTUNREACH),
    row(STATUS_PROTOCOL_UNREACHABLE, ERROR_PROTOCOL_UNREACHABLE, WSAENETUNREACH),
    row(STATUS_PORT_UNREACHABLE, ERROR_PORT_UNREACHABLE, WSAECONNRESET),
    row(STATUS_HOST_DOWN, ERROR_HOST_DOWN, WSAEHOSTDOWN),
    row(STATUS_REQUEST_ABORTED, ERROR_REQUEST_ABORTED, WSAEINTR),
    row(STATUS_IO_TIMEOUT, ERROR_SEM_TIMEOUT, WSAETIMEDOUT),
    row(STATUS_BUFFER_OVERFLOW, ERROR_MORE_DATA, WSAEMSGSIZE),
    row(STATUS_INSUFFICIENT_RESOURCES, ERROR_NO_SYSTEM_RESOURCES, WSAENOBUFS),
    row(STATUS_CONNECTION_INVALID, ERROR_CONNECTION_INVALID, WSAENOTCONN),
    row(STATUS_ADDRESS_ALREADY_ASSOCIATED, ERROR_ADDRESS_ALREADY_ASSOCIATED, WSAEADDRINUSE),
    row(STATUS_PIPE_DISCONNECTED, ERROR_PIPE_NOT_CONNECTED, WSAESHUTDOWN),
];

/// Whether an accept's error is one client's: the connection died before
/// it was accepted (reset, aborted, timed out or gone), and the listener is
/// as healthy as before. Read after [`completion_error`]. Under Wine it
/// includes `ERROR_UNEXP_NET_ERR` (59), which Wine 8 completes an
/// `AcceptEx` with for a connection reset in the backlog (measured:
/// `tests/io/net.rs::accept_skips_connections_reset_before_they_were_accepted`);
/// on Windows that error also means the network is down, the system's
/// trouble, which the caller must see.
pub(crate) fn peer_left(e: &io::Error) -> bool {
    match e.raw_os_error() {
        Some(WSAECONNRESET | WSAECONNABORTED | WSAENETRESET | WSAENOTCONN | WSAETIMEDOUT | WSAEDISCON) => true,
        Some(code) => code == ERROR_UNEXP_NET_ERR as i32 && crate::sys::on_wine(),
        None => false,
    }
}

/// A new overlapped, non-inheritable socket.
pub(crate) fn new_socket(family: u16, ty: WINSOCK_SOCKET_TYPE, protocol: IPPROTO) -> io::Result<OwnedSocket> {
    // SAFETY: no pointers; the result is checked.
    let s = unsafe {
        WSASocketW(family.into(), ty, protocol, core::ptr::null(), 0, WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT)
    };
    if s == INVALID_SOCKET {
        return Err(last_error());
    }
    // SAFETY: a new socket owned by nothing else.
    Ok(unsafe { OwnedSocket::from_raw_socket(s as RawSocket) })
}

/// An address as Winsock takes it, and its length.
pub(crate) fn to_raw(addr: &SocketAddr) -> (SOCKADDR_STORAGE, i32) {
    let mut storage = SOCKADDR_STORAGE::default();
    let len = match addr {
        SocketAddr::V4(a) => {
            let mut raw = SOCKADDR_IN { sin_family: AF_INET, sin_port: a.port().to_be(), ..Default::default() };
            raw.sin_addr.S_un.S_addr = u32::from_ne_bytes(a.ip().octets());
            // SAFETY: a SOCKADDR_STORAGE is large and aligned enough for any address.
            unsafe { (&raw mut storage).cast::<SOCKADDR_IN>().write(raw) };
            size_of::<SOCKADDR_IN>()
        }
        SocketAddr::V6(a) => {
            let mut raw = SOCKADDR_IN6 {
                sin6_family: AF_INET6,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                ..Default::default()
            };
            raw.sin6_addr.u.Byte = a.ip().octets();
            raw.Anonymous.sin6_scope_id = a.scope_id();
            // SAFETY: as above.
            unsafe { (&raw mut storage).cast::<SOCKADDR_IN6>().write(raw) };
            size_of::<SOCKADDR_IN6>()
        }
    };
    (storage, len as i32)
}

/// The address at `raw`, `len` bytes long.
///
/// # Safety
/// `raw` points to `len` readable bytes (at least a family's worth).
pub(crate) unsafe fn from_raw(raw: *const SOCKADDR, len: i32) -> io::Result<SocketAddr> {
    let len = usize::try_from(len).unwrap_or(0);
    if len < size_of::<u16>() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "an address shorter than its family"));
    }
    // SAFETY: at least the family is readable; each kind is read only if
    // `len` covers it; every read is unaligned, since the caller's buffer may
    // be a byte array.
    unsafe {
        match (&raw const (*raw).sa_family).read_unaligned() {
            AF_INET if len >= size_of::<SOCKADDR_IN>() => {
                let a = raw.cast::<SOCKADDR_IN>().read_unaligned();
                let ip = Ipv4Addr::from(a.sin_addr.S_un.S_addr.to_ne_bytes());
                Ok(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(a.sin_port))))
            }
            AF_INET6 if len >= size_of::<SOCKADDR_IN6>() => {
                let a = raw.cast::<SOCKADDR_IN6>().read_unaligned();
                let ip = Ipv6Addr::from(a.sin6_addr.u.Byte);
                let port = u16::from_be(a.sin6_port);
                Ok(SocketAddr::V6(SocketAddrV6::new(ip, port, a.sin6_flowinfo, a.Anonymous.sin6_scope_id)))
            }
            _ => Err(io::Error::new(io::ErrorKind::InvalidData, "an address of an unknown family")),
        }
    }
}

/// The unspecified address of `addr`'s family, port 0: what a socket is
/// bound to before `ConnectEx`, which needs a bound socket.
pub(crate) fn unspecified_like(addr: &SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    }
}

pub(crate) fn family(addr: &SocketAddr) -> u16 {
    if addr.is_ipv4() { AF_INET } else { AF_INET6 }
}

/// `getsockname`/`getpeername` of `s`.
pub(crate) fn name_of(
    s: SOCKET,
    call: unsafe extern "system" fn(SOCKET, *mut SOCKADDR, *mut i32) -> i32,
) -> io::Result<SocketAddr> {
    let mut storage = SOCKADDR_STORAGE::default();
    let mut len = size_of::<SOCKADDR_STORAGE>() as i32;
    // SAFETY: `storage` has room for `len` bytes.
    check(unsafe { call(s, (&raw mut storage).cast(), &mut len) })?;
    // SAFETY: the call wrote `len` bytes of an address.
    unsafe { from_raw((&raw const storage).cast(), len) }
}

/// Binds `s` to `addr` (`bind`).
pub(crate) fn bind_to(s: SOCKET, addr: &SocketAddr) -> io::Result<()> {
    let (raw, len) = to_raw(addr);
    // SAFETY: `raw` holds `len` bytes of an address.
    check(unsafe { windows_sys::Win32::Networking::WinSock::bind(s, (&raw const raw).cast(), len) })
}

/// A socket option of type `T` (`setsockopt`).
pub(crate) fn set_option<T: Copy>(s: SOCKET, level: i32, name: i32, value: T) -> io::Result<()> {
    // SAFETY: `value` is `size_of::<T>()` readable bytes, the option's type.
    check(unsafe { setsockopt(s, level, name, (&raw const value).cast(), size_of::<T>() as i32) })
}

/// A socket option of type `T` (`getsockopt`).
pub(crate) fn option<T: Copy + Default>(s: SOCKET, level: i32, name: i32) -> io::Result<T> {
    let mut value = T::default();
    let mut len = size_of::<T>() as i32;
    // SAFETY: `value` has room for `len` bytes, the option's type.
    check(unsafe { getsockopt(s, level, name, (&raw mut value).cast(), &mut len) })?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row's Win32 error is the one the system gives its status, and
    /// a completion with it reads as the row's Winsock error.
    #[test]
    fn completion_errors_follow_the_status_they_come_from() {
        use windows_sys::Win32::Foundation::RtlNtStatusToDosError;
        let mut wrong = Vec::new();
        for row in COMPLETION_ERRORS {
            // SAFETY: no preconditions.
            let win32 = unsafe { RtlNtStatusToDosError(row.status) };
            let e = completion_error(io::Error::from_raw_os_error(row.win32 as i32));
            if win32 != row.win32 || e.raw_os_error() != Some(row.winsock) {
                wrong.push((row.status as u32, win32, e.raw_os_error()));
            }
        }
        assert!(wrong.is_empty(), "(status, its Win32 error, the Winsock error given): {wrong:x?}");
        let cancelled = completion_error(io::Error::from_raw_os_error(995));
        assert_eq!(cancelled.raw_os_error(), Some(995), "a cancellation stays ERROR_OPERATION_ABORTED");
    }

    /// No Win32 error has two rows: the first would hide the second.
    #[test]
    fn each_win32_error_has_one_row() {
        for (i, a) in COMPLETION_ERRORS.iter().enumerate() {
            assert!(COMPLETION_ERRORS[i + 1..].iter().all(|b| b.win32 != a.win32), "{} twice", a.win32);
        }
    }
}
