//! `wine-runner`: what `xtask/wine-run`, the cargo runner for
//! `x86_64-pc-windows-gnu` on Linux, executes once it has checked the prefix.
//! `cargo xtask setup` builds it and installs it into the Wine prefix.
//!
//! It runs `wine <exe> <args>`, passes the exe's output through as it
//! arrives, and passes its exit status on. Exactly two outcomes, both with
//! nothing written to stdout or stderr, are retried, once: exit code 1
//! within [`SIGNATURE_WINDOW`] of the start (Wine failing to start a process
//! under heavy machine load; seen about twice in 30 full runs, at 20 to
//! 70 ms), and exit code 66 at any time, the low byte of
//! `STATUS_DLL_INIT_FAILED` (`0xC0000142`: the process ended before its
//! `main`, its DLLs' initialisation having failed; seen once at four tests
//! at once on 2 cores, after 311 ms). Neither is ever a test's own outcome: a
//! libtest binary prints its `running N tests` header before anything can
//! fail, a panic prints its message and exits 101, and an abort or a crash
//! exits with another code. The retry is
//! announced on stderr and, when [`LOG_VAR`] names a file, appended to it, so
//! `cargo xtask test` can list every retry even in a green run.
//!
//! To know whether the exe wrote anything, its stdout and stderr are pipes
//! the runner copies, chunk by chunk as they arrive, to its own stdout and
//! stderr (so the test harness above still captures or streams them). Tests
//! that re-execute their own binary do so inside Wine and never pass through
//! here. After the exe exits the runner waits up to [`OUTPUT_GRACE`] for the
//! pipes to close; a process the exe left running may hold them longer, and
//! the runner then says so and stops waiting.

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A process that exits with code 1, silently, within this long of its
/// start shows Wine's start-up failure signature.
const SIGNATURE_WINDOW: Duration = Duration::from_millis(100);
/// How long to wait, after the exe exits, for its output pipes to close.
const OUTPUT_GRACE: Duration = Duration::from_secs(1);
/// Names a file every retry is appended to (one line each).
const LOG_VAR: &str = "WINDOWS_THREADPOOL_RUNNER_LOG";

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(exe) = args.next() else {
        eprintln!("wine-runner: usage: wine-runner <exe> [args...]");
        return ExitCode::from(2);
    };
    let rest: Vec<OsString> = args.collect();
    let wine = || {
        let mut c = Command::new("wine");
        c.arg(&exe).args(&rest);
        c
    };
    let what = exe.to_string_lossy().into_owned();
    let note = |msg: &str| {
        eprintln!("wine-runner: {msg}");
        if let Some(path) = std::env::var_os(LOG_VAR) {
            let line = format!("{msg}\n");
            let appended = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .and_then(|mut f| f.write_all(line.as_bytes()));
            if let Err(e) = appended {
                eprintln!("wine-runner: cannot append to {}: {e}", path.to_string_lossy());
            }
        }
    };
    match run_retrying(&what, wine, SIGNATURE_WINDOW, terminal, note) {
        Ok(status) => exit_code(status),
        Err(e) => {
            eprintln!("wine-runner: cannot start wine: {e}");
            ExitCode::from(127)
        }
    }
}

/// Where a run's stdout and stderr go.
type Sinks = (Box<dyn Write + Send>, Box<dyn Write + Send>);

fn terminal() -> Sinks {
    (Box::new(io::stdout()), Box::new(io::stderr()))
}

/// The exe's own status, as this process's exit code: a signal `n` reads as
/// `128 + n`, as a shell reports it.
fn exit_code(status: ExitStatus) -> ExitCode {
    if let Some(code) = status.code() {
        // A Unix exit code is 0..=255.
        return ExitCode::from(code as u8);
    }
    #[cfg(unix)]
    if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(&status) {
        // Wine turns a Windows exception into an exit code, so a signal
        // means Wine itself died (or something killed it): say which.
        eprintln!("wine-runner: wine was killed by signal {sig}; exiting with {}", 128 + sig);
        return ExitCode::from((128 + sig) as u8);
    }
    ExitCode::FAILURE
}

/// What one run of the command showed.
#[derive(Debug)]
struct Run {
    status: ExitStatus,
    /// From the start to the process's exit.
    elapsed: Duration,
    /// Any byte on stdout or stderr.
    wrote: bool,
    /// Both pipes closed within the grace period.
    drained: bool,
}

/// The exit code Wine gives a process whose DLLs failed to initialise:
/// `STATUS_DLL_INIT_FAILED` (`0xC0000142`), of which a Unix exit code keeps
/// the low byte.
const DLL_INIT_FAILED: i32 = 0x42;

impl Run {
    fn is_start_up_failure(&self, window: Duration) -> bool {
        let signature = match self.status.code() {
            Some(1) => self.elapsed <= window,
            Some(DLL_INIT_FAILED) => true,
            _ => false,
        };
        signature && !self.wrote && self.drained
    }
}

/// Runs `make()`'s command; when the run shows the start-up failure
/// signature, `note`s it and runs it once more. Returns the last run's status.
fn run_retrying(
    what: &str,
    mut make: impl FnMut() -> Command,
    window: Duration,
    sinks: fn() -> Sinks,
    mut note: impl FnMut(&str),
) -> io::Result<ExitStatus> {
    let first = run_once(&mut make(), sinks())?;
    if !first.is_start_up_failure(window) {
        return Ok(first.status);
    }
    note(&format!(
        "{what} exited with code {} after {} ms having written nothing (Wine's start-up failure signature); retrying \
         once",
        first.status.code().unwrap_or_default(),
        first.elapsed.as_millis()
    ));
    Ok(run_once(&mut make(), sinks())?.status)
}

fn run_once(cmd: &mut Command, (out, err): Sinks) -> io::Result<Run> {
    let started = Instant::now();
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let wrote = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = mpsc::channel();
    pump(child.stdout.take().expect("piped"), out, Arc::clone(&wrote), done_tx.clone());
    pump(child.stderr.take().expect("piped"), err, Arc::clone(&wrote), done_tx);
    let status = child.wait()?;
    let elapsed = started.elapsed();
    let deadline = Instant::now() + OUTPUT_GRACE;
    let drained = (0..2).all(|_| done_rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).is_ok());
    if !drained {
        eprintln!(
            "wine-runner: the exe exited ({status}) but its output is still held open {} ms later \
             (a process it started is still running); not waiting for it",
            OUTPUT_GRACE.as_millis()
        );
    }
    Ok(Run { status, elapsed, wrote: wrote.load(Ordering::SeqCst), drained })
}

/// Copies `from` to `to` as data arrives, on its own thread; sends on `done`
/// at end of file.
fn pump(
    mut from: impl Read + Send + 'static,
    mut to: Box<dyn Write + Send>,
    wrote: Arc<AtomicBool>,
    done: mpsc::Sender<()>,
) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        loop {
            match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    wrote.store(true, Ordering::SeqCst);
                    // When our own reader has gone, keep draining so the exe never blocks on a full pipe.
                    let _ = to.write_all(&buf[..n]).and_then(|()| to.flush());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = done.send(());
    });
}

// The tests drive `sh`; the runner itself only ever runs on Linux.
#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn quiet() -> Sinks {
        (Box::new(io::sink()), Box::new(io::sink()))
    }

    /// Runs `script` under `sh` with the retry logic; returns (exit code, attempts, notes).
    fn run(script: &str, window: Duration) -> (Option<i32>, usize, usize) {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("wine-runner-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let attempts = dir.join("attempts");
        let make = || {
            let mut c = Command::new("sh");
            c.args(["-c", &format!("echo x >> \"$D/attempts\"; {script}")]).env("D", &dir);
            c
        };
        let mut notes = 0;
        let status = run_retrying("test", make, window, quiet, |_| notes += 1).unwrap();
        let n = std::fs::read_to_string(&attempts).unwrap().lines().count();
        std::fs::remove_dir_all(&dir).unwrap();
        (status.code(), n, notes)
    }

    const WIDE: Duration = Duration::from_secs(60);

    #[test]
    fn a_silent_quick_exit_1_is_retried_once() {
        assert_eq!(run("exit 1", WIDE), (Some(1), 2, 1));
        // The retry's outcome is what counts.
        assert_eq!(run("[ -e \"$D/m\" ] && exit 0; : > \"$D/m\"; exit 1", WIDE), (Some(0), 2, 1));
    }

    #[test]
    fn a_silent_exit_66_is_retried_once_however_late() {
        assert_eq!(run("exit 66", WIDE), (Some(66), 2, 1));
        assert_eq!(run("sleep 0.3; exit 66", Duration::from_millis(100)), (Some(66), 2, 1));
        assert_eq!(run("[ -e \"$D/m\" ] && exit 0; : > \"$D/m\"; exit 66", WIDE), (Some(0), 2, 1));
    }

    #[test]
    fn anything_else_is_not_retried() {
        assert_eq!(run("echo out; exit 66", WIDE), (Some(66), 1, 0));
        assert_eq!(run("echo err >&2; exit 66", WIDE), (Some(66), 1, 0));
        assert_eq!(run("echo out; exit 1", WIDE), (Some(1), 1, 0));
        assert_eq!(run("echo err >&2; exit 1", WIDE), (Some(1), 1, 0));
        assert_eq!(run("exit 2", WIDE), (Some(2), 1, 0));
        assert_eq!(run("exit 0", WIDE), (Some(0), 1, 0));
        assert_eq!(run("kill -9 $$", WIDE), (None, 1, 0));
        // Slower than the window: not the signature.
        assert_eq!(run("sleep 0.3; exit 1", Duration::from_millis(100)), (Some(1), 1, 0));
    }

    #[test]
    fn output_is_passed_through() {
        let out = Arc::new(std::sync::Mutex::new(Vec::new()));
        struct Shared(Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (o, e) = (Shared(Arc::clone(&out)), Shared(Arc::clone(&out)));
        let run = run_once(
            Command::new("sh").args(["-c", "printf 'a\\n'; printf 'b\\n' >&2; exit 3"]),
            (Box::new(o), Box::new(e)),
        )
        .unwrap();
        assert_eq!(run.status.code(), Some(3));
        assert!(run.wrote && run.drained);
        let mut got = out.lock().unwrap().clone();
        got.sort();
        assert_eq!(got, b"\n\nab");
    }
}
