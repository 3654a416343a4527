//! The named-pipe family: a server instance's wait for its client
//! (`FSCTL_PIPE_LISTEN`, the request `ConnectNamedPipe` makes, issued as
//! `NtFsControlFile` so that its status is classified exactly, as the file
//! family's reads and writes are). Reads and writes of a connected instance
//! are the file family's.

use std::io;

use windows_sys::Wdk::Storage::FileSystem::{FSCTL_PIPE_LISTEN, NtFsControlFile};
use windows_sys::Win32::Foundation::{HANDLE, NTSTATUS, STATUS_PENDING, STATUS_PIPE_CONNECTED};
use windows_sys::Win32::System::IO::{IO_STATUS_BLOCK, OVERLAPPED};

use super::{AsyncOp, Issued, classify_skipping};
use crate::io::handles::issue_status;

/// Waits for a client to open the server instance it is issued on; `true`
/// when the instance has skip-on-success.
pub(crate) struct Listen(pub(crate) bool);

/// Classifies the status of an overlapped `FSCTL_PIPE_LISTEN`:
/// - `STATUS_PIPE_CONNECTED` (a client opened the instance before the
///   request; `ConnectNamedPipe`'s `ERROR_PIPE_CONNECTED`, which its
///   documentation calls a good connection) is of the error class, so no
///   completion is queued: connected at once;
/// - on an instance with skip-on-success (`inline`), any other status is
///   classified by [`classify_skipping`]: only a pending request queues a
///   completion;
/// - without it, by [`issue_status`]: a completion is queued for every
///   status outside the error class;
/// - either way an error (`STATUS_PIPE_CLOSING`, `ERROR_NO_DATA`: a client
///   came and went before the request) fails with no completion.
pub(crate) fn classify_listen(status: NTSTATUS, inline: bool) -> io::Result<Issued> {
    if status == STATUS_PIPE_CONNECTED {
        return Ok(Issued::Completed(0));
    }
    if inline {
        return classify_skipping(status, || 0);
    }
    issue_status(status).map(|()| Issued::Queued)
}

impl AsyncOp for Listen {
    type Output = io::Result<()>;

    unsafe fn issue(this: *mut Self, handle: HANDLE, ov: *mut OVERLAPPED) -> io::Result<Issued> {
        // SAFETY: read before the operation is issued (the caller's contract).
        let inline = unsafe { (*this).0 };
        // SAFETY: `ov` is the operation's zeroed OVERLAPPED, ours until
        // issued; `Internal` starts as STATUS_PENDING, as the Win32 calls
        // leave it.
        unsafe { (*ov).Internal = STATUS_PENDING as usize };
        let iosb = ov.cast::<IO_STATUS_BLOCK>();
        let context = ov.cast_const().cast();
        let status = trace_call!("NtFsControlFile", handle, ov, {
            // SAFETY: `ov` (and the IO_STATUS_BLOCK at its start) stays in
            // its block until the completion (the caller's contract);
            // `handle` is the open server instance; the request takes no
            // buffers.
            unsafe {
                NtFsControlFile(
                    handle,
                    core::ptr::null_mut(),
                    None,
                    context,
                    iosb,
                    FSCTL_PIPE_LISTEN,
                    core::ptr::null(),
                    0,
                    core::ptr::null_mut(),
                    0,
                )
            }
        });
        classify_listen(status, inline)
    }

    fn finish(self, result: io::Result<usize>) -> Self::Output {
        result.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use windows_sys::Win32::Foundation::{
        ERROR_MORE_DATA, ERROR_NO_DATA, ERROR_PIPE_CONNECTED, STATUS_BUFFER_OVERFLOW, STATUS_PIPE_CLOSING,
        STATUS_SUCCESS,
    };

    #[test]
    fn a_listen_is_queued_connected_at_once_or_failed() {
        for queued in [STATUS_PENDING, STATUS_SUCCESS, STATUS_BUFFER_OVERFLOW] {
            assert_eq!(classify_listen(queued, false).unwrap(), Issued::Queued, "{queued:#x}");
        }
        for inline in [false, true] {
            assert_eq!(classify_listen(STATUS_PIPE_CONNECTED, inline).unwrap(), Issued::Completed(0));
            let e = classify_listen(STATUS_PIPE_CLOSING, inline).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(ERROR_NO_DATA as i32));
            assert_ne!(e.raw_os_error(), Some(ERROR_PIPE_CONNECTED as i32));
        }
        // With skip-on-success only a pending wait queues its completion.
        assert_eq!(classify_listen(STATUS_SUCCESS, true).unwrap(), Issued::Completed(0));
        assert_eq!(classify_listen(STATUS_PENDING, true).unwrap(), Issued::Queued);
        let e = classify_listen(STATUS_BUFFER_OVERFLOW, true).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(ERROR_MORE_DATA as i32));
    }
}
