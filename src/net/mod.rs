//! TCP and UDP sockets whose operations complete on the pool:
//! [`TcpListener`], [`TcpStream`], [`UdpSocket`].
//!
//! Each socket is an overlapped Winsock socket bound to a thread-pool I/O
//! object (`CreateThreadpoolIo`, as IIS and .NET bind theirs), and each
//! operation a future with an owned buffer, as [`AsyncIo`](crate::io::AsyncIo)'s:
//! it takes the buffer and gives it back with the result, so the kernel
//! never writes into memory the caller still holds. The futures work under
//! any executor; they borrow the socket (`&self`), so one task can read
//! while another writes.
//!
//! ```
//! use windows_threadpool::net::{TcpListener, TcpStream};
//! use windows_threadpool::task;
//!
//! let listener = TcpListener::bind("127.0.0.1:0")?;
//! let addr = listener.local_addr()?;
//! let server = task::spawn(async move {
//!     let (stream, _peer) = listener.accept().await?;
//!     let (n, buf) = stream.read(vec![0u8; 64]).await;
//!     let (sent, _) = stream.write_all(buf[..n?].to_vec()).await; // echo
//!     sent
//! });
//! task::block_on(async {
//!     let stream = TcpStream::connect(addr).await?;
//!     stream.set_nodelay(true)?;
//!     let (sent, _) = stream.write_all(b"hello".to_vec()).await;
//!     sent?;
//!     let (n, buf) = stream.read(vec![0u8; 64]).await;
//!     assert_eq!(&buf[..n?], b"hello");
//!     server.await.unwrap()
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The whole surface in one piece: a stream, its options and its
//! shutdown, beside a datagram each way.
//!
//! ```
//! use windows_threadpool::net::{TcpListener, TcpStream, UdpSocket};
//! use windows_threadpool::task;
//!
//! task::block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0")?;
//!     let addr = listener.local_addr()?;
//!     let (connected, accepted) = futures::join!(TcpStream::connect(addr), listener.accept());
//!     let (stream, (server, peer)) = (connected?, accepted?);
//!     assert_eq!(peer, stream.local_addr()?);
//!     stream.set_nodelay(true)?;
//!     let (res, buf) = stream.write(b"ping".to_vec()).await;
//!     assert_eq!(res?, 4);
//!     let (res, buf) = server.read(buf).await; // the buffer comes back
//!     assert_eq!(&buf[..res?], b"ping");
//!     let (res, _) = stream.write_all(buf).await;
//!     res?;
//!     stream.shutdown(std::net::Shutdown::Write)?;
//!     let (res, _) = server.read(vec![0u8; 4096]).await;
//!     assert!(res? > 0); // the rest, then end of file
//!
//!     let udp = UdpSocket::bind("127.0.0.1:0")?;
//!     let to = udp.local_addr()?;
//!     let (res, _) = udp.send_to(b"datagram".to_vec(), to).await;
//!     assert_eq!(res?, 8);
//!     let (res, buf) = udp.recv_from(vec![0u8; 1500]).await;
//!     let (n, from) = res?;
//!     assert_eq!((&buf[..n], from), (&b"datagram"[..], to));
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # One completion path, completing in place
//! The sockets use the I/O object's machinery as it is: the operation
//! blocks, the registry that ignores foreign and stale `OVERLAPPED`s, the
//! trampoline, and the teardown. What differs is the issuing call
//! (`WSARecv`, `WSASend`, `AcceptEx`, `ConnectEx`, `WSARecvFrom`,
//! `WSASendTo`) and one flag: where a *stream* socket's Winsock provider is
//! an IFS provider (`XP1_IFS_HANDLES` in its `SO_PROTOCOL_INFOW`, the
//! condition Microsoft documents: a layered provider that is not may still
//! queue a completion for a synchronous success), the socket gets
//! `FILE_SKIP_COMPLETION_PORT_ON_SUCCESS` and
//! `FILE_SKIP_SET_EVENT_ON_HANDLE`. An operation that succeeds at once
//! (buffered data, most sends) then queues no completion: the future's first
//! poll finishes it and is ready, with no hand-off to a pool thread, and the
//! operation's `StartThreadpoolIo` is balanced with `CancelThreadpoolIo` in
//! the one function that does so for every path with no completion to come.
//!
//! Datagram sockets ([`UdpSocket`]) never get the flags: every one of their
//! operations completes through the pool. Every Windows that has
//! `SetFileCompletionNotificationModes` has a bug with datagram sockets
//! (libuv records it in `src/win/udp.c`): a receive that truncates a
//! datagram (`WSAEMSGSIZE`) does not reliably say whether a completion
//! packet follows, and a packet that came after the operation was finished
//! inline would land on whatever operation next used its address. libuv
//! works round it only through an undocumented AFD ioctl, which this crate
//! does not use. A truncating receive's completion carries `WSAEMSGSIZE`.
//!
//! # Errors
//! Errors are `io::Error`s carrying the Winsock code, as std's are, so its
//! kinds apply (`WSAECONNRESET` is `ConnectionReset`, `WSAECONNREFUSED`
//! `ConnectionRefused`). A completion reports a Win32 status; it is given as
//! the Winsock code `WSAGetOverlappedResult` would report
//! (`ERROR_NETNAME_DELETED` as `WSAECONNRESET`, `ERROR_CONNECTION_REFUSED`
//! as `WSAECONNREFUSED`, `ERROR_MORE_DATA` as `WSAEMSGSIZE`, ...). A
//! cancelled operation is `ERROR_OPERATION_ABORTED` (995), as for files.
//!
//! An error that one client causes never ends a listener:
//! [`TcpListener::accept`] skips a connection that died before it was
//! accepted (reset, aborted, or, under Wine, `ERROR_UNEXP_NET_ERR` for it) and
//! waits for the next, so what an accept loop sees is the listener's own
//! trouble or the system's (out of sockets or memory), which a server
//! outlives by waiting a moment and accepting again (as the accept loop of
//! `examples/http_server` does).
//!
//! # Teardown
//! A future dropped after its first poll cancels its operation
//! (`CancelIoEx`) without waiting; its buffer is freed when the cancelled
//! completion arrives. A socket is dropped without blocking, by the rule of
//! every async wrapper over a pool object (see
//! [`AsyncIo`](crate::io::AsyncIo#dropping)): with nothing in flight it is
//! closed in place; otherwise what is in flight is cancelled and the
//! completion that ends the last of it closes the socket (`closesocket`)
//! from its callback. No thread waits for a completion, so closing 1,000
//! idle connections at once parks no pool thread.
//!
//! # From std
//! `from_std` takes a socket of `std::net`, which std creates overlapped
//! and not inheritable (`WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT`)
//! and on which it issues only synchronous calls. A socket that was not
//! created overlapped (`std`'s `From<OwnedSocket>` wraps any) is refused
//! with `InvalidInput`: its file object has synchronous I/O
//! (`FileModeInformation`). Binding an overlapped one is sound: the value
//! is moved in, so no `std` handle to it remains but
//! a clone made earlier (`try_clone`), and a synchronous call on such a
//! clone passes no `OVERLAPPED` of this crate's, so any completion it could
//! cause names an address that is not one of the socket's live operations
//! and is ignored (see [Completions that are not
//! ours](crate::io#completions-that-are-not-ours); two live allocations of
//! one process never share an address). Issuing I/O through such a clone
//! is still unsupported. The sockets lend only their raw value
//! (`AsRawSocket`), not `AsSocket`, for the reason [`Io`](crate::io::Io)
//! lends no `AsHandle`.
//!
//! # Into std
//! `into_std` gives a socket back as std's type. It first runs the socket
//! down: an operation a dropped or forgotten future left behind is
//! cancelled and its completion waited for, so, like
//! [`Io::run_down`](crate::io::Io::run_down), it blocks until a pool thread
//! has delivered them (from a callback of a pool whose other threads are
//! all busy, that deadlocks; with every future resolved there is nothing
//! to wait for). It then ends the socket's association with the pool's
//! completion port (`NtSetInformationFile` with
//! `FileReplaceCompletionInformation` and no port, Windows 8.1 and later)
//! before closing the I/O object: still associated, the socket would let
//! any overlapped operation issued on it later, by code holding the std
//! socket, queue a completion for an object that no longer exists. Where
//! the association cannot be ended (Wine 8 does not implement the call),
//! the conversion fails with an [`IntoStdError`] that gives the socket
//! back, still bound and usable.
//!
//! The skip flags set at binding a stream socket
//! (`FILE_SKIP_COMPLETION_PORT_ON_SUCCESS`, `FILE_SKIP_SET_EVENT_ON_HANDLE`)
//! cannot be cleared and stay on the returned socket. std's synchronous calls do not depend on them; code
//! that binds the socket to a completion port again must expect a
//! synchronous success to queue no completion.
//!
//! Winsock is started once per process (`WSAStartup`, never cleaned up, as
//! std does lazily).

pub(crate) mod bind;
#[cfg(any(feature = "futures-io", feature = "tokio", feature = "hyper"))]
mod compat;
mod futures;
mod tcp;
mod udp;

pub use futures::{IntoStdError, RecvFromFuture, SendToFuture, TcpReadFuture, TcpReadableFuture, TcpWriteFuture};
pub use tcp::{AcceptFuture, Keepalive, TcpListener, TcpStream};
pub use udp::UdpSocket;

/// Whether a TCP socket over IPv4 completes synchronous successes inline
/// (its provider is an IFS provider). A datagram socket never does (see
/// [the module docs](self#one-completion-path-completing-in-place)). A test
/// hook, not API.
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub fn completes_inline() -> std::io::Result<bool> {
    use crate::sys::winsock as sys;
    use windows_sys::Win32::Networking::WinSock::{AF_INET, IPPROTO_TCP, SOCK_STREAM};
    sys::winsock()?;
    sys::ifs_provider(&sys::new_socket(AF_INET, SOCK_STREAM, IPPROTO_TCP)?)
}
