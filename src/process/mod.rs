//! Child processes for async code: a [`Command`] whose [`Child`] is awaited
//! on the pool and whose pipes are [`AsyncIo`](crate::io::AsyncIo)s.
//!
//! ```
//! use std::process::Stdio;
//! use windows_threadpool::process::Command;
//!
//! windows_threadpool::task::block_on(async {
//!     let mut child = Command::new("cmd").args(["/c", "echo hello"]).stdout(Stdio::piped()).spawn()?;
//!     let stdout = child.stdout.take().unwrap();
//!     let mut out = Vec::new();
//!     loop {
//!         let (n, buf) = stdout.read(vec![0u8; 256]).await;
//!         match n? {
//!             0 => break,
//!             n => out.extend_from_slice(&buf[..n]),
//!         }
//!     }
//!     assert_eq!(out, b"hello\r\n");
//!     assert!(child.wait().await?.success());
//!
//!     let output = Command::new("cmd").args(["/c", "echo hi& exit 3"]).output().await?;
//!     assert_eq!((output.stdout.as_slice(), output.status.code()), (&b"hi\r\n"[..], Some(3)));
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Coming from tokio
//! `tokio::process::Command` is [`Command`], with the same builder
//! methods, `kill_on_drop`, `spawn`, `output` and `status`; its `Child` is
//! [`Child`], with the same `stdin`/`stdout`/`stderr` fields, `id`, `wait`,
//! `try_wait`, `start_kill`, `kill` and `wait_with_output`. It runs under
//! any executor and needs no runtime. What differs:
//! - [`ChildStdin`], [`ChildStdout`] and [`ChildStderr`] read and write
//!   with owned buffers, as [`AsyncIo`](crate::io::AsyncIo) does
//!   (`let (n, buf) = stdout.read(buf).await`). For tokio's or futures'
//!   traits (`BufReader`, `lines`, `read_to_end`, `write_all`) wrap one in
//!   [`io::Compat`](crate::io::Compat) (features `tokio`, `futures-io`).
//! - [`start_kill`](Child::start_kill) of a child already reaped is `Ok`
//!   (as std's `kill`); tokio's is an error.
//! - [`output`](Command::output) pipes stdout and stderr, and gives the
//!   child a null stdin, only where they were not set through this
//!   `Command`'s own [`stdin`](Command::stdin), [`stdout`](Command::stdout)
//!   and [`stderr`](Command::stderr) (tokio's pipes them always), and
//!   leaves the `Command` as it was.
//! - The pipes cannot be handed to another child as its stdio (tokio's
//!   `TryInto<Stdio>`): a handle bound to the pool must reach no other
//!   process (see [Completions that are not
//!   ours](crate::io#completions-that-are-not-ours)). Pipe one child into
//!   another with `std::process`'s own `ChildStdout`, or copy.
//!
//! # Pipes
//! `std::process::Stdio` is opaque, so `std` makes the pipes: for each
//! stream set to [`Stdio::piped`](std::process::Stdio::piped), `spawn`
//! takes the parent's end out of std's `Child` and binds it to the pool as
//! an [`AsyncIo`](crate::io::AsyncIo). That end is the server end of a
//! pipe std creates for the spawn, opened for overlapped I/O and not
//! inheritable; the child gets the pipe's other end, a file object of its
//! own, so no I/O of the child's can complete on our end's port. Std does
//! this by its own implementation, not its documented API, so `spawn`
//! checks what it can
//! ([`OverlappedHandle::try_from_owned`](crate::io::OverlappedHandle::try_from_owned):
//! overlapped, not inheritable); an end that fails the check makes `spawn`
//! kill the child, wait for it to be gone, and return the error
//! (`InvalidInput`).
//!
//! Std's `Command` keeps no copy of a piped end (it makes a new pipe at
//! each spawn and gives the child's end away), so the child's exit closes
//! the last writer and our reads see end of file, even while the `Command`
//! lives on ([`io::inbound_pipe`](crate::io::inbound_pipe)'s pipes differ:
//! there the `Command` keeps a copy of the writer). A grandchild that
//! inherited the child's stdout holds it open until it exits too.
//!
//! # Waiting and killing
//! [`Child::wait`] is [`wait::process_exit`](crate::wait::process_exit):
//! a thread-pool wait on the process handle, no thread parked. It drops
//! stdin first (as tokio's and std's do). Once a wait has seen the exit
//! status, the child is reaped: [`id`](Child::id) is `None`, and every
//! later wait gives the same status. [`Child::start_kill`] is std's
//! `Child::kill` (`TerminateProcess`, exit code 1); [`Child::kill`] adds
//! the wait. The process handle is held until the `Child` is dropped, so
//! a kill always reaches this process, never one that reused its id.
//!
//! Dropping a `Child` lets the process run on, unless
//! [`kill_on_drop`](Command::kill_on_drop) was set: then a child not yet
//! reaped is terminated (without waiting for it to be gone).
//!
//! # No job object
//! A child is not put in a job object, as tokio puts none: killing it ends
//! that process alone, and its own children live on (`cmd /c` running a
//! program, killed, leaves the program running). A job is a policy over a
//! whole tree of processes, which the caller may have set already (a CI
//! runner or a service host runs its processes in one) and which limits
//! what the child may do with jobs of its own. Where the whole tree must
//! end, a job of your own does it (`JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`),
//! assigned through [`raw_handle`](Child::raw_handle) (children the child
//! started before the assignment are not in it).

use core::future::Future;
use std::ffi::OsStr;
use std::io;
use std::os::windows::process::CommandExt;
use std::path::Path;
use std::process::{CommandArgs, CommandEnvs, ExitStatus, Output, Stdio};

mod child;
mod stdio;
#[cfg(test)]
mod tests;

pub use child::Child;
pub use stdio::{ChildStderr, ChildStdin, ChildStdout};

/// A process to start: [`std::process::Command`], whose [`spawn`](Self::spawn)
/// gives a [`Child`] to await and whose [`output`](Self::output) and
/// [`status`](Self::status) are futures.
///
/// The builder methods are std's, returning `&mut Self` to chain; see the
/// [module docs](self).
#[derive(Debug)]
pub struct Command {
    std: std::process::Command,
    kill_on_drop: bool,
    /// Which of stdin, stdout and stderr were set through this type.
    set: [bool; 3],
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Command>();
};

const STDIN: usize = 0;
const STDOUT: usize = 1;
const STDERR: usize = 2;

impl From<std::process::Command> for Command {
    /// Wraps `std`; its stdio counts as not set (see [`output`](Command::output)).
    fn from(std: std::process::Command) -> Self {
        Self { std, kill_on_drop: false, set: [false; 3] }
    }
}

impl Command {
    /// A command to run `program` (std's [`new`](std::process::Command::new)).
    pub fn new<S: AsRef<OsStr>>(program: S) -> Self {
        std::process::Command::new(program).into()
    }

    /// Adds an argument (std's [`arg`](std::process::Command::arg)).
    pub fn arg<S: AsRef<OsStr>>(&mut self, arg: S) -> &mut Self {
        self.std.arg(arg);
        self
    }

    /// Adds arguments (std's [`args`](std::process::Command::args)).
    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.std.args(args);
        self
    }

    /// Appends an argument to the command line as is, unquoted (std's
    /// [`raw_arg`](CommandExt::raw_arg)).
    pub fn raw_arg<S: AsRef<OsStr>>(&mut self, arg: S) -> &mut Self {
        self.std.raw_arg(arg);
        self
    }

    /// Sets an environment variable (std's [`env`](std::process::Command::env)).
    pub fn env<K, V>(&mut self, key: K, val: V) -> &mut Self
    where
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.std.env(key, val);
        self
    }

    /// Sets environment variables (std's [`envs`](std::process::Command::envs)).
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.std.envs(vars);
        self
    }

    /// Removes an environment variable (std's
    /// [`env_remove`](std::process::Command::env_remove)).
    pub fn env_remove<K: AsRef<OsStr>>(&mut self, key: K) -> &mut Self {
        self.std.env_remove(key);
        self
    }

    /// Starts from an empty environment (std's
    /// [`env_clear`](std::process::Command::env_clear)).
    pub fn env_clear(&mut self) -> &mut Self {
        self.std.env_clear();
        self
    }

    /// Sets the working directory (std's
    /// [`current_dir`](std::process::Command::current_dir)).
    pub fn current_dir<P: AsRef<Path>>(&mut self, dir: P) -> &mut Self {
        self.std.current_dir(dir);
        self
    }

    /// Sets the child's stdin; [`Stdio::piped`] gives [`Child::stdin`] a
    /// [`ChildStdin`].
    pub fn stdin<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Self {
        self.std.stdin(cfg);
        self.set[STDIN] = true;
        self
    }

    /// Sets the child's stdout; [`Stdio::piped`] gives [`Child::stdout`] a
    /// [`ChildStdout`].
    pub fn stdout<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Self {
        self.std.stdout(cfg);
        self.set[STDOUT] = true;
        self
    }

    /// Sets the child's stderr; [`Stdio::piped`] gives [`Child::stderr`] a
    /// [`ChildStderr`].
    pub fn stderr<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Self {
        self.std.stderr(cfg);
        self.set[STDERR] = true;
        self
    }

    /// Sets the process creation flags (std's
    /// [`creation_flags`](CommandExt::creation_flags)).
    pub fn creation_flags(&mut self, flags: u32) -> &mut Self {
        self.std.creation_flags(flags);
        self
    }

    /// Whether a [`Child`] of this command that is dropped before it is
    /// reaped terminates the process; `false` unless set (as tokio's).
    pub fn kill_on_drop(&mut self, kill_on_drop: bool) -> &mut Self {
        self.kill_on_drop = kill_on_drop;
        self
    }

    /// Whether [`kill_on_drop`](Self::kill_on_drop) is set.
    pub fn get_kill_on_drop(&self) -> bool {
        self.kill_on_drop
    }

    /// The program (std's [`get_program`](std::process::Command::get_program)).
    pub fn get_program(&self) -> &OsStr {
        self.std.get_program()
    }

    /// The arguments (std's [`get_args`](std::process::Command::get_args)).
    pub fn get_args(&self) -> CommandArgs<'_> {
        self.std.get_args()
    }

    /// The environment changes (std's [`get_envs`](std::process::Command::get_envs)).
    pub fn get_envs(&self) -> CommandEnvs<'_> {
        self.std.get_envs()
    }

    /// The working directory, if set (std's
    /// [`get_current_dir`](std::process::Command::get_current_dir)).
    pub fn get_current_dir(&self) -> Option<&Path> {
        self.std.get_current_dir()
    }

    /// The std command underneath.
    pub fn as_std(&self) -> &std::process::Command {
        &self.std
    }

    /// The std command underneath, for what this type does not forward.
    /// Stdio set through it counts as not set (see [`output`](Self::output)).
    pub fn as_std_mut(&mut self) -> &mut std::process::Command {
        &mut self.std
    }

    /// The std command underneath, given up.
    pub fn into_std(self) -> std::process::Command {
        self.std
    }

    /// Starts the process. stdin, stdout and stderr are inherited unless
    /// set; each one set to [`Stdio::piped`] is a field of the [`Child`].
    ///
    /// # Errors
    /// Std's `spawn` errors (`NotFound` for a program that does not exist);
    /// `InvalidInput` if a pipe's end from std is not fit to bind (the
    /// child is killed then, see [Pipes](self#pipes)); the OS error if
    /// binding one fails.
    pub fn spawn(&mut self) -> io::Result<Child> {
        // SAFETY: `from_std` hands `bind` only the piped ends it takes out
        // of the `std::process::Child` that this `spawn` just returned.
        Child::from_std(self.std.spawn()?, self.kill_on_drop, |end| unsafe { stdio::bind(end) })
    }

    /// Starts the process and collects its output, reading stdout and
    /// stderr concurrently while it runs.
    ///
    /// Stdout and stderr are piped, and stdin is null, unless they were set
    /// through this `Command`; those it sets go back to inheriting after
    /// (what they were, unless set through [`as_std_mut`](Self::as_std_mut),
    /// whose settings of them are replaced). The child is
    /// started when the future is first polled; dropping the future drops
    /// the [`Child`] (killed, with [`kill_on_drop`](Self::kill_on_drop)).
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn), and the first error reading or waiting.
    // Not an `async fn`: the signature promises `Send`.
    #[allow(clippy::manual_async_fn)]
    pub fn output(&mut self) -> impl Future<Output = io::Result<Output>> + Send + '_ {
        async move {
            let child = self.spawn_defaulting([Stdio::null, Stdio::piped, Stdio::piped]);
            child?.wait_with_output().await
        }
    }

    /// Starts the process and resolves to its exit status; stdin, stdout
    /// and stderr are inherited unless set (as std's `status`). The child is
    /// started when the future is first polled.
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn), and waiting's.
    // Not an `async fn`: the signature promises `Send`.
    #[allow(clippy::manual_async_fn)]
    pub fn status(&mut self) -> impl Future<Output = io::Result<ExitStatus>> + Send + '_ {
        async move { self.spawn()?.wait().await }
    }

    /// [`spawn`](Self::spawn) with `defaults` (stdin, stdout, stderr) for
    /// the streams not set through this type; those go back to inheriting
    /// after, which is what an unset stream does at a spawn.
    fn spawn_defaulting(&mut self, defaults: [fn() -> Stdio; 3]) -> io::Result<Child> {
        let setters: [fn(&mut std::process::Command, Stdio) -> &mut std::process::Command; 3] =
            [std::process::Command::stdin, std::process::Command::stdout, std::process::Command::stderr];
        let set = self.set;
        for i in (0..3).filter(|&i| !set[i]) {
            setters[i](&mut self.std, defaults[i]());
        }
        let child = self.spawn();
        for i in (0..3).filter(|&i| !set[i]) {
            setters[i](&mut self.std, Stdio::inherit());
        }
        child
    }
}
