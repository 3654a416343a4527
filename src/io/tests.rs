//! Unit tests of the status classification and the completion path (the
//! registry's own are in `registry.rs`).

use super::{handles::*, iocore::*, operation::*};
use core::any::TypeId;
use core::ffi::c_void;
use core::ptr::NonNull;
use core::sync::atomic::AtomicUsize;
use core::sync::atomic::Ordering;
use std::sync::Mutex;
use windows_sys::Win32::Foundation::{
    ERROR_BUSY, ERROR_END_OF_MEDIA, ERROR_FILEMARK_DETECTED, ERROR_HANDLE_EOF, ERROR_INVALID_PARAMETER,
    ERROR_MORE_DATA, ERROR_OPERATION_ABORTED, STATUS_ALERTED, STATUS_BUFFER_OVERFLOW, STATUS_CANCELLED,
    STATUS_DEVICE_BUSY, STATUS_END_OF_FILE, STATUS_END_OF_MEDIA, STATUS_FILEMARK_DETECTED, STATUS_INVALID_PARAMETER,
    STATUS_MORE_ENTRIES, STATUS_NO_MORE_FILES, STATUS_OBJECT_NAME_EXISTS, STATUS_PIPE_BROKEN, STATUS_SUCCESS,
    STATUS_WAIT_1,
};
use windows_sys::Win32::Foundation::{NTSTATUS, RtlNtStatusToDosError, STATUS_PENDING};
use windows_sys::Win32::System::IO::OVERLAPPED;
use windows_sys::Win32::System::Threading::PTP_IO;

/// [`deliver_in`] with no callback instance: these callbacks never use it.
unsafe fn deliver<F: Fn(&IoCompletion)>(
    header: &IoHeader,
    callback: &F,
    overlapped: *mut c_void,
    io_result: u32,
    bytes: usize,
    io: PTP_IO,
) {
    // SAFETY: the caller's guarantee, as for `deliver_in`.
    unsafe { deliver_in(0, header, callback, overlapped, io_result, bytes, io) }
}

#[test]
fn completion_is_queued_for_every_status_but_an_error() {
    let queued = [
        ("success", STATUS_SUCCESS),
        ("success", STATUS_WAIT_1),
        ("success", STATUS_ALERTED),
        ("pending", STATUS_PENDING),
        ("success", STATUS_MORE_ENTRIES),
        ("informational", STATUS_OBJECT_NAME_EXISTS),
        ("informational", 0x7FFF_FFFF),
        ("warning", STATUS_BUFFER_OVERFLOW),
        ("warning", STATUS_NO_MORE_FILES),
        ("warning", STATUS_DEVICE_BUSY),
        ("warning", STATUS_FILEMARK_DETECTED),
        ("warning", STATUS_END_OF_MEDIA),
        ("warning", 0xBFFF_FFFF_u32 as NTSTATUS),
    ];
    for (class, status) in queued {
        assert!(queues_completion(status), "{class} status {:#010x} queues a completion", status as u32);
        assert!(issue_status(status).is_ok(), "{class} status {:#010x}", status as u32);
    }
    let failed = [
        (STATUS_END_OF_FILE, ERROR_HANDLE_EOF),
        (STATUS_PIPE_BROKEN, windows_sys::Win32::Foundation::ERROR_BROKEN_PIPE),
        (STATUS_CANCELLED, ERROR_OPERATION_ABORTED),
        (STATUS_INVALID_PARAMETER, ERROR_INVALID_PARAMETER),
    ];
    for (status, win32) in failed {
        assert!(!queues_completion(status), "error status {:#010x} queues nothing", status as u32);
        let e = issue_status(status).expect_err("an error status fails synchronously");
        assert_eq!(e.raw_os_error(), Some(win32 as i32), "status {:#010x}", status as u32);
    }
    assert!(!queues_completion(0xC000_0000_u32 as NTSTATUS) && !queues_completion(-1));
    // The warnings above surface from Win32 calls as ordinary errors,
    // which is why the Win32 error code cannot classify them.
    for (status, win32) in [
        (STATUS_END_OF_MEDIA, ERROR_END_OF_MEDIA),
        (STATUS_DEVICE_BUSY, ERROR_BUSY),
        (STATUS_FILEMARK_DETECTED, ERROR_FILEMARK_DETECTED),
    ] {
        // SAFETY: a pure conversion.
        assert_eq!(unsafe { RtlNtStatusToDosError(status) }, win32);
    }
}

#[test]
fn a_completions_result_is_its_bytes_or_its_error() {
    let completion = |result: u32, bytes: usize| IoCompletion {
        instance: crate::instance::CallbackInstance::new(0),
        block: core::cell::Cell::new(None),
        type_id: TypeId::of::<()>(),
        id: OperationId { generation: 1, address: 0, slot: 0 },
        result,
        bytes,
    };
    assert_eq!(completion(0, 5).result().unwrap(), 5);
    let eof = completion(ERROR_HANDLE_EOF, 0).result().unwrap_err();
    assert_eq!(eof.raw_os_error(), Some(ERROR_HANDLE_EOF as i32));
    let more = completion(ERROR_MORE_DATA, 3);
    assert_eq!(more.result().unwrap_err().raw_os_error(), Some(ERROR_MORE_DATA as i32));
    assert_eq!(more.bytes_transferred(), 3);
}

type Claimed = Mutex<Vec<Operation<Vec<u8>>>>;

/// A header with one registered operation, counted as the submit path counts it.
fn one_outstanding(header: &IoHeader) -> OperationId {
    let block = Operation::new(vec![7u8; 4]).into_raw();
    let id = header.register(block.as_ptr() as usize);
    header.outstanding.fetch_add(1, Ordering::SeqCst);
    header.obligation.publish_submission(|| ());
    id
}

static FORGED_FREES: AtomicUsize = AtomicUsize::new(0);

/// Frees nothing: the forged header below lives on the stack.
unsafe fn forged_free(_: NonNull<OpHeader>) {
    FORGED_FREES.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn foreign_and_stale_completions_are_ignored() {
    let header = IoHeader::default();
    let calls = AtomicUsize::new(0);
    let claimed = core::mem::ManuallyDrop::new(Claimed::default());
    let callback = |c: &IoCompletion| {
        calls.fetch_add(1, Ordering::SeqCst);
        if let Some(op) = c.claim::<Vec<u8>>() {
            claimed.lock().unwrap().push(op);
        }
    };
    let id = one_outstanding(&header);
    let io = 0x1230 as PTP_IO;
    let settled = |n: usize| (calls.load(Ordering::SeqCst), header.outstanding.load(Ordering::SeqCst), n);

    // A foreign OVERLAPPED on the stack, inside something laid out like
    // an operation block of the same payload type.
    let mut forged = OpHeader {
        overlapped: OVERLAPPED::default(),
        type_id: TypeId::of::<Vec<u8>>(),
        free: forged_free,
        complete: None,
        parent: crate::callback::spans::Captured::NONE,
    };
    let p = (&raw mut forged).cast::<c_void>();
    // SAFETY: `p` is not in the registry.
    unsafe { deliver(&header, &callback, p, 0, 4, io) };
    assert_eq!(settled(FORGED_FREES.load(Ordering::SeqCst)), (0, 1, 0), "a foreign completion was delivered");
    assert!(header.obligation.is_owed(), "a foreign completion settled the drain");

    // The real completion is delivered once...
    let address = id.overlapped_address() as *mut c_void;
    // SAFETY: the operation never reached the kernel, so it is done with it.
    unsafe { deliver(&header, &callback, address, 0, 4, io) };
    assert_eq!(settled(0), (1, 0, 0));
    assert!(!header.obligation.is_owed());
    assert_eq!(claimed.lock().unwrap()[0].payload(), &[7u8; 4]);
    // ...and a second packet for the same (still allocated) address is stale.
    // SAFETY: the address is no longer in the registry.
    unsafe { deliver(&header, &callback, address, 0, 4, io) };
    assert_eq!(settled(0), (1, 0, 0), "a delivered address was delivered again");
    assert_eq!(lock(&header.registry).take(id.overlapped_address()), None);

    // A null OVERLAPPED (a packet posted without one).
    // SAFETY: null is never in the registry.
    unsafe { deliver(&header, &callback, core::ptr::null_mut(), 0, 0, io) };
    assert_eq!(settled(0), (1, 0, 0));
    drop(core::mem::ManuallyDrop::into_inner(claimed));
}

/// With the `trace` feature, a foreign completion leaves its record (in a
/// child process: the filter is read once per process).
#[cfg(feature = "trace")]
#[test]
fn foreign_completions_are_traced() {
    const NAME: &str = "io::tests::foreign_completions_are_traced";
    const CHILD: &str = "WINDOWS_THREADPOOL_IO_TEST_CHILD";
    const DONE: i32 = 0x5A;
    if std::env::var_os(CHILD).is_some() {
        assert!(crate::trace::wants("io"), "the child's filter does not arm io");
        let header = IoHeader::default();
        let id = one_outstanding(&header);
        let mut ov = OVERLAPPED::default();
        // SAFETY: `ov` is not in the registry.
        unsafe {
            deliver(&header, &|_: &IoCompletion| unreachable!(), (&raw mut ov).cast(), 4321, 0, 0xABC0 as PTP_IO)
        };
        let dump = crate::trace::dump();
        let row = dump.lines().find(|l| l.contains(" io trampoline-foreign ")).unwrap_or_else(|| panic!("{dump}"));
        assert!(row.ends_with("io=0xabc0 result=4321"), "{row}");
        assert_eq!(header.outstanding.load(Ordering::SeqCst), 1);
        // SAFETY: the operation never reached the kernel.
        unsafe { deliver(&header, &|_: &IoCompletion| {}, id.overlapped_address() as *mut c_void, 0, 0, 0) };
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(DONE);
    }
    let out = crate::test_start::output(
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .env(crate::trace::imp::FILTER_VAR, "io"),
    )
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(DONE),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Creates a pipe under the name `pipe_pair` gives its pipe with serial
/// number `n`, with `open_flags` besides `PIPE_ACCESS_DUPLEX`.
fn create_pipe(n: u64, open_flags: u32, instances: u32) -> std::io::Result<std::os::windows::io::OwnedHandle> {
    use std::os::windows::io::FromRawHandle;
    use windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE;
    use windows_sys::Win32::Storage::FileSystem::PIPE_ACCESS_DUPLEX;
    use windows_sys::Win32::System::Pipes::{CreateNamedPipeW, PIPE_TYPE_BYTE};
    let name = pipe_name(n);
    // SAFETY: `name` is NUL-terminated; a null security descriptor is the default.
    let h = unsafe {
        CreateNamedPipeW(
            name.as_ptr(),
            PIPE_ACCESS_DUPLEX | open_flags,
            PIPE_TYPE_BYTE,
            instances,
            0,
            0,
            0,
            core::ptr::null(),
        )
    };
    if h == INVALID_HANDLE_VALUE {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh handle that nothing else owns.
    Ok(unsafe { std::os::windows::io::OwnedHandle::from_raw_handle(h) })
}

/// Occupies the name `pipe_pair` gives its pipe with serial number `n`.
fn squat_pipe_name(n: u64, instances: u32) -> std::os::windows::io::OwnedHandle {
    create_pipe(n, 0, instances).unwrap()
}

/// Whether `err` is one of the errors that say a pipe name is taken.
fn says_name_taken(err: &std::io::Error) -> bool {
    use windows_sys::Win32::Foundation::{ERROR_ACCESS_DENIED, ERROR_PIPE_BUSY};
    matches!(err.raw_os_error().map(|e| e as u32), Some(ERROR_ACCESS_DENIED | ERROR_PIPE_BUSY))
}

#[test]
fn pipe_pair_takes_the_next_name_when_one_is_taken() {
    let n = PIPE_SERIAL.load(Ordering::SeqCst);
    // Single-instance squatters: one more instance is refused on Windows and
    // Wine alike (FILE_FLAG_FIRST_PIPE_INSTANCE alone is not honoured by Wine).
    let _squatters = [squat_pipe_name(n, 1), squat_pipe_name(n + 1, 1)];
    let (server, client) = pipe_pair().expect("the next name is free");
    assert_eq!(PIPE_SERIAL.load(Ordering::SeqCst), n + 3, "two names skipped, the next one used");
    // The pair is connected: a byte written at one end is read at the other.
    use std::io::{Read, Write};
    let mut client = std::fs::File::from(client.into_owned());
    let mut server = std::fs::File::from(server.into_owned());
    client.write_all(&[7]).unwrap();
    let mut b = [0];
    server.read_exact(&mut b).unwrap();
    assert_eq!(b, [7]);
}

#[test]
fn pipe_pair_gives_up_after_sixteen_taken_names() {
    let n = PIPE_SERIAL.load(Ordering::SeqCst);
    let squatters: Vec<_> = (n..n + 16).map(|n| squat_pipe_name(n, 1)).collect();
    let err = pipe_pair().expect_err("sixteen names in a row are taken");
    assert!(says_name_taken(&err), "{err}");
    assert_eq!(PIPE_SERIAL.load(Ordering::SeqCst), n + 16, "exactly sixteen names tried");
    drop(squatters);
    drop(pipe_pair().expect("names are free again"));
}

/// Pins a Wine difference `pipe_pair` must not rely on: Windows refuses a
/// `FILE_FLAG_FIRST_PIPE_INSTANCE` pipe whose name exists
/// (`ERROR_ACCESS_DENIED`); Wine 8 creates another instance. Source for
/// Windows: Microsoft's `CreateNamedPipeW` ("creation of the next instance
/// fails with ERROR_ACCESS_DENIED"), and Wine's conformance test
/// `dlls/ntdll/tests/pipe.c` `test_create_invalid` (`FILE_CREATE` on a taken
/// name: `STATUS_ACCESS_DENIED`, marked `todo_wine`).
#[test]
fn a_first_instance_flag_on_a_taken_name_is_refused_except_on_wine() {
    use windows_sys::Win32::Foundation::ERROR_ACCESS_DENIED;
    use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_FIRST_PIPE_INSTANCE;
    use windows_sys::Win32::System::Pipes::PIPE_UNLIMITED_INSTANCES;
    let n = PIPE_SERIAL.fetch_add(1, Ordering::SeqCst);
    let _squatter = squat_pipe_name(n, PIPE_UNLIMITED_INSTANCES);
    let second = create_pipe(n, FILE_FLAG_FIRST_PIPE_INSTANCE, PIPE_UNLIMITED_INSTANCES);
    if crate::sys::on_wine() {
        assert!(second.is_ok(), "Wine now honours FILE_FLAG_FIRST_PIPE_INSTANCE ({second:?}): update docs/wine.md");
    } else {
        let err = second.expect_err("a second first instance was created");
        assert_eq!(err.raw_os_error(), Some(ERROR_ACCESS_DENIED as i32), "{err}");
    }
}

/// Shows `handle` is overlapped: bound to an `Io`, a read with nothing to
/// read is outstanding (a synchronous handle would block the caller in the
/// read) until it is cancelled.
fn assert_a_read_with_nothing_to_read_pends(handle: OverlappedHandle) {
    let aborted = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&aborted);
    let io = super::Io::new(handle, move |c: &IoCompletion| {
        assert_eq!(c.io_result(), windows_sys::Win32::Foundation::ERROR_OPERATION_ABORTED);
        seen.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    let id = io.read(vec![0u8; 8]).map_err(std::io::Error::from).unwrap();
    assert_eq!(io.outstanding(), 1, "the read is pending");
    io.cancel(id).unwrap();
    io.wait();
    assert_eq!(aborted.load(Ordering::SeqCst), 1);
}

/// `open_file_with_flags` keeps the handle overlapped when the caller's flags
/// name `FILE_FLAG_OVERLAPPED` again (here a pipe's client end, opened by name).
#[test]
fn open_file_with_flags_tolerates_the_overlapped_flag_repeated() {
    use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_OVERLAPPED;
    let n = PIPE_SERIAL.fetch_add(1, Ordering::SeqCst);
    let _server = squat_pipe_name(n, 1);
    let name = pipe_name(n);
    let path = String::from_utf16(&name[..name.len() - 1]).unwrap();
    let client =
        open_file_with_flags(&path, std::fs::OpenOptions::new().read(true).write(true), FILE_FLAG_OVERLAPPED).unwrap();
    assert_a_read_with_nothing_to_read_pends(client);
}

/// Both ends `pipe_pair` returns are overlapped (each tested while the other
/// end is open, so its read cannot see a broken pipe).
#[test]
fn both_pipe_pair_ends_are_overlapped() {
    let (_server, client) = pipe_pair().unwrap();
    assert_a_read_with_nothing_to_read_pends(client);
    let (server, _client) = pipe_pair().unwrap();
    assert_a_read_with_nothing_to_read_pends(server);
}

/// `synchronous_io` tells the two kinds of file object apart: both ends of
/// `pipe_pair` are overlapped, a file `std` opens is synchronous
/// (`FILE_SYNCHRONOUS_IO_NONALERT`), as are the ends
/// `inbound_pipe` and `outbound_pipe` make for a child.
#[test]
fn synchronous_io_tells_overlapped_from_synchronous_handles() {
    use std::os::windows::io::AsRawHandle;
    let (server, client) = pipe_pair().unwrap();
    assert!(!synchronous_io(server.as_raw_handle()).unwrap(), "pipe_pair's server end is overlapped");
    assert!(!synchronous_io(client.as_raw_handle()).unwrap(), "pipe_pair's client end is overlapped");
    let file = std::fs::File::open(std::env::current_exe().unwrap()).unwrap();
    assert!(synchronous_io(file.as_raw_handle()).unwrap(), "std opens files synchronously");
    let (_ours, theirs) = inbound_pipe().unwrap();
    assert!(synchronous_io(theirs.as_raw_handle()).unwrap(), "inbound_pipe's end for a child is synchronous");
    let (_ours, theirs) = outbound_pipe().unwrap();
    assert!(synchronous_io(theirs.as_raw_handle()).unwrap(), "outbound_pipe's end for a child is synchronous");
}

/// `issue_result` reads the thread's last error only for `FALSE`: pending and
/// more-data are issued operations (a completion is queued), anything else
/// is the error.
#[test]
fn issue_result_classifies_the_last_error_of_a_false() {
    use windows_sys::Win32::Foundation::{ERROR_ACCESS_DENIED, ERROR_IO_PENDING, SetLastError};
    let after = |error: u32, ret: i32| {
        // SAFETY: no preconditions.
        unsafe { SetLastError(error) };
        issue_result(ret).map_err(|e| e.raw_os_error())
    };
    assert_eq!(after(ERROR_ACCESS_DENIED, 1), Ok(()), "TRUE is success whatever the last error");
    assert_eq!(after(ERROR_IO_PENDING, 0), Ok(()));
    assert_eq!(after(ERROR_MORE_DATA, 0), Ok(()));
    assert_eq!(after(ERROR_ACCESS_DENIED, 0), Err(Some(ERROR_ACCESS_DENIED as i32)));
    assert_eq!(after(ERROR_HANDLE_EOF, 0), Err(Some(ERROR_HANDLE_EOF as i32)));
}
