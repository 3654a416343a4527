//! Handles of proven provenance, and classifying an overlapped call's result.

use core::sync::atomic::{AtomicU64, Ordering};
use std::fs::OpenOptions;
use std::io::{self, PipeReader, PipeWriter};
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};
use std::path::Path;

use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, ERROR_IO_PENDING, ERROR_MORE_DATA, ERROR_PIPE_BUSY, GENERIC_READ, GENERIC_WRITE,
    GetHandleInformation, HANDLE, HANDLE_FLAG_INHERIT, INVALID_HANDLE_VALUE, NTSTATUS, RtlNtStatusToDosError,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FILE_FLAG_FIRST_PIPE_INSTANCE, FILE_FLAG_OVERLAPPED, FILE_READ_ATTRIBUTES, FILE_WRITE_ATTRIBUTES,
    OPEN_EXISTING, PIPE_ACCESS_DUPLEX, PIPE_ACCESS_INBOUND, PIPE_ACCESS_OUTBOUND, SECURITY_IDENTIFICATION,
    SECURITY_SQOS_PRESENT, SetFileCompletionNotificationModes,
};
use windows_sys::Win32::System::Pipes::{
    CreateNamedPipeW, GetNamedPipeInfo, PIPE_READMODE_BYTE, PIPE_REJECT_REMOTE_CLIENTS, PIPE_TYPE_BYTE,
    PIPE_TYPE_MESSAGE, PIPE_WAIT,
};
use windows_sys::Win32::System::Threading::GetCurrentProcessId;
use windows_sys::Win32::System::WindowsProgramming::{
    FILE_SKIP_COMPLETION_PORT_ON_SUCCESS, FILE_SKIP_SET_EVENT_ON_HANDLE,
};
use windows_sys::core::BOOL;

/// An owned handle known to be fit for [`Io::new`](crate::io::Io::new): opened by this
/// module with `FILE_FLAG_OVERLAPPED`, not inheritable, not bound to a
/// completion port, and without skip-on-success.
///
/// It lends only its raw value (`AsRawHandle`), not a `BorrowedHandle`: a
/// duplicate of it would share its file object, and overlapped I/O on such
/// a duplicate (in a child process, say) completes on the `Io`'s port (see
/// [`assume_overlapped`](Self::assume_overlapped)).
#[derive(Debug)]
#[must_use = "dropping it closes the handle"]
pub struct OverlappedHandle(pub(super) OwnedHandle);

impl OverlappedHandle {
    /// Asserts that a handle this module did not open is fit for
    /// [`Io::new`](crate::io::Io::new).
    ///
    /// # Safety
    /// `handle` must have been opened for overlapped I/O
    /// (`FILE_FLAG_OVERLAPPED` or the equivalent) and must not already be
    /// bound to a completion port. While it is bound (from [`Io::new`] until
    /// the `Io` is dropped), no overlapped I/O may be issued on its file
    /// object other than through the [`Io`]: not on this handle, and not on
    /// any other handle to the same file object (a duplicate made before or
    /// after, in this process or another). In particular the handle must not
    /// be inheritable, since `std::process::Command` hands every inheritable
    /// handle to the child. Nor may overlapped I/O issued earlier on its
    /// file object, through any handle, still be pending: its completion
    /// would come to the `Io`'s port. Such a completion carries an address
    /// that is not the `Io`'s (another process's, or memory its issuer has
    /// since freed), which can equal one of the `Io`'s live operations (see
    /// [Completions that are not
    /// ours](crate::io#completions-that-are-not-ours)). (It must also not
    /// have `FILE_SKIP_COMPLETION_PORT_ON_SUCCESS` set, now or later: that one
    /// is a liveness condition, an operation then never completes.)
    ///
    /// [`Io`]: crate::io::Io
    /// [`Io::new`]: crate::io::Io::new
    pub unsafe fn assume_overlapped(handle: OwnedHandle) -> Self {
        Self(handle)
    }

    /// [`assume_overlapped`](Self::assume_overlapped) after checking what
    /// the handle itself can show: that its file object was opened for
    /// overlapped I/O (`FileModeInformation` shows neither
    /// `FILE_SYNCHRONOUS_IO_ALERT` nor `FILE_SYNCHRONOUS_IO_NONALERT`) and
    /// that it is not inheritable. [`process`](crate::process) takes the
    /// parent's end of each pipe `std` makes for a child through it.
    ///
    /// Still `unsafe`: no call shows whether overlapped I/O issued earlier
    /// on the file object is still pending, or whether a copy of the handle
    /// made while it was inheritable, or kept as a raw value, will issue
    /// some; either would complete on the [`Io`](crate::io::Io)'s port with
    /// addresses that are not its own.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] for a handle opened for synchronous
    /// I/O or an inheritable one (the handle is closed); the OS error if a
    /// query fails.
    ///
    /// # Safety
    /// Every condition of [`assume_overlapped`](Self::assume_overlapped)
    /// but the two checked here (overlapped, not inheritable now): the
    /// handle is bound to no completion port; no overlapped I/O issued on
    /// its file object is still pending; while it is bound, none is issued
    /// other than through the [`Io`](crate::io::Io), neither through a raw
    /// copy of this handle's value nor through another handle to the same
    /// file object, in this process or another (one inherited while the
    /// handle was inheritable included); and it never gets
    /// `FILE_SKIP_COMPLETION_PORT_ON_SUCCESS` (a liveness condition).
    pub unsafe fn try_from_owned(handle: OwnedHandle) -> io::Result<Self> {
        if synchronous_io(handle.as_raw_handle())? {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "the handle was not opened for overlapped I/O"));
        }
        let mut flags = 0;
        // SAFETY: `handle` is open; `flags` is a valid out-pointer.
        crate::sys::check(unsafe { GetHandleInformation(handle.as_raw_handle(), &mut flags) })?;
        if flags & HANDLE_FLAG_INHERIT != 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "the handle is inheritable"));
        }
        Ok(Self(handle))
    }

    /// Gives up the proof and returns the plain owned handle.
    #[must_use = "the handle is closed if unused"]
    pub fn into_owned(self) -> OwnedHandle {
        self.0
    }
}

impl AsRawHandle for OverlappedHandle {
    fn as_raw_handle(&self) -> RawHandle {
        self.0.as_raw_handle()
    }
}

impl From<OverlappedHandle> for OwnedHandle {
    fn from(h: OverlappedHandle) -> Self {
        h.0
    }
}

/// Opens `path` with `options` for overlapped I/O.
///
/// `options` decides access and disposition (`read`, `write`, `create`,
/// `truncate`, ...). This sets the options' `custom_flags` to
/// `FILE_FLAG_OVERLAPPED`, replacing any custom flags already set on them;
/// use [`open_file_with_flags`] to pass others.
pub fn open_file(path: impl AsRef<Path>, options: &OpenOptions) -> io::Result<OverlappedHandle> {
    open_file_with_flags(path, options, 0)
}

/// [`open_file`] with extra `FILE_FLAG_*` values (for example
/// `FILE_FLAG_NO_BUFFERING`), combined with `FILE_FLAG_OVERLAPPED`.
pub fn open_file_with_flags(path: impl AsRef<Path>, options: &OpenOptions, flags: u32) -> io::Result<OverlappedHandle> {
    let mut options = options.clone();
    options.custom_flags(flags | FILE_FLAG_OVERLAPPED);
    Ok(OverlappedHandle(OwnedHandle::from(options.open(path)?)))
}

/// Creates a connected pair of overlapped named-pipe ends, `(server, client)`,
/// both readable and writable, in byte mode.
///
/// The pipe has a unique local name (process id and a counter), admits one
/// instance (`FILE_FLAG_FIRST_PIPE_INSTANCE`, so an existing pipe of that name
/// is never joined; except under Wine, which ignores that flag: see
/// `docs/wine.md`), rejects remote clients, and the client end is opened at
/// identification level, so the server cannot impersonate it.
pub fn pipe_pair() -> io::Result<(OverlappedHandle, OverlappedHandle)> {
    let (server, client) = connected_pipe(PIPE_ACCESS_DUPLEX, GENERIC_READ | GENERIC_WRITE, FILE_FLAG_OVERLAPPED)?;
    Ok((OverlappedHandle(server), OverlappedHandle(client)))
}

/// Creates a pipe whose data flows into this process: an overlapped read end
/// for [`AsyncIo`](crate::io::AsyncIo) or [`Io`](crate::io::Io), and an
/// ordinary, synchronous [`PipeWriter`] for a child process's stdout or
/// stderr (or for a thread that writes with `std::io::Write`).
///
/// Returns `(ours, theirs)`. Reads on `ours` see `Ok(0)` once every handle to
/// `theirs` is closed: the `PipeWriter`, the copy a child inherited (which
/// its own children may inherit in turn), and the copy a
/// [`Command`](std::process::Command) keeps until it is dropped or given
/// another `stdout`. `ours` is read-only (a write through it fails with
/// `ERROR_ACCESS_DENIED`).
///
/// Neither end is inheritable. [`Command`](std::process::Command) hands the
/// child an inheritable duplicate of `theirs` made during the spawn, under
/// the lock that keeps another `Command`'s spawn from inheriting it, and
/// closes that duplicate once the child has it; an inheritable `theirs` would
/// instead reach every child spawned while it is open, whose copy would hold
/// back the end of file.
///
/// `theirs` may be lent, duplicated and inherited freely: it is the pipe's
/// client end, a file object of its own, so no I/O on it (in this process or
/// another, overlapped or not) can post a completion to the port `ours` is
/// bound to (see [Completions that are not
/// ours](crate::io#completions-that-are-not-ours)). It is synchronous, as a
/// child expects its standard handles to be. The pipe is named and checked
/// as [`pipe_pair`]'s is, and its one instance is connected, so no one else
/// can open it.
///
/// ```
/// use std::process::Command;
/// use windows_threadpool::io::{self, AsyncIo};
///
/// let (ours, theirs) = io::inbound_pipe()?;
/// // The `Command` is a temporary: dropped at the end of the statement, it
/// // keeps no copy of `theirs` that would hold back the end of file.
/// let mut child = Command::new("cmd").args(["/c", "echo hello"]).stdout(theirs).spawn()?;
/// let stdout = AsyncIo::new(ours)?;
/// let output = futures::executor::block_on(async {
///     let mut output = Vec::new();
///     loop {
///         let (n, buf) = stdout.read(vec![0u8; 256]).await;
///         match n? {
///             0 => break Ok::<_, std::io::Error>(output),
///             n => output.extend_from_slice(&buf[..n]),
///         }
///     }
/// })?;
/// assert_eq!(output, b"hello\r\n");
/// assert!(child.wait()?.success());
/// # Ok::<(), std::io::Error>(())
/// ```
#[doc(alias = "child_stdout")]
#[doc(alias = "child_stderr")]
pub fn inbound_pipe() -> io::Result<(OverlappedHandle, PipeWriter)> {
    let (server, client) = connected_pipe(PIPE_ACCESS_INBOUND, GENERIC_WRITE | FILE_READ_ATTRIBUTES, 0)?;
    Ok((OverlappedHandle(server), PipeWriter::from(client)))
}

/// Creates a pipe whose data flows out of this process: an overlapped write
/// end for [`AsyncIo`](crate::io::AsyncIo) or [`Io`](crate::io::Io), and an
/// ordinary, synchronous [`PipeReader`] for a child process's stdin (or for
/// a thread that reads with `std::io::Read`).
///
/// Returns `(ours, theirs)`. The reader sees the end of file once `ours` is
/// closed (drop the `AsyncIo`), after the data already written. `ours` is
/// write-only (a read through it fails with `ERROR_ACCESS_DENIED`).
/// Inheritance, lending `theirs` and the pipe's name are as for
/// [`inbound_pipe`].
///
/// ```
/// use std::os::windows::process::CommandExt;
/// use std::process::{Command, Stdio};
/// use windows_threadpool::io::{self, AsyncIo};
///
/// let (ours, theirs) = io::outbound_pipe()?;
/// // `find "child"` copies the lines of its input that contain "child".
/// let child = Command::new("find").raw_arg("\"child\"").stdin(theirs).stdout(Stdio::piped()).spawn()?;
/// let stdin = AsyncIo::new(ours)?;
/// let (n, _) = futures::executor::block_on(stdin.write(b"to the child\r\nnot this\r\n".to_vec()));
/// assert_eq!(n?, 24);
/// drop(stdin); // the end of the child's input
/// let output = child.wait_with_output()?;
/// assert_eq!(output.stdout, b"to the child\r\n");
/// # Ok::<(), std::io::Error>(())
/// ```
#[doc(alias = "child_stdin")]
pub fn outbound_pipe() -> io::Result<(OverlappedHandle, PipeReader)> {
    let (server, client) = connected_pipe(PIPE_ACCESS_OUTBOUND, GENERIC_READ | FILE_WRITE_ATTRIBUTES, 0)?;
    Ok((OverlappedHandle(server), PipeReader::from(client)))
}

/// Creates a uniquely named one-instance pipe, overlapped on the server side,
/// with the server's `access` (`PIPE_ACCESS_*`), and connects a client end
/// opened with `client_access` and `client_flags`. Both are not inheritable
/// (null security attributes). Returns `(server, client)`.
fn connected_pipe(access: u32, client_access: u32, client_flags: u32) -> io::Result<(OwnedHandle, OwnedHandle)> {
    /// Each end's buffer size hint.
    const BUFFER: u32 = 64 * 1024;
    let mut attempts = 0;
    let (server, name) = loop {
        let name = pipe_name(PIPE_SERIAL.fetch_add(1, Ordering::Relaxed));
        // SAFETY: `name` is NUL-terminated; a null security descriptor is the default.
        let h = unsafe {
            CreateNamedPipeW(
                name.as_ptr(),
                access | FILE_FLAG_OVERLAPPED | FILE_FLAG_FIRST_PIPE_INSTANCE,
                PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
                1,
                BUFFER,
                BUFFER,
                0,
                core::ptr::null(),
            )
        };
        if h != INVALID_HANDLE_VALUE {
            // SAFETY: a fresh handle that nothing else owns.
            break (unsafe { OwnedHandle::from_raw_handle(h) }, name);
        }
        let err = io::Error::last_os_error();
        // Someone else holds this name: take the next one. Windows refuses a
        // first instance of a taken name (ERROR_ACCESS_DENIED); Wine ignores
        // that flag and only refuses a pipe with no instance to spare
        // (ERROR_PIPE_BUSY).
        attempts += 1;
        let taken = matches!(err.raw_os_error().map(|e| e as u32), Some(ERROR_ACCESS_DENIED | ERROR_PIPE_BUSY));
        if !taken || attempts == 16 {
            return Err(err);
        }
    };
    let client = open_pipe_client(&name, client_access, client_flags)?;
    // The client's open connected the pipe: `ConnectNamedPipe` would only
    // report `ERROR_PIPE_CONNECTED`, which its documentation calls a good
    // connection.
    Ok((server, client))
}

/// The serial number in the name of the next pipe [`connected_pipe`] creates.
pub(super) static PIPE_SERIAL: AtomicU64 = AtomicU64::new(0);

/// The NUL-terminated name [`connected_pipe`] gives its pipe with serial number `n`.
pub(super) fn pipe_name(n: u64) -> Vec<u16> {
    // SAFETY: no preconditions.
    let pid = unsafe { GetCurrentProcessId() };
    format!(r"\\.\pipe\windows-threadpool-{pid}-{n}").encode_utf16().chain(Some(0)).collect()
}

/// Whether `h`'s file object does synchronous I/O: `FileModeInformation`
/// shows `FILE_SYNCHRONOUS_IO_ALERT` or `FILE_SYNCHRONOUS_IO_NONALERT`
/// (it was opened without `FILE_FLAG_OVERLAPPED`). Overlapped calls on such
/// a handle complete in ways the start/cancel balance does not expect.
pub(crate) fn synchronous_io(h: RawHandle) -> io::Result<bool> {
    use windows_sys::Wdk::Storage::FileSystem::{
        FILE_MODE_INFORMATION, FILE_SYNCHRONOUS_IO_ALERT, FILE_SYNCHRONOUS_IO_NONALERT, FileModeInformation,
        NtQueryInformationFile,
    };
    let mut iosb = windows_sys::Win32::System::IO::IO_STATUS_BLOCK::default();
    let mut info = FILE_MODE_INFORMATION { Mode: 0 };
    // SAFETY: both out-pointers are valid for their sizes; `h` is only a
    // value to the call, which fails for a handle that is not open.
    let status = unsafe {
        NtQueryInformationFile(
            h,
            &mut iosb,
            (&raw mut info).cast(),
            size_of::<FILE_MODE_INFORMATION>() as u32,
            FileModeInformation,
        )
    };
    crate::sys::nt_check(status)?;
    Ok(info.Mode & (FILE_SYNCHRONOUS_IO_ALERT | FILE_SYNCHRONOUS_IO_NONALERT) != 0)
}

/// Classifies the `BOOL` a Win32 overlapped call returned, reading the
/// thread's last error when it is `FALSE`: `Ok` for success,
/// `ERROR_IO_PENDING` and `ERROR_MORE_DATA`, the error otherwise. Call it
/// directly after the issuing call, before anything else can overwrite the
/// last error. Meant for [`Io::submit`](crate::io::Io::submit)'s `issue` closures.
///
/// A Win32 error code does not say whether the status behind it was a
/// warning (a completion is queued) or an error (none is): this is exact
/// only for calls whose one possible warning is `STATUS_BUFFER_OVERFLOW`
/// (`ERROR_MORE_DATA`), such as reads and writes of files and pipes. For a
/// call that can end in another warning (a tape or removable-media driver's
/// `STATUS_END_OF_MEDIA`, `STATUS_FILEMARK_DETECTED`, a `STATUS_DEVICE_BUSY`,
/// ...) issue its `Nt*` form and classify with [`issue_status`].
pub fn issue_result(ret: BOOL) -> io::Result<()> {
    if ret != 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error().map(|e| e as u32) {
        Some(ERROR_IO_PENDING | ERROR_MORE_DATA) => Ok(()),
        _ => Err(err),
    }
}

/// Classifies the `NTSTATUS` an `Nt*` overlapped call (`NtReadFile`,
/// `NtDeviceIoControlFile`, ...) returned: `Ok` when a completion will be
/// queued, which is for every status that is not of the error class
/// (success, `STATUS_PENDING`, informational and warning statuses), the
/// status as a Win32 error (`RtlNtStatusToDosError`) otherwise. Meant for
/// [`Io::submit`](crate::io::Io::submit)'s `issue` closures.
pub fn issue_status(status: NTSTATUS) -> io::Result<()> {
    if queues_completion(status) {
        Ok(())
    } else {
        // SAFETY: a pure conversion. The thread's last error is left alone.
        Err(io::Error::from_raw_os_error(unsafe { RtlNtStatusToDosError(status) } as i32))
    }
}

/// Whether an overlapped call that returned `status` has a completion queued
/// for it: the I/O manager queues one for every status outside the error
/// class (severity bits `0b11`), so success, `STATUS_PENDING`, the
/// informational and the warning statuses all do, and only an error fails
/// the operation synchronously.
pub(crate) const fn queues_completion(status: NTSTATUS) -> bool {
    (status as u32) >> 30 != 0b11
}

/// The pipe type of `h`: `Some(true)` for a message-type pipe,
/// `Some(false)` for a byte-type one, `None` for a handle that is no pipe
/// (`GetNamedPipeInfo` refuses it).
pub(crate) fn pipe_is_message(h: HANDLE) -> Option<bool> {
    let mut flags = 0;
    // SAFETY: `h` is an open handle (the caller's); the pointers not wanted are null.
    let info =
        unsafe { GetNamedPipeInfo(h, &mut flags, core::ptr::null_mut(), core::ptr::null_mut(), core::ptr::null_mut()) };
    (info != 0).then_some(flags & PIPE_TYPE_MESSAGE != 0)
}

/// Gives the handle of an async object (whose engine classifies every
/// synchronous outcome itself) skip-on-success, unless it is a
/// message-type pipe (`message`): a read of part of a message is pended by
/// Windows 8 and later and returned at once by Wine and older Windows, so
/// such a pipe stays on the one path tested for both. Whether it was set:
/// then an operation that completes at once finishes inline.
pub(crate) fn complete_inline_unless_message(h: HANDLE, message: bool) -> io::Result<bool> {
    if message {
        return Ok(false);
    }
    skip_completion_port_on_success(h)?;
    Ok(true)
}

/// Sets skip-on-success on `h` (`FILE_SKIP_COMPLETION_PORT_ON_SUCCESS`,
/// and `FILE_SKIP_SET_EVENT_ON_HANDLE`: nothing waits on the handle): a
/// synchronous success then queues no completion, and its operation is
/// finished inline.
pub(crate) fn skip_completion_port_on_success(h: HANDLE) -> io::Result<()> {
    let flags = (FILE_SKIP_COMPLETION_PORT_ON_SUCCESS | FILE_SKIP_SET_EVENT_ON_HANDLE) as u8;
    // SAFETY: `h` is an open handle (the caller's); the call takes no pointers.
    crate::sys::check(unsafe { SetFileCompletionNotificationModes(h, flags) })
}

/// Opens the pipe `name` (NUL-terminated) as a client with `access` and
/// `flags` (`FILE_FLAG_OVERLAPPED` or not), not inheritable, and for
/// identification only (`SECURITY_SQOS_PRESENT | SECURITY_IDENTIFICATION`):
/// its server can learn who the client is, not act as it. Every pipe
/// client the crate opens is opened here.
pub(crate) fn open_pipe_client(name: &[u16], access: u32, flags: u32) -> io::Result<OwnedHandle> {
    // SAFETY: `name` is NUL-terminated; the other arguments are plain values.
    let h = unsafe {
        CreateFileW(
            name.as_ptr(),
            access,
            0,
            core::ptr::null(),
            OPEN_EXISTING,
            flags | SECURITY_SQOS_PRESENT | SECURITY_IDENTIFICATION,
            core::ptr::null_mut(),
        )
    };
    if h == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle that nothing else owns.
    Ok(unsafe { OwnedHandle::from_raw_handle(h) })
}
