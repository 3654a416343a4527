//! 14 on: the async futures and executor against tokio (the numbers are
//! Wine's, like every row here).

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::task::Context;
use std::thread::Thread;
use std::time::{Duration, Instant};

use windows_sys::Win32::System::Threading::{
    CloseThreadpoolTimer, CreateThreadpoolTimer, PTP_CALLBACK_INSTANCE, PTP_TIMER, SetThreadpoolTimer,
    TrySubmitThreadpoolCallback, WaitForThreadpoolTimerCallbacks,
};
use windows_threadpool::{task, time};

use crate::report::{CRATE, Cell, RAW, TOKIO, Table};
use crate::workloads::Config;

pub fn run(cfg: &Config, table: &mut Table) {
    sleep_latency(cfg, table);
    many_sleeps(cfg, table);
    spawn_await(cfg, table);
    child_exit(cfg, table);
    random_reads(cfg, table);
}

fn tokio_current() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn tokio_multi() -> tokio::runtime::Runtime {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build().unwrap()
}

/// A raw one-shot timer's callback: sets the flag and unparks the waiter.
struct RawWake {
    fired: AtomicBool,
    waiter: Thread,
}

unsafe extern "system" fn raw_timer_wake(_: PTP_CALLBACK_INSTANCE, ctx: *mut core::ffi::c_void, _: PTP_TIMER) {
    // SAFETY: ctx is a `RawWake` that outlives the timer (drained and closed before it is dropped).
    let w = unsafe { &*(ctx as *const RawWake) };
    w.fired.store(true, Release);
    w.waiter.unpark();
}

/// 14. `sleep(1 ms)` awaited, one at a time: µs from the call to the wake-up.
fn sleep_latency(cfg: &Config, table: &mut Table) {
    let n = cfg.n(500);
    let d = Duration::from_millis(1);
    let mut cols: [Option<Cell>; 6] = Default::default();
    let us = |t: Instant| t.elapsed().as_nanos() as f64 / 1000.0;

    let samples = task::block_on(async {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            time::sleep(d).await;
            v.push(us(t));
        }
        v
    });
    cols[CRATE] = Some(Cell::latency(samples));

    // Raw: a TP_TIMER armed for 1 ms whose callback unparks this thread.
    let w = RawWake { fired: AtomicBool::new(false), waiter: std::thread::current() };
    let due = crate::workloads::filetime(-10_000);
    let mut samples = Vec::with_capacity(n);
    // SAFETY: `w` outlives the timer, which is disarmed, drained and closed below.
    unsafe {
        let t = CreateThreadpoolTimer(Some(raw_timer_wake), &w as *const _ as *mut _, core::ptr::null());
        assert_ne!(t, 0);
        for _ in 0..n {
            w.fired.store(false, Release);
            let t0 = Instant::now();
            SetThreadpoolTimer(t, &due, 0, 0);
            while !w.fired.load(Acquire) {
                std::thread::park();
            }
            samples.push(us(t0));
        }
        SetThreadpoolTimer(t, core::ptr::null(), 0, 0);
        WaitForThreadpoolTimerCallbacks(t, 0);
        CloseThreadpoolTimer(t);
    }
    cols[RAW] = Some(Cell::latency(samples));

    let samples = tokio_current().block_on(async {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            tokio::time::sleep(d).await;
            v.push(us(t));
        }
        v
    });
    cols[TOKIO] = Some(Cell::latency(samples));
    table.add(
        format!(
            "14. sleep(1 ms) awaited, {n} in a row (this crate: task::block_on + time::sleep; raw: a TP_TIMER whose \
             callback unparks the thread; tokio: current-thread runtime)"
        ),
        "µs call→wake",
        cols,
    );
}

/// Bytes live on the Rust heap, counted by the bench's global allocator.
fn heap_bytes() -> f64 {
    crate::heap::live() as f64
}

/// Polls `f` once (registering everything it holds), reads the memory, then
/// awaits it: returns the bytes held while everything was registered.
async fn held_while_pending<F: Future>(f: F, before: f64) -> f64 {
    let mut f = pin!(f);
    let mut first = true;
    let mut held = 0.0;
    std::future::poll_fn(|cx: &mut Context<'_>| {
        let r = f.as_mut().poll(cx);
        if first {
            first = false;
            held = heap_bytes() - before;
        }
        r.map(|_| ())
    })
    .await;
    held
}

/// Delays of 1 to 100 ms from a fixed xorshift sequence.
fn delays(n: usize) -> Vec<Duration> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Duration::from_millis(1 + x % 100)
        })
        .collect()
}

/// Row 15: 100,000 concurrent sleeps of 1 to 100 ms: wall time, and the memory
/// held while all are pending.
fn many_sleeps(cfg: &Config, table: &mut Table) {
    let n = cfg.n(100_000);
    let ds = delays(n);
    let (mut wall, mut mem): ([Vec<f64>; 6], [Vec<f64>; 6]) = Default::default();
    for trial in 0..=cfg.trials {
        let before = heap_bytes();
        let t = Instant::now();
        let held = task::block_on(async {
            let all = futures::future::join_all(ds.iter().map(|&d| time::sleep(d)));
            held_while_pending(all, before).await
        });
        wall[CRATE].push(t.elapsed().as_secs_f64() * 1000.0);
        mem[CRATE].push(held / 1e6);

        let rt = tokio_current();
        let before = heap_bytes();
        let t = Instant::now();
        let held = rt.block_on(async {
            let all = futures::future::join_all(ds.iter().map(|&d| tokio::time::sleep(d)));
            held_while_pending(all, before).await
        });
        wall[TOKIO].push(t.elapsed().as_secs_f64() * 1000.0);
        mem[TOKIO].push(held / 1e6);
        drop(rt);
        if trial == 0 {
            wall.iter_mut().chain(mem.iter_mut()).for_each(Vec::clear);
        }
    }
    let cells = |v: [Vec<f64>; 6]| v.map(|v| (!v.is_empty()).then(|| Cell::trials(v)));
    table.add(
        format!("15a. {n} concurrent sleeps of 1 to 100 ms, joined (join_all; tokio: current-thread runtime)"),
        "ms wall",
        cells(wall),
    );
    table.add(
        format!(
            "15b. the same: Rust heap bytes live while all {n} are pending (counted by the bench's allocator; \
             join_all's own included for both)"
        ),
        "MB",
        cells(mem),
    );
}

unsafe extern "system" fn raw_count(_: PTP_CALLBACK_INSTANCE, ctx: *mut core::ffi::c_void) {
    // SAFETY: ctx is the counter, which outlives every callback (we spin until all counted).
    unsafe { &*(ctx as *const AtomicUsize) }.fetch_add(1, Release);
}

/// 16. spawn + await of N trivial tasks: ns per task.
fn spawn_await(cfg: &Config, table: &mut Table) {
    let n = cfg.n(100_000);
    let expect: usize = (0..n).map(|i| i * 2).sum();
    let per = |t: Instant| t.elapsed().as_nanos() as f64 / n as f64;
    let mut cols: [Vec<f64>; 6] = Default::default();
    let rt = tokio_multi();
    for trial in 0..=cfg.trials {
        let t = Instant::now();
        let sum = task::block_on(async {
            let hs: Vec<_> = (0..n).map(|i| task::spawn(async move { i * 2 })).collect();
            let mut sum = 0;
            for h in hs {
                sum += h.await.unwrap();
            }
            sum
        });
        cols[CRATE].push(per(t));
        assert_eq!(sum, expect);

        // Raw: one TrySubmitThreadpoolCallback per task, counted.
        let done = AtomicUsize::new(0);
        let t = Instant::now();
        for _ in 0..n {
            // SAFETY: `done` outlives every callback: we spin until all have counted.
            let ok =
                unsafe { TrySubmitThreadpoolCallback(Some(raw_count), (&raw const done) as *mut _, core::ptr::null()) };
            assert_ne!(ok, 0);
        }
        while done.load(Acquire) < n {
            std::hint::spin_loop();
        }
        cols[RAW].push(per(t));

        let t = Instant::now();
        let sum = rt.block_on(async {
            let hs: Vec<_> = (0..n).map(|i| tokio::spawn(async move { i * 2 })).collect();
            let mut sum = 0;
            for h in hs {
                sum += h.await.unwrap();
            }
            sum
        });
        cols[TOKIO].push(per(t));
        assert_eq!(sum, expect);
        if trial == 0 {
            cols.iter_mut().for_each(Vec::clear);
        }
    }
    table.add(
        format!(
            "16. spawn + await, {n} trivial async tasks (this crate: task::spawn, awaited in task::block_on; raw: \
             TrySubmitThreadpoolCallback per task; tokio: multi-thread runtime, a worker per processor)"
        ),
        "ns/task",
        cols.clone().map(|v| (!v.is_empty()).then(|| Cell::trials(v))),
    );
    table.add(
        "16b. the crate's own share of row 16: task::spawn + await minus the raw TrySubmitThreadpoolCallback, \
         trial by trial (add it to Windows' own submission cost)",
        "ns/task",
        [Some(Cell::difference(&cols[CRATE], &cols[RAW]))],
    );
}

/// A child that exits at once.
fn exit_command() -> std::process::Command {
    let mut c = std::process::Command::new("cmd");
    c.args(["/c", "exit 0"]);
    c
}

/// 17. spawn a child (`cmd /c exit 0`) and await its exit: ms each.
fn child_exit(cfg: &Config, table: &mut Table) {
    let n = cfg.n(40).min(40);
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1000.0;
    let mut cols: [Option<Cell>; 6] = Default::default();
    let samples = task::block_on(async {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            let mut child = crate::start::spawn(&mut exit_command()).unwrap();
            let status = windows_threadpool::wait::process_exit(&mut child).await.unwrap();
            assert!(status.success());
            v.push(ms(t));
        }
        v
    });
    cols[CRATE] = Some(Cell::latency(samples));
    let samples = (0..n)
        .map(|_| {
            let t = Instant::now();
            assert!(crate::start::spawn(&mut exit_command()).unwrap().wait().unwrap().success());
            ms(t)
        })
        .collect();
    cols[RAW] = Some(Cell::latency(samples));
    let samples = tokio_current().block_on(async {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            let mut command = tokio::process::Command::new("cmd");
            command.args(["/c", "exit 0"]);
            let status = crate::start::retry_start_with("cmd", || command.spawn()).unwrap().wait().await;
            assert!(status.unwrap().success());
            v.push(ms(t));
        }
        v
    });
    cols[TOKIO] = Some(Cell::latency(samples));
    table.add(
        format!(
            "17. spawn `cmd /c exit 0` and await its exit, {n} in a row (this crate: wait::process_exit; raw: \
             std's blocking Child::wait; tokio: tokio::process, current-thread runtime)"
        ),
        "ms spawn→exit",
        cols,
    );
}

const FILE_SIZE: u64 = 64 << 20;
pub(crate) const BLOCK: usize = 4096;

/// A 64 MiB file of non-zero bytes, written once and read back by row 18.
pub(crate) fn read_file() -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("wtp-bench-reads-{}", std::process::id()));
    let chunk: Vec<u8> = (0..1 << 20).map(|i| (i % 251 + 1) as u8).collect();
    let mut f = std::fs::File::create(&path).unwrap();
    for _ in 0..FILE_SIZE >> 20 {
        std::io::Write::write_all(&mut f, &chunk).unwrap();
    }
    path
}

/// `n` block-aligned offsets from a fixed xorshift sequence.
pub(crate) fn offsets(n: usize) -> Vec<u64> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % (FILE_SIZE / BLOCK as u64)) * BLOCK as u64
        })
        .collect()
}

/// 18. 4 KiB random reads of a 64 MiB file at queue depth 1 and 32: µs per read.
fn random_reads(cfg: &Config, table: &mut Table) {
    use std::os::windows::fs::FileExt;
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    use windows_threadpool::io::{AsyncIo, open_file};

    let path = read_file();
    let n = cfg.n(20_000);
    let offs = offsets(n);
    let rt = tokio_multi();
    for depth in [1usize, 32] {
        let mut cols: [Vec<f64>; 6] = Default::default();
        let lanes: Vec<Vec<u64>> = (0..depth).map(|l| offs.iter().copied().skip(l).step_by(depth).collect()).collect();
        let per = |t: Instant| t.elapsed().as_nanos() as f64 / 1000.0 / n as f64;
        for trial in 0..=cfg.trials {
            // This crate: one AsyncIo, `depth` reads in flight, each lane
            // reusing its buffer.
            let file = AsyncIo::new(open_file(&path, std::fs::OpenOptions::new().read(true)).unwrap()).unwrap();
            let t = Instant::now();
            let total = task::block_on(futures::future::join_all(lanes.iter().map(|lane| {
                let file = &file;
                async move {
                    let mut buf = vec![0u8; BLOCK];
                    let mut total = 0;
                    for &off in lane {
                        let (r, b) = file.read_at(buf, off).await;
                        total += r.unwrap();
                        buf = b;
                    }
                    total
                }
            })));
            cols[CRATE].push(per(t));
            assert_eq!(total.iter().sum::<usize>(), n * BLOCK);
            drop(file);

            // Raw: synchronous positioned reads (`ReadFile` with an
            // offset) on as many threads as the depth: the floor for reads
            // the cache serves.
            let f = std::fs::File::open(&path).unwrap();
            let t = Instant::now();
            std::thread::scope(|s| {
                for lane in &lanes {
                    let f = &f;
                    s.spawn(move || {
                        let mut buf = vec![0u8; BLOCK];
                        for &off in lane {
                            assert_eq!(f.seek_read(&mut buf, off).unwrap(), BLOCK);
                        }
                    });
                }
            });
            cols[RAW].push(per(t));

            // tokio::fs: a file per lane, seek + read_exact.
            let t = Instant::now();
            rt.block_on(async {
                let hs: Vec<_> = lanes
                    .iter()
                    .cloned()
                    .map(|lane| {
                        let path = path.clone();
                        tokio::spawn(async move {
                            let mut f = tokio::fs::File::open(&path).await.unwrap();
                            let mut buf = vec![0u8; BLOCK];
                            for off in lane {
                                f.seek(std::io::SeekFrom::Start(off)).await.unwrap();
                                f.read_exact(&mut buf).await.unwrap();
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.await.unwrap();
                }
            });
            cols[TOKIO].push(per(t));
            if trial == 0 {
                cols.iter_mut().for_each(Vec::clear);
            }
        }
        table.add(
            format!(
                "18. {n} random 4 KiB reads of a 64 MiB file at queue depth {depth} (this crate: AsyncIo::read_at; \
                 raw: blocking seek_read on {depth} thread(s); tokio: tokio::fs::File seek + read_exact, a task per \
                 lane, multi-thread runtime)"
            ),
            "µs/read",
            cols.map(|v| (!v.is_empty()).then(|| Cell::trials(v))),
        );
    }
    let _ = std::fs::remove_file(&path);
}
