//! Thread-pool I/O (`TP_IO`): overlapped operations whose completions run a
//! callback on a pool thread.
//!
//! A [`Io`] binds an overlapped handle to the pool. Each operation
//! ([`read_at`](Io::read_at), [`write_at`](Io::write_at),
//! [`read`](Io::read), [`write`](Io::write), or any other
//! overlapped call through [`submit`](Io::submit)) delivers exactly
//! one [`IoCompletion`] to the callback, unless it fails synchronously, in
//! which case the caller gets the error and its buffer back and the callback
//! never runs.
//!
//! ```
//! use std::sync::mpsc;
//! use windows_threadpool::io::{self, IoCompletion, Io};
//!
//! let path = std::env::temp_dir().join(format!("wtp-io-doc-{}", std::process::id()));
//! std::fs::write(&path, b"hello, pool")?;
//! let (tx, rx) = mpsc::channel();
//! let file = Io::new(
//!     io::open_file(&path, std::fs::OpenOptions::new().read(true))?,
//!     move |c: &IoCompletion| {
//!         let buf = c.claim::<Vec<u8>>().expect("a Vec<u8> read").into_payload();
//!         tx.send(c.result().map(|n| buf[..n].to_vec()).map_err(|e| e.kind())).unwrap();
//!     },
//! )?;
//! file.read_at(7, vec![0u8; 64])?;
//! assert_eq!(rx.recv().unwrap(), Ok(b"pool".to_vec()));
//! drop(file);
//! std::fs::remove_file(&path)?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Ownership
//! From the moment an operation is issued until its completion is delivered,
//! its `OVERLAPPED` and its buffer belong to the kernel. The crate owns both:
//! an operation is one heap block ([`Operation`]) holding the `OVERLAPPED`
//! (first, so the `OVERLAPPED*` a completion carries is the block's address)
//! and a payload `P` (the buffer, or anything the issuing call needs). The
//! caller hands the operation over and gets an [`OperationId`] back; the
//! callback can take the payload back with [`IoCompletion::claim`], which
//! checks the payload's type. A payload nobody claims is dropped when the
//! callback returns.
//!
//! # The start/cancel balance
//! `StartThreadpoolIo` must precede every operation, and be undone with
//! `CancelThreadpoolIo` when the operation fails synchronously (no completion
//! will arrive). The crate keeps one counter,
//! [`outstanding`](Io::outstanding): an operation counts from just
//! before its start until its completion has been delivered and its storage
//! freed, or until its synchronous failure has been balanced. That is both
//! the balance and what a rundown waits for.
//!
//! Which results queue a completion is decided by the `NTSTATUS` behind
//! them: the I/O manager queues one for every status that is not of the
//! error class (its two severity bits `0b11`), so success, `STATUS_PENDING`,
//! informational and warning statuses all do. Win32 calls report warnings
//! (`STATUS_BUFFER_OVERFLOW`, `STATUS_END_OF_MEDIA`, `STATUS_DEVICE_BUSY`,
//! ...) as `FALSE` with an ordinary error code, indistinguishable from a real
//! failure; treating one as a failure would free a block whose completion is
//! still coming. So the crate's own reads and writes are issued with
//! `NtReadFile` and `NtWriteFile`, which return the status itself, and
//! [`issue_status`] classifies it. These are documented calls (the WDK's
//! `NtReadFile`/`ZwReadFile` pages; user-mode code uses the `Nt` names);
//! `RtlGetLastNtStatus`, which would recover the status behind a Win32
//! call's last error, is not documented, and the `OVERLAPPED`'s `Internal`
//! cannot be read after a call that queued a completion (the completion may
//! already have freed the block). [`issue_result`] classifies a Win32 call
//! and is exact only where `ERROR_MORE_DATA` is the one possible warning.
//!
//! # Completions that are not ours
//! A completion port is bound to the file object, not to the handle: any
//! duplicate of the bound handle (made from its raw value, inherited by a
//! child process, handed to a library) that issues overlapped I/O sends its
//! completion to this object's port. The callback therefore trusts no
//! `OVERLAPPED`: it looks the address up among the object's outstanding
//! operations (an O(1) index by address inside the registry, under the one
//! lock acquisition the completion path takes anyway) and only then reads
//! the block. Anything else is recorded as `trampoline-foreign` and ignored:
//! the callback does not run, and neither `outstanding` nor the drain is
//! touched. The same look-up makes a second completion for an address that
//! was already delivered a foreign one.
//!
//! The guard keeps the crate's memory safe; it cannot repair the thread
//! pool's own count of started operations, which such I/O bypasses.
//! Microsoft documents I/O on the handle without `StartThreadpoolIo` as
//! corrupting the pool's state. Wine 8 drops a foreign packet when no start
//! is pending, and otherwise pairs it with one of the object's starts and
//! later drops that operation's own packet, which then never completes (a
//! rundown waits for it forever); see `docs/wine.md`. Issuing I/O on a
//! duplicate of the handle therefore stays unsupported. An address the
//! registry holds is trusted, so a foreign `OVERLAPPED` whose memory was
//! freed and reused for one of this object's blocks while its packet was
//! still queued cannot be told apart either.
//!
//! That last case is also reachable across processes, and then it is a
//! memory-safety hole rather than a hang: a duplicate inherited by a child
//! (for instance wrapped in `Stdio` for a spawned process) that issues
//! overlapped I/O posts packets carrying addresses from the child's address
//! space, and one that equals a live block's address would be delivered as
//! that block while the kernel still owns it. So safe code cannot reach the
//! handle: [`OverlappedHandle`] and [`Io`] lend only its raw value (no
//! `AsHandle`), the handles this module opens are not inheritable, and
//! [`OverlappedHandle::assume_overlapped`], the way in for other handles, is
//! `unsafe` with this in its contract. (Synchronous I/O through `std`, in
//! this process or a child, posts no packet.)
//!
//! A child's stdio therefore never shares our end's file object:
//! [`inbound_pipe`] and [`outbound_pipe`] bind the pipe's server end and
//! give the child its client end, which the kernel opens as a file object of
//! its own. A port is reached only through the file object it is bound to,
//! and the child (or anyone it passes its handle to) holds no handle to
//! ours: whatever I/O it issues, synchronous or overlapped, completes on the
//! client's object, which no port of ours is bound to. The client end can
//! then be an ordinary `PipeReader` or `PipeWriter`, lent and inherited
//! freely. (A client opened by name reaches a server instance, each a file
//! object of its own; the pipe admits one, ours, and it is connected.)
//!
//! # Operation ids
//! A block's address is reused once a completion frees it, so an
//! [`OperationId`] carries a process-wide generation as well as the address.
//! [`cancel`](Io::cancel) looks the id up in a registry of
//! outstanding operations and calls `CancelIoEx` only if the live operation at
//! that slot has the same address and generation, all under the registry's
//! lock, which the completion path takes before it frees a block. A stale id
//! is rejected rather than cancelling whatever now lives at its address. The
//! registry grows to the largest number of operations outstanding at once and
//! is reused after that: issuing allocates only the operation's block.
//!
//! # Teardown
//! `Drop` runs down (cancels everything outstanding with `CancelIoEx` and
//! waits, on a condition variable, until every completion has been delivered),
//! drains the callbacks (`WaitForThreadpoolIoCallbacks(.., FALSE)`, never
//! cancelling queued callbacks), closes the handle, then closes the `TP_IO`:
//! `CloseThreadpoolIo` asks for the handle to be closed and outstanding I/O
//! finished before it is called, and for no I/O to be caused after. A pipe
//! read nobody will ever satisfy cannot hang teardown.
//!
//! The callback may drop the last owner of its own I/O object: the teardown
//! (rundown included) then runs on another thread and completes once the
//! callback has returned. `run_down`, `stop_and_drain` and `wait` called
//! from the object's own callback panic: they would wait for themselves (see
//! the [crate docs](crate#a-callback-that-reaches-its-own-object)).
//!
//! `WaitForThreadpoolIoCallbacks` also waits for every started operation
//! whose completion has not arrived (measured under Wine; correct whether or
//! not Windows does the same), so the drain runs only once nothing is
//! outstanding, while submissions are held off: a start racing it would make
//! it wait for that operation.
//!
//! `TP_IO` objects are deliberately not cleanup-group members: a `TP_IO` must
//! not be closed while an operation is outstanding, which a bulk
//! `CloseThreadpoolCleanupGroupMembers` cannot guarantee.
//!
//! # Handles
//! A handle must be opened for overlapped I/O, not already be bound to a
//! completion port, and not have skip-on-success
//! (`FILE_SKIP_COMPLETION_PORT_ON_SUCCESS`) set, or completions go missing
//! and the balance breaks. [`open_file`], [`pipe_pair`], [`inbound_pipe`]
//! and [`outbound_pipe`] return an [`OverlappedHandle`] that is known to
//! satisfy this; any other handle goes through the unsafe
//! [`OverlappedHandle::assume_overlapped`], or
//! [`OverlappedHandle::try_from_owned`], which checks that the handle is
//! overlapped and not inheritable first (a child's stdio: use
//! [`process`](crate::process), or [`inbound_pipe`] and [`outbound_pipe`]).
//!
//! [`AsyncIo`] sets skip-on-success itself as it binds its handle (once;
//! not on a message-type pipe, see
//! [One completion path](crate::pipe#one-completion-path)), as the sockets
//! and named pipes do: a read of data a pipe holds, a write a pipe has room
//! for, or on Windows a file read its cache answers, finishes at the
//! future's first poll with no completion. Wine answers every file read on
//! a bound handle through the port, so under Wine pipes carry that path's
//! tests.
//!
//! # Async I/O
//! [`AsyncIo`] wraps an `Io` whose reads and writes are futures, completion
//! based as in io_uring runtimes: each takes its buffer by value and
//! resolves to the result and the buffer, so the kernel never writes into
//! memory the caller still holds. A future issues its operation at its first
//! poll; the object's one callback claims the payload, publishes the result
//! and the buffer to the future's shared state, and wakes the latest poll's
//! waker once. A read's end of file (and a pipe whose writer has gone)
//! resolves to `Ok(0)`. A child process's stdin, stdout and stderr are
//! [`process`](crate::process)'s, or pipes made by [`outbound_pipe`] and
//! [`inbound_pipe`].
//!
//! The futures borrow the `AsyncIo`, so it cannot be dropped under them.
//! Dropping an unfinished future cancels its operation (`CancelIoEx`, which
//! does not wait) and leaves the buffer with the crate: the cancelled
//! completion frees it once the kernel is done.
//!
//! Dropping the `AsyncIo` never waits for a completion (see
//! [`AsyncIo`'s docs](AsyncIo#dropping)): it may run on an executor's thread, or in a task
//! on a pool whose only thread it holds, where the cancelled completion of a
//! future dropped a moment before still needs that thread. With operations
//! in flight, they are cancelled and the completion that ends the last of
//! them drops the object from its callback (the engine's "teardown without
//! waiting"). An [`Io`] itself drains in its drop,
//! [`run_down`](Io::run_down) and [`stop_and_drain`](Io::stop_and_drain):
//! called from a callback of another object on the same pool while every
//! thread of that pool is busy (a pool with a maximum of one thread, from
//! any of its callbacks), that drain waits for a completion that needs one
//! of those threads, and never returns.
//!
//! The callback is one closure for the whole object, and every kind of
//! operation finishes through its block's header, so one block holds all
//! of an operation: the buffer, the output and what the future shares with
//! the completion. The object keeps the blocks of finished operations for
//! the next ones, so in steady state an operation allocates nothing
//! (`tests/async_io.rs`, `tests/alloc.rs`).
//!
//! Wine 8 answers every overlapped file read on a bound handle with
//! `ERROR_IO_PENDING`, even one past the end of the file, whose completion
//! then carries `ERROR_HANDLE_EOF`; Windows usually fails such a read
//! synchronously. Either way it surfaces as an error (see `docs/wine.md`).

#[cfg(any(feature = "futures-io", feature = "tokio", feature = "hyper"))]
pub(crate) mod compat;
pub(crate) mod engine;
mod future;
pub(crate) mod handles;
pub(crate) mod iocore;
mod kept;
mod object;
pub(crate) mod op;
mod operation;
mod registry;
#[cfg(test)]
mod tests;

#[cfg(any(feature = "futures-io", feature = "tokio", feature = "hyper"))]
pub use compat::{Compat, CompatIo, ReadHalf, ReuniteError, WriteHalf};
#[cfg(any(test, feature = "test-hooks"))]
pub use engine::async_completions;
pub use future::{AsyncIo, ReadFuture, WriteFuture};
pub use handles::{
    OverlappedHandle, inbound_pipe, issue_result, issue_status, open_file, open_file_with_flags, outbound_pipe,
    pipe_pair,
};
pub use object::Io;
#[cfg(any(test, feature = "test-hooks"))]
pub use operation::live_operations;
pub use operation::{IoCompletion, Operation, OperationId, SubmitError};
