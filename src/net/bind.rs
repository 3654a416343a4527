//! Binding a socket to the pool: the checks a socket passes first and
//! whether it may skip the completion port on success.

use std::io;
use std::os::windows::io::{AsRawSocket, OwnedSocket};

use windows_sys::Win32::Foundation::HANDLE;

use crate::callback_env::CallbackEnviron;
use crate::io::engine::Unblocking;
use crate::sys::winsock::ifs_provider;

/// Refuses a socket that was not created for overlapped I/O (its file
/// object has synchronous I/O, `FileModeInformation`): `std`'s
/// `From<OwnedSocket>` can wrap any socket, and overlapped calls on a
/// synchronous one would complete in ways the start/cancel balance does
/// not expect.
pub(crate) fn require_overlapped(socket: &OwnedSocket) -> io::Result<()> {
    if crate::io::handles::synchronous_io(socket.as_raw_socket() as HANDLE)? {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "the socket was not created for overlapped I/O"));
    }
    Ok(())
}

/// What a socket carries, which decides whether it may skip the completion
/// port on success.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Transport {
    /// A stream socket (TCP): skip-on-success where the provider is IFS.
    Stream,
    /// A datagram socket (UDP): never skip-on-success. Every Windows with
    /// `SetFileCompletionNotificationModes` has a bug that makes the flag
    /// unusable with datagram sockets (libuv, `src/win/udp.c`,
    /// `uv_udp_set_socket`): a `WSARecvFrom` that truncates a datagram
    /// fails with `WSAEMSGSIZE` and does not reliably tell whether a
    /// completion follows. libuv gets round it only through an undocumented
    /// AFD ioctl, so here every datagram operation completes through the
    /// pool.
    Datagram,
}

/// Binds an overlapped socket to the pool, with skip-on-success where
/// `transport` and Winsock allow it; returns the engine and whether a
/// synchronous success completes inline (queues no completion).
pub(crate) fn bind_socket(
    socket: OwnedSocket,
    transport: Transport,
    env: Option<&CallbackEnviron>,
) -> io::Result<(Unblocking, bool)> {
    let inline = transport == Transport::Stream && ifs_provider(&socket)?;
    if inline {
        crate::io::handles::skip_completion_port_on_success(socket.as_raw_socket() as HANDLE)?;
    }
    Ok((Unblocking::bind_socket(socket, env)?, inline))
}
