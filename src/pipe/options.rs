//! [`PipeOptions`]: how a listener's instances are created.

use std::ffi::OsStr;
use std::io;

use windows_sys::Win32::Foundation::{HLOCAL, LocalFree};
use windows_sys::Win32::Security::Authorization::{
    ConvertStringSecurityDescriptorToSecurityDescriptorW, SDDL_REVISION_1,
};
use windows_sys::Win32::Security::{PSECURITY_DESCRIPTOR, SECURITY_ATTRIBUTES};
use windows_sys::Win32::Storage::FileSystem::{
    FILE_FLAG_FIRST_PIPE_INSTANCE, FILE_FLAG_OVERLAPPED, PIPE_ACCESS_DUPLEX,
};
use windows_sys::Win32::System::Pipes::{
    PIPE_ACCEPT_REMOTE_CLIENTS, PIPE_READMODE_BYTE, PIPE_READMODE_MESSAGE, PIPE_REJECT_REMOTE_CLIENTS, PIPE_TYPE_BYTE,
    PIPE_TYPE_MESSAGE, PIPE_UNLIMITED_INSTANCES, PIPE_WAIT,
};

use std::os::windows::ffi::OsStrExt;

/// The buffer size each end of an instance asks for by default (a hint:
/// the system may grow or round it).
const DEFAULT_BUFFER: u32 = 64 * 1024;

/// How a [`PipeListener`](super::PipeListener)'s instances are created, as `OpenOptions` says
/// how a file is opened: set what differs from the defaults, then
/// [`bind`](Self::bind).
///
/// The defaults: byte mode, as many instances as the system allows (255),
/// 64 KiB buffers, the system's default security descriptor, and no
/// remote clients.
///
/// ```
/// use windows_threadpool::pipe::{PipeOptions, PipeStream};
///
/// let name = format!(r"\\.\pipe\windows-threadpool-doc-options-{}", std::process::id());
/// let listener = PipeOptions::new()
///     .max_instances(4)
///     .message_mode(true)
///     // Everything for the system and the administrators, read and write
///     // for interactive users.
///     .security_descriptor("D:(A;;GA;;;SY)(A;;GA;;;BA)(A;;GRGW;;;IU)")
///     .bind(&name)?;
/// futures::executor::block_on(async {
///     let (client, server) = futures::join!(PipeStream::connect(&name), listener.accept());
///     let (client, server) = (client?, server?);
///     let (sent, _) = client.write(b"one message".to_vec()).await;
///     sent?;
///     let (n, buf) = server.read(vec![0u8; 64]).await;
///     assert_eq!(&buf[..n?], b"one message");
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct PipeOptions {
    max_instances: u32,
    message: bool,
    in_buffer: u32,
    out_buffer: u32,
    sddl: Option<String>,
    remote: bool,
}

impl Default for PipeOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl PipeOptions {
    /// The defaults (see the type's docs).
    pub fn new() -> Self {
        Self {
            max_instances: PIPE_UNLIMITED_INSTANCES,
            message: false,
            in_buffer: DEFAULT_BUFFER,
            out_buffer: DEFAULT_BUFFER,
            sddl: None,
            remote: false,
        }
    }

    /// The most instances that may exist at once, connected or listening
    /// (1 to 254; 255 or more is as many as the system allows). A
    /// listener keeps one listening, so `n` admits `n` clients at once
    /// only while no accept is waiting for a new one. Zero is
    /// `InvalidInput` at [`bind`](Self::bind).
    pub fn max_instances(&mut self, n: usize) -> &mut Self {
        self.max_instances = u32::try_from(n).unwrap_or(u32::MAX).min(PIPE_UNLIMITED_INSTANCES);
        self
    }

    /// Message mode (`true`): each write is one message, and each read
    /// returns at most one (see [Errors and ends](super#errors-and-ends) for
    /// a message longer than the buffer). Byte mode (`false`, the default):
    /// a stream of bytes, as a socket's. A client's
    /// [`PipeStream::connect`](super::PipeStream::connect) reads in the
    /// mode the pipe was created in.
    pub fn message_mode(&mut self, message: bool) -> &mut Self {
        self.message = message;
        self
    }

    /// The sizes the instance asks for its input and output buffers (hints
    /// the system may round or grow; 64 KiB each by default). A write of
    /// more than the reader has room for waits, in flight, until the
    /// reader has read enough.
    pub fn buffer_sizes(&mut self, input: u32, output: u32) -> &mut Self {
        (self.in_buffer, self.out_buffer) = (input, output);
        self
    }

    /// The instances' security descriptor, in SDDL (as
    /// `ConvertStringSecurityDescriptorToSecurityDescriptorW` takes it);
    /// one it cannot parse fails [`bind`](Self::bind) with its error.
    /// Without one, the system's default for named pipes applies (see
    /// [Security](super#security)).
    pub fn security_descriptor(&mut self, sddl: &str) -> &mut Self {
        self.sddl = Some(sddl.to_owned());
        self
    }

    /// Whether clients on other machines may connect (`false` by default:
    /// `PIPE_REJECT_REMOTE_CLIENTS`). A pipe that admits them is reachable
    /// over SMB by anyone its security descriptor admits.
    pub fn accept_remote_clients(&mut self, remote: bool) -> &mut Self {
        self.remote = remote;
        self
    }

    /// What `CreateNamedPipeW` is given for each instance.
    pub(super) fn create_params(&self) -> io::Result<CreateParams> {
        if self.max_instances == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a pipe of at most 0 instances"));
        }
        let security = match &self.sddl {
            Some(sddl) => Some(SecurityDescriptor::from_sddl(sddl)?),
            None => None,
        };
        Ok(CreateParams {
            pipe_mode: pipe_mode(self.message, self.remote),
            max_instances: self.max_instances,
            in_buffer: self.in_buffer,
            out_buffer: self.out_buffer,
            security,
        })
    }
}

/// `s` as a NUL-terminated wide string (a pipe's name, an SDDL string);
/// one holding a NUL is `InvalidInput`.
pub(super) fn wide(s: &OsStr) -> io::Result<Vec<u16>> {
    let mut wide: Vec<u16> = s.encode_wide().collect();
    if wide.contains(&0) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a pipe name or SDDL string holds a NUL character"));
    }
    wide.push(0);
    Ok(wide)
}

/// `CreateNamedPipeW`'s pipe mode: the type and read mode, always blocking
/// mode (overlapped I/O is what keeps it from blocking), and whether remote
/// clients are rejected.
pub(super) fn pipe_mode(message: bool, remote: bool) -> u32 {
    let kind = if message { PIPE_TYPE_MESSAGE | PIPE_READMODE_MESSAGE } else { PIPE_TYPE_BYTE | PIPE_READMODE_BYTE };
    let remote = if remote { PIPE_ACCEPT_REMOTE_CLIENTS } else { PIPE_REJECT_REMOTE_CLIENTS };
    kind | PIPE_WAIT | remote
}

/// `CreateNamedPipeW`'s open mode: both directions, overlapped, and for
/// the listener's first instance `FILE_FLAG_FIRST_PIPE_INSTANCE`.
pub(super) fn open_mode(first: bool) -> u32 {
    let first = if first { FILE_FLAG_FIRST_PIPE_INSTANCE } else { 0 };
    PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED | first
}

/// The parameters every instance of a listener is created with.
#[derive(Debug)]
pub(super) struct CreateParams {
    pub(super) pipe_mode: u32,
    pub(super) max_instances: u32,
    pub(super) in_buffer: u32,
    pub(super) out_buffer: u32,
    pub(super) security: Option<SecurityDescriptor>,
}

impl CreateParams {
    /// Whether the instances are of message type.
    pub(super) fn message(&self) -> bool {
        self.pipe_mode & PIPE_TYPE_MESSAGE != 0
    }
}

/// A self-relative security descriptor allocated by
/// `ConvertStringSecurityDescriptorToSecurityDescriptorW`, freed with
/// `LocalFree`.
#[derive(Debug)]
pub(super) struct SecurityDescriptor(PSECURITY_DESCRIPTOR);

// SAFETY: the descriptor is memory this value alone owns, only read after
// its creation (by `CreateNamedPipeW`, from any thread).
unsafe impl Send for SecurityDescriptor {}
// SAFETY: as above: shared use only reads it.
unsafe impl Sync for SecurityDescriptor {}

impl SecurityDescriptor {
    fn from_sddl(sddl: &str) -> io::Result<Self> {
        let wide = wide(OsStr::new(sddl))?;
        let mut sd: PSECURITY_DESCRIPTOR = core::ptr::null_mut();
        // SAFETY: `wide` is NUL-terminated; `sd` is a valid out-pointer and
        // the size pointer may be null.
        let ok = unsafe {
            ConvertStringSecurityDescriptorToSecurityDescriptorW(
                wide.as_ptr(),
                SDDL_REVISION_1,
                &mut sd,
                core::ptr::null_mut(),
            )
        };
        crate::sys::check(ok)?;
        Ok(Self(sd))
    }

    /// Security attributes naming the descriptor, not inheritable; valid
    /// while `self` is.
    pub(super) fn attributes(&self) -> SECURITY_ATTRIBUTES {
        SECURITY_ATTRIBUTES {
            nLength: size_of::<SECURITY_ATTRIBUTES>() as u32,
            lpSecurityDescriptor: self.0,
            bInheritHandle: 0,
        }
    }
}

impl Drop for SecurityDescriptor {
    fn drop(&mut self) {
        // SAFETY: allocated by the conversion with LocalAlloc, freed once.
        unsafe { LocalFree(self.0 as HLOCAL) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_clients_are_rejected_unless_asked() {
        assert_ne!(pipe_mode(false, false) & PIPE_REJECT_REMOTE_CLIENTS, 0);
        assert_ne!(pipe_mode(true, false) & PIPE_REJECT_REMOTE_CLIENTS, 0);
        assert_eq!(pipe_mode(false, true) & PIPE_REJECT_REMOTE_CLIENTS, 0);
        let made = PipeOptions::new().create_params().unwrap();
        assert_ne!(made.pipe_mode & PIPE_REJECT_REMOTE_CLIENTS, 0, "the default rejects them");
        let asked = PipeOptions::new().accept_remote_clients(true).create_params().unwrap();
        assert_eq!(asked.pipe_mode & PIPE_REJECT_REMOTE_CLIENTS, 0);
    }

    #[test]
    fn message_mode_sets_the_type_and_the_read_mode() {
        assert_eq!(pipe_mode(true, true) & (PIPE_TYPE_MESSAGE | PIPE_READMODE_MESSAGE), 6);
        assert_eq!(pipe_mode(false, true) & (PIPE_TYPE_MESSAGE | PIPE_READMODE_MESSAGE), 0);
    }

    #[test]
    fn only_the_first_instance_claims_the_name() {
        assert_ne!(open_mode(true) & FILE_FLAG_FIRST_PIPE_INSTANCE, 0);
        assert_eq!(open_mode(false) & FILE_FLAG_FIRST_PIPE_INSTANCE, 0);
        for first in [true, false] {
            assert_eq!(
                open_mode(first) & (PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED),
                PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED
            );
        }
    }

    #[test]
    fn the_instance_limit_is_clamped_and_zero_is_refused() {
        assert_eq!(PipeOptions::new().max_instances(1000).create_params().unwrap().max_instances, 255);
        assert_eq!(PipeOptions::new().max_instances(3).create_params().unwrap().max_instances, 3);
        let e = PipeOptions::new().max_instances(0).create_params().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn an_sddl_the_system_cannot_parse_fails_with_its_error() {
        assert!(PipeOptions::new().security_descriptor("D:(A;;GA;;;SY)").create_params().unwrap().security.is_some());
        let e = PipeOptions::new().security_descriptor("not sddl").create_params().unwrap_err();
        assert!(e.raw_os_error().is_some(), "{e}");
    }
}
