//! The file family: reads and writes of files and pipes, issued as
//! `NtReadFile`/`NtWriteFile` so that a warning status is not mistaken for
//! a failure (see the I/O module's docs).

use core::ffi::c_void;
use std::io;

use windows_sys::Wdk::Storage::FileSystem::{NtReadFile, NtWriteFile};
use windows_sys::Win32::Foundation::{ERROR_BROKEN_PIPE, ERROR_HANDLE_EOF, HANDLE, NTSTATUS, STATUS_PENDING};
use windows_sys::Win32::System::IO::{IO_STATUS_BLOCK, OVERLAPPED};

use super::{AsyncOp, BufPtr, BufferFor, Issued, classify_skipping, transfer_at};
use crate::io::handles::issue_status;

/// A read's result: end of file (`ERROR_HANDLE_EOF`) and a pipe whose
/// writer has gone (`ERROR_BROKEN_PIPE`) read 0 bytes, as `std`'s reads do.
fn read_result(result: io::Result<usize>) -> io::Result<usize> {
    match result {
        Err(e) if matches!(e.raw_os_error(), Some(c) if c == ERROR_HANDLE_EOF as i32 || c == ERROR_BROKEN_PIPE as i32) => {
            Ok(0)
        }
        other => other,
    }
}

/// A read (`WRITE = false`) or write of a file or stream.
pub(crate) struct Transfer<B, const WRITE: bool> {
    buf: B,
    pub(crate) offset: u64,
    /// The buffer's pointer and length, taken by `prepare`.
    parts: (BufPtr, u32),
    /// The handle has skip-on-success: a synchronous success completes inline.
    inline: bool,
}

impl<B, const WRITE: bool> Transfer<B, WRITE> {
    /// A transfer at byte `offset` (0 for a pipe); `inline` when the handle
    /// has skip-on-success ([`skip_completion_port_on_success`](crate::io::handles::skip_completion_port_on_success)).
    pub(crate) fn new(buf: B, offset: u64, inline: bool) -> Self {
        Self { buf, offset, parts: (BufPtr::NULL, 0), inline }
    }
}

impl<B: BufferFor<WRITE> + Send + 'static, const WRITE: bool> AsyncOp for Transfer<B, WRITE> {
    type Output = (io::Result<usize>, B);

    fn prepare(&mut self) -> io::Result<()> {
        let (ptr, len) = transfer_at::<B, WRITE>(&mut self.buf, self.offset)?;
        self.parts = (BufPtr(ptr), len);
        Ok(())
    }

    unsafe fn issue(this: *mut Self, handle: HANDLE, ov: *mut OVERLAPPED) -> io::Result<Issued> {
        // SAFETY: read before the operation is issued (the caller's contract).
        let ((BufPtr(ptr), len), offset, inline) = unsafe { ((*this).parts, (*this).offset, (*this).inline) };
        // SAFETY: `ptr..ptr + len` is the buffer in `*this`, which stays in
        // place until the completion (the caller's contract).
        let status = unsafe { nt_read_write::<WRITE>(handle, ov, ptr, len, offset) };
        if inline {
            // SAFETY: read only when the call completed synchronously, so the
            // status block (`InternalHigh`: the bytes transferred) was written
            // before it returned; with no completion queued nothing touches
            // `ov` again.
            return classify_skipping(status, || unsafe { (*ov).InternalHigh });
        }
        issue_status(status).map(|()| Issued::Queued)
    }

    fn finish(self, result: io::Result<usize>) -> Self::Output {
        (if WRITE { result } else { read_result(result) }, self.buf)
    }
}

/// Issues one `NtReadFile` (`WRITE = false`) or `NtWriteFile` of `len`
/// bytes at `ptr`, at byte `offset`, with the completion context `ov`, on a
/// handle without skip-on-success; `Ok` exactly when a completion is queued
/// ([`issue_status`]).
///
/// # Safety
/// As [`nt_read_write`].
pub(crate) unsafe fn issue_read_write<const WRITE: bool>(
    handle: HANDLE,
    ov: *mut OVERLAPPED,
    ptr: *mut u8,
    len: u32,
    offset: u64,
) -> io::Result<()> {
    // SAFETY: the caller's contract.
    issue_status(unsafe { nt_read_write::<WRITE>(handle, ov, ptr, len, offset) })
}

/// Issues one `NtReadFile` (`WRITE = false`) or `NtWriteFile` of `len`
/// bytes at `ptr`, at byte `offset`, with the completion context `ov`;
/// returns the call's status.
///
/// # Safety
/// `ov` is a zeroed `OVERLAPPED` the caller owns until the completion, and
/// `ptr..ptr + len` memory that stays valid (and, for a read, unaliased)
/// until then; `handle` is open. `offset` passed [`transfer_at`]'s check.
unsafe fn nt_read_write<const WRITE: bool>(
    handle: HANDLE,
    ov: *mut OVERLAPPED,
    ptr: *mut u8,
    len: u32,
    offset: u64,
) -> NTSTATUS {
    // SAFETY: `ov` is the operation's zeroed OVERLAPPED, ours until issued.
    // `Internal` starts as STATUS_PENDING, as ReadFile leaves it; the offset
    // is recorded where ReadFile would have put it.
    unsafe {
        (*ov).Internal = STATUS_PENDING as usize;
        (*ov).Anonymous.Anonymous.Offset = offset as u32;
        (*ov).Anonymous.Anonymous.OffsetHigh = (offset >> 32) as u32;
    }
    let position = offset as i64;
    // The OVERLAPPED's `Internal` and `InternalHigh` are the request's
    // IO_STATUS_BLOCK, and its address the completion's context, as ReadFile
    // and WriteFile pass them.
    let iosb = ov.cast::<IO_STATUS_BLOCK>();
    let context = ov.cast_const().cast::<c_void>();
    let event = core::ptr::null_mut();
    if WRITE {
        trace_call!("NtWriteFile", handle, ov, {
            // SAFETY: the caller's contract; `position` is read before the
            // call returns.
            unsafe { NtWriteFile(handle, event, None, context, iosb, ptr.cast(), len, &position, core::ptr::null()) }
        })
    } else {
        trace_call!("NtReadFile", handle, ov, {
            // SAFETY: as above.
            unsafe { NtReadFile(handle, event, None, context, iosb, ptr.cast(), len, &position, core::ptr::null()) }
        })
    }
}
