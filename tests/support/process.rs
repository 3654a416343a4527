//! A process's own open handles and private bytes, and the slack within
//! which they may move without counting as a leak. Shared by the leak
//! checks (`leak.rs`) and `examples/http_server`'s `--stats`, which the
//! HTTP soak of `cargo xtask stress` reads.
//!
//! Under Wine 8 two of the documented calls are stubs (docs/wine.md):
//! `GetProcessHandleCount` reports 0 handles, so handles are counted by
//! probing handle values ([`handle_count`]); and
//! `PROCESS_MEMORY_COUNTERS_EX::PrivateUsage` reads 0, so private bytes are
//! read from `PagefileUsage`, which Windows defines as the same quantity
//! (the commit charge of the process) and Wine fills in.
#![allow(dead_code)]

/// Handle values probed: every handle of these tests' processes is below it
/// (Wine hands out the lowest free multiple of 4; Windows' tables of a small
/// process stay far below too).
const HANDLE_LIMIT: usize = 1 << 16;

/// The handles this process has open, other than thread handles.
///
/// Counted by probing every handle value below [`HANDLE_LIMIT`]
/// (`GetHandleInformation` succeeds for an open one; `GetThreadId` for a
/// thread's), on Windows and under Wine alike: under Wine 8
/// `GetProcessHandleCount` is a stub that reports 0, and
/// `NtQuerySystemInformation(SystemExtendedHandleInformation)` was seen to
/// hang while other processes came and went. Thread handles are left out:
/// the pool's worker threads come and go (an idle one exits after a few
/// seconds), and no object of the crate owns a thread handle.
pub fn handle_count() -> usize {
    use windows_sys::Win32::Foundation::{GetHandleInformation, HANDLE};
    use windows_sys::Win32::System::Threading::GetThreadId;
    (4..HANDLE_LIMIT)
        .step_by(4)
        .filter(|&v| {
            let h = v as HANDLE;
            let mut flags = 0u32;
            // SAFETY: probing a handle value; an invalid one only fails the calls.
            unsafe { GetHandleInformation(h, &mut flags) != 0 && GetThreadId(h) == 0 }
        })
        .count()
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

/// The bytes of this process's private memory that are committed, summed
/// over its address space (`VirtualQuery`): what its Windows code holds,
/// heaps and thread stacks included. On Windows close to
/// [`private_bytes`]; under Wine 8 that one is the Linux process's
/// anonymous resident memory (`RssAnon`, equal to the byte), which also
/// counts Wine's own allocations on its Unix side, and this one does not
/// (docs/wine.md).
pub fn committed_private_bytes() -> usize {
    use windows_sys::Win32::System::Memory::{MEM_COMMIT, MEM_PRIVATE, MEMORY_BASIC_INFORMATION, VirtualQuery};
    let (mut addr, mut committed) = (0usize, 0usize);
    // SAFETY: zero is a valid value of this plain C struct.
    let mut info: MEMORY_BASIC_INFORMATION = unsafe { core::mem::zeroed() };
    let size = core::mem::size_of::<MEMORY_BASIC_INFORMATION>();
    // SAFETY: querying addresses only reads the process's memory map; one
    // that is past the user address space makes it return 0, ending the walk.
    while unsafe { VirtualQuery(addr as *const _, &mut info, size) } == size {
        if info.State == MEM_COMMIT && info.Type == MEM_PRIVATE {
            committed += info.RegionSize;
        }
        addr = info.BaseAddress as usize + info.RegionSize;
    }
    committed
}

/// The free bytes inside the process heap's committed regions (`HeapWalk`):
/// memory the heap keeps for its next allocations (it grows to a burst's
/// peak and keeps it), which [`committed_private_bytes`] counts.
pub fn heap_free_bytes() -> usize {
    use windows_sys::Win32::System::Memory::{GetProcessHeap, HeapLock, HeapUnlock, HeapWalk, PROCESS_HEAP_ENTRY};
    // Entries with none of the busy, region or uncommitted-range flags.
    const FREE: u16 = 0;
    // SAFETY: the heap is the process's own, locked for the walk (so no
    // other thread changes it meanwhile); `entry` starts zeroed, as a walk's
    // first call requires, and is only passed back to `HeapWalk`.
    unsafe {
        let heap = GetProcessHeap();
        let mut entry: PROCESS_HEAP_ENTRY = core::mem::zeroed();
        let mut free = 0;
        HeapLock(heap);
        while HeapWalk(heap, &mut entry) != 0 {
            if entry.wFlags == FREE {
                free += entry.cbData as usize;
            }
        }
        HeapUnlock(heap);
        free
    }
}

/// Handles the pool itself may hold at one moment and not at another,
/// whatever the objects do: under Wine 8 each wait bucket (the thread
/// behind up to 63 waits) has an event of its own, created with the bucket
/// and closed when the bucket's thread exits after a few idle seconds
/// (measured: the count of non-thread handles moved between 11 and 13 with
/// no object alive). A handle leaked per object or per cycle exceeds this
/// within a few cycles, so the checks compare with this slack.
pub const POOL_HANDLE_SLACK: usize = 4;

/// Private bytes may grow this much over a check without counting as a
/// leak: after a warm-up round the allocator (Rust's, over the Windows
/// heap) and the pool keep some memory cached, and the heap grows in
/// segments (measured under Wine 8: up to +1,015,808 bytes over 2,000
/// cycles of a cleanup group or a sleep, one heap segment). A leak of one context (about 100
/// bytes) per cycle over 100,000 cycles is 10 MB.
pub const PRIVATE_BYTES_SLACK: usize = 4 << 20;

/// The ids of this process's threads (a Toolhelp snapshot).
pub fn thread_ids() -> std::collections::HashSet<u32> {
    use windows_sys::Win32::Foundation::{CloseHandle, INVALID_HANDLE_VALUE};
    use windows_sys::Win32::System::Diagnostics::ToolHelp::{
        CreateToolhelp32Snapshot, TH32CS_SNAPTHREAD, THREADENTRY32, Thread32First, Thread32Next,
    };
    let me = std::process::id();
    let mut ids = std::collections::HashSet::new();
    // SAFETY: the snapshot handle is checked and closed; `entry` is sized as
    // the API requires.
    unsafe {
        let snap = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
        assert_ne!(snap, INVALID_HANDLE_VALUE, "CreateToolhelp32Snapshot: {}", std::io::Error::last_os_error());
        let mut entry: THREADENTRY32 = core::mem::zeroed();
        entry.dwSize = core::mem::size_of::<THREADENTRY32>() as u32;
        let mut ok = Thread32First(snap, &mut entry);
        while ok != 0 {
            if entry.th32OwnerProcessID == me {
                ids.insert(entry.th32ThreadID);
            }
            ok = Thread32Next(snap, &mut entry);
        }
        CloseHandle(snap);
    }
    ids
}

/// The process's threads, handles and private bytes, and the slack the
/// leak checks allow them, as the examples' `GET /stats` line ends
/// (`key=value`, which `cargo xtask`'s `parse_stats` reads).
pub fn resources_line() -> String {
    format!(
        "threads={} handles={} private_bytes={} handle_slack={} private_bytes_slack={}",
        thread_ids().len(),
        handle_count(),
        private_bytes(),
        POOL_HANDLE_SLACK,
        PRIVATE_BYTES_SLACK
    )
}
