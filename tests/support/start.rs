//! Starting a process from a test, with Wine's two start-up failures
//! started once more, and saying so: shared by the integration tests
//! (`tests/support`), the crate's own (`src/lib.rs`), the benchmark
//! program (`bench`) and `cargo xtask test`'s check of the examples
//! (`xtask`, the error code).
#![allow(dead_code)]

use std::process::Command;

/// `STATUS_DLL_INIT_FAILED`: a process that ended before its `main`, its
/// DLLs' initialisation having failed. Under heavy load Wine starts a
/// process so now and then; a child that ends so having written nothing
/// (libtest prints its header first) is started once more, as the Wine
/// runner (`xtask/runner`) does for a test binary.
pub(crate) const DLL_INIT_FAILED: u32 = 0xC000_0142;

/// Whether a child ended as Wine's failed start does (see [`DLL_INIT_FAILED`]):
/// that status, nothing written.
pub(crate) fn failed_to_start(out: &std::process::Output) -> bool {
    out.status.code() == Some(DLL_INIT_FAILED as i32) && out.stdout.is_empty() && out.stderr.is_empty()
}

/// `ERROR_INTERNAL_ERROR`: what Wine's `CreateProcess` fails with when the
/// new process dies before it has finished starting (its server-side
/// start-up record ends with no success and no exit code). Under load Wine
/// does so now and then; [`spawn`] and [`output`] start such a child once
/// more, as the tests' re-execution of their binary does a child ending with
/// [`DLL_INIT_FAILED`].
pub(crate) const INTERNAL_ERROR: i32 = 1359;

/// Whether a spawn failed as Wine's dying start does (see [`INTERNAL_ERROR`]).
pub(crate) fn spawn_died_starting(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(INTERNAL_ERROR)
}

/// Starts something at most twice (`start`: a spawn, an `output`, a
/// `status`, of std's `Command` or the crate's), the second time only after
/// Wine's dying start ([`spawn_died_starting`]) and saying so, naming it by
/// `what`; every test that starts a process starts it here.
pub(crate) fn retry_start_with<T>(what: &str, mut start: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    match start() {
        Err(e) if spawn_died_starting(&e) => {
            note_retry(&format!(
                "starting {what} failed with {e} (Wine's CreateProcess when the child dies starting); retrying once"
            ));
            start()
        }
        started => started,
    }
}

/// [`retry_start_with`] for std's `cmd`, named by its program.
fn retry_start<T>(cmd: &mut Command, mut start: impl FnMut(&mut Command) -> std::io::Result<T>) -> std::io::Result<T> {
    let what = format!("{:?}", cmd.get_program());
    retry_start_with(&what, || start(cmd))
}

/// [`Command::spawn`], started again once after Wine's dying start.
pub(crate) fn spawn(cmd: &mut Command) -> std::io::Result<std::process::Child> {
    retry_start(cmd, Command::spawn)
}

/// [`Command::output`], started again once after Wine's dying start.
pub(crate) fn output(cmd: &mut Command) -> std::io::Result<std::process::Output> {
    retry_start(cmd, Command::output)
}

/// Says on stderr that a child was started again and, when the Wine runner's
/// log is named (`cargo xtask test` lists it), appends it there.
pub(crate) fn note_retry(msg: &str) {
    use std::io::Write;
    eprintln!("support: {msg}");
    if let Some(path) = std::env::var_os("WINDOWS_THREADPOOL_RUNNER_LOG") {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path);
        let _ = file.and_then(|mut f| writeln!(f, "{msg}"));
    }
}
