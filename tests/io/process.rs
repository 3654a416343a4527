//! `process`: child processes as a tokio user expects them. The children
//! are Windows' (and Wine's) own `cmd` and `find`, and this test binary
//! re-executed where a child must write a lot or run until killed.
#![cfg(windows)]

use crate::support;

use crate::executors;
use executors::{on_each_executor, run_on};

use crate::counts;

use std::future::Future;
use std::io::{self, Read, Write};
use std::os::windows::io::{AsRawHandle, OwnedHandle};
use std::process::Stdio;
use std::time::Instant;

use windows_sys::Win32::Foundation::{
    CloseHandle, HANDLE, HANDLE_FLAG_INHERIT, SetHandleInformation, WAIT_OBJECT_0, WAIT_TIMEOUT,
};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE, WaitForSingleObject,
};
use windows_threadpool::io::OverlappedHandle;
use windows_threadpool::process::{Child, ChildStderr, ChildStdout, Command};

/// The exit code std's `Child::kill` (`TerminateProcess`) gives.
const KILLED: i32 = 1;

/// Our end of a child's stdout or stderr.
trait Reader: Send + Sync {
    fn read_into(&self, buf: Vec<u8>) -> impl Future<Output = (io::Result<usize>, Vec<u8>)> + Send + '_;
}

impl Reader for ChildStdout {
    fn read_into(&self, buf: Vec<u8>) -> impl Future<Output = (io::Result<usize>, Vec<u8>)> + Send + '_ {
        self.read(buf)
    }
}

impl Reader for ChildStderr {
    fn read_into(&self, buf: Vec<u8>) -> impl Future<Output = (io::Result<usize>, Vec<u8>)> + Send + '_ {
        self.read(buf)
    }
}

/// Reads `from` until a read gives `Ok(0)`.
async fn read_to_end(from: &impl Reader) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let (n, buf) = from.read_into(vec![0u8; 4096]).await;
        match n.expect("a read") {
            0 => return out,
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// Spawns `cmd` through the tests' one retry of Wine's dying start.
fn spawn(cmd: &mut Command) -> Child {
    let what = format!("{:?}", cmd.get_program());
    support::retry_start_with(&what, || cmd.spawn()).expect("spawn")
}

/// `cmd /c <line>`, the line passed as is.
fn cmd(line: &str) -> Command {
    let mut c = Command::new("cmd");
    c.raw_arg(format!("/c {line}"));
    c
}

/// In the child started by the returned command, runs `body` and exits
/// with `support::CHILD_DONE`; in the test, gives a command that re-runs
/// this test binary for `test` alone as that child (libtest prints its
/// header on stdout first).
fn reexec(test: &str, body: impl FnOnce()) -> Command {
    if std::env::var(support::CHILD_VAR).as_deref() == Ok(test) {
        body();
        io::stdout().flush().unwrap();
        std::process::exit(support::CHILD_DONE);
    }
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([test, "--exact", "--nocapture", "--test-threads=1"]).env(support::CHILD_VAR, test);
    c
}

/// Runs until its stdin reaches end of file.
fn until_stdin_ends() {
    let mut byte = [0u8; 1];
    while io::stdin().read(&mut byte).unwrap_or(0) != 0 {}
}

/// Another handle to the process `pid`, to see it end after its `Child` is gone.
struct Process(HANDLE);

impl Process {
    fn open(pid: u32) -> Self {
        // SAFETY: plain values; the handle is checked.
        let h = unsafe { OpenProcess(PROCESS_SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
        assert!(!h.is_null(), "OpenProcess: {}", io::Error::last_os_error());
        Self(h)
    }

    /// Whether it ended within `ms` milliseconds.
    fn ended_within(&self, ms: u32) -> bool {
        // SAFETY: the handle is open.
        match unsafe { WaitForSingleObject(self.0, ms) } {
            WAIT_OBJECT_0 => true,
            WAIT_TIMEOUT => false,
            other => panic!("WaitForSingleObject: {other}, {}", io::Error::last_os_error()),
        }
    }

    fn exit_code(&self) -> i32 {
        let mut code = 0;
        // SAFETY: the handle is open; `code` is a valid out-pointer.
        assert_ne!(unsafe { GetExitCodeProcess(self.0, &mut code) }, 0, "{}", io::Error::last_os_error());
        code as i32
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // SAFETY: the handle is open and closed once.
        unsafe { CloseHandle(self.0) };
    }
}

fn patience_ms() -> u32 {
    support::PATIENCE.as_millis() as u32
}

/// The program of the task's brief, as a tokio user writes it: every name
/// and shape, and what each line is said to do.
#[test]
fn a_tokio_users_program_runs_as_commented() {
    let test = "process::a_tokio_users_program_runs_as_commented";
    drop(reexec(test, until_stdin_ends));
    on_each_executor(move || async move {
        let mut child = support::retry_start_with("cmd", || {
            Command::new("cmd")
                .args(["/c", "echo one& echo two& exit 3"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .spawn()
        })
        .unwrap();
        let stdout: ChildStdout = child.stdout.take().unwrap();
        let (res, buf) = stdout.read(vec![0u8; 4096]).await;
        let mut out = buf[..res.unwrap()].to_vec();
        out.extend(read_to_end(&stdout).await);
        assert_eq!(out, b"one\r\ntwo\r\n");
        let status: std::process::ExitStatus = child.wait().await.unwrap();
        assert_eq!(status.code(), Some(3));

        // In place of `ping -n 100`: a child that runs until its stdin,
        // which we hold, ends.
        let mut long = spawn(reexec(test, || unreachable!()).stdin(Stdio::piped()).stdout(Stdio::null()));
        let stdin = long.stdin.take();
        long.start_kill().unwrap();
        let status = long.wait().await.unwrap();
        assert_eq!(status.code(), Some(KILLED));
        drop(stdin);
    });
    // The retry is synchronous: awaited on an executor of its own.
    let out: std::process::Output = support::retry_start_with("cmd", || {
        futures::executor::block_on(Command::new("cmd").args(["/c", "echo hi"]).output())
    })
    .unwrap();
    assert_eq!((out.stdout.as_slice(), out.stderr.as_slice()), (&b"hi\r\n"[..], &b""[..]));
    assert!(out.status.success());
}

/// The other use of the brief's stdout: tokio's `BufReader` and `lines`
/// through `io::Compat`.
#[cfg(feature = "tokio")]
#[test]
fn a_childs_stdout_reads_as_lines_through_compat() {
    on_each_executor(|| async {
        use tokio::io::AsyncBufReadExt;
        let mut child = spawn(cmd("echo one& echo two& exit 3").stdout(Stdio::piped()));
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(windows_threadpool::io::Compat::new(stdout)).lines();
        // `lines` strips "\r\n" as it strips "\n".
        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("one"));
        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("two"));
        assert_eq!(lines.next_line().await.unwrap(), None);
        assert_eq!(child.wait().await.unwrap().code(), Some(3));
    });
}

/// `output` pipes stdout and stderr, reads both, and gives the exit code;
/// the `Command` is left inheriting, so a later `status` captures nothing.
#[test]
fn output_gives_stdout_stderr_and_the_exit_code() {
    let mut command = cmd("echo out& echo err>&2& exit 4");
    let out = support::retry_start_with("cmd", || futures::executor::block_on(command.output())).unwrap();
    assert_eq!((out.stdout.as_slice(), out.stderr.as_slice()), (&b"out\r\n"[..], &b"err\r\n"[..]));
    assert_eq!(out.status.code(), Some(4));
    // `output` leaves the command as it was: a spawn of it then pipes
    // nothing, and `status` inherits.
    let mut quiet = cmd("exit 7");
    let out = support::retry_start_with("cmd", || futures::executor::block_on(quiet.output())).unwrap();
    assert_eq!(out.status.code(), Some(7));
    let mut child = spawn(&mut quiet);
    assert!(child.stdin.is_none() && child.stdout.is_none() && child.stderr.is_none(), "{child:?}");
    assert_eq!(futures::executor::block_on(child.wait()).unwrap().code(), Some(7));
    let status = support::retry_start_with("cmd", || futures::executor::block_on(quiet.status())).unwrap();
    assert_eq!(status.code(), Some(7));
}

/// A stream set through the `Command` is left as set by `output`: stderr
/// to null gives no stderr.
#[test]
fn output_leaves_a_stream_that_was_set() {
    let mut command = cmd("echo out& echo err>&2");
    command.stderr(Stdio::null());
    let out = support::retry_start_with("cmd", || futures::executor::block_on(command.output())).unwrap();
    assert_eq!((out.stdout.as_slice(), out.stderr.as_slice()), (&b"out\r\n"[..], &b""[..]));
}

#[test]
fn stderr_is_read_apart_from_stdout() {
    on_each_executor(|| async {
        let mut child = spawn(cmd("echo out& echo err>&2").stdout(Stdio::piped()).stderr(Stdio::piped()));
        let (out, err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let (out, err) = futures::future::join(read_to_end(&out), read_to_end(&err)).await;
        assert_eq!((out.as_slice(), err.as_slice()), (&b"out\r\n"[..], &b"err\r\n"[..]));
        assert!(child.wait().await.unwrap().success());
    });
}

/// Our writes reach the child's stdin, more than a pipe buffer's worth,
/// while its stdout is read; dropping `stdin` is its end of file: `find`
/// copies every matching line and exits only then.
#[test]
fn stdin_is_written_closed_and_read_back_through_find() {
    on_each_executor(|| async {
        let mut child = spawn(Command::new("find").raw_arg("\"line\"").stdin(Stdio::piped()).stdout(Stdio::piped()));
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let input: Vec<u8> = (0..8000).flat_map(|i| format!("line {i}\r\nskip {i}\r\n").into_bytes()).collect();
        let expected: Vec<u8> = (0..8000).flat_map(|i| format!("line {i}\r\n").into_bytes()).collect();
        assert!(input.len() > 128 * 1024);
        let write = async move {
            let (r, _) = stdin.write_all(input).await;
            r.unwrap();
            drop(stdin);
        };
        let (_, output) = futures::future::join(write, read_to_end(&stdout)).await;
        assert!(output == expected, "{} bytes read, {} expected", output.len(), expected.len());
        assert!(child.wait().await.unwrap().success());
    });
}

/// The bytes the large-output child writes after its marker.
fn large_payload() -> Vec<u8> {
    (0..8 << 20).map(|i: u32| (i % 251) as u8).collect()
}

const MARK: &[u8] = b"<payload>";

/// 8 MiB through a 64 KiB pipe: the child cannot finish writing before we
/// have read nearly all of it, so after the first read it still runs.
#[test]
fn a_large_output_is_read_while_the_child_writes() {
    let test = "process::a_large_output_is_read_while_the_child_writes";
    let child_side = reexec(test, || {
        let mut out = io::stdout().lock();
        out.write_all(MARK).unwrap();
        out.write_all(&large_payload()).unwrap();
    });
    drop(child_side);
    let expected = large_payload();
    on_each_executor(move || {
        let expected = expected.clone();
        async move {
            let mut child = spawn(reexec(test, || unreachable!()).stdout(Stdio::piped()));
            let stdout = child.stdout.take().unwrap();
            let (n, buf) = stdout.read(vec![0u8; 64 * 1024]).await;
            let mut out = buf[..n.unwrap()].to_vec();
            assert!(child.try_wait().unwrap().is_none(), "the child finished its 8 MiB before we read");
            out.extend(read_to_end(&stdout).await);
            let at = out.windows(MARK.len()).position(|w| w == MARK).expect("the marker");
            let payload = &out[at + MARK.len()..];
            assert!(payload == expected, "{} bytes after the marker, {} expected", payload.len(), expected.len());
            assert_eq!(child.wait().await.unwrap().code(), Some(support::CHILD_DONE));
        }
    });
}

/// A child that would run until its stdin ends (we hold it) is killed and
/// awaited at once: `kill` resolves with the child gone, its exit code
/// std's kill's, well within the patience (the executors' watchdog).
#[test]
fn kill_ends_a_long_running_child_at_once() {
    let test = "process::kill_ends_a_long_running_child_at_once";
    drop(reexec(test, until_stdin_ends));
    on_each_executor(move || async move {
        let (reader, writer) = io::pipe().unwrap();
        let mut child = spawn(reexec(test, || unreachable!()).stdin(reader).stdout(Stdio::null()));
        let id = child.id().expect("running");
        let started = Instant::now();
        child.kill().await.unwrap();
        assert!(started.elapsed() < support::PATIENCE);
        assert_eq!(child.id(), None, "reaped");
        assert_eq!(child.try_wait().unwrap().and_then(|s| s.code()), Some(KILLED), "child {id}");
        // Killing a reaped child is fine, as std's kill of an exited one.
        child.start_kill().unwrap();
        child.kill().await.unwrap();
        drop(writer);
    });
}

/// A child dropped with `kill_on_drop` and not reaped is terminated; one
/// without it runs on, and ends when its stdin does.
#[test]
fn kill_on_drop_ends_a_child_dropped_unreaped() {
    let test = "process::kill_on_drop_ends_a_child_dropped_unreaped";
    drop(reexec(test, until_stdin_ends));
    for kill_on_drop in [true, false] {
        let (reader, writer) = io::pipe().unwrap();
        let mut command = reexec(test, || unreachable!());
        command.stdin(reader).stdout(Stdio::null()).kill_on_drop(kill_on_drop);
        assert_eq!(command.get_kill_on_drop(), kill_on_drop);
        let child = spawn(&mut command);
        let process = Process::open(child.id().unwrap());
        drop(child);
        if kill_on_drop {
            assert!(process.ended_within(patience_ms()), "the child runs on after its drop");
            assert_eq!(process.exit_code(), KILLED);
        } else {
            assert!(!process.ended_within(0), "the child ended with its drop");
            drop(writer);
            assert!(process.ended_within(patience_ms()), "the child did not end with its stdin");
            assert_eq!(process.exit_code(), support::CHILD_DONE);
        }
    }
}

#[test]
fn a_program_that_does_not_exist_is_not_found() {
    let mut command = Command::new("windows-threadpool-no-such-program");
    let err = support::retry_start_with("a missing program", || command.spawn()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
}

/// std's `Command` keeps no copy of a piped end: with the `Command` alive,
/// the child's exit is our end of file (the trap `io::inbound_pipe`'s
/// kept writer sets cannot happen; a hang would be the watchdog's).
#[test]
fn stdout_ends_while_the_command_lives_on() {
    on_each_executor(|| async {
        let mut command = cmd("echo last line");
        command.stdout(Stdio::piped());
        let mut child = spawn(&mut command);
        let stdout = child.stdout.take().unwrap();
        assert_eq!(read_to_end(&stdout).await, b"last line\r\n");
        assert!(child.wait().await.unwrap().success());
        // The command lived throughout, and spawns again.
        let mut again = spawn(&mut command);
        assert_eq!(read_to_end(again.stdout.as_ref().unwrap()).await, b"last line\r\n");
        assert!(again.wait().await.unwrap().success());
    });
}

/// Once a wait has seen the status, the child is reaped: no id, and every
/// wait gives the same status. `wait` drops stdin.
#[test]
fn a_reaped_child_keeps_its_status() {
    run_on("futures::executor::block_on", async {
        let mut child = spawn(Command::new("find").raw_arg("\"x\"").stdin(Stdio::piped()).stdout(Stdio::null()));
        assert!(child.id().is_some() && child.raw_handle().is_some());
        assert!(child.stdin.is_some());
        // `find` ends only once its stdin does: `wait` must drop it.
        let status = child.wait().await.unwrap();
        assert!(child.stdin.is_none());
        assert_eq!((child.id(), child.raw_handle()), (None, None));
        assert_eq!(child.wait().await.unwrap(), status);
        assert_eq!(child.try_wait().unwrap(), Some(status));
    });
}

/// `try_from_owned` refuses a synchronous handle and an inheritable one.
#[test]
fn try_from_owned_refuses_synchronous_and_inheritable_handles() {
    let path = std::env::temp_dir().join(format!("wtp-process-try-from-{}", std::process::id()));
    std::fs::write(&path, b"x").unwrap();
    let sync = OwnedHandle::from(std::fs::File::open(&path).unwrap());
    // SAFETY: a handle of our own, with no duplicate; it is refused anyway.
    let refused = unsafe { OverlappedHandle::try_from_owned(sync) }.unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::InvalidInput, "{refused}");

    let open = || windows_threadpool::io::open_file(&path, std::fs::OpenOptions::new().read(true)).unwrap();
    let inheritable = open().into_owned();
    // SAFETY: `inheritable` is open.
    let set = unsafe { SetHandleInformation(inheritable.as_raw_handle(), HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT) };
    assert_ne!(set, 0, "{}", io::Error::last_os_error());
    // SAFETY: a handle of our own, with no duplicate (no child was started since).
    let refused = unsafe { OverlappedHandle::try_from_owned(inheritable) }.unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::InvalidInput, "{refused}");

    // SAFETY: a handle of our own, with no duplicate, bound nowhere.
    let fit = unsafe { OverlappedHandle::try_from_owned(open().into_owned()) }.unwrap();
    drop(fit);
    std::fs::remove_file(&path).unwrap();
}

/// 100 children with all three pipes, read and waited for: the process's
/// handles come back (within the pool's own slack, 4: a handle kept per
/// spawn would be 100).
#[test]
fn spawns_give_their_handles_back() {
    /// Each start is a round trip through Wine's server, about 0.1 s.
    const SPAWNS: usize = 100;
    support::alone("process::spawns_give_their_handles_back", || {
        let round = |n: usize| {
            windows_threadpool::task::block_on(async {
                for _ in 0..n {
                    let mut command = cmd("echo out& echo err>&2");
                    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
                    let out = spawn(&mut command).wait_with_output().await.unwrap();
                    assert_eq!((out.stdout.as_slice(), out.stderr.as_slice()), (&b"out\r\n"[..], &b"err\r\n"[..]));
                }
            })
        };
        round(10); // std's pipe machinery and the pool's wait threads, once
        let before = counts::handle_count();
        round(SPAWNS);
        let deadline = Instant::now() + support::PATIENCE;
        let mut after = counts::handle_count();
        while after > before + counts::POOL_HANDLE_SLACK && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            after = counts::handle_count();
        }
        assert!(after <= before + counts::POOL_HANDLE_SLACK, "handles {before} -> {after} over {SPAWNS} spawns");
    });
}
