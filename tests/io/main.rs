//! Integration tests of I/O: `io::Io` and its operations, sockets (`net`),
//! `io::Compat` (tokio's and `futures-io`'s traits), child processes and
//! their stdio pipes.
//!
//! One test binary per area, each former test file a module of it (a test is
//! named `<module>::<test>`): nextest still runs every test in a process of
//! its own, and the binary is linked and started once per configuration
//! instead of once per file. Modules that need a feature gate themselves.
#![cfg(windows)]

#[path = "../support/mod.rs"]
mod support;

// Shared helpers, compiled once for the modules that use them.
#[path = "../support/executors.rs"]
mod executors;
// `process` is the test module; the process counts (`leak`'s, which holds
// them) keep its old name for them.
use leak as counts;
#[cfg(feature = "trace")]
#[path = "../support/rows.rs"]
mod rows;
#[path = "../support/sockets.rs"]
mod sockets;
// The hostile-client rounds of `pipe_hostile`.
#[path = "../support/hostile_pipe.rs"]
mod hostile_pipe;
#[path = "../support/leak.rs"]
mod leak;
#[path = "../support/pipe_server.rs"]
mod pipe_server;
#[path = "../support/rounds.rs"]
mod rounds;

mod child_stdio;
mod compat;
mod io;
mod net;
mod pipe;
mod pipe_hostile;
mod process;

/// `NtQueryInformationFile(h, class)` into `info`, its all-zeroes start;
/// panics on a failed query.
///
/// # Safety
/// `T` is the plain-data structure `class` fills (every bit pattern valid;
/// `Copy`, so no drop glue or owned resource is overwritten).
unsafe fn file_information<T: Copy>(h: std::os::windows::io::RawHandle, class: i32, mut info: T) -> T {
    use windows_sys::Wdk::Storage::FileSystem::NtQueryInformationFile;
    use windows_sys::Win32::System::IO::IO_STATUS_BLOCK;
    // SAFETY: all zeroes is a valid IO_STATUS_BLOCK (integers and a pointer).
    let mut iosb: IO_STATUS_BLOCK = unsafe { core::mem::zeroed() };
    // SAFETY: both out-pointers are valid for their sizes, and `T` is what
    // `class` writes (the caller's contract). `h` is only a value: a closed
    // one fails the query, and one closed and reused may name another
    // object, which is harmless since the query writes only into these
    // locals. NtQueryInformationFile finishes before it returns even on an
    // overlapped handle (the I/O manager answers these classes itself), so
    // nothing writes `iosb` or `info` after the call.
    let status = unsafe { NtQueryInformationFile(h, &mut iosb, (&raw mut info).cast(), size_of::<T>() as u32, class) };
    assert_eq!(status, 0, "NtQueryInformationFile(class {class}): {status:#x}");
    info
}
