//! The operation layer: what one overlapped operation is, whatever its
//! handle, and the helpers every family shares. The engine
//! ([`super::engine`]) runs an [`AsyncOp`]; each family of handles says in
//! one file how its calls are issued and classified:
//!
//! - `fs`: reads and writes of files and pipes (`NtReadFile`,
//!   `NtWriteFile`), classified by their `NTSTATUS`
//!   ([`issue_status`](super::issue_status));
//! - `socket`: Winsock's accept, connect, send and receive (`AcceptEx`,
//!   `ConnectEx`, `WSASend`, `WSARecv` and the datagram forms), classified
//!   by `classify` there;
//! - `pipe`: a named-pipe server instance's wait for its client
//!   (`FSCTL_PIPE_LISTEN`, `ConnectNamedPipe`'s request, as `NtFsControlFile`).
//!
//! A new family of handles adds one file here and nothing else: the engine, the object and the futures stay as they are.
//! Nothing here imports the engine or the I/O object, so families and
//! engine meet only through [`AsyncOp`] and [`Issued`].

use std::io;

use windows_sys::Win32::Foundation::{HANDLE, NTSTATUS, RtlNtStatusToDosError, STATUS_PENDING};
use windows_sys::Win32::System::IO::OVERLAPPED;

pub(crate) mod fs;
pub(crate) mod pipe;
pub(crate) mod socket;

/// One kind of async operation.
pub(crate) trait AsyncOp: Send + 'static {
    /// What the future resolves to.
    type Output: Send + 'static;

    /// Checks the operation before anything is started (user code, such as
    /// a buffer's `AsMut`, may run here).
    fn prepare(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Issues the operation on `handle` with `ov`.
    ///
    /// A raw pointer, not `&mut self`: once the issuing call has queued a
    /// completion, a pool thread may finish and free the operation before
    /// that call has even returned here, so no reference to it may live
    /// across the call.
    ///
    /// # Safety
    /// `this` points to the operation, prepared, at a fixed address (in its
    /// block) until the completion, and `ov` is the block's zeroed
    /// `OVERLAPPED`. The implementation must read what it needs of `*this`
    /// before the issuing call and touch nothing of it after; issue at most
    /// one overlapped operation, on `handle` with `ov`, passing the kernel
    /// only memory inside `*this` (through raw projections) or memory that
    /// outlives the call and is not read after it, for outputs the kernel
    /// writes only before the call returns (a byte count); and classify it
    /// as [`IoCore::submit_op`](crate::io::iocore::IoCore::submit_op) requires.
    unsafe fn issue(this: *mut Self, handle: HANDLE, ov: *mut OVERLAPPED) -> io::Result<Issued>;

    /// The output for the operation's result: its completion's, an inline
    /// completion's byte count, or the error it failed with synchronously.
    fn finish(self, result: io::Result<usize>) -> Self::Output;
}

/// What issuing an operation did, when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Issued {
    /// A completion will be queued for it.
    Queued,
    /// It completed synchronously, transferring this many bytes, and no
    /// completion will be queued: a success on a handle with
    /// skip-on-success, or a status of the error class that means success
    /// (`STATUS_PIPE_CONNECTED`).
    Completed(usize),
}

/// Classifies the status an overlapped `Nt*` call returned on a handle
/// with skip-on-success, where a request that does not pend queues no
/// completion, whatever its status (the I/O manager skips the port for a
/// synchronous completion of any status outside the error class; errors
/// never queue one):
/// - `STATUS_PENDING`: a completion will be queued;
/// - a success (`NT_SUCCESS`: the success and informational classes):
///   completed, `information()` bytes transferred (the status block's
///   `Information`, written before the call returned);
/// - a warning (`STATUS_BUFFER_OVERFLOW`: a message longer than the
///   buffer, which holds its start) or an error: failed synchronously, with
///   the status as a Win32 error.
pub(crate) fn classify_skipping(status: NTSTATUS, information: impl FnOnce() -> usize) -> io::Result<Issued> {
    if status == STATUS_PENDING {
        Ok(Issued::Queued)
    } else if status >= 0 {
        Ok(Issued::Completed(information()))
    } else {
        // SAFETY: a pure conversion. The thread's last error is left alone.
        Err(io::Error::from_raw_os_error(unsafe { RtlNtStatusToDosError(status) } as i32))
    }
}

/// A pointer into an operation's own buffer, taken by its `prepare`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BufPtr(pub(crate) *mut u8);

// SAFETY: it points into the buffer of the operation holding it, which is
// `Send` with it, and is used only by the thread that issues the operation.
unsafe impl Send for BufPtr {}

impl BufPtr {
    pub(crate) const NULL: Self = Self(core::ptr::null_mut());
}

/// A buffer the safe operations can read into (`WRITE = false`, needs
/// `AsMut<[u8]>`) or write from (`WRITE = true`, needs `AsRef<[u8]>`).
pub(crate) trait BufferFor<const WRITE: bool> {
    fn raw_parts(&mut self) -> (*mut u8, usize);
}

impl<B: AsMut<[u8]>> BufferFor<false> for B {
    fn raw_parts(&mut self) -> (*mut u8, usize) {
        let s = self.as_mut();
        (s.as_mut_ptr(), s.len())
    }
}

impl<B: AsRef<[u8]>> BufferFor<true> for B {
    fn raw_parts(&mut self) -> (*mut u8, usize) {
        let s = self.as_ref();
        // The kernel only reads through a write's pointer.
        (s.as_ptr().cast_mut(), s.len())
    }
}
/// A buffer's pointer and length for one transfer; a buffer longer than
/// one call can transfer is `InvalidInput`.
pub(crate) fn transfer_parts<B: BufferFor<WRITE>, const WRITE: bool>(b: &mut B) -> io::Result<(*mut u8, u32)> {
    let (ptr, len) = b.raw_parts();
    let len = u32::try_from(len).map_err(|_| {
        io::Error::new(io::ErrorKind::InvalidInput, "a single read or write transfers at most u32::MAX bytes")
    })?;
    Ok((ptr, len))
}

/// A buffer's pointer and length for one transfer on a stream socket, where
/// a short transfer is an ordinary outcome: a buffer longer than one call
/// can transfer gives its first `u32::MAX` bytes, and the caller goes on
/// from there (as std's `write` does on Windows), so a `write_all` of any
/// length works.
pub(crate) fn stream_parts<B: BufferFor<WRITE>, const WRITE: bool>(b: &mut B) -> (*mut u8, u32) {
    let (ptr, len) = b.raw_parts();
    (ptr, u32::try_from(len).unwrap_or(u32::MAX))
}

/// [`transfer_parts`] for a transfer at byte `offset` of a file; an offset
/// of 2^63 or more is `InvalidInput`: `NtReadFile`/`NtWriteFile` take it as
/// a signed position, whose negative values name other requests (-1 is
/// `FILE_WRITE_TO_END_OF_FILE`, -2 the file pointer's position).
pub(crate) fn transfer_at<B: BufferFor<WRITE>, const WRITE: bool>(
    b: &mut B,
    offset: u64,
) -> io::Result<(*mut u8, u32)> {
    if i64::try_from(offset).is_err() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a file offset is at most i64::MAX"));
    }
    transfer_parts::<B, WRITE>(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer that only reports a pointer and a length (never read).
    struct Claimed(usize);

    impl<const WRITE: bool> BufferFor<WRITE> for Claimed {
        fn raw_parts(&mut self) -> (*mut u8, usize) {
            (core::ptr::NonNull::dangling().as_ptr(), self.0)
        }
    }

    #[test]
    fn a_stream_transfer_longer_than_one_call_takes_its_first_u32_max_bytes() {
        let huge = u32::MAX as usize + 10;
        assert_eq!(stream_parts::<_, true>(&mut Claimed(huge)).1, u32::MAX);
        assert_eq!(stream_parts::<_, false>(&mut Claimed(huge)).1, u32::MAX);
        assert_eq!(stream_parts::<_, true>(&mut Claimed(7)).1, 7);
        let e = transfer_parts::<_, true>(&mut Claimed(huge)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    /// On a skip-on-success handle only a pending request queues a
    /// completion: a success completes with the status block's byte count,
    /// a warning (its bytes in the buffer) or an error fails synchronously.
    #[test]
    fn on_a_skipping_handle_only_a_pending_request_is_queued() {
        use windows_sys::Win32::Foundation::{
            ERROR_BROKEN_PIPE, ERROR_MORE_DATA, STATUS_BUFFER_OVERFLOW, STATUS_PIPE_BROKEN, STATUS_SUCCESS,
        };
        assert_eq!(classify_skipping(STATUS_PENDING, || unreachable!()).unwrap(), Issued::Queued);
        for success in [STATUS_SUCCESS, 0x4000_0000, 0x7FFF_FFFF] {
            assert_eq!(classify_skipping(success, || 5).unwrap(), Issued::Completed(5), "{success:#x}");
        }
        for (status, win32) in [(STATUS_BUFFER_OVERFLOW, ERROR_MORE_DATA), (STATUS_PIPE_BROKEN, ERROR_BROKEN_PIPE)] {
            let e = classify_skipping(status, || unreachable!()).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(win32 as i32), "{status:#x}");
        }
    }

    #[test]
    fn a_file_offset_beyond_i64_max_is_invalid_input() {
        for offset in [1 << 63, u64::MAX, u64::MAX - 1] {
            let e = transfer_at::<_, true>(&mut Claimed(1), offset).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{offset}");
        }
        assert_eq!(transfer_at::<_, false>(&mut Claimed(3), i64::MAX as u64).unwrap().1, 3);
    }
}
