//! Process-level counts for the leak checks (`tests/leaks.rs`,
//! `tests/leak_stress.rs`) and the lifecycle models (`tests/lifecycle.rs`):
//! open handles, private bytes, live contexts and I/O operation blocks.
//!
//! Under Wine 8 two of the documented calls are stubs (docs/wine.md):
//! `GetProcessHandleCount` reports 0 handles, so handles are counted from
//! `NtQuerySystemInformation(SystemExtendedHandleInformation)` filtered to
//! this process (what `GetProcessHandleCount` counts on Windows); and
//! `PROCESS_MEMORY_COUNTERS_EX::PrivateUsage` reads 0, so private bytes are
//! read from `PagefileUsage`, which Windows defines as the same quantity
//! (the commit charge of the process) and Wine fills in.
#![allow(dead_code)]

use core::ffi::c_void;

/// `SystemExtendedHandleInformation`.
const SYSTEM_EXTENDED_HANDLE_INFORMATION: u32 = 64;
const STATUS_INFO_LENGTH_MISMATCH: i32 = 0xC000_0004_u32 as i32;

#[repr(C)]
#[derive(Clone, Copy)]
struct HandleEntryEx {
    object: *mut c_void,
    unique_process_id: usize,
    handle_value: usize,
    granted_access: u32,
    creator_back_trace_index: u16,
    object_type_index: u16,
    handle_attributes: u32,
    reserved: u32,
}

#[link(name = "ntdll")]
unsafe extern "system" {
    fn NtQuerySystemInformation(class: u32, info: *mut c_void, len: u32, ret_len: *mut u32) -> i32;
}

/// The handles this process has open, other than thread handles (see
/// [`handles_but_threads`]).
pub fn handle_count() -> usize {
    handles_but_threads()
}

/// The handles this process has open, all kinds (`GetProcessHandleCount`,
/// or the system handle table under Wine).
pub fn all_handles() -> usize {
    use windows_sys::Win32::System::Threading::{GetCurrentProcess, GetProcessHandleCount};
    let mut n = 0u32;
    // SAFETY: the pseudo-handle of this process and a valid out pointer.
    let ok = unsafe { GetProcessHandleCount(GetCurrentProcess(), &mut n) };
    assert!(ok != 0, "GetProcessHandleCount: {}", std::io::Error::last_os_error());
    if n != 0 {
        return n as usize;
    }
    // Wine 8: `GetProcessHandleCount` is a stub that reports 0.
    handles_from_system_table()
}

/// This process's entries in the system handle table.
fn handles_from_system_table() -> usize {
    with_own_handles(|entries| entries.len())
}

/// This process's handles other than thread handles, from the system handle
/// table (on Windows and Wine alike). The pool's worker threads come and go
/// (an idle one exits after a few seconds), and with them handles to
/// threads, which no object of the crate owns; every other kind (events,
/// files and pipes, wait completion packets, ...) must come back exactly.
pub fn handles_but_threads() -> usize {
    let thread_type = thread_type_index();
    with_own_handles(|entries| entries.iter().filter(|e| e.object_type_index != thread_type).count())
}

/// The object type index of a thread handle, found by opening one.
fn thread_type_index() -> u16 {
    use std::os::windows::io::AsRawHandle;
    static INDEX: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    *INDEX.get_or_init(|| {
        let t = std::thread::spawn(|| ());
        let raw = t.as_raw_handle() as usize;
        let index = with_own_handles(|entries| entries.iter().find(|e| e.handle_value == raw).map(|e| e.object_type_index));
        t.join().unwrap();
        index.expect("a thread's handle is in the system handle table")
    })
}

/// Runs `f` on this process's entries of the system handle table.
fn with_own_handles<R>(f: impl FnOnce(&[HandleEntryEx]) -> R) -> R {
    let pid = std::process::id() as usize;
    let mut buf: Vec<u64> = vec![0; 1 << 14];
    loop {
        let len = u32::try_from(buf.len() * 8).expect("handle table buffer size");
        let mut ret = 0u32;
        // SAFETY: `buf` is valid for writes of `len` bytes, 8-aligned.
        let status = unsafe {
            NtQuerySystemInformation(SYSTEM_EXTENDED_HANDLE_INFORMATION, buf.as_mut_ptr().cast(), len, &mut ret)
        };
        if status == STATUS_INFO_LENGTH_MISMATCH {
            let want = (ret as usize / 8).max(buf.len() * 2) + 1024;
            buf = vec![0; want];
            continue;
        }
        assert!(status >= 0, "NtQuerySystemInformation(SystemExtendedHandleInformation): status {status:#x}");
        let count = buf[0] as usize;
        // SAFETY: the call filled in `count` entries after the two-word header.
        let entries = unsafe {
            std::slice::from_raw_parts(buf.as_ptr().add(2).cast::<HandleEntryEx>(), count)
        };
        let own: Vec<HandleEntryEx> = entries.iter().filter(|e| e.unique_process_id == pid).copied().collect();
        return f(&own);
    }
}

/// The private bytes (commit charge) of this process.
pub fn private_bytes() -> usize {
    use windows_sys::Win32::System::ProcessStatus::{GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS_EX};
    use windows_sys::Win32::System::Threading::GetCurrentProcess;
    // SAFETY: zero is a valid value of this plain C struct.
    let mut c: PROCESS_MEMORY_COUNTERS_EX = unsafe { core::mem::zeroed() };
    let size = core::mem::size_of::<PROCESS_MEMORY_COUNTERS_EX>() as u32;
    c.cb = size;
    // SAFETY: `c` is a PROCESS_MEMORY_COUNTERS_EX of `size` bytes.
    let ok = unsafe { GetProcessMemoryInfo(GetCurrentProcess(), (&raw mut c).cast(), size) };
    assert!(ok != 0, "GetProcessMemoryInfo: {}", std::io::Error::last_os_error());
    // Wine 8 leaves `PrivateUsage` at 0; `PagefileUsage` is the same quantity.
    if c.PrivateUsage != 0 { c.PrivateUsage } else { c.PagefileUsage }
}

/// Handles the pool itself may hold at one moment and not at another,
/// whatever the objects do: under Wine 8 each wait bucket (the thread
/// behind up to 63 waits) has an event of its own, created with the bucket
/// and closed when the bucket's thread exits after a few idle seconds
/// (measured: the count of non-thread handles moved between 11 and 13 with
/// no object alive). A handle leaked per object or per cycle exceeds this
/// within a few cycles, so the checks compare with this slack.
pub const POOL_HANDLE_SLACK: usize = 4;

/// What must come back to its value after a leak check or a lifecycle case.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Counts {
    pub contexts: usize,
    pub operations: usize,
    /// Handles other than threads ([`handles_but_threads`]).
    pub handles: usize,
}

impl Counts {
    pub fn now() -> Self {
        Self {
            contexts: windows_threadpool::live_contexts(),
            operations: windows_threadpool::io::live_operations(),
            handles: handle_count(),
        }
    }

    /// Whether `self` is back to `before`: contexts and operation blocks
    /// exactly, handles within [`POOL_HANDLE_SLACK`].
    pub fn back_to(&self, before: &Self) -> bool {
        self.contexts == before.contexts
            && self.operations == before.operations
            && self.handles <= before.handles + POOL_HANDLE_SLACK
    }

    /// The counts once they are back to `before` ([`Self::back_to`]), or
    /// after `patience` (a teardown handed to another thread finishes on its
    /// own time).
    pub fn settled(before: &Self, patience: std::time::Duration) -> Self {
        let deadline = std::time::Instant::now() + patience;
        loop {
            let now = Self::now();
            if now.back_to(before) || std::time::Instant::now() > deadline {
                return now;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}
