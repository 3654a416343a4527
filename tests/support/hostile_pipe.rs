//! Hostile clients against the named-pipe server of `pipe_server.rs`
//! (`examples/pipe_service.rs`'s `answer_pipe`, a task per accepted
//! stream, an accept loop that counts errors and goes on): the scenarios
//! of the bounded test in `tests/io/pipe_hostile.rs` (`cargo xtask test`)
//! and of their full versions in `tests/pipe_stress.rs` (`cargo xtask
//! stress`), which differ only in their numbers. How they run, and the end
//! every scenario shares, is `rounds.rs`'s; here the well-behaved client
//! is a `ping` answered `pong: ping` ([`pipe_server::ping`]), the hostile
//! clients are `std` handles ([`RawPipe`], [`pipe_server::open`]) on
//! threads of their own, and every scenario also checks that no accept
//! failed. Include it beside `support`, `leak`, `rounds` and `pipe_server`.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

use windows_threadpool::{task, time};

use crate::leak as process;
use crate::pipe_server::{self, PipeServer, PipeStats, RawPipe};
use crate::rounds::{self, Footprint, SETTLE, off_pool, settle, until};
use crate::support;

/// What a scenario's rounds get: the pipe's name and the server's counters.
#[derive(Clone)]
pub struct Target {
    pub name: Arc<str>,
    pub stats: Arc<PipeStats>,
}

impl Target {
    pub fn get(&self, counter: impl Fn(&PipeStats) -> &AtomicU64) -> u64 {
        PipeStats::get(counter(&self.stats))
    }

    /// Waits (at most `patience`) until `counter` reaches `value`, and
    /// checks it did not pass it.
    pub async fn reaches(&self, what: &str, patience: Duration, counter: fn(&PipeStats) -> &AtomicU64, value: u64) {
        let (count, show) = (|| PipeStats::get(counter(&self.stats)), || format!("{:?}", self.stats));
        rounds::reaches(what, patience, count, value, show).await;
    }

    /// No accept has failed.
    fn no_accept_error(&self, what: &str) {
        assert_eq!(self.get(|s| &s.accept_errors), 0, "{what}: an accept failed: {:?}", self.stats);
    }
}

/// Under Wine 8 each closed `TP_IO` keeps about 210 bytes (docs/wine.md),
/// and each pipe connection took one (its instance's), accepted or
/// skipped as gone.
const WINE_TP_IO_BYTES: usize = 256;

impl rounds::Server for PipeServer {
    type Setup = ();
    type Target = Target;
    const WINE_BYTES_PER_CONNECTION: usize = WINE_TP_IO_BYTES;

    fn start(_: &()) -> Self {
        PipeServer::start()
    }

    fn target(&self) -> Target {
        Target { name: self.name.clone(), stats: self.stats.clone() }
    }

    async fn promptly(target: &Target, during: &str) -> Duration {
        pipe_server::promptly(&target.name, &target.stats, during).await
    }

    async fn all_ended(target: &Target, what: &str) {
        let stats = target.stats.clone();
        until(what, support::PATIENCE, move || stats.ended() == PipeStats::get(&stats.accepted)).await;
        target.no_accept_error(what);
    }

    fn connections(&self) -> usize {
        self.accepted().max(PipeStats::get(&self.stats.opened)) as usize
    }

    fn stats(&self) -> String {
        format!("{:?}", self.stats)
    }

    async fn stop(self) {
        PipeServer::stop(self).await
    }
}

/// A scenario of the pipe server.
pub type Scenario = rounds::Scenario<PipeServer>;

fn scenario<R, Fut>(name: &'static str, rounds: usize, limit: Duration, round: R) -> Scenario
where
    R: Fn(Target, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = String> + Send + 'static,
{
    Scenario::new(name, (), rounds, limit, round)
}

/// Opens a raw client of `t`, counted.
fn open_raw(t: &Target) -> RawPipe {
    let (pipe, _) = RawPipe::open(&t.name);
    t.stats.opened.fetch_add(1, SeqCst);
    pipe
}

/// A `ping` on a raw client: `pong: ping` back within
/// [`support::PATIENCE`].
fn raw_ping(pipe: &mut RawPipe, what: &str) {
    let sent = pipe.write(b"ping", support::PATIENCE);
    assert!(matches!(sent, Ok(Some(4))), "{what}: the ping's write: {sent:?}");
    let (mut got, mut buf) = (Vec::new(), [0u8; 64]);
    // At most 10 reads: each returns a byte or more, or ends the loop.
    while got.len() < b"pong: ping".len() {
        match pipe.read(&mut buf, support::PATIENCE) {
            Ok(Some(0)) => break,
            Ok(Some(n)) => got.extend_from_slice(&buf[..n]),
            other => panic!("{what}: the answer's read: {other:?}"),
        }
    }
    assert_eq!(got, b"pong: ping", "{what}: {:?}", String::from_utf8_lossy(&got));
}

/// Each round, `clients` clients open the pipe and close it at once, in a
/// tight loop, from `threads` threads: each the server accepted ends (its
/// read sees the close); one that was gone before its accept saw it
/// (`ERROR_NO_DATA`) is skipped by the accept, never an accept error.
pub fn come_and_go(clients: usize, threads: usize, rounds: usize) -> Scenario {
    scenario("pipe_come_and_go", rounds, support::PATIENCE * 2, move |t, round| async move {
        let (accepted, requests) = (t.get(|s| &s.accepted), t.get(|s| &s.requests));
        let started = Instant::now();
        let target = t.clone();
        let busy: usize = off_pool(move || {
            std::thread::scope(|scope| {
                let each: Vec<_> = (0..threads)
                    .map(|_| {
                        scope.spawn(|| {
                            let mut busy = 0;
                            for _ in 0..clients / threads {
                                let (file, b) = pipe_server::open(&target.name, 0);
                                target.stats.opened.fetch_add(1, SeqCst);
                                drop(file);
                                busy += b;
                            }
                            busy
                        })
                    })
                    .collect();
                each.into_iter().map(|h| h.join().unwrap()).sum()
            })
        })
        .await;
        let took = started.elapsed();
        t.no_accept_error(&format!("round {round}"));
        assert_eq!(t.get(|s| &s.requests), requests, "round {round}: {:?}", t.stats);
        let got = t.get(|s| &s.accepted) - accepted;
        let clients = clients / threads * threads;
        assert!(got <= clients as u64, "round {round}: {got} accepted of {clients} clients: {:?}", t.stats);
        format!(
            "{clients} clients a round opened and closed from {threads} threads in {:.2}s, {got} seen by an \
             accept (so far; the rest skipped as gone), {busy} tries found the pipe busy",
            took.as_secs_f64()
        )
    })
}

/// Each round, `clients` clients connect and hold the pipe open doing
/// nothing for `idle` (and, when that is 5 s or more, until the threads
/// their burst added have idled out), then each is served a `ping`; then
/// all close. Reports what they cost while idle: each server-side
/// connection waits in a read, with its buffer and no thread.
pub fn idle(clients: usize, idle: Duration, rounds: usize) -> Scenario {
    let limit = support::PATIENCE * 2 + (idle + SETTLE) * 2 * (rounds as u32 + 1);
    scenario("pipe_idle", rounds, limit, move |t, round| async move {
        let (accepted, requests, closed) = (t.get(|s| &s.accepted), t.get(|s| &s.requests), t.get(|s| &s.closed));
        let before = Footprint::memory();
        let target = t.clone();
        let mut open = off_pool(move || (0..clients).map(|_| open_raw(&target)).collect::<Vec<_>>()).await;
        let all = accepted + clients as u64;
        t.reaches(&format!("round {round}: every client accepted"), support::PATIENCE, |s| &s.accepted, all).await;
        let (idle_at, seen) = rounds::after_idle(idle, before.threads).await;
        let open = off_pool(move || {
            for (i, pipe) in open.iter_mut().enumerate() {
                raw_ping(pipe, &format!("client {i}, after idling"));
            }
            open
        })
        .await;
        assert_eq!(t.get(|s| &s.requests), requests + clients as u64, "round {round}: {:?}", t.stats);
        drop(open);
        let all = closed + clients as u64;
        t.reaches(&format!("round {round}: every client's close seen"), support::PATIENCE, |s| &s.closed, all).await;
        let per = |a: usize, b: usize| (b as i64 - a as i64) / clients as i64;
        let (held, committed, private) = (
            per(before.held(), idle_at.held()),
            per(before.committed, idle_at.committed),
            per(before.private_bytes, idle_at.private_bytes),
        );
        eprintln!(
            "pipe_idle: round {round}: memory per idle pipe connection (the client's handle and event included): \
             held {held:+} B, committed {committed:+} B, private bytes {private:+} B"
        );
        format!(
            "{clients} clients a round idle {idle:?}, then each served a ping; while idle (the clients' handles \
             included): threads {} -> {} ({seen:?}), held {held:+} a connection, committed {committed:+} a \
             connection, private bytes {private:+} a connection",
            before.threads, idle_at.threads,
        )
    })
}

/// Each round, `clients` clients each send 1 KiB requests and never read
/// an answer, until every server-side task is stuck writing an answer
/// (the pipe's buffers full); then a new client's `ping` is answered
/// within [`rounds::PROMPTLY`] five times, and the pool holds no thread for
/// any of them (the thread count stays under a thread per client); then
/// they close, and each answer in flight ends with `BrokenPipe`, which
/// ends its task.
pub fn never_reads(clients: usize, rounds: usize) -> Scenario {
    scenario("pipe_never_reads", rounds, support::PATIENCE * 3 + SETTLE, move |t, round| async move {
        let (broken, writing, closed) = (t.get(|s| &s.broken), t.get(|s| &s.writing), t.get(|s| &s.closed));
        let threads = process::thread_ids().len();
        let target = t.clone();
        let open = off_pool(move || {
            std::thread::scope(|scope| {
                let each: Vec<_> = (0..clients)
                    .map(|_| {
                        scope.spawn(|| {
                            let mut pipe = open_raw(&target);
                            let request = [b'r'; 1024];
                            let (mut written, mut stalled) = (0usize, false);
                            let deadline = Instant::now() + support::PATIENCE;
                            // Writes until every server-side task is stuck
                            // writing (its own among them).
                            while !stalled || target.get(|s| &s.writing) < writing + clients as u64 {
                                assert!(Instant::now() < deadline, "the server never stuck writing: {written} bytes");
                                match pipe.write(&request, Duration::from_millis(50)).unwrap() {
                                    Some(n) => written += n,
                                    None => stalled = true,
                                }
                            }
                            (pipe, written)
                        })
                    })
                    .collect();
                each.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
            })
        })
        .await;
        let mut stuck = process::thread_ids().len();
        let mut slowest = Duration::ZERO;
        for _ in 0..5 {
            slowest = slowest.max(pipe_server::promptly(&t.name, &t.stats, "beside clients that never read").await);
        }
        // A ping's answer counts as writing until its task sees the write
        // return, which may be after the ping has read it: wait for the
        // pings' tasks to end before counting the stuck ones.
        t.reaches(&format!("round {round}: every ping's close seen"), support::PATIENCE, |s| &s.closed, closed + 5)
            .await;
        assert_eq!(t.get(|s| &s.writing), writing + clients as u64, "round {round}: {:?}", t.stats);
        // Wine's pool starts a thread for each callback queued while all
        // are busy (docs/wine.md), and the clients' burst may leave more
        // than the bound, idle: they exit within IDLE_OUT, a held one never.
        let bound = threads + clients / 2;
        if stuck >= bound {
            let (settled, seen) = settle(|n, _| n < bound, SETTLE);
            stuck = seen.last().map_or(stuck, |&(_, n)| n);
            assert!(
                settled,
                "round {round}: {stuck} threads with {clients} clients stuck (from {threads}): a thread held for \
                 each? (ms, threads): {seen:?}"
            );
        }
        let most = open.iter().map(|(_, n)| *n).max().unwrap_or(0);
        drop(open);
        let all = broken + clients as u64;
        t.reaches(&format!("round {round}: every answer in flight broken"), support::PATIENCE, |s| &s.broken, all)
            .await;
        format!(
            "{clients} clients a round that never read (at most {most} bytes written by one before the server \
             stuck), threads {threads} -> {stuck} with all stuck; 5 pings meanwhile, the slowest in {:.1} ms",
            slowest.as_secs_f64() * 1e3
        )
    })
}

/// Each round, `clients` clients each write `bytes` bytes one at a time,
/// `pause` apart, while a new client's `ping` is answered within
/// [`rounds::PROMPTLY`] every `pause`; then each reads its answers
/// (`pong: ` and each byte) and all close.
pub fn trickle(clients: usize, bytes: usize, pause: Duration, rounds: usize) -> Scenario {
    let limit = support::PATIENCE * 2 + pause * bytes as u32 * 2;
    scenario("pipe_trickle", rounds, limit, move |t, round| async move {
        let closed = t.get(|s| &s.closed);
        let done = Arc::new(AtomicBool::new(false));
        let (target, finished) = (t.clone(), done.clone());
        let started = Instant::now();
        let tricklers = task::spawn(off_pool(move || {
            let mut open: Vec<_> = (0..clients).map(|_| open_raw(&target)).collect();
            let sent: Vec<u8> = (0..bytes).map(|i| b'a' + (i % 26) as u8).collect();
            for &byte in &sent {
                for pipe in &mut open {
                    assert_eq!(pipe.write(&[byte], support::PATIENCE).unwrap(), Some(1));
                }
                std::thread::sleep(pause);
            }
            for (i, pipe) in open.iter_mut().enumerate() {
                // Each byte answered `pong: ` and the byte, or bytes read
                // together answered together.
                let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
                for _ in 0..7 * bytes {
                    let answered = String::from_utf8_lossy(&got).replace("pong: ", "");
                    if answered.len() >= bytes {
                        break;
                    }
                    match pipe.read(&mut buf, support::PATIENCE).unwrap() {
                        Some(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                        other => panic!("client {i}: {other:?} after {got:?}"),
                    }
                }
                let answered = String::from_utf8_lossy(&got).replace("pong: ", "");
                assert_eq!(answered.as_bytes(), &sent[..], "client {i}: {:?}", String::from_utf8_lossy(&got));
            }
            finished.store(true, SeqCst);
            open
        }));
        let deadline = started + limit;
        let (mut pings, mut slowest) = (0u64, Duration::ZERO);
        while !done.load(SeqCst) {
            assert!(Instant::now() < deadline, "round {round}: the trickling clients not done within {limit:?}");
            slowest = slowest.max(pipe_server::promptly(&t.name, &t.stats, "beside trickling clients").await);
            pings += 1;
            time::sleep(pause).await;
        }
        let open = tricklers.await.expect("the trickling clients panicked");
        let took = started.elapsed();
        assert!(pings > 0, "round {round}: no ping while the clients trickled");
        drop(open);
        let all = closed + clients as u64 + pings;
        let what = format!("round {round}: every client's close (and every ping's) seen");
        t.reaches(&what, support::PATIENCE, |s| &s.closed, all).await;
        format!(
            "{clients} clients a round each wrote {bytes} bytes {pause:?} apart ({:.2}s); {pings} pings meanwhile, \
             the slowest in {:.1} ms",
            took.as_secs_f64(),
            slowest.as_secs_f64() * 1e3
        )
    })
}

/// Each round, one client writes 4 KiB requests as fast as the pipe takes
/// them for `flood`, never reading an answer (once the server's answers
/// fill the pipe it stops reading, and the client's writes stall), while a
/// new client's `ping` is answered within [`rounds::PROMPTLY`], from the
/// flood's first request read until it ends; then it closes.
pub fn flood(flood: Duration, rounds: usize) -> Scenario {
    let limit = support::PATIENCE * 2 + flood * 2;
    scenario("pipe_flood", rounds, limit, move |t, round| async move {
        let requests = t.get(|s| &s.requests);
        let done = Arc::new(AtomicBool::new(false));
        let (target, finished) = (t.clone(), done.clone());
        let flooder = task::spawn(off_pool(move || {
            let mut pipe = open_raw(&target);
            let request = [b'f'; 4096];
            let (mut written, mut stalls) = (0usize, 0usize);
            let end = Instant::now() + flood;
            while Instant::now() < end {
                match pipe.write(&request, Duration::from_millis(50)).unwrap() {
                    Some(n) => written += n,
                    None => stalls += 1,
                }
            }
            finished.store(true, SeqCst);
            (pipe, written, stalls)
        }));
        let stats = t.stats.clone();
        until(&format!("round {round}: the flood's first request read"), support::PATIENCE, move || {
            PipeStats::get(&stats.requests) > requests
        })
        .await;
        let (mut pings, mut slowest) = (0u64, Duration::ZERO);
        let deadline = Instant::now() + limit;
        while !done.load(SeqCst) {
            assert!(Instant::now() < deadline, "round {round}: the flood did not end within {limit:?}");
            slowest = slowest.max(pipe_server::promptly(&t.name, &t.stats, "during the flood").await);
            pings += 1;
        }
        let (pipe, written, stalls) = flooder.await.expect("the flooder panicked");
        let served = t.get(|s| &s.requests) - requests - pings;
        let writing = t.get(|s| &s.writing);
        drop(pipe);
        format!(
            "a flood of {:.0?}: {written} bytes written ({stalls} writes stalled 50 ms), {served} reads answered \
             (an answer in flight at the end: {writing}); {pings} pings meanwhile, the slowest in {:.1} ms",
            flood,
            slowest.as_secs_f64() * 1e3
        )
    })
}
