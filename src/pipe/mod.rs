//! Named pipes whose operations complete on the pool: [`PipeListener`]
//! (the server) and [`PipeStream`] (a connected instance, on either side).
//!
//! ```
//! use windows_threadpool::pipe::{PipeListener, PipeStream};
//! use windows_threadpool::task;
//!
//! let name = format!(r"\\.\pipe\windows-threadpool-doc-{}", std::process::id());
//! let listener = PipeListener::bind(&name)?;
//! let server = task::spawn(async move {
//!     let stream = listener.accept().await?;
//!     assert_eq!(stream.client_process_id()?, std::process::id());
//!     let (n, buf) = stream.read(vec![0u8; 64]).await;
//!     let (sent, _) = stream.write_all(buf[..n?].to_vec()).await; // echo
//!     sent
//! });
//! task::block_on(async {
//!     let client = PipeStream::connect(&name).await?;
//!     let (sent, _) = client.write_all(b"hello".to_vec()).await;
//!     sent?;
//!     let (n, buf) = client.read(vec![0u8; 64]).await;
//!     assert_eq!(&buf[..n?], b"hello");
//!     server.await.unwrap()
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # One completion path
//! A pipe instance is an overlapped handle bound to a thread-pool I/O
//! object, as a socket is: the same engine, operation blocks, registry of
//! live operations, teardown and budget. Reads and writes are the file
//! family's (`NtReadFile`, `NtWriteFile`); the one operation of its own is
//! the server's wait for a client (`ConnectNamedPipe`'s request, issued as
//! `NtFsControlFile` with `FSCTL_PIPE_LISTEN`: `io::op::pipe`).
//! A byte-mode instance (either end) has skip-on-success, as a TCP socket
//! has: a read of data the pipe already holds, or a write it has room for,
//! completes at the future's first poll with no trip through the pool. A
//! message-mode one does not: a read of part of a message ends with a
//! warning, which Wine and older Windows return at once and Windows 8 and
//! later pend (Wine's `ntdll` pipe tests), so it completes through the
//! pool, the one path tested here for both.
//! The futures borrow the stream (`&self`), so one task can read while
//! another writes, and each takes a buffer and gives it back with its
//! result.
//!
//! # Always listening
//! A client that opens a pipe name when no instance of it exists fails
//! with `NotFound`. A listener therefore keeps one instance open and
//! listening from [`bind`](PipeListener::bind) on: an accept connects that
//! instance and, before it returns the connected stream, opens the next,
//! so there is no moment between two accepts with no instance (tokio's
//! server leaves that step to its user). A client that arrives while every
//! instance is connected sees `ERROR_PIPE_BUSY`, which
//! [`PipeStream::connect`] waits out. A client may open the listening
//! instance before anyone awaits an accept: the next accept returns it at
//! once.
//!
//! When the instance limit ([`PipeOptions::max_instances`]) is reached,
//! no next instance can be opened: the accept still returns its stream, and
//! the next accept waits until a connected instance is dropped (it tries
//! again on a pool timer, every 1 ms at first and at most every 50 ms: the
//! system gives no notice of an instance's close).
//!
//! # Errors and ends
//! - A read returns `Ok(0)` once the peer has closed its end (after the
//!   data it wrote before closing: closing a handle discards nothing); a
//!   read or write that is in flight when the peer closes ends then, a read
//!   with `Ok(0)`, a write with `BrokenPipe` (`ERROR_NO_DATA` or
//!   `ERROR_BROKEN_PIPE`). Neither hangs.
//! - In message mode ([`PipeOptions::message_mode`]) a read returns one
//!   message. A read into a buffer shorter than the message fills the
//!   buffer and fails with `ERROR_MORE_DATA` (234, as `ReadFile` does): the
//!   buffer comes back holding the message's start, and the next reads
//!   return the rest of it.
//! - An accept whose client came and went before the accept saw it
//!   (`ERROR_NO_DATA`) is not an error of the listener: that instance is
//!   closed and the accept goes on with a new one, as
//!   [`TcpListener::accept`](crate::net::TcpListener::accept) skips a reset
//!   connection.
//!
//! # Security
//! Instances reject remote clients (`PIPE_REJECT_REMOTE_CLIENTS`) unless
//! [`PipeOptions::accept_remote_clients`] says otherwise. Without a
//! security descriptor ([`PipeOptions::security_descriptor`], in SDDL) an
//! instance gets the system's default for named pipes: full control for
//! LocalSystem, administrators and the creator, read access for everyone
//! else (so another account's client can open it for reading only). A
//! service running as LocalSystem that its logged-on users' tools must
//! write to sets one (`D:(A;;GA;;;SY)(A;;GRGW;;;IU)`, say: everything for
//! the system, read and write for interactive users). A client opens the pipe for
//! identification only (`SECURITY_IDENTIFICATION`): the server can learn
//! who the client is, not act as it.
//!
//! # Teardown
//! Dropping a stream or a listener never blocks, by the rule of every
//! async type of the crate (see [`AsyncIo`](crate::io::AsyncIo#dropping)):
//! what is in flight is cancelled and the instance closed once its
//! completion has arrived. An accept future dropped after its first poll
//! cancels its wait and gives its instance back to the listener, still
//! listening: a client that connected at that moment is returned by the
//! next accept, not lost. A listener cannot be dropped while one of its
//! accepts is in flight: the future borrows it.
//!
//! ```compile_fail,E0505
//! use windows_threadpool::pipe::PipeListener;
//! let listener = PipeListener::bind(r"\\.\pipe\windows-threadpool-doc-borrow")?;
//! let accept = listener.accept();
//! drop(listener);
//! drop(accept);
//! # Ok::<(), std::io::Error>(())
//! ```

mod busy;
mod listener;
mod options;
mod stream;

pub use listener::{AcceptFuture, PipeListener};
pub use options::PipeOptions;
pub use stream::{DEFAULT_CONNECT_TIMEOUT, PipeStream};
