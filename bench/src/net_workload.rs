//! N1 on: sockets (issue 26), in a table of their own whose columns are the
//! ways a Rust user would serve sockets on Windows. Both ends of every
//! connection live in this process, on 127.0.0.1; each implementation runs
//! its client and its server side in its own runtime (the raw column: both
//! sides are callback-driven state machines on the pool, `raw_tpio`, so no
//! thread is woken per operation but the callback's own). TCP sockets set
//! `TCP_NODELAY` everywhere. A row's columns are measured in alternated
//! rounds ([`alternated`]: every column once a round, in turn), so a slow
//! stretch of the machine lands on all of them; a cell is the median round.
//! A cell that fails is n/a, with the reason on stderr. Every run is
//! bounded in count and, by a watchdog, in time.
//! After N6 come the named-pipe rows, N7 to N8b (`pipe_workload`), on this
//! module's columns and helpers: each column's echo, ping, sink and source
//! are written once here, over its socket and pipe types alike.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::report::{Cell, Table};
use crate::workloads::Config;

/// The columns of the socket table; [`RAW`] is its floor.
pub const COLUMNS: [&str; 6] = [
    "this crate",
    "raw windows-sys TP_IO",
    "compio (IOCP driver)",
    "tokio multi-thread",
    "tokio current-thread",
    "std blocking, two threads",
];
pub(crate) const CRATE: usize = 0;
pub const RAW: usize = 1;
pub(crate) const COMPIO: usize = 2;
pub(crate) const TOKIO_MT: usize = 3;
pub(crate) const TOKIO_CT: usize = 4;
pub(crate) const STD: usize = 5;

/// Bytes per ping and per pong.
pub(crate) const MSG: usize = 64;
/// The longest one cell may take before the watchdog ends the program.
pub(crate) const LIMIT: Duration = Duration::from_secs(120);
/// The longest one run in a tokio runtime may take: it then fails (and its
/// tasks are dropped with the runtime), leaving the cell n/a.
const TOKIO_LIMIT: Duration = Duration::from_secs(60);

/// Runs every row, or only those `WTP_BENCH_NET_ROWS` names (`N1,N4`, `N7b`).
pub fn run(cfg: &Config, table: &mut Table) {
    let only = std::env::var("WTP_BENCH_NET_ROWS").ok();
    let want = |row: &str| only.as_deref().is_none_or(|o| o.split(',').any(|r| r.trim() == row));
    if want("N1") {
        tcp_ping_pong(cfg, table);
    }
    for (row, chunk) in [("N2", 64 << 10), ("N3", 1 << 20)] {
        if want(row) {
            streaming(cfg, table, chunk);
        }
    }
    if want("N2c") {
        copy_streaming(cfg, table);
    }
    if want("N4") {
        many_connections(cfg, table);
    }
    if want("N4b") {
        many_std_connections(cfg, table);
    }
    if want("N5") {
        udp_ping_pong(cfg, table);
    }
    if want("N6") {
        file_reads(cfg, table);
    }
    crate::pipe_workload::run(cfg, table, &want);
}

/// Ends the program if it is not dropped within [`LIMIT`].
struct Watchdog {
    _alive: mpsc::Sender<()>,
}

fn watchdog(what: String) -> Watchdog {
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(LIMIT) {
            eprintln!("bench: {what} took over {LIMIT:?}; ending the program");
            std::process::exit(3);
        }
    });
    Watchdog { _alive: tx }
}

/// Runs one cell's measurement under the watchdog; a failure is reported
/// on stderr and leaves the cell n/a.
pub(crate) fn measure<T>(row: &str, column: usize, f: impl FnOnce() -> io::Result<T>) -> Option<T> {
    let what = format!("{row} / {}", COLUMNS[column]);
    let _dog = watchdog(what.clone());
    let t = Instant::now();
    match f() {
        Ok(v) => {
            eprintln!("bench: {what}: {:.1} s", t.elapsed().as_secs_f64());
            Some(v)
        }
        Err(e) => {
            eprintln!("bench: {what}: failed after {:.1} s: {e}", t.elapsed().as_secs_f64());
            None
        }
    }
}

pub(crate) fn us(t: Instant) -> f64 {
    t.elapsed().as_nanos() as f64 / 1000.0
}

pub(crate) fn eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed early")
}

pub(crate) fn joined<T>(r: Result<io::Result<T>, impl std::fmt::Debug>) -> io::Result<T> {
    r.map_err(|e| io::Error::other(format!("a task failed: {e:?}")))?
}

/// Awaits a ping's task, then its echo's (any runtime's join handles): the
/// ping's samples.
pub(crate) async fn pinged(
    echo: impl Future<Output = Result<io::Result<impl Sized>, impl std::fmt::Debug>>,
    ping: impl Future<Output = Result<io::Result<Vec<f64>>, impl std::fmt::Debug>>,
) -> io::Result<Vec<f64>> {
    let v = joined(ping.await)?;
    joined(echo.await)?;
    Ok(v)
}

/// Awaits a source's task, then its sink's (any runtime's join handles):
/// seconds since `t`, taken before either was spawned.
pub(crate) async fn streamed(
    t: Instant,
    sink: impl Future<Output = Result<io::Result<()>, impl std::fmt::Debug>>,
    source: impl Future<Output = Result<io::Result<()>, impl std::fmt::Debug>>,
) -> io::Result<f64> {
    joined(source.await)?;
    joined(sink.await)?;
    Ok(t.elapsed().as_secs_f64())
}

pub(crate) fn tokio_current() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

pub(crate) fn tokio_multi() -> io::Result<tokio::runtime::Runtime> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build()
}

/// A connected pair made by std's blocking connect and accept, with no delay
/// on either end: (client, server).
fn std_pair(listener: &std::net::TcpListener) -> io::Result<(std::net::TcpStream, std::net::TcpStream)> {
    let c = std::net::TcpStream::connect(listener.local_addr()?)?;
    let s = listener.accept()?.0;
    c.set_nodelay(true)?;
    s.set_nodelay(true)?;
    Ok((c, s))
}

/// The implementations, each as the four measurements.
trait Net {
    /// `trips` round trips of [`MSG`] bytes over one connection: µs each.
    fn ping_pong(&self, trips: usize) -> io::Result<Vec<f64>>;
    /// `total` bytes in writes of `chunk`, read in reads of `chunk`: seconds
    /// from the first write to the last byte read.
    fn stream(&self, total: usize, chunk: usize) -> io::Result<f64>;
    /// `conns` connections at once, each `trips` round trips: seconds from
    /// the first connect to the last connection's end.
    fn many(&self, conns: usize, trips: usize) -> io::Result<f64>;
    /// As [`many`](Self::many), with every connection made as raw's are
    /// ([`std_pair`], in turn on this thread) and then handed over. Only
    /// where a stream can be made from std's.
    fn many_from_std(&self, _conns: usize, _trips: usize) -> io::Result<f64> {
        Err(io::Error::other("no column made from std's connections"))
    }
    /// `total` bytes written by `tokio::io::copy` (8 KiB writes) from an
    /// in-memory reader, read in 64 KiB reads: seconds, as [`stream`](Self::stream).
    /// Only where the stream has tokio's traits.
    fn copy_stream(&self, _total: usize) -> io::Result<f64> {
        Err(io::Error::other("no tokio::io::copy column"))
    }
    /// `trips` UDP round trips of [`MSG`] bytes: µs each.
    fn udp(&self, trips: usize) -> io::Result<Vec<f64>>;
}

/// The implementations in column order.
fn impls() -> [(usize, Box<dyn Net>); 6] {
    [
        (CRATE, Box::new(wtp::Wtp)),
        (RAW, Box::new(raw::Raw)),
        (COMPIO, Box::new(cmp::Compio)),
        (TOKIO_MT, Box::new(tok::Tokio(tokio_multi))),
        (TOKIO_CT, Box::new(tok::Tokio(tokio_current))),
        (STD, Box::new(blocking::Std)),
    ]
}

/// Latency samples with the first tenth dropped (connection warm-up).
pub(crate) fn warmed(mut v: Vec<f64>) -> Vec<f64> {
    let skip = v.len() / 10;
    v.drain(..skip);
    v
}

/// Measures every column of `cols` once a round, in turn, for `rounds`
/// rounds after `warmups` uncounted ones, each round starting one column
/// further on, so that a slow stretch of the machine lands on every column
/// alike and no column always follows the same one. A column that fails
/// is n/a from then on; so is one not in `cols`.
pub(crate) fn alternated<T>(
    row: &str,
    cols: &[usize],
    warmups: usize,
    rounds: usize,
    mut one: impl FnMut(usize) -> io::Result<T>,
) -> [Option<Vec<T>>; 6] {
    let mut got: [Vec<T>; 6] = Default::default();
    let mut failed = [false; 6];
    for round in 0..warmups + rounds {
        for k in 0..cols.len() {
            let col = cols[(k + round) % cols.len()];
            if failed[col] {
                continue;
            }
            match measure(row, col, || one(col)) {
                Some(v) if round >= warmups => got[col].push(v),
                Some(_) => {}
                None => failed[col] = true,
            }
        }
    }
    core::array::from_fn(|c| (cols.contains(&c) && !failed[c]).then(|| std::mem::take(&mut got[c])))
}

/// Every column, in table order.
const ALL: [usize; 6] = [CRATE, RAW, COMPIO, TOKIO_MT, TOKIO_CT, STD];

/// The median over rounds of each round's median (its first tenth dropped,
/// as [`warmed`]), with their min..max and the p99 of every round's samples.
pub(crate) fn rounds_cell(per_round: Vec<Vec<f64>>) -> Cell {
    let per_round: Vec<Vec<f64>> = per_round.into_iter().map(warmed).collect();
    let all = per_round.concat();
    let mut c = Cell::trials(per_round.into_iter().map(|v| Cell::latency(v).value).collect());
    c.spread = format!("{}, {}", c.spread, Cell::latency(all).spread);
    c
}

/// [`warmed`] samples' median and p99.
fn warm(v: Vec<f64>) -> Cell {
    Cell::latency(warmed(v))
}

/// N1's measurement for this crate alone (the in-place rows): `n` round
/// trips timed after a tenth as many of warm-up, µs each.
pub fn crate_ping_pong(n: usize) -> Cell {
    let trips = n + n / 9;
    warm(wtp::Wtp.ping_pong(trips).expect("N1 tcp ping-pong (this crate)"))
}

/// N1. TCP ping-pong.
fn tcp_ping_pong(cfg: &Config, table: &mut Table) {
    let n = cfg.n(5_000);
    let trips = n + n / 9;
    let imps = impls();
    let cols = alternated("N1 tcp ping-pong", &ALL, 0, cfg.trials, |c| imps[c].1.ping_pong(trips));
    table.add(
        format!(
            "N1. TCP ping-pong, {MSG} B each way over one connection, {n} round trips timed after {} of warm-up, \
             {} rounds alternated (spread: min..max of the rounds' medians, p99 of all; client and echo server as \
             tasks of one runtime; raw: both callback-driven; std: echo on its own thread)",
            trips - n,
            cfg.trials
        ),
        "µs/round trip",
        cols.map(|v| v.map(rounds_cell)),
    );
}

/// N2, N3. Streaming `total` bytes over one connection.
fn streaming(cfg: &Config, table: &mut Table, chunk: usize) {
    let total = ((256usize << 20) as f64 * cfg.scale) as usize / chunk * chunk;
    let row = format!("N streaming {} KiB", chunk >> 10);
    let imps = impls();
    let mbs = |secs: Vec<f64>| Cell::trials(secs.into_iter().map(|s| total as f64 / s / 1e6).collect());
    let cols = alternated(&row, &ALL, 1, cfg.trials, |c| imps[c].1.stream(total, chunk));
    table.add(
        format!(
            "N{}. stream {} MiB over one connection in {} writes (reads of the same size; higher is better; {} \
             rounds alternated after one of warm-up)",
            if chunk == 64 << 10 { 2 } else { 3 },
            total >> 20,
            if chunk >= 1 << 20 { format!("{} MiB", chunk >> 20) } else { format!("{} KiB", chunk >> 10) },
            cfg.trials
        ),
        "MB/s",
        cols.map(|v| v.map(mbs)),
    );
}

/// N2c. N2 with the writer a `tokio::io::copy`.
fn copy_streaming(cfg: &Config, table: &mut Table) {
    let chunk = 64 << 10;
    let total = ((256usize << 20) as f64 * cfg.scale) as usize / chunk * chunk;
    let imps = impls();
    let mbs = |secs: Vec<f64>| Cell::trials(secs.into_iter().map(|s| total as f64 / s / 1e6).collect());
    let cols = alternated("N2c copy", &[CRATE, RAW, TOKIO_MT], 1, cfg.trials, |c| {
        if c == RAW { imps[c].1.stream(total, chunk) } else { imps[c].1.copy_stream(total) }
    });
    table.add(
        format!(
            "N2c. N2 with the writer a tokio::io::copy from an in-memory reader (8 KiB writes; this crate: through \
             io::Compat over its TcpStream; tokio: over its own; raw: N2's, measured in the same rounds; reads of \
             64 KiB; higher is better; {} rounds alternated after one of warm-up)",
            cfg.trials
        ),
        "MB/s",
        cols.map(|v| v.map(mbs)),
    );
}

/// N4. Many connections at once.
fn many_connections(cfg: &Config, table: &mut Table) {
    // `WTP_BENCH_CONNS` overrides the count (to find where an implementation stops scaling).
    let conns = std::env::var("WTP_BENCH_CONNS").ok().and_then(|v| v.parse().ok()).unwrap_or(cfg.n(1_000).max(50));
    let trips = 10;
    let trials = cfg.trials.min(3);
    let imps = impls();
    let ms = |secs: Vec<f64>| Cell::trials(secs.into_iter().map(|s| s * 1000.0).collect());
    let cols = alternated("N4 many connections", &ALL[..STD], 1, trials, |c| imps[c].1.many(conns, trips));
    table.add(
        format!(
            "N4. {conns} connections at once, each {trips} round trips of {MSG} B: connects, accepts and echoes \
             ({trials} rounds alternated after one of warm-up; a task per connection and side; raw: std connect + \
             accept in turn on one thread, both sides callback-driven; std: n/a, it would take a thread per socket)"
        ),
        "ms wall",
        cols.map(|v| v.map(ms)),
    );
}

/// N4b. N4 with std's connect and accept on both columns, so that the
/// difference is what each adds per connection once it has the sockets.
fn many_std_connections(cfg: &Config, table: &mut Table) {
    let conns = std::env::var("WTP_BENCH_CONNS").ok().and_then(|v| v.parse().ok()).unwrap_or(cfg.n(1_000).max(50));
    let trips = 10;
    let trials = cfg.trials.min(3);
    let imps = impls();
    let ms = |secs: Vec<f64>| Cell::trials(secs.into_iter().map(|s| s * 1000.0).collect());
    let cols =
        alternated("N4b connections from std", &[CRATE, RAW], 1, trials, |c| imps[c].1.many_from_std(conns, trips));
    table.add(
        format!(
            "N4b. N4 with every connection made by std's blocking connect + accept in turn on one thread, as raw's \
             are, then handed to the column (crate: `TcpStream::from_std` and a task per side; raw: N4's own): the \
             difference is each column's share per connection beyond its connect and accept ({trials} rounds \
             alternated after one of warm-up)"
        ),
        "ms wall",
        cols.map(|v| v.map(ms)),
    );
}

/// N5. UDP ping-pong.
fn udp_ping_pong(cfg: &Config, table: &mut Table) {
    let n = cfg.n(5_000);
    let trips = n + n / 9;
    let imps = impls();
    let cols = alternated("N5 udp ping-pong", &ALL, 0, cfg.trials, |c| imps[c].1.udp(trips));
    table.add(
        format!(
            "N5. UDP ping-pong, {MSG} B datagrams (send_to / recv_from), {n} round trips timed after {} of warm-up, \
             {} rounds alternated (spread: min..max of the rounds' medians, p99 of all)",
            trips - n,
            cfg.trials
        ),
        "µs/round trip",
        cols.map(|v| v.map(rounds_cell)),
    );
}

/// N6. Row 18's reads at depth 1 again, with compio's `File::read_at`.
fn file_reads(cfg: &Config, table: &mut Table) {
    use std::os::windows::fs::FileExt;
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    use windows_threadpool::io::{AsyncIo, open_file};
    use windows_threadpool::task;

    const BLOCK: usize = crate::async_workload::BLOCK;
    let path = crate::async_workload::read_file();
    let n = cfg.n(20_000);
    let offs = crate::async_workload::offsets(n);
    let row = "N6 file reads";
    let per = |t: Instant| us(t) / n as f64;
    let mut cols: [Vec<f64>; 6] = Default::default();
    let (mt, ct) = (tokio_multi().unwrap(), tokio_current().unwrap());
    for trial in 0..=cfg.trials {
        let v = measure(row, CRATE, || {
            let file = AsyncIo::new(open_file(&path, std::fs::OpenOptions::new().read(true))?)?;
            let t = Instant::now();
            task::block_on(async {
                let mut buf = vec![0u8; BLOCK];
                for &off in &offs {
                    let (r, b) = file.read_at(buf, off).await;
                    assert_eq!(r?, BLOCK);
                    buf = b;
                }
                Ok(per(t))
            })
        });
        cols[CRATE].extend(v);
        let v = measure(row, RAW, || {
            let f = std::fs::File::open(&path)?;
            let mut buf = vec![0u8; BLOCK];
            let t = Instant::now();
            for &off in &offs {
                assert_eq!(f.seek_read(&mut buf, off)?, BLOCK);
            }
            Ok(per(t))
        });
        cols[RAW].extend(v);
        let v = measure(row, COMPIO, || {
            use compio::io::AsyncReadAt;
            compio::runtime::Runtime::new()?.block_on(async {
                let file = compio::fs::File::open(&path).await?;
                let mut buf = Vec::with_capacity(BLOCK);
                let t = Instant::now();
                for &off in &offs {
                    buf.clear();
                    let compio::BufResult(r, b) = file.read_at(buf, off).await;
                    assert_eq!(r?, BLOCK);
                    buf = b;
                }
                Ok(per(t))
            })
        });
        cols[COMPIO].extend(v);
        for (col, rt) in [(TOKIO_MT, &mt), (TOKIO_CT, &ct)] {
            let v = measure(row, col, || {
                rt.block_on(async {
                    let mut f = tokio::fs::File::open(&path).await?;
                    let mut buf = vec![0u8; BLOCK];
                    let t = Instant::now();
                    for &off in &offs {
                        f.seek(std::io::SeekFrom::Start(off)).await?;
                        f.read_exact(&mut buf).await?;
                    }
                    Ok(per(t))
                })
            });
            cols[col].extend(v);
        }
        if trial == 0 {
            cols.iter_mut().for_each(Vec::clear);
        }
    }
    let _ = std::fs::remove_file(&path);
    table.add(
        format!(
            "N6. row 18 again at queue depth 1 ({n} random 4 KiB reads of a 64 MiB file), with compio's \
             File::read_at (this crate: AsyncIo::read_at; raw: blocking seek_read, row 18's floor, not a TP_IO; \
             tokio: tokio::fs::File seek + read_exact)"
        ),
        "µs/read",
        cols.map(|v| (v.len() == cfg.trials).then(|| Cell::trials(v))),
    );
}

/// An owned buffer whose `start..end` is what an operation of this crate
/// sees (a partial read continues where the last one ended).
pub(crate) struct Window {
    pub(crate) buf: Vec<u8>,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

impl Window {
    pub(crate) fn whole(buf: Vec<u8>) -> Self {
        let end = buf.len();
        Self { buf, start: 0, end }
    }
}

impl AsRef<[u8]> for Window {
    fn as_ref(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }
}

impl AsMut<[u8]> for Window {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.end]
    }
}

/// Runs `f` in a fresh multi-thread or current-thread tokio runtime, for
/// at most [`TOKIO_LIMIT`].
pub(crate) fn in_tokio<T>(
    rt: fn() -> io::Result<tokio::runtime::Runtime>,
    f: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    let rt = rt()?;
    let r = rt.block_on(async {
        tokio::time::timeout(TOKIO_LIMIT, f)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, format!("over {TOKIO_LIMIT:?}")))?
    });
    rt.shutdown_background();
    r
}

pub(crate) mod wtp {
    //! This crate: `task::block_on` awaiting tasks spawned on the pool.
    use super::*;
    use std::sync::Arc;
    use windows_threadpool::net::{TcpListener, TcpStream, UdpSocket};
    use windows_threadpool::task;

    pub struct Wtp;

    /// A byte stream of this crate whose reads and writes take the buffer
    /// by value (a socket, a pipe, an `AsyncIo`).
    pub(crate) trait Stream: Send + Sync + 'static {
        fn read(&self, w: Window) -> impl Future<Output = (io::Result<usize>, Window)> + Send + '_;
        fn write_all(&self, w: Window) -> impl Future<Output = (io::Result<()>, Window)> + Send + '_;
    }

    impl Stream for TcpStream {
        fn read(&self, w: Window) -> impl Future<Output = (io::Result<usize>, Window)> + Send + '_ {
            TcpStream::read(self, w)
        }

        fn write_all(&self, w: Window) -> impl Future<Output = (io::Result<()>, Window)> + Send + '_ {
            TcpStream::write_all(self, w)
        }
    }

    /// Reads the whole buffer.
    async fn read_exact(s: &impl Stream, mut w: Window) -> io::Result<Window> {
        let end = w.buf.len();
        (w.start, w.end) = (0, end);
        while w.start < end {
            let (r, b) = s.read(w).await;
            w = b;
            match r? {
                0 => return Err(eof()),
                n => w.start += n,
            }
        }
        w.start = 0;
        Ok(w)
    }

    /// Echoes until end of file (at most `reads` reads); returns the bytes echoed.
    pub(crate) async fn echo(s: impl Stream, cap: usize, reads: usize) -> io::Result<usize> {
        let mut w = Window::whole(vec![0; cap]);
        let mut total = 0;
        for _ in 0..reads {
            w.end = cap;
            let (r, b) = s.read(w).await;
            w = b;
            let n = r?;
            if n == 0 {
                return Ok(total);
            }
            total += n;
            w.end = n;
            let (r, b) = s.write_all(w).await;
            w = b;
            r?;
        }
        Err(io::Error::other("echo: more reads than its bound"))
    }

    /// `trips` round trips of [`MSG`] bytes: µs each.
    pub(crate) async fn ping(c: &impl Stream, trips: usize) -> io::Result<Vec<f64>> {
        let mut w = Window::whole(vec![1u8; MSG]);
        let mut v = Vec::with_capacity(trips);
        for _ in 0..trips {
            let t = Instant::now();
            let (r, b) = c.write_all(w).await;
            r?;
            w = read_exact(c, b).await?;
            v.push(us(t));
        }
        Ok(v)
    }

    /// Reads `total` bytes in reads of `chunk`.
    pub(crate) async fn sink(s: impl Stream, total: usize, chunk: usize) -> io::Result<()> {
        let mut w = Window::whole(vec![0u8; chunk]);
        let mut got = 0;
        while got < total {
            let (r, b) = s.read(w).await;
            w = b;
            match r? {
                0 => return Err(eof()),
                n => got += n,
            }
        }
        Ok(())
    }

    /// Writes `total` bytes in writes of `chunk`.
    pub(crate) async fn source(c: impl Stream, total: usize, chunk: usize) -> io::Result<()> {
        let mut w = Window::whole(vec![1u8; chunk]);
        for _ in 0..total / chunk {
            let (r, b) = c.write_all(w).await;
            r?;
            w = b;
        }
        Ok(())
    }

    /// [`source`] on `c` and [`sink`] on `s` as tasks on the pool: seconds
    /// from their spawn to the last byte read.
    pub(crate) async fn timed_stream(c: impl Stream, s: impl Stream, total: usize, chunk: usize) -> io::Result<f64> {
        // Arguments are evaluated in order: the clock starts before either spawn.
        streamed(Instant::now(), task::spawn(sink(s, total, chunk)), task::spawn(source(c, total, chunk))).await
    }

    async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        let c = TcpStream::connect(addr).await?;
        c.set_nodelay(true)?;
        Ok(c)
    }

    async fn accept(listener: &TcpListener) -> io::Result<TcpStream> {
        let s = listener.accept().await?.0;
        s.set_nodelay(true)?;
        Ok(s)
    }

    impl Net for Wtp {
        fn ping_pong(&self, trips: usize) -> io::Result<Vec<f64>> {
            task::block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0")?;
                let addr = listener.local_addr()?;
                let echoing = task::spawn(async move { echo(accept(&listener).await?, MSG, trips * MSG + 1).await });
                pinged(echoing, task::spawn(async move { ping(&connect(addr).await?, trips).await })).await
            })
        }

        fn stream(&self, total: usize, chunk: usize) -> io::Result<f64> {
            task::block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0")?;
                let (c, s) = futures::future::join(connect(listener.local_addr()?), accept(&listener)).await;
                timed_stream(c?, s?, total, chunk).await
            })
        }

        fn copy_stream(&self, total: usize) -> io::Result<f64> {
            task::block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0")?;
                let (c, s) = futures::future::join(connect(listener.local_addr()?), accept(&listener)).await;
                let (c, s) = (c?, s?);
                let copy = async move {
                    let mut c = windows_threadpool::io::Compat::new(c);
                    let mut from = tokio::io::AsyncReadExt::take(tokio::io::repeat(1), total as u64);
                    tokio::io::copy(&mut from, &mut c).await?;
                    tokio::io::AsyncWriteExt::flush(&mut c).await
                };
                // Arguments are evaluated in order: the clock starts before either spawn.
                streamed(Instant::now(), task::spawn(sink(s, total, 64 << 10)), task::spawn(copy)).await
            })
        }

        fn many(&self, conns: usize, trips: usize) -> io::Result<f64> {
            task::block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0")?;
                let addr = listener.local_addr()?;
                let t = Instant::now();
                let server = task::spawn(async move {
                    let mut echoes = Vec::with_capacity(conns);
                    for _ in 0..conns {
                        echoes.push(task::spawn(echo(accept(&listener).await?, MSG, trips * MSG + 1)));
                    }
                    for e in echoes {
                        joined(e.await)?;
                    }
                    Ok(())
                });
                let clients: Vec<_> =
                    (0..conns).map(|_| task::spawn(async move { ping(&connect(addr).await?, trips).await })).collect();
                for c in clients {
                    joined(c.await)?;
                }
                joined(server.await)?;
                Ok(t.elapsed().as_secs_f64())
            })
        }

        fn many_from_std(&self, conns: usize, trips: usize) -> io::Result<f64> {
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            task::block_on(async move {
                let t = Instant::now();
                let mut sides = Vec::with_capacity(2 * conns);
                for _ in 0..conns {
                    let (c, s) = std_pair(&listener)?;
                    let (c, s) = (TcpStream::from_std(c)?, TcpStream::from_std(s)?);
                    sides.push(task::spawn(async move { echo(s, MSG, trips * MSG + 1).await.map(drop) }));
                    sides.push(task::spawn(async move { ping(&c, trips).await.map(drop) }));
                }
                for side in sides {
                    joined(side.await)?;
                }
                Ok(t.elapsed().as_secs_f64())
            })
        }

        fn udp(&self, trips: usize) -> io::Result<Vec<f64>> {
            task::block_on(async move {
                let server = Arc::new(UdpSocket::bind("127.0.0.1:0")?);
                let client = UdpSocket::bind("127.0.0.1:0")?;
                let to = server.local_addr()?;
                let echo = task::spawn(async move {
                    let mut buf = vec![0u8; MSG];
                    for _ in 0..trips {
                        let (r, b) = server.recv_from(buf).await;
                        let (n, from) = r?;
                        let (r, b) = server.send_to(Window { buf: b, start: 0, end: n }, from).await;
                        r?;
                        buf = b.buf;
                    }
                    Ok(())
                });
                let ping = task::spawn(async move {
                    let mut buf = vec![1u8; MSG];
                    let mut v = Vec::with_capacity(trips);
                    for _ in 0..trips {
                        let t = Instant::now();
                        let (r, b) = client.send_to(buf, to).await;
                        r?;
                        let (r, b) = client.recv_from(b).await;
                        assert_eq!(r?.0, MSG);
                        buf = b;
                        v.push(us(t));
                    }
                    Ok(v)
                });
                pinged(echo, ping).await
            })
        }
    }
}

pub(crate) mod cmp {
    //! compio: one runtime on this thread (its IOCP driver), the sides as its tasks.
    use super::*;
    use compio::BufResult;
    use compio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
    use compio::net::{TcpListener, TcpSocket, TcpStream, UdpSocket};
    use compio::runtime::spawn;

    pub struct Compio;

    fn block_on<T>(f: impl Future<Output = io::Result<T>>) -> io::Result<T> {
        compio::runtime::Runtime::new()?.block_on(f)
    }

    /// Echoes until end of file (at most `reads` reads); returns the bytes echoed.
    pub(crate) async fn echo(mut s: impl AsyncRead + AsyncWrite, cap: usize, reads: usize) -> io::Result<usize> {
        let mut buf = Vec::with_capacity(cap);
        let mut total = 0;
        for _ in 0..reads {
            buf.clear();
            let BufResult(r, b) = s.read(buf).await;
            let n = r?;
            if n == 0 {
                return Ok(total);
            }
            total += n;
            let BufResult(r, b) = s.write_all(b).await;
            r?;
            buf = b;
        }
        Err(io::Error::other("echo: more reads than its bound"))
    }

    /// `trips` round trips of [`MSG`] bytes: µs each.
    pub(crate) async fn ping(mut c: impl AsyncRead + AsyncWrite, trips: usize) -> io::Result<Vec<f64>> {
        let mut buf = vec![1u8; MSG];
        let mut v = Vec::with_capacity(trips);
        for _ in 0..trips {
            let t = Instant::now();
            let BufResult(r, mut b) = c.write_all(buf).await;
            r?;
            b.clear();
            let BufResult(r, b) = c.read_exact(b).await;
            r?;
            buf = b;
            v.push(us(t));
        }
        Ok(v)
    }

    /// Reads `total` bytes in reads of `chunk`.
    pub(crate) async fn sink(mut s: impl AsyncRead, total: usize, chunk: usize) -> io::Result<()> {
        let mut buf = Vec::with_capacity(chunk);
        let mut got = 0;
        while got < total {
            buf.clear();
            let BufResult(r, b) = s.read(buf).await;
            buf = b;
            match r? {
                0 => return Err(eof()),
                n => got += n,
            }
        }
        Ok(())
    }

    /// Writes `total` bytes in writes of `chunk`.
    pub(crate) async fn source(mut c: impl AsyncWrite, total: usize, chunk: usize) -> io::Result<()> {
        let mut buf = vec![1u8; chunk];
        for _ in 0..total / chunk {
            let BufResult(r, b) = c.write_all(buf).await;
            r?;
            buf = b;
        }
        Ok(())
    }

    /// [`source`] on `c` and [`sink`] on `s` as tasks of the runtime:
    /// seconds from their spawn to the last byte read.
    pub(crate) async fn timed_stream(
        c: impl AsyncWrite + 'static,
        s: impl AsyncRead + 'static,
        total: usize,
        chunk: usize,
    ) -> io::Result<f64> {
        // Arguments are evaluated in order: the clock starts before either spawn.
        streamed(Instant::now(), spawn(sink(s, total, chunk)), spawn(source(c, total, chunk))).await
    }

    async fn accept(listener: &TcpListener) -> io::Result<TcpStream> {
        let s = listener.accept().await?.0;
        s.set_nodelay(true)?;
        Ok(s)
    }

    async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        let c = TcpStream::connect(addr).await?;
        c.set_nodelay(true)?;
        Ok(c)
    }

    impl Net for Compio {
        fn ping_pong(&self, trips: usize) -> io::Result<Vec<f64>> {
            block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let addr = listener.local_addr()?;
                let echoing = spawn(async move { echo(accept(&listener).await?, MSG, trips * MSG + 1).await });
                pinged(echoing, spawn(async move { ping(connect(addr).await?, trips).await })).await
            })
        }

        fn stream(&self, total: usize, chunk: usize) -> io::Result<f64> {
            block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let (c, s) = futures::future::join(connect(listener.local_addr()?), accept(&listener)).await;
                timed_stream(c?, s?, total, chunk).await
            })
        }

        fn many(&self, conns: usize, trips: usize) -> io::Result<f64> {
            block_on(async move {
                // `TcpListener::bind` listens with a backlog of 128; this
                // gives it tokio's 1,024, so that all connects fit.
                let socket = TcpSocket::new_v4().await?;
                socket.bind("127.0.0.1:0".parse().unwrap()).await?;
                let listener = socket.listen(1024).await?;
                let addr = listener.local_addr()?;
                let t = Instant::now();
                let server = spawn(async move {
                    let mut echoes = Vec::with_capacity(conns);
                    for _ in 0..conns {
                        echoes.push(spawn(echo(accept(&listener).await?, MSG, trips * MSG + 1)));
                    }
                    for e in echoes {
                        joined(e.await)?;
                    }
                    Ok(())
                });
                let clients: Vec<_> =
                    (0..conns).map(|_| spawn(async move { ping(connect(addr).await?, trips).await })).collect();
                for c in clients {
                    joined(c.await)?;
                }
                joined(server.await)?;
                Ok(t.elapsed().as_secs_f64())
            })
        }

        fn udp(&self, trips: usize) -> io::Result<Vec<f64>> {
            block_on(async move {
                let server = UdpSocket::bind("127.0.0.1:0").await?;
                let client = UdpSocket::bind("127.0.0.1:0").await?;
                let to = server.local_addr()?;
                let echo = spawn(async move {
                    let mut buf = Vec::with_capacity(MSG);
                    for _ in 0..trips {
                        buf.clear();
                        let BufResult(r, b) = server.recv_from(buf).await;
                        let from = r?.1;
                        let BufResult(r, b) = server.send_to(b, from).await;
                        r?;
                        buf = b;
                    }
                    Ok(())
                });
                let ping = spawn(async move {
                    let mut buf = vec![1u8; MSG];
                    let mut v = Vec::with_capacity(trips);
                    for _ in 0..trips {
                        let t = Instant::now();
                        let BufResult(r, mut b) = client.send_to(buf, to).await;
                        r?;
                        b.clear();
                        let BufResult(r, b) = client.recv_from(b).await;
                        assert_eq!(r?.0, MSG);
                        buf = b;
                        v.push(us(t));
                    }
                    Ok(v)
                });
                pinged(echo, ping).await
            })
        }
    }
}

pub(crate) mod tok {
    //! tokio: a fresh runtime per measurement, the sides as `tokio::spawn`ed tasks.
    use super::*;
    use std::sync::Arc;
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream, UdpSocket};
    use tokio::spawn;

    pub struct Tokio(pub fn() -> io::Result<tokio::runtime::Runtime>);

    /// Echoes until end of file (at most `reads` reads); returns the bytes echoed.
    pub(crate) async fn echo(
        mut s: impl AsyncRead + AsyncWrite + Unpin,
        cap: usize,
        reads: usize,
    ) -> io::Result<usize> {
        let mut buf = vec![0u8; cap];
        let mut total = 0;
        for _ in 0..reads {
            let n = s.read(&mut buf).await?;
            if n == 0 {
                return Ok(total);
            }
            total += n;
            s.write_all(&buf[..n]).await?;
        }
        Err(io::Error::other("echo: more reads than its bound"))
    }

    /// `trips` round trips of [`MSG`] bytes: µs each.
    pub(crate) async fn ping(mut c: impl AsyncRead + AsyncWrite + Unpin, trips: usize) -> io::Result<Vec<f64>> {
        let mut buf = vec![1u8; MSG];
        let mut v = Vec::with_capacity(trips);
        for _ in 0..trips {
            let t = Instant::now();
            c.write_all(&buf).await?;
            c.read_exact(&mut buf).await?;
            v.push(us(t));
        }
        Ok(v)
    }

    /// Reads `total` bytes in reads of `chunk`.
    pub(crate) async fn sink(mut s: impl AsyncRead + Unpin, total: usize, chunk: usize) -> io::Result<()> {
        let mut buf = vec![0u8; chunk];
        let mut got = 0;
        while got < total {
            match s.read(&mut buf).await? {
                0 => return Err(eof()),
                n => got += n,
            }
        }
        Ok(())
    }

    /// Writes `total` bytes in writes of `chunk`.
    pub(crate) async fn source(mut c: impl AsyncWrite + Unpin, total: usize, chunk: usize) -> io::Result<()> {
        let buf = vec![1u8; chunk];
        for _ in 0..total / chunk {
            c.write_all(&buf).await?;
        }
        Ok(())
    }

    /// [`source`] on `c` and [`sink`] on `s` as tasks of the runtime:
    /// seconds from their spawn to the last byte read.
    pub(crate) async fn timed_stream(
        c: impl AsyncWrite + Unpin + Send + 'static,
        s: impl AsyncRead + Unpin + Send + 'static,
        total: usize,
        chunk: usize,
    ) -> io::Result<f64> {
        // Arguments are evaluated in order: the clock starts before either spawn.
        streamed(Instant::now(), spawn(sink(s, total, chunk)), spawn(source(c, total, chunk))).await
    }

    async fn accept(listener: &TcpListener) -> io::Result<TcpStream> {
        let s = listener.accept().await?.0;
        s.set_nodelay(true)?;
        Ok(s)
    }

    async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        let c = TcpStream::connect(addr).await?;
        c.set_nodelay(true)?;
        Ok(c)
    }

    impl Net for Tokio {
        fn ping_pong(&self, trips: usize) -> io::Result<Vec<f64>> {
            in_tokio(self.0, async move {
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let addr = listener.local_addr()?;
                let echoing = spawn(async move { echo(accept(&listener).await?, MSG, trips * MSG + 1).await });
                pinged(echoing, spawn(async move { ping(connect(addr).await?, trips).await })).await
            })
        }

        fn stream(&self, total: usize, chunk: usize) -> io::Result<f64> {
            in_tokio(self.0, async move {
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let (c, s) = futures::future::join(connect(listener.local_addr()?), accept(&listener)).await;
                timed_stream(c?, s?, total, chunk).await
            })
        }

        fn copy_stream(&self, total: usize) -> io::Result<f64> {
            in_tokio(self.0, async move {
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let (c, s) = futures::future::join(connect(listener.local_addr()?), accept(&listener)).await;
                let (mut c, s) = (c?, s?);
                let copy = async move {
                    let mut from = tokio::io::AsyncReadExt::take(tokio::io::repeat(1), total as u64);
                    tokio::io::copy(&mut from, &mut c).await?;
                    tokio::io::AsyncWriteExt::flush(&mut c).await
                };
                // Arguments are evaluated in order: the clock starts before either spawn.
                streamed(Instant::now(), spawn(sink(s, total, 64 << 10)), spawn(copy)).await
            })
        }

        fn many(&self, conns: usize, trips: usize) -> io::Result<f64> {
            in_tokio(self.0, async move {
                // `TcpListener::bind` listens with a backlog of 1,024.
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let addr = listener.local_addr()?;
                let t = Instant::now();
                let server = spawn(async move {
                    let mut echoes = Vec::with_capacity(conns);
                    for _ in 0..conns {
                        echoes.push(spawn(echo(accept(&listener).await?, MSG, trips * MSG + 1)));
                    }
                    for e in echoes {
                        joined(e.await)?;
                    }
                    Ok(())
                });
                let clients: Vec<_> =
                    (0..conns).map(|_| spawn(async move { ping(connect(addr).await?, trips).await })).collect();
                for c in clients {
                    joined(c.await)?;
                }
                joined(server.await)?;
                Ok(t.elapsed().as_secs_f64())
            })
        }

        fn udp(&self, trips: usize) -> io::Result<Vec<f64>> {
            in_tokio(self.0, async move {
                let server = Arc::new(UdpSocket::bind("127.0.0.1:0").await?);
                let client = UdpSocket::bind("127.0.0.1:0").await?;
                let to = server.local_addr()?;
                let echo = spawn(async move {
                    let mut buf = vec![0u8; MSG];
                    for _ in 0..trips {
                        let (n, from) = server.recv_from(&mut buf).await?;
                        server.send_to(&buf[..n], from).await?;
                    }
                    Ok(())
                });
                let ping = spawn(async move {
                    let mut buf = vec![1u8; MSG];
                    let mut v = Vec::with_capacity(trips);
                    for _ in 0..trips {
                        let t = Instant::now();
                        client.send_to(&buf, to).await?;
                        assert_eq!(client.recv_from(&mut buf).await?.0, MSG);
                        v.push(us(t));
                    }
                    Ok(v)
                });
                pinged(echo, ping).await
            })
        }
    }
}

pub(crate) mod blocking {
    //! Blocking `std` sockets: the client on this thread, the server on another.
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream, UdpSocket};

    pub struct Std;

    /// How long a blocking read may wait (bounds the server threads).
    const READ_LIMIT: Option<Duration> = Some(Duration::from_secs(60));

    fn pair() -> io::Result<(TcpStream, TcpStream)> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let c = TcpStream::connect(listener.local_addr()?)?;
        let s = listener.accept()?.0;
        for x in [&c, &s] {
            x.set_nodelay(true)?;
            x.set_read_timeout(READ_LIMIT)?;
        }
        Ok((c, s))
    }

    fn on_thread<T: Send + 'static>(
        f: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> impl FnOnce() -> io::Result<T> {
        let h = std::thread::spawn(f);
        move || h.join().map_err(|_| io::Error::other("a thread panicked"))?
    }

    /// `trips` round trips of [`MSG`] bytes from `c` on this thread to the
    /// echo `s` on another: µs each.
    pub(crate) fn ping_pong(
        mut c: impl Read + Write,
        mut s: impl Read + Write + Send + 'static,
        trips: usize,
    ) -> io::Result<Vec<f64>> {
        let server = on_thread(move || {
            let mut buf = [0u8; MSG];
            for _ in 0..trips * MSG + 1 {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    return Ok(());
                }
                s.write_all(&buf[..n])?;
            }
            Err(io::Error::other("echo: more reads than its bound"))
        });
        let mut buf = [1u8; MSG];
        let mut v = Vec::with_capacity(trips);
        for _ in 0..trips {
            let t = Instant::now();
            c.write_all(&buf)?;
            c.read_exact(&mut buf)?;
            v.push(us(t));
        }
        drop(c);
        server()?;
        Ok(v)
    }

    /// `total` bytes from `c` on another thread to `s` on this one, in writes
    /// and reads of `chunk`: seconds.
    pub(crate) fn stream(
        mut c: impl Write + Send + 'static,
        mut s: impl Read,
        total: usize,
        chunk: usize,
    ) -> io::Result<f64> {
        let t = Instant::now();
        let source = on_thread(move || {
            let buf = vec![1u8; chunk];
            for _ in 0..total / chunk {
                c.write_all(&buf)?;
            }
            Ok(())
        });
        let mut buf = vec![0u8; chunk];
        let mut got = 0;
        while got < total {
            match s.read(&mut buf)? {
                0 => return Err(eof()),
                n => got += n,
            }
        }
        let secs = t.elapsed().as_secs_f64();
        source()?;
        Ok(secs)
    }

    impl Net for Std {
        fn ping_pong(&self, trips: usize) -> io::Result<Vec<f64>> {
            let (c, s) = pair()?;
            ping_pong(c, s, trips)
        }

        fn stream(&self, total: usize, chunk: usize) -> io::Result<f64> {
            let (c, s) = pair()?;
            stream(c, s, total, chunk)
        }

        fn many(&self, _: usize, _: usize) -> io::Result<f64> {
            Err(io::Error::new(io::ErrorKind::Unsupported, "a thread per socket"))
        }

        fn udp(&self, trips: usize) -> io::Result<Vec<f64>> {
            let server = UdpSocket::bind("127.0.0.1:0")?;
            let client = UdpSocket::bind("127.0.0.1:0")?;
            let to = server.local_addr()?;
            for x in [&server, &client] {
                x.set_read_timeout(READ_LIMIT)?;
            }
            let echo = on_thread(move || {
                let mut buf = [0u8; MSG];
                for _ in 0..trips {
                    let (n, from) = server.recv_from(&mut buf)?;
                    server.send_to(&buf[..n], from)?;
                }
                Ok(())
            });
            let mut buf = [1u8; MSG];
            let mut v = Vec::with_capacity(trips);
            for _ in 0..trips {
                let t = Instant::now();
                client.send_to(&buf, to)?;
                assert_eq!(client.recv_from(&mut buf)?.0, MSG);
                v.push(us(t));
            }
            echo()?;
            Ok(v)
        }
    }
}

mod raw {
    //! The floor: std's overlapped sockets on `raw_tpio`'s state machines.
    use super::*;
    use crate::raw_tpio::{self, Conn, Done, End, Ends, Role};
    use std::os::windows::io::OwnedSocket;

    pub struct Raw;

    fn pair(listener: &std::net::TcpListener) -> io::Result<(OwnedSocket, OwnedSocket)> {
        let (c, s) = std_pair(listener)?;
        Ok((c.into(), s.into()))
    }

    impl Net for Raw {
        fn ping_pong(&self, trips: usize) -> io::Result<Vec<f64>> {
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            let (c, s) = pair(&listener)?;
            raw_tpio::ping_pong(End::Tcp(s), End::Tcp(c), None, trips)
        }

        fn stream(&self, total: usize, chunk: usize) -> io::Result<f64> {
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            let (c, s) = pair(&listener)?;
            raw_tpio::stream(End::Tcp(s), End::Tcp(c), total, chunk)
        }

        fn many(&self, conns: usize, trips: usize) -> io::Result<f64> {
            // std's listener has a backlog of 128: each connect is accepted
            // before the next, so it never fills.
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            let done = Done::new(2 * conns);
            // On an early return, its drop stops the ends started so far.
            let mut ends = Ends::with_capacity(2 * conns);
            let t = Instant::now();
            for _ in 0..conns {
                let (c, s) = pair(&listener)?;
                for end in [
                    Conn::new(End::Tcp(s), Role::Echo { left: None }, MSG, &done)?,
                    Conn::new(End::Tcp(c), Role::ping(trips), MSG, &done)?,
                ] {
                    ends.start(end);
                }
            }
            ends.wait(&done)?;
            Ok(t.elapsed().as_secs_f64())
        }

        fn many_from_std(&self, conns: usize, trips: usize) -> io::Result<f64> {
            self.many(conns, trips)
        }

        fn udp(&self, trips: usize) -> io::Result<Vec<f64>> {
            let server = std::net::UdpSocket::bind("127.0.0.1:0")?;
            let client = std::net::UdpSocket::bind("127.0.0.1:0")?;
            let (to, back) = (server.local_addr()?, client.local_addr()?);
            // Connected to each other, so no other process's datagram (one
            // larger than MSG, say) reaches them.
            server.connect(back)?;
            client.connect(to)?;
            raw_tpio::ping_pong(End::Udp(server.into(), back), End::Udp(client.into(), to), Some(trips), trips)
        }
    }
}
