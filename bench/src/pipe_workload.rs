//! N7, N8: named pipes in the socket table, its columns and its helpers
//! (`net_workload`), each implementation's pipe types in place of its
//! sockets; N7b, N8b: the same over the crate's `io::pipe_pair` (an
//! anonymous connected pair, each end an `AsyncIo`), beside the raw
//! column of N7 and N8.
//!
//! Every round measures every column once, in turn (and `pipe_pair` after
//! them), so a slow stretch of the machine lands on all of them; a cell is
//! the median over rounds. Every pipe has a name of its own (process id
//! and a counter) and one instance, created with `FILE_FLAG_FIRST_PIPE_INSTANCE`
//! where the implementation lets it be set, in byte mode with 64 KiB
//! buffers (every implementation's default), rejecting remote clients.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::{FromRawHandle, OwnedHandle};
use std::sync::atomic::{AtomicUsize, Ordering};

use windows_sys::Win32::Foundation::{ERROR_PIPE_CONNECTED, INVALID_HANDLE_VALUE};
use windows_sys::Win32::Storage::FileSystem::{
    FILE_FLAG_FIRST_PIPE_INSTANCE, FILE_FLAG_OVERLAPPED, PIPE_ACCESS_DUPLEX, SECURITY_IDENTIFICATION,
};
use windows_sys::Win32::System::Pipes::{
    ConnectNamedPipe, CreateNamedPipeW, PIPE_READMODE_BYTE, PIPE_REJECT_REMOTE_CLIENTS, PIPE_TYPE_BYTE, PIPE_WAIT,
};

use crate::net_workload::{
    COMPIO, CRATE, MSG, RAW, STD, TOKIO_CT, TOKIO_MT, Window, in_tokio, measure, pinged, rounds_cell, tokio_current,
    tokio_multi,
};
use crate::report::{Cell, Table};
use crate::workloads::Config;

/// Each end's buffer, as every implementation asks by default.
const BUFFER: u32 = 64 << 10;

/// Runs N7 and N7b, then N8 and N8b, as `want` selects them.
pub fn run(cfg: &Config, table: &mut Table, want: &dyn Fn(&str) -> bool) {
    if want("N7") || want("N7b") {
        ping_pong(cfg, table, want);
    }
    if want("N8") || want("N8b") {
        streaming(cfg, table, want);
    }
}

/// The implementations, each as the two measurements.
trait Pipe {
    /// `trips` round trips of [`MSG`] bytes over one connection: µs each.
    fn ping_pong(&self, name: String, trips: usize) -> io::Result<Vec<f64>>;
    /// `total` bytes in writes of `chunk` from the client to the server,
    /// read in reads of `chunk`: seconds from the first write to the last
    /// byte read.
    fn stream(&self, name: String, total: usize, chunk: usize) -> io::Result<f64>;
}

/// The columns of N7 and N8 in table order, then `pipe_pair` (`None`: the
/// crate column of N7b and N8b).
fn impls() -> [(Option<usize>, Box<dyn Pipe>); 7] {
    [
        (Some(CRATE), Box::new(wtp::Wtp)),
        (Some(RAW), Box::new(raw::Raw)),
        (Some(COMPIO), Box::new(cmp::Compio)),
        (Some(TOKIO_MT), Box::new(tok::Tokio(tokio_multi))),
        (Some(TOKIO_CT), Box::new(tok::Tokio(tokio_current))),
        (Some(STD), Box::new(blocking::Std)),
        (None, Box::new(wtp::Pair)),
    ]
}

/// The row and column a cell's progress and failure are reported under:
/// `rows.1` and the crate's for `pipe_pair`.
fn row_of(rows: (&'static str, &'static str), col: Option<usize>) -> (&'static str, usize) {
    match col {
        Some(c) => (rows.0, c),
        None => (rows.1, CRATE),
    }
}

/// A pipe name no other run uses.
fn unique_name() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(r"\\.\pipe\wtp-bench-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// N7, N7b. Pipe ping-pong.
fn ping_pong(cfg: &Config, table: &mut Table, want: &dyn Fn(&str) -> bool) {
    let n = cfg.n(5_000);
    let trips = n + n / 9;
    let imps = impls();
    let mut v: [Vec<Vec<f64>>; 7] = Default::default();
    let mut failed = [false; 7];
    for _ in 0..cfg.trials {
        for (i, (col, imp)) in imps.iter().enumerate() {
            if failed[i] {
                continue;
            }
            let (row, c) = row_of(("N7 pipe ping-pong", "N7b pipe_pair ping-pong"), *col);
            match measure(row, c, || imp.ping_pong(unique_name(), trips)) {
                Some(s) => v[i].push(s),
                None => failed[i] = true,
            }
        }
    }
    let cells = v.map(|r| (r.len() == cfg.trials).then(|| rounds_cell(r)));
    let warmup = trips - n;
    if want("N7") {
        table.add(
            format!(
                "N7. named-pipe ping-pong, {MSG} B each way over one pipe connection, {n} round trips timed after \
                 {warmup} of warm-up, {} rounds (spread: min..max of the rounds' medians, p99 of all; server \
                 accept and client connect as tasks of one runtime; raw: CreateNamedPipeW, ConnectNamedPipe, \
                 ReadFile, WriteFile on TP_IO, both ends callback-driven; std: a synchronous instance and a \
                 std::fs::File client, echo on its own thread)",
                cfg.trials
            ),
            "µs/round trip",
            core::array::from_fn::<_, 6, _>(|i| cells[i].clone()),
        );
    }
    if want("N7b") {
        table.add(
            format!(
                "N7b. N7 over io::pipe_pair, each end an AsyncIo (raw: N7's, measured in the same rounds; \
                 {n} round trips after {warmup} of warm-up)"
            ),
            "µs/round trip",
            [cells[6].clone(), cells[RAW].clone()],
        );
    }
}

/// N8, N8b. Streaming over one pipe.
fn streaming(cfg: &Config, table: &mut Table, want: &dyn Fn(&str) -> bool) {
    let chunk = 64 << 10;
    let total = ((256usize << 20) as f64 * cfg.scale) as usize / chunk * chunk;
    let imps = impls();
    let mut mbs: [Vec<f64>; 7] = Default::default();
    let mut failed = [false; 7];
    // Round 0 warms up and is not counted, as N2's first trial.
    for round in 0..=cfg.trials {
        for (i, (col, imp)) in imps.iter().enumerate() {
            if failed[i] {
                continue;
            }
            let (row, c) = row_of(("N8 pipe streaming", "N8b pipe_pair streaming"), *col);
            match measure(row, c, || imp.stream(unique_name(), total, chunk)) {
                Some(secs) if round > 0 => mbs[i].push(total as f64 / secs / 1e6),
                Some(_) => {}
                None => failed[i] = true,
            }
        }
    }
    let cells = mbs.map(|v| (v.len() == cfg.trials).then(|| Cell::trials(v)));
    if want("N8") {
        table.add(
            format!(
                "N8. stream {} MiB over one pipe connection in {} KiB writes (reads of the same size; higher is \
                 better; {} rounds after one of warm-up)",
                total >> 20,
                chunk >> 10,
                cfg.trials
            ),
            "MB/s",
            core::array::from_fn::<_, 6, _>(|i| cells[i].clone()),
        );
    }
    if want("N8b") {
        table.add(
            format!(
                "N8b. N8 over io::pipe_pair, each end an AsyncIo ({} MiB; raw: N8's, measured in the same rounds; \
                 higher is better)",
                total >> 20
            ),
            "MB/s",
            [cells[6].clone(), cells[RAW].clone()],
        );
    }
}

fn wide(name: &str) -> Vec<u16> {
    OsStr::new(name).encode_wide().chain(Some(0)).collect()
}

/// The pipe's one instance, overlapped or not (a raw handle: the raw and
/// std columns' server).
fn instance(name: &str, overlapped: bool) -> io::Result<OwnedHandle> {
    let name = wide(name);
    let flags = PIPE_ACCESS_DUPLEX | FILE_FLAG_FIRST_PIPE_INSTANCE | if overlapped { FILE_FLAG_OVERLAPPED } else { 0 };
    let mode = PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS;
    // SAFETY: `name` is NUL-terminated; no security attributes.
    let h = unsafe { CreateNamedPipeW(name.as_ptr(), flags, mode, 1, BUFFER, BUFFER, 0, core::ptr::null()) };
    if h == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle that nothing else owns.
    Ok(unsafe { OwnedHandle::from_raw_handle(h) })
}

/// The pipe's client, opened by std for reading and writing at
/// identification level (as the crate's and tokio's are), overlapped or not.
fn client(name: &str, overlapped: bool) -> io::Result<File> {
    File::options()
        .read(true)
        .write(true)
        .security_qos_flags(SECURITY_IDENTIFICATION)
        .custom_flags(if overlapped { FILE_FLAG_OVERLAPPED } else { 0 })
        .open(name)
}

mod wtp {
    //! This crate: `task::block_on` awaiting tasks spawned on the pool.
    use super::*;
    use crate::net_workload::wtp::{Stream, echo, ping, timed_stream};
    use std::future::Future;
    use windows_threadpool::io::{AsyncIo, pipe_pair};
    use windows_threadpool::pipe::{PipeListener, PipeStream};
    use windows_threadpool::task;

    /// `PipeListener` and `PipeStream`.
    pub struct Wtp;

    /// `io::pipe_pair`, each end an `AsyncIo`.
    pub struct Pair;

    impl Stream for PipeStream {
        fn read(&self, w: Window) -> impl Future<Output = (io::Result<usize>, Window)> + Send + '_ {
            PipeStream::read(self, w)
        }

        fn write_all(&self, w: Window) -> impl Future<Output = (io::Result<()>, Window)> + Send + '_ {
            PipeStream::write_all(self, w)
        }
    }

    impl Stream for AsyncIo {
        fn read(&self, w: Window) -> impl Future<Output = (io::Result<usize>, Window)> + Send + '_ {
            AsyncIo::read(self, w)
        }

        /// Writes until the window is written (a pipe write in byte mode
        /// writes all of it), then gives it back as it came.
        async fn write_all(&self, mut w: Window) -> (io::Result<()>, Window) {
            let start = w.start;
            let mut r = Ok(());
            while w.start < w.end {
                let (n, b) = self.write(w).await;
                w = b;
                match n {
                    Ok(0) => r = Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => w.start += n,
                    Err(e) => r = Err(e),
                }
                if r.is_err() {
                    break;
                }
            }
            w.start = start;
            (r, w)
        }
    }

    impl Pipe for Wtp {
        fn ping_pong(&self, name: String, trips: usize) -> io::Result<Vec<f64>> {
            task::block_on(async move {
                let listener = PipeListener::bind(&name)?;
                let echoing = task::spawn(async move { echo(listener.accept().await?, MSG, trips * MSG + 1).await });
                pinged(echoing, task::spawn(async move { ping(&PipeStream::connect(&name).await?, trips).await })).await
            })
        }

        fn stream(&self, name: String, total: usize, chunk: usize) -> io::Result<f64> {
            task::block_on(async move {
                let listener = PipeListener::bind(&name)?;
                let (c, s) = futures::future::join(PipeStream::connect(&name), listener.accept()).await;
                timed_stream(c?, s?, total, chunk).await
            })
        }
    }

    fn pair() -> io::Result<(AsyncIo, AsyncIo)> {
        let (s, c) = pipe_pair()?;
        Ok((AsyncIo::new(s)?, AsyncIo::new(c)?))
    }

    impl Pipe for Pair {
        fn ping_pong(&self, _: String, trips: usize) -> io::Result<Vec<f64>> {
            let (s, c) = pair()?;
            task::block_on(async move {
                let echoing = task::spawn(echo(s, MSG, trips * MSG + 1));
                pinged(echoing, task::spawn(async move { ping(&c, trips).await })).await
            })
        }

        fn stream(&self, _: String, total: usize, chunk: usize) -> io::Result<f64> {
            let (s, c) = pair()?;
            task::block_on(timed_stream(c, s, total, chunk))
        }
    }
}

mod raw {
    //! The floor: an overlapped instance and client on `raw_tpio`'s state
    //! machines, the server's first step its `ConnectNamedPipe`.
    use super::*;
    use crate::raw_tpio::{self, End};

    pub struct Raw;

    /// The instance waiting for its client, and the client (opened at once,
    /// so the wait may find it connected already).
    fn ends(name: &str) -> io::Result<(End, End)> {
        let server = instance(name, true)?;
        Ok((End::PipeServer(server), End::Pipe(client(name, true)?.into())))
    }

    impl Pipe for Raw {
        fn ping_pong(&self, name: String, trips: usize) -> io::Result<Vec<f64>> {
            let (s, c) = ends(&name)?;
            raw_tpio::ping_pong(s, c, None, trips)
        }

        fn stream(&self, name: String, total: usize, chunk: usize) -> io::Result<f64> {
            let (s, c) = ends(&name)?;
            raw_tpio::stream(s, c, total, chunk)
        }
    }
}

mod cmp {
    //! compio: one runtime on this thread (its IOCP driver), the sides as its tasks.
    use super::*;
    use crate::net_workload::cmp::{echo, ping, timed_stream};
    use compio::fs::named_pipe::{ClientOptions, ServerOptions};
    use compio::runtime::spawn;

    pub struct Compio;

    fn server(name: &str) -> io::Result<compio::fs::named_pipe::NamedPipeServer> {
        ServerOptions::new().first_pipe_instance(true).max_instances(1).create(name)
    }

    impl Pipe for Compio {
        fn ping_pong(&self, name: String, trips: usize) -> io::Result<Vec<f64>> {
            compio::runtime::Runtime::new()?.block_on(async move {
                let s = server(&name)?;
                let echoing = spawn(async move {
                    s.connect().await?;
                    echo(s, MSG, trips * MSG + 1).await
                });
                pinged(echoing, spawn(async move { ping(ClientOptions::new().open(&name).await?, trips).await })).await
            })
        }

        fn stream(&self, name: String, total: usize, chunk: usize) -> io::Result<f64> {
            compio::runtime::Runtime::new()?.block_on(async move {
                let s = server(&name)?;
                let (c, connected) = futures::future::join(ClientOptions::new().open(&name), s.connect()).await;
                let c = c?;
                connected?;
                timed_stream(c, s, total, chunk).await
            })
        }
    }
}

mod tok {
    //! tokio: a fresh runtime per measurement, the sides as `tokio::spawn`ed tasks.
    use super::*;
    use crate::net_workload::tok::{echo, ping, timed_stream};
    use tokio::net::windows::named_pipe::{ClientOptions, NamedPipeServer, ServerOptions};
    use tokio::spawn;

    pub struct Tokio(pub fn() -> io::Result<tokio::runtime::Runtime>);

    fn server(name: &str) -> io::Result<NamedPipeServer> {
        ServerOptions::new().first_pipe_instance(true).max_instances(1).create(name)
    }

    impl Pipe for Tokio {
        fn ping_pong(&self, name: String, trips: usize) -> io::Result<Vec<f64>> {
            in_tokio(self.0, async move {
                let s = server(&name)?;
                let echoing = spawn(async move {
                    s.connect().await?;
                    echo(s, MSG, trips * MSG + 1).await
                });
                pinged(echoing, spawn(async move { ping(ClientOptions::new().open(&name)?, trips).await })).await
            })
        }

        fn stream(&self, name: String, total: usize, chunk: usize) -> io::Result<f64> {
            in_tokio(self.0, async move {
                let s = server(&name)?;
                let c = ClientOptions::new().open(&name)?;
                s.connect().await?;
                timed_stream(c, s, total, chunk).await
            })
        }
    }
}

mod blocking {
    //! Synchronous handles: a synchronous instance (`CreateNamedPipeW`
    //! without `FILE_FLAG_OVERLAPPED`) and a `std::fs::File` client, one on
    //! this thread and one on another.
    use super::*;
    use crate::net_workload::blocking::{ping_pong, stream};

    pub struct Std;

    /// `(client, server)`, connected.
    fn pair(name: &str) -> io::Result<(File, File)> {
        let server = instance(name, false)?;
        let c = client(name, false)?;
        // SAFETY: a valid instance; no OVERLAPPED (a synchronous handle).
        // The client has opened it, so this returns at once.
        if unsafe { ConnectNamedPipe(std::os::windows::io::AsRawHandle::as_raw_handle(&server), core::ptr::null_mut()) }
            == 0
        {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(ERROR_PIPE_CONNECTED as i32) {
                return Err(e);
            }
        }
        Ok((c, File::from(server)))
    }

    impl Pipe for Std {
        fn ping_pong(&self, name: String, trips: usize) -> io::Result<Vec<f64>> {
            let (c, s) = pair(&name)?;
            ping_pong(c, s, trips)
        }

        fn stream(&self, name: String, total: usize, chunk: usize) -> io::Result<f64> {
            let (c, s) = pair(&name)?;
            stream(c, s, total, chunk)
        }
    }
}
