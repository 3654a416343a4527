//! N1 on: sockets (issue 26), in a table of their own whose columns are the
//! ways a Rust user would serve sockets on Windows. Both ends of every
//! connection live in this process, on 127.0.0.1; each implementation runs
//! its client and its server side in its own runtime (the raw column: both
//! sides are callback-driven state machines on the pool, so no thread is
//! woken per operation but the callback's own). TCP sockets set
//! `TCP_NODELAY` everywhere. A cell that fails is n/a, with the reason on
//! stderr. Every run is bounded in count and, by a watchdog, in time.

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
const CRATE: usize = 0;
pub const RAW: usize = 1;
const COMPIO: usize = 2;
const TOKIO_MT: usize = 3;
const TOKIO_CT: usize = 4;
const STD: usize = 5;

/// Bytes per ping and per pong.
const MSG: usize = 64;
/// The longest one cell may take before the watchdog ends the program.
const LIMIT: Duration = Duration::from_secs(120);
/// The longest one run in a tokio runtime may take: it then fails (and its
/// tasks are dropped with the runtime), leaving the cell n/a.
const TOKIO_LIMIT: Duration = Duration::from_secs(60);

/// Runs every row, or only those `WTP_BENCH_NET_ROWS` names (`N1,N4`).
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
    if want("N4") {
        many_connections(cfg, table);
    }
    if want("N5") {
        udp_ping_pong(cfg, table);
    }
    if want("N6") {
        file_reads(cfg, table);
    }
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
fn measure<T>(row: &str, column: usize, f: impl FnOnce() -> io::Result<T>) -> Option<T> {
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

fn us(t: Instant) -> f64 {
    t.elapsed().as_nanos() as f64 / 1000.0
}

fn eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed early")
}

fn joined<T>(r: Result<io::Result<T>, impl std::fmt::Debug>) -> io::Result<T> {
    r.map_err(|e| io::Error::other(format!("a task failed: {e:?}")))?
}

fn tokio_current() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

fn tokio_multi() -> io::Result<tokio::runtime::Runtime> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build()
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
fn warm(mut v: Vec<f64>) -> Cell {
    let skip = v.len() / 10;
    v.drain(..skip);
    Cell::latency(v)
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
    let row = "N1 tcp ping-pong";
    let mut cols: [Option<Cell>; 6] = Default::default();
    for (col, imp) in impls() {
        cols[col] = measure(row, col, || imp.ping_pong(trips)).map(warm);
    }
    table.add(
        format!(
            "N1. TCP ping-pong, {MSG} B each way over one connection, {n} round trips timed after {} of warm-up \
             (client and echo server as tasks of one runtime; raw: both callback-driven; std: echo on its own thread)",
            trips - n
        ),
        "µs/round trip",
        cols,
    );
}

/// N2, N3. Streaming `total` bytes over one connection.
fn streaming(cfg: &Config, table: &mut Table, chunk: usize) {
    let total = ((256usize << 20) as f64 * cfg.scale) as usize / chunk * chunk;
    let row = format!("N streaming {} KiB", chunk >> 10);
    let mut cols: [Option<Cell>; 6] = Default::default();
    for (col, imp) in impls() {
        let mut mbs = Vec::new();
        for trial in 0..=cfg.trials {
            match measure(&row, col, || imp.stream(total, chunk)) {
                Some(secs) if trial > 0 => mbs.push(total as f64 / secs / 1e6),
                Some(_) => {}
                None => break,
            }
        }
        cols[col] = (mbs.len() == cfg.trials).then(|| Cell::trials(mbs));
    }
    table.add(
        format!(
            "N{}. stream {} MiB over one connection in {} writes (reads of the same size; higher is better)",
            if chunk == 64 << 10 { 2 } else { 3 },
            total >> 20,
            if chunk >= 1 << 20 { format!("{} MiB", chunk >> 20) } else { format!("{} KiB", chunk >> 10) }
        ),
        "MB/s",
        cols,
    );
}

/// N4. Many connections at once.
fn many_connections(cfg: &Config, table: &mut Table) {
    // `WTP_BENCH_CONNS` overrides the count (to find where an implementation stops scaling).
    let conns = std::env::var("WTP_BENCH_CONNS").ok().and_then(|v| v.parse().ok()).unwrap_or(cfg.n(1_000).max(50));
    let trips = 10;
    let trials = cfg.trials.min(3);
    let row = "N4 many connections";
    let mut cols: [Option<Cell>; 6] = Default::default();
    for (col, imp) in impls() {
        if col == STD {
            continue;
        }
        let mut ms = Vec::new();
        for trial in 0..=trials {
            match measure(row, col, || imp.many(conns, trips)) {
                Some(secs) if trial > 0 => ms.push(secs * 1000.0),
                Some(_) => {}
                None => break,
            }
        }
        cols[col] = (ms.len() == trials).then(|| Cell::trials(ms));
    }
    table.add(
        format!(
            "N4. {conns} connections at once, each {trips} round trips of {MSG} B: connects, accepts and echoes \
             (a task per connection and side; raw: std connect + accept in turn on one thread, both sides \
             callback-driven; std: n/a, it would take a thread per socket)"
        ),
        "ms wall",
        cols,
    );
}

/// N5. UDP ping-pong.
fn udp_ping_pong(cfg: &Config, table: &mut Table) {
    let n = cfg.n(5_000);
    let trips = n + n / 9;
    let row = "N5 udp ping-pong";
    let mut cols: [Option<Cell>; 6] = Default::default();
    for (col, imp) in impls() {
        cols[col] = measure(row, col, || imp.udp(trips)).map(warm);
    }
    table.add(
        format!(
            "N5. UDP ping-pong, {MSG} B datagrams (send_to / recv_from), {n} round trips timed after {} of warm-up",
            trips - n
        ),
        "µs/round trip",
        cols,
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
struct Window {
    buf: Vec<u8>,
    start: usize,
    end: usize,
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
fn in_tokio<T>(
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

mod wtp {
    //! This crate: `task::block_on` awaiting tasks spawned on the pool.
    use super::*;
    use std::sync::Arc;
    use windows_threadpool::net::{TcpListener, TcpStream, UdpSocket};
    use windows_threadpool::task;

    pub struct Wtp;

    async fn read_exact(s: &TcpStream, buf: Vec<u8>) -> io::Result<Vec<u8>> {
        let end = buf.len();
        let mut w = Window { buf, start: 0, end };
        while w.start < end {
            let (r, b) = s.read(w).await;
            w = b;
            match r? {
                0 => return Err(eof()),
                n => w.start += n,
            }
        }
        Ok(w.buf)
    }

    /// Echoes until end of file (at most `reads` reads); returns the bytes echoed.
    async fn echo(s: TcpStream, cap: usize, reads: usize) -> io::Result<usize> {
        s.set_nodelay(true)?;
        let mut w = Window { buf: vec![0; cap], start: 0, end: cap };
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

    async fn ping(c: &TcpStream, trips: usize) -> io::Result<Vec<f64>> {
        let mut buf = vec![1u8; MSG];
        let mut v = Vec::with_capacity(trips);
        for _ in 0..trips {
            let t = Instant::now();
            let (r, b) = c.write_all(buf).await;
            r?;
            buf = read_exact(c, b).await?;
            v.push(us(t));
        }
        Ok(v)
    }

    async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        let c = TcpStream::connect(addr).await?;
        c.set_nodelay(true)?;
        Ok(c)
    }

    impl Net for Wtp {
        fn ping_pong(&self, trips: usize) -> io::Result<Vec<f64>> {
            task::block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0")?;
                let addr = listener.local_addr()?;
                let server = task::spawn(async move { echo(listener.accept().await?.0, MSG, trips * MSG + 1).await });
                let client = task::spawn(async move { ping(&connect(addr).await?, trips).await });
                let v = joined(client.await)?;
                joined(server.await)?;
                Ok(v)
            })
        }

        fn stream(&self, total: usize, chunk: usize) -> io::Result<f64> {
            task::block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0")?;
                let (c, a) = futures::future::join(connect(listener.local_addr()?), listener.accept()).await;
                let (c, s) = (c?, a?.0);
                let t = Instant::now();
                let sink = task::spawn(async move {
                    let mut buf = vec![0u8; chunk];
                    let mut got = 0;
                    while got < total {
                        let (r, b) = s.read(buf).await;
                        buf = b;
                        match r? {
                            0 => return Err(eof()),
                            n => got += n,
                        }
                    }
                    Ok(())
                });
                let source = task::spawn(async move {
                    let mut buf = vec![1u8; chunk];
                    for _ in 0..total / chunk {
                        let (r, b) = c.write_all(buf).await;
                        r?;
                        buf = b;
                    }
                    Ok(())
                });
                joined(source.await)?;
                joined(sink.await)?;
                Ok(t.elapsed().as_secs_f64())
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
                        let s = listener.accept().await?.0;
                        echoes.push(task::spawn(echo(s, MSG, trips * MSG + 1)));
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
                let v = joined(ping.await)?;
                joined(echo.await)?;
                Ok(v)
            })
        }
    }
}

mod cmp {
    //! compio: one runtime on this thread (its IOCP driver), the sides as its tasks.
    use super::*;
    use compio::BufResult;
    use compio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
    use compio::net::{TcpListener, TcpSocket, TcpStream, UdpSocket};
    use compio::runtime::spawn;

    pub struct Compio;

    fn block_on<T>(f: impl Future<Output = io::Result<T>>) -> io::Result<T> {
        compio::runtime::Runtime::new()?.block_on(f)
    }

    async fn echo(mut s: TcpStream, cap: usize, reads: usize) -> io::Result<usize> {
        s.set_nodelay(true)?;
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

    async fn ping(mut c: TcpStream, trips: usize) -> io::Result<Vec<f64>> {
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
                let server = spawn(async move { echo(listener.accept().await?.0, MSG, trips * MSG + 1).await });
                let client = spawn(async move { ping(connect(addr).await?, trips).await });
                let v = joined(client.await)?;
                joined(server.await)?;
                Ok(v)
            })
        }

        fn stream(&self, total: usize, chunk: usize) -> io::Result<f64> {
            block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let (c, a) = futures::future::join(connect(listener.local_addr()?), listener.accept()).await;
                let (mut c, mut s) = (c?, a?.0);
                let t = Instant::now();
                let sink = spawn(async move {
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
                });
                let source = spawn(async move {
                    let mut buf = vec![1u8; chunk];
                    for _ in 0..total / chunk {
                        let BufResult(r, b) = c.write_all(buf).await;
                        r?;
                        buf = b;
                    }
                    Ok(())
                });
                joined(source.await)?;
                joined(sink.await)?;
                Ok(t.elapsed().as_secs_f64())
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
                        let s = listener.accept().await?.0;
                        echoes.push(spawn(echo(s, MSG, trips * MSG + 1)));
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
                let v = joined(ping.await)?;
                joined(echo.await)?;
                Ok(v)
            })
        }
    }
}

mod tok {
    //! tokio: a fresh runtime per measurement, the sides as `tokio::spawn`ed tasks.
    use super::*;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream, UdpSocket};
    use tokio::spawn;

    pub struct Tokio(pub fn() -> io::Result<tokio::runtime::Runtime>);

    async fn echo(mut s: TcpStream, cap: usize, reads: usize) -> io::Result<usize> {
        s.set_nodelay(true)?;
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

    async fn ping(mut c: TcpStream, trips: usize) -> io::Result<Vec<f64>> {
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
                let server = spawn(async move { echo(listener.accept().await?.0, MSG, trips * MSG + 1).await });
                let client = spawn(async move { ping(connect(addr).await?, trips).await });
                let v = joined(client.await)?;
                joined(server.await)?;
                Ok(v)
            })
        }

        fn stream(&self, total: usize, chunk: usize) -> io::Result<f64> {
            in_tokio(self.0, async move {
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let (c, a) = futures::future::join(connect(listener.local_addr()?), listener.accept()).await;
                let (mut c, mut s) = (c?, a?.0);
                let t = Instant::now();
                let sink = spawn(async move {
                    let mut buf = vec![0u8; chunk];
                    let mut got = 0;
                    while got < total {
                        match s.read(&mut buf).await? {
                            0 => return Err(eof()),
                            n => got += n,
                        }
                    }
                    Ok(())
                });
                let source = spawn(async move {
                    let buf = vec![1u8; chunk];
                    for _ in 0..total / chunk {
                        c.write_all(&buf).await?;
                    }
                    Ok(())
                });
                joined(source.await)?;
                joined(sink.await)?;
                Ok(t.elapsed().as_secs_f64())
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
                        let s = listener.accept().await?.0;
                        echoes.push(spawn(echo(s, MSG, trips * MSG + 1)));
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
                let v = joined(ping.await)?;
                joined(echo.await)?;
                Ok(v)
            })
        }
    }
}

mod blocking {
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

    impl Net for Std {
        fn ping_pong(&self, trips: usize) -> io::Result<Vec<f64>> {
            let (mut c, mut s) = pair()?;
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

        fn stream(&self, total: usize, chunk: usize) -> io::Result<f64> {
            let (mut c, mut s) = pair()?;
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
    //! The floor: overlapped sockets (std's) bound to a `TP_IO` each, with
    //! `FILE_SKIP_COMPLETION_PORT_ON_SUCCESS`; every connection end is a
    //! state machine advanced by its completion callback (and, for
    //! operations that complete at once, inline by whoever issued them).
    use super::*;
    use std::os::windows::io::{AsRawSocket, OwnedSocket};
    use std::sync::{Arc, Condvar, Mutex};

    use windows_sys::Win32::Foundation::HANDLE;
    use windows_sys::Win32::Networking::WinSock::{
        AF_INET, IN_ADDR, IN_ADDR_0, SD_SEND, SOCKADDR, SOCKADDR_IN, SOCKADDR_STORAGE, SOCKET, WSA_IO_PENDING, WSABUF,
        WSAGetLastError, WSARecv, WSARecvFrom, WSASend, WSASendTo, shutdown,
    };
    use windows_sys::Win32::Storage::FileSystem::SetFileCompletionNotificationModes;
    use windows_sys::Win32::System::IO::OVERLAPPED;
    use windows_sys::Win32::System::Threading::{
        CancelThreadpoolIo, CloseThreadpoolIo, CreateThreadpoolIo, PTP_CALLBACK_INSTANCE, PTP_IO, StartThreadpoolIo,
        WaitForThreadpoolIoCallbacks,
    };

    /// `FILE_SKIP_COMPLETION_PORT_ON_SUCCESS | FILE_SKIP_SET_EVENT_ON_HANDLE`.
    const SKIP_ON_SUCCESS: u8 = 1 | 2;

    pub struct Raw;

    /// What a connection end does.
    enum Role {
        /// Echoes what it reads: until end of file, or (UDP) `left` datagrams.
        Echo { left: Option<usize> },
        /// Sends [`MSG`] bytes and reads them back, `left` times, timing each.
        Ping { left: usize, t0: Instant, samples: Vec<f64> },
        /// Reads until `left` bytes have arrived.
        Sink { left: usize },
        /// Writes `left` bytes in writes of the buffer's length.
        Source { left: usize },
    }

    #[derive(Clone, Copy)]
    enum Step {
        Recv { from: usize, to: usize },
        Send { from: usize, to: usize },
    }

    /// What comes after an operation.
    enum Next {
        Op(Step),
        Done(io::Result<()>),
    }

    struct Udp {
        /// Where sends go.
        peer: SOCKADDR_STORAGE,
        /// Where the last datagram came from (written by `WSARecvFrom`).
        from: SOCKADDR_STORAGE,
        from_len: i32,
    }

    struct State {
        role: Role,
        step: Step,
        buf: Vec<u8>,
        ov: OVERLAPPED,
        flags: u32,
        udp: Option<Udp>,
        outcome: Option<io::Result<()>>,
    }

    impl State {
        fn first(&mut self) -> Next {
            let cap = self.buf.len();
            match &mut self.role {
                Role::Echo { .. } | Role::Sink { .. } => Next::Op(Step::Recv { from: 0, to: cap }),
                Role::Ping { t0, .. } => {
                    *t0 = Instant::now();
                    Next::Op(Step::Send { from: 0, to: MSG })
                }
                Role::Source { left } => Next::Op(Step::Send { from: 0, to: cap.min(*left) }),
            }
        }

        /// The next step after the current one moved `n` bytes.
        fn after(&mut self, n: usize) -> Next {
            let cap = self.buf.len();
            let udp = self.udp.is_some();
            match (&mut self.role, self.step) {
                (_, Step::Send { from, to }) if from + n < to && !udp => Next::Op(Step::Send { from: from + n, to }),
                (Role::Echo { left }, Step::Send { .. }) => match left {
                    Some(0) => Next::Done(Ok(())),
                    _ => Next::Op(Step::Recv { from: 0, to: cap }),
                },
                (Role::Echo { left }, Step::Recv { .. }) => {
                    if n == 0 && !udp {
                        return Next::Done(Ok(()));
                    }
                    if let Some(left) = left {
                        *left -= 1;
                    }
                    if let Some(u) = &mut self.udp {
                        u.peer = u.from;
                    }
                    Next::Op(Step::Send { from: 0, to: n })
                }
                (Role::Ping { .. }, Step::Send { .. }) => Next::Op(Step::Recv { from: 0, to: MSG }),
                (Role::Ping { .. }, Step::Recv { .. }) if n == 0 => Next::Done(Err(eof())),
                (Role::Ping { .. }, Step::Recv { from, to }) if from + n < to && !udp => {
                    Next::Op(Step::Recv { from: from + n, to })
                }
                (Role::Ping { left, t0, samples }, Step::Recv { .. }) => {
                    samples.push(us(*t0));
                    *left -= 1;
                    if *left == 0 {
                        return Next::Done(Ok(()));
                    }
                    *t0 = Instant::now();
                    Next::Op(Step::Send { from: 0, to: MSG })
                }
                (Role::Sink { .. }, Step::Recv { .. }) if n == 0 => Next::Done(Err(eof())),
                (Role::Sink { left }, Step::Recv { .. }) => {
                    *left = left.saturating_sub(n);
                    if *left == 0 { Next::Done(Ok(())) } else { Next::Op(Step::Recv { from: 0, to: cap }) }
                }
                (Role::Source { left }, Step::Send { to, .. }) => {
                    *left -= to;
                    if *left == 0 { Next::Done(Ok(())) } else { Next::Op(Step::Send { from: 0, to: cap.min(*left) }) }
                }
                (Role::Source { .. }, Step::Recv { .. }) => unreachable!("a source only sends"),
                (Role::Sink { .. }, Step::Send { .. }) => unreachable!("a sink only reads"),
            }
        }
    }

    /// Counts connection ends still running.
    struct Done {
        left: Mutex<usize>,
        cv: Condvar,
    }

    impl Done {
        fn new(n: usize) -> Arc<Self> {
            Arc::new(Self { left: Mutex::new(n), cv: Condvar::new() })
        }

        fn finish(&self) {
            *self.left.lock().unwrap() -= 1;
            self.cv.notify_all();
        }

        fn wait(&self) -> io::Result<()> {
            let (left, timeout) =
                self.cv.wait_timeout_while(self.left.lock().unwrap(), LIMIT, |left| *left > 0).unwrap();
            if timeout.timed_out() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, format!("{} ends still running", *left)));
            }
            Ok(())
        }
    }

    /// One connection end: a socket, its `TP_IO`, and its role's state.
    struct Conn {
        socket: SOCKET,
        io: PTP_IO,
        tcp: bool,
        state: Mutex<State>,
        done: Arc<Done>,
        _owner: OwnedSocket,
    }

    // SAFETY: `io` is a thread-pool object, usable from any thread; the rest
    // is Send + Sync.
    unsafe impl Send for Conn {}
    // SAFETY: as above; the state is behind a mutex.
    unsafe impl Sync for Conn {}

    unsafe extern "system" fn on_io(
        _: PTP_CALLBACK_INSTANCE,
        ctx: *mut core::ffi::c_void,
        _: *mut core::ffi::c_void,
        result: u32,
        bytes: usize,
        _: PTP_IO,
    ) {
        // SAFETY: ctx is the `Conn`, which outlives its TP_IO's callbacks
        // (its drop waits for them before closing it).
        let conn = unsafe { &*(ctx as *const Conn) };
        let outcome = if result == 0 { Ok(bytes) } else { Err(io::Error::from_raw_os_error(result as i32)) };
        let mut st = conn.state.lock().unwrap();
        conn.advance(&mut st, Some(outcome));
    }

    fn sockaddr(a: SocketAddr) -> SOCKADDR_STORAGE {
        let SocketAddr::V4(a) = a else { panic!("the bench uses 127.0.0.1") };
        let sin = SOCKADDR_IN {
            sin_family: AF_INET,
            sin_port: a.port().to_be(),
            sin_addr: IN_ADDR { S_un: IN_ADDR_0 { S_addr: u32::from_ne_bytes(a.ip().octets()) } },
            sin_zero: [0; 8],
        };
        // SAFETY: all-zero is a valid SOCKADDR_STORAGE.
        let mut s: SOCKADDR_STORAGE = unsafe { core::mem::zeroed() };
        // SAFETY: SOCKADDR_STORAGE is larger than SOCKADDR_IN and as aligned.
        unsafe { core::ptr::write((&raw mut s).cast::<SOCKADDR_IN>(), sin) };
        s
    }

    impl Conn {
        /// Binds `owner` to a new `TP_IO` (std's sockets are overlapped).
        fn new(
            owner: OwnedSocket,
            tcp: bool,
            role: Role,
            cap: usize,
            peer: Option<SocketAddr>,
            done: &Arc<Done>,
        ) -> io::Result<Arc<Self>> {
            let socket = owner.as_raw_socket() as SOCKET;
            // SAFETY: a valid socket handle.
            if unsafe { SetFileCompletionNotificationModes(socket as HANDLE, SKIP_ON_SUCCESS) } == 0 {
                return Err(io::Error::last_os_error());
            }
            let udp = peer.map(|p| Udp {
                peer: sockaddr(p),
                from: sockaddr(p),
                from_len: core::mem::size_of::<SOCKADDR_STORAGE>() as i32,
            });
            let state = State {
                role,
                step: Step::Recv { from: 0, to: 0 },
                buf: vec![1u8; cap],
                // SAFETY: all-zero is a valid OVERLAPPED.
                ov: unsafe { core::mem::zeroed() },
                flags: 0,
                udp,
                outcome: None,
            };
            let mut conn =
                Arc::new(Conn { socket, io: 0, tcp, state: Mutex::new(state), done: done.clone(), _owner: owner });
            let ctx = Arc::as_ptr(&conn) as *mut core::ffi::c_void;
            // SAFETY: the Conn outlives the TP_IO (closed in its drop).
            let io = unsafe { CreateThreadpoolIo(socket as HANDLE, Some(on_io), ctx, core::ptr::null()) };
            if io == 0 {
                return Err(io::Error::last_os_error());
            }
            Arc::get_mut(&mut conn).expect("not shared yet").io = io;
            Ok(conn)
        }

        fn start(&self) {
            let mut st = self.state.lock().unwrap();
            self.advance(&mut st, None);
        }

        /// Feeds the outcome of the operation that completed (`None`: none
        /// yet) to the role and issues the next, for as long as operations
        /// complete at once.
        fn advance(&self, st: &mut State, mut outcome: Option<io::Result<usize>>) {
            loop {
                let next = match outcome.take() {
                    None => st.first(),
                    Some(Err(e)) => Next::Done(Err(e)),
                    Some(Ok(n)) => st.after(n),
                };
                match next {
                    Next::Done(r) => {
                        if self.tcp && matches!(st.role, Role::Ping { .. } | Role::Source { .. }) {
                            // The peer's echo or sink reads end of file.
                            // SAFETY: a valid socket.
                            unsafe { shutdown(self.socket, SD_SEND) };
                        }
                        st.outcome = Some(r);
                        self.done.finish();
                        return;
                    }
                    Next::Op(step) => {
                        st.step = step;
                        match self.issue(st) {
                            None => return,
                            inline => outcome = inline,
                        }
                    }
                }
            }
        }

        /// Issues `st.step`: `None` if it is pending (its callback follows),
        /// else its outcome (no callback follows).
        fn issue(&self, st: &mut State) -> Option<io::Result<usize>> {
            let (Step::Recv { from, to } | Step::Send { from, to }) = st.step;
            let recv = matches!(st.step, Step::Recv { .. });
            let wsabuf = WSABUF { len: (to - from) as u32, buf: st.buf[from..].as_mut_ptr() };
            st.ov = OVERLAPPED::default();
            st.flags = 0;
            let mut n = 0u32;
            // SAFETY: the buffer, OVERLAPPED, flags and addresses live in the
            // state, which outlives the operation (nothing else touches them
            // until its completion: the next step is issued from there).
            let rc = unsafe {
                StartThreadpoolIo(self.io);
                match (&mut st.udp, recv) {
                    (None, true) => WSARecv(self.socket, &wsabuf, 1, &mut n, &mut st.flags, &mut st.ov, None),
                    (None, false) => WSASend(self.socket, &wsabuf, 1, &mut n, 0, &mut st.ov, None),
                    (Some(u), true) => {
                        u.from_len = core::mem::size_of::<SOCKADDR_STORAGE>() as i32;
                        WSARecvFrom(
                            self.socket,
                            &wsabuf,
                            1,
                            &mut n,
                            &mut st.flags,
                            (&raw mut u.from).cast::<SOCKADDR>(),
                            &mut u.from_len,
                            &mut st.ov,
                            None,
                        )
                    }
                    (Some(u), false) => WSASendTo(
                        self.socket,
                        &wsabuf,
                        1,
                        &mut n,
                        0,
                        (&raw const u.peer).cast::<SOCKADDR>(),
                        core::mem::size_of::<SOCKADDR_IN>() as i32,
                        &mut st.ov,
                        None,
                    ),
                }
            };
            if rc == 0 {
                // Completed at once: with the skip flag no callback follows.
                // SAFETY: balances the StartThreadpoolIo above.
                unsafe { CancelThreadpoolIo(self.io) };
                return Some(Ok(n as usize));
            }
            // SAFETY: no preconditions.
            let e = unsafe { WSAGetLastError() };
            if e == WSA_IO_PENDING {
                return None;
            }
            // SAFETY: failed at once: no callback follows.
            unsafe { CancelThreadpoolIo(self.io) };
            Some(Err(io::Error::from_raw_os_error(e)))
        }

        fn outcome(&self) -> io::Result<()> {
            self.state.lock().unwrap().outcome.take().unwrap_or_else(|| Err(io::Error::other("still running")))
        }

        fn samples(&self) -> Vec<f64> {
            match &mut self.state.lock().unwrap().role {
                Role::Ping { samples, .. } => std::mem::take(samples),
                _ => Vec::new(),
            }
        }
    }

    impl Drop for Conn {
        fn drop(&mut self) {
            if self.io == 0 {
                return;
            }
            // SAFETY: every end is done (no operation pending) before its
            // last reference goes; this waits for a callback still returning.
            unsafe {
                WaitForThreadpoolIoCallbacks(self.io, 0);
                CloseThreadpoolIo(self.io);
            }
        }
    }

    fn pair(listener: &std::net::TcpListener) -> io::Result<(OwnedSocket, OwnedSocket)> {
        let c = std::net::TcpStream::connect(listener.local_addr()?)?;
        let s = listener.accept()?.0;
        c.set_nodelay(true)?;
        s.set_nodelay(true)?;
        Ok((c.into(), s.into()))
    }

    /// Starts every end, waits for all, and checks their outcomes.
    fn run_all(ends: &[Arc<Conn>], done: &Done) -> io::Result<()> {
        ends.iter().for_each(|e| e.start());
        done.wait()?;
        ends.iter().try_for_each(|e| e.outcome())
    }

    impl Net for Raw {
        fn ping_pong(&self, trips: usize) -> io::Result<Vec<f64>> {
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            let (c, s) = pair(&listener)?;
            let done = Done::new(2);
            let ping = Role::Ping { left: trips, t0: Instant::now(), samples: Vec::with_capacity(trips) };
            let ends = [
                Conn::new(s, true, Role::Echo { left: None }, MSG, None, &done)?,
                Conn::new(c, true, ping, MSG, None, &done)?,
            ];
            run_all(&ends, &done)?;
            Ok(ends[1].samples())
        }

        fn stream(&self, total: usize, chunk: usize) -> io::Result<f64> {
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            let (c, s) = pair(&listener)?;
            let done = Done::new(2);
            let ends = [
                Conn::new(s, true, Role::Sink { left: total }, chunk, None, &done)?,
                Conn::new(c, true, Role::Source { left: total }, chunk, None, &done)?,
            ];
            let t = Instant::now();
            run_all(&ends, &done)?;
            Ok(t.elapsed().as_secs_f64())
        }

        fn many(&self, conns: usize, trips: usize) -> io::Result<f64> {
            // std's listener has a backlog of 128: each connect is accepted
            // before the next, so it never fills.
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            let done = Done::new(2 * conns);
            let mut ends = Vec::with_capacity(2 * conns);
            let t = Instant::now();
            for _ in 0..conns {
                let (c, s) = pair(&listener)?;
                let ping = Role::Ping { left: trips, t0: Instant::now(), samples: Vec::with_capacity(trips) };
                for end in [
                    Conn::new(s, true, Role::Echo { left: None }, MSG, None, &done)?,
                    Conn::new(c, true, ping, MSG, None, &done)?,
                ] {
                    end.start();
                    ends.push(end);
                }
            }
            done.wait()?;
            let secs = t.elapsed().as_secs_f64();
            ends.iter().try_for_each(|e| e.outcome())?;
            Ok(secs)
        }

        fn udp(&self, trips: usize) -> io::Result<Vec<f64>> {
            let server = std::net::UdpSocket::bind("127.0.0.1:0")?;
            let client = std::net::UdpSocket::bind("127.0.0.1:0")?;
            let (to, back) = (server.local_addr()?, client.local_addr()?);
            let done = Done::new(2);
            let ping = Role::Ping { left: trips, t0: Instant::now(), samples: Vec::with_capacity(trips) };
            let ends = [
                Conn::new(server.into(), false, Role::Echo { left: Some(trips) }, MSG, Some(back), &done)?,
                Conn::new(client.into(), false, ping, MSG, Some(to), &done)?,
            ];
            run_all(&ends, &done)?;
            Ok(ends[1].samples())
        }
    }
}
