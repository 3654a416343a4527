//! What `spawn` does with a pipe's end that fails its check: std gives only
//! overlapped ends, so the check's failure is made here.

use std::io;
use std::os::windows::process::CommandExt;
use std::process::Stdio;

use windows_sys::Win32::Foundation::{CloseHandle, WAIT_OBJECT_0};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE, WaitForSingleObject,
};

use super::Child;

/// The child is killed and gone by the time the error comes back.
#[test]
fn an_end_that_fails_its_check_ends_the_child() {
    // `find` reads its stdin to the end; we hold the writer, so it would run on.
    let (reader, _writer) = io::pipe().unwrap();
    let mut cmd = std::process::Command::new("find");
    cmd.raw_arg("\"x\"").stdin(reader).stdout(Stdio::piped()).stderr(Stdio::null());
    let child = crate::test_start::spawn(&mut cmd).unwrap();
    // SAFETY: plain values; the handle is checked and closed below.
    let process = unsafe { OpenProcess(PROCESS_SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION, 0, child.id()) };
    assert!(!process.is_null(), "{}", io::Error::last_os_error());
    let refused = Child::from_std(child, false, |_| Err(io::Error::new(io::ErrorKind::InvalidInput, "refused")));
    assert_eq!(refused.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    // SAFETY: `process` is open.
    let gone = unsafe { WaitForSingleObject(process, 0) };
    let mut code = 0;
    // SAFETY: `process` is open; `code` is a valid out-pointer.
    assert_ne!(unsafe { GetExitCodeProcess(process, &mut code) }, 0);
    // SAFETY: `process` is open and closed once.
    unsafe { CloseHandle(process) };
    assert_eq!(gone, WAIT_OBJECT_0, "the child still runs");
    assert_eq!(code, 1, "the child ended otherwise than by std's kill");
}
