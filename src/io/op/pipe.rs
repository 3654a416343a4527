//! The named-pipe family: a server instance's wait for its client
//! (`ConnectNamedPipe`). Reads and writes of a connected instance are the
//! file family's.

use std::io;

use windows_sys::Win32::Foundation::{ERROR_IO_PENDING, ERROR_PIPE_CONNECTED, GetLastError, HANDLE};
use windows_sys::Win32::System::IO::OVERLAPPED;
use windows_sys::Win32::System::Pipes::ConnectNamedPipe;

use super::{AsyncOp, Issued};

/// Waits for a client to open the server instance it is issued on.
pub(crate) struct Listen;

/// Classifies an overlapped `ConnectNamedPipe` that returned `ok`, or
/// failed with `error`:
/// - a success and `ERROR_IO_PENDING` queue a completion;
/// - `ERROR_PIPE_CONNECTED` (a client opened the instance before the call,
///   which the documentation calls a good connection) is a failure status
///   underneath, so nothing is queued: connected at once;
/// - any other error (`ERROR_NO_DATA`: a client came and went before the
///   call) is a synchronous failure, with no completion.
pub(crate) fn classify_listen(ok: bool, error: u32) -> io::Result<Issued> {
    if ok {
        return Ok(Issued::Queued);
    }
    match error {
        ERROR_IO_PENDING => Ok(Issued::Queued),
        ERROR_PIPE_CONNECTED => Ok(Issued::Completed(0)),
        e => Err(io::Error::from_raw_os_error(e as i32)),
    }
}

impl AsyncOp for Listen {
    type Output = io::Result<()>;

    unsafe fn issue(_: *mut Self, handle: HANDLE, ov: *mut OVERLAPPED) -> io::Result<Issued> {
        let (ok, error) = trace_call!("ConnectNamedPipe", handle, ov, {
            // SAFETY: `ov` is the operation's zeroed OVERLAPPED, which stays
            // in its block until the completion (the caller's contract);
            // `handle` is the open server instance.
            let ok = unsafe { ConnectNamedPipe(handle, ov) } != 0;
            // SAFETY: no preconditions; read at once, before anything can
            // overwrite the thread's last error.
            (ok, if ok { 0 } else { unsafe { GetLastError() } })
        });
        classify_listen(ok, error)
    }

    fn finish(self, result: io::Result<usize>) -> Self::Output {
        result.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use windows_sys::Win32::Foundation::{ERROR_INVALID_HANDLE, ERROR_NO_DATA};

    #[test]
    fn a_listen_is_queued_connected_at_once_or_failed() {
        assert_eq!(classify_listen(true, 0).unwrap(), Issued::Queued);
        assert_eq!(classify_listen(false, ERROR_IO_PENDING).unwrap(), Issued::Queued);
        assert_eq!(classify_listen(false, ERROR_PIPE_CONNECTED).unwrap(), Issued::Completed(0));
        for e in [ERROR_NO_DATA, ERROR_INVALID_HANDLE] {
            assert_eq!(classify_listen(false, e).unwrap_err().raw_os_error(), Some(e as i32));
        }
    }
}
