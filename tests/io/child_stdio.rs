//! A child process's stdio through `io::inbound_pipe` and `io::outbound_pipe`:
//! our end async (`AsyncIo`), the child's an ordinary synchronous handle.
//! The children are Windows' (and Wine's) own `cmd` and `find`.
#![cfg(windows)]

use crate::support;

use crate::executors;
use executors::{on_each_executor, run_on};

use std::os::windows::io::{AsRawHandle, RawHandle};
use std::os::windows::process::CommandExt;
use std::process::{Command, Stdio};

use windows_sys::Wdk::Storage::FileSystem::{
    FILE_MODE_INFORMATION, FILE_SYNCHRONOUS_IO_ALERT, FILE_SYNCHRONOUS_IO_NONALERT, FileModeInformation,
};
use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, ERROR_BROKEN_PIPE, GetHandleInformation, HANDLE_FLAG_INHERIT,
};
use windows_sys::Win32::System::Pipes::PeekNamedPipe;
use windows_threadpool::io::{self, AsyncIo};
use windows_threadpool::wait::process_exit;

/// Reads `io` until a read gives `Ok(0)`.
async fn read_to_end(io: &AsyncIo) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let (n, buf) = io.read(vec![0u8; 4096]).await;
        match n.expect("a read") {
            0 => return out,
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// `cmd /c <line>`, the line passed as is.
fn cmd(line: &str) -> Command {
    let mut c = Command::new("cmd");
    c.raw_arg(format!("/c {line}"));
    c
}

/// `find "<s>"`: copies the lines of its stdin that contain `s`.
fn find(s: &str) -> Command {
    let mut c = Command::new("find");
    c.raw_arg(format!("\"{s}\""));
    c
}

fn inheritable(h: RawHandle) -> bool {
    let mut flags = 0;
    // SAFETY: `h` is an open handle; `flags` is a valid out-pointer.
    assert_ne!(unsafe { GetHandleInformation(h, &mut flags) }, 0, "{}", std::io::Error::last_os_error());
    flags & HANDLE_FLAG_INHERIT != 0
}

/// Whether `h`'s file object does synchronous I/O (not opened overlapped).
fn synchronous(h: RawHandle) -> bool {
    // SAFETY: FileModeInformation fills a FILE_MODE_INFORMATION.
    let info = unsafe { crate::file_information(h, FileModeInformation, FILE_MODE_INFORMATION { Mode: 0 }) };
    info.Mode & (FILE_SYNCHRONOUS_IO_ALERT | FILE_SYNCHRONOUS_IO_NONALERT) != 0
}

/// `PeekNamedPipe` on a pipe end: `Ok(bytes available)`, or the error
/// (`ERROR_BROKEN_PIPE` once the other end is closed).
fn peek(h: RawHandle) -> std::io::Result<u32> {
    let mut avail = 0;
    // SAFETY: `h` is an open pipe handle; a null buffer of size 0 peeks no data.
    let ok =
        unsafe { PeekNamedPipe(h, core::ptr::null_mut(), 0, core::ptr::null_mut(), &mut avail, core::ptr::null_mut()) };
    if ok == 0 { Err(std::io::Error::last_os_error()) } else { Ok(avail) }
}

#[test]
fn a_childs_stdout_is_read_to_the_end_of_file() {
    on_each_executor(|| async {
        let (ours, theirs) = io::inbound_pipe().unwrap();
        let mut child = support::spawn(cmd("echo hello").stdout(theirs)).unwrap();
        let stdout = AsyncIo::new(ours).unwrap();
        assert_eq!(read_to_end(&stdout).await, b"hello\r\n");
        assert!(process_exit(&mut child).await.unwrap().success());
    });
}

/// Our writes reach the child's stdin, more than a pipe buffer's worth
/// (64 KiB) while its stdout is read, and dropping our end is its end of
/// file: `find` copies every line and exits only then.
#[test]
fn a_childs_stdin_is_written_while_its_stdout_is_read() {
    on_each_executor(|| async {
        let (stdin, child_stdin) = io::outbound_pipe().unwrap();
        let (stdout, child_stdout) = io::inbound_pipe().unwrap();
        let mut child = support::spawn(find("line").stdin(child_stdin).stdout(child_stdout)).unwrap();
        let (stdin, stdout) = (AsyncIo::new(stdin).unwrap(), AsyncIo::new(stdout).unwrap());
        let input: Vec<u8> = (0..8000).flat_map(|i| format!("line {i}\r\nskip {i}\r\n").into_bytes()).collect();
        let expected: Vec<u8> = (0..8000).flat_map(|i| format!("line {i}\r\n").into_bytes()).collect();
        assert!(input.len() > 128 * 1024);
        let len = input.len();
        let write = async move {
            let (n, _) = stdin.write(input).await;
            assert_eq!(n.unwrap(), len);
            drop(stdin);
        };
        let (_, output) = futures::future::join(write, read_to_end(&stdout)).await;
        assert!(output == expected, "{} bytes read, {} expected", output.len(), expected.len());
        assert!(process_exit(&mut child).await.unwrap().success());
    });
}

#[test]
fn a_childs_stderr_is_read_apart_from_its_stdout() {
    run_on("futures::executor::block_on", async {
        let (out, child_out) = io::inbound_pipe().unwrap();
        let (err, child_err) = io::inbound_pipe().unwrap();
        let mut child = support::spawn(cmd("echo out& echo err>&2").stdout(child_out).stderr(child_err)).unwrap();
        let (out, err) = (AsyncIo::new(out).unwrap(), AsyncIo::new(err).unwrap());
        let (out, err) = futures::future::join(read_to_end(&out), read_to_end(&err)).await;
        assert_eq!((out.as_slice(), err.as_slice()), (&b"out\r\n"[..], &b"err\r\n"[..]));
        assert!(process_exit(&mut child).await.unwrap().success());
    });
}

#[test]
fn a_child_without_output_reads_0_at_once() {
    run_on("futures::executor::block_on", async {
        let (ours, theirs) = io::inbound_pipe().unwrap();
        let mut child = support::spawn(cmd("exit 0").stdout(theirs)).unwrap();
        let stdout = AsyncIo::new(ours).unwrap();
        let (n, _) = stdout.read(vec![0u8; 16]).await;
        assert_eq!(n.unwrap(), 0);
        assert!(process_exit(&mut child).await.unwrap().success());
    });
}

/// Neither end is inheritable (`Command` makes its own inheritable duplicate
/// for the child); ours is overlapped, theirs synchronous. The probes are
/// checked on handles of known kind first.
#[test]
fn neither_end_is_inheritable_and_only_ours_is_overlapped() {
    let (a, b) = io::pipe_pair().unwrap();
    assert!(!synchronous(a.as_raw_handle()) && !synchronous(b.as_raw_handle()), "pipe_pair's ends are overlapped");
    let file = std::fs::File::open(std::env::current_exe().unwrap()).unwrap();
    assert!(synchronous(file.as_raw_handle()), "std opens files synchronously");
    let inheritable_event = {
        use std::os::windows::io::{FromRawHandle, OwnedHandle};
        use windows_sys::Win32::Security::SECURITY_ATTRIBUTES;
        use windows_sys::Win32::System::Threading::CreateEventW;
        let sa = SECURITY_ATTRIBUTES {
            nLength: size_of::<SECURITY_ATTRIBUTES>() as u32,
            lpSecurityDescriptor: core::ptr::null_mut(),
            bInheritHandle: 1,
        };
        // SAFETY: `sa` is valid; a null name makes an unnamed event.
        let h = unsafe { CreateEventW(&sa, 1, 0, core::ptr::null()) };
        assert!(!h.is_null());
        // SAFETY: a fresh handle that nothing else owns.
        unsafe { OwnedHandle::from_raw_handle(h) }
    };
    assert!(inheritable(inheritable_event.as_raw_handle()) && !inheritable(file.as_raw_handle()));

    let (ours, theirs) = io::inbound_pipe().unwrap();
    let (r_ours, r_theirs) = (ours.as_raw_handle(), theirs.as_raw_handle());
    let (ours_out, theirs_in) = io::outbound_pipe().unwrap();
    let (w_ours, w_theirs) = (ours_out.as_raw_handle(), theirs_in.as_raw_handle());
    for (name, h) in [("inbound ours", r_ours), ("inbound theirs", r_theirs)]
        .into_iter()
        .chain([("outbound ours", w_ours), ("outbound theirs", w_theirs)])
    {
        assert!(!inheritable(h), "{name} is inheritable");
    }
    assert!(!synchronous(r_ours) && !synchronous(w_ours), "our ends are overlapped");
    assert!(synchronous(r_theirs) && synchronous(w_theirs), "their ends are synchronous");
}

/// Our end goes one way: a write to an inbound pipe's, a read from an
/// outbound pipe's, fail with `ERROR_ACCESS_DENIED`.
#[test]
fn our_end_goes_one_way() {
    let (inbound, _w) = io::inbound_pipe().unwrap();
    let (outbound, _r) = io::outbound_pipe().unwrap();
    let (inbound, outbound) = (AsyncIo::new(inbound).unwrap(), AsyncIo::new(outbound).unwrap());
    futures::executor::block_on(async {
        let (n, _) = inbound.write(b"x".to_vec()).await;
        assert_eq!(n.unwrap_err().raw_os_error(), Some(ERROR_ACCESS_DENIED as i32));
        let (n, _) = outbound.read(vec![0u8; 1]).await;
        assert_eq!(n.unwrap_err().raw_os_error(), Some(ERROR_ACCESS_DENIED as i32));
    });
}

/// A child spawned while the pipe is open inherits no copy of either end
/// (were theirs inheritable, this bystander's copy would hold back the end of
/// file until it exits, and the executor's watchdog would fail the test).
#[test]
fn a_child_spawned_meanwhile_holds_back_no_end_of_file() {
    let (ours, theirs) = io::inbound_pipe().unwrap();
    // Runs until its stdin is closed, below (its own stdio is std's).
    let mut bystander =
        support::spawn(find("x").stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null())).unwrap();
    let mut child = support::spawn(cmd("echo hello").stdout(theirs)).unwrap();
    let stdout = AsyncIo::new(ours).unwrap();
    run_on("futures::executor::block_on", async move {
        assert_eq!(read_to_end(&stdout).await, b"hello\r\n");
        assert!(process_exit(&mut child).await.unwrap().success());
    });
    assert!(bystander.try_wait().unwrap().is_none(), "the bystander was alive throughout");
    // A line `find` copies (to null) makes it exit 0.
    std::io::Write::write_all(&mut bystander.stdin.take().unwrap(), b"x\r\n").unwrap();
    assert!(bystander.wait().unwrap().success());
}

/// The `Command` keeps its copy of theirs until it is dropped: the pipe's
/// writer side stays open after the child exits, and closes with the
/// `Command`.
#[test]
fn the_end_of_file_waits_for_the_command_to_be_dropped() {
    let (ours, theirs) = io::inbound_pipe().unwrap();
    let mut command = cmd("exit 0");
    command.stdout(theirs);
    let mut child = support::spawn(&mut command).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(peek(ours.as_raw_handle()).unwrap(), 0, "the writer is open, nothing written");
    drop(command);
    let err = peek(ours.as_raw_handle()).expect_err("the writer is closed");
    assert_eq!(err.raw_os_error(), Some(ERROR_BROKEN_PIPE as i32), "{err}");
    let stdout = AsyncIo::new(ours).unwrap();
    let (n, _) = futures::executor::block_on(stdout.read(vec![0u8; 16]));
    assert_eq!(n.unwrap(), 0);
}
