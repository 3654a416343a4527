//! P1 to P4: what polling a woken task in place saves (`task` module docs,
//! "In-place polling"). Every row runs twice in one invocation: in this
//! process, in place, and in a child process of this program with
//! `WINDOWS_THREADPOOL_NO_INPLACE=1` (read once per process), where every
//! wake is submitted as before, alternated over [`ROUNDS`] rounds; each
//! cell is the median of the rounds' values. The child prints one line per
//! row (`IP<TAB>row<TAB>value<TAB>spread`). `WTP_BENCH_INPLACE_ROWS` picks
//! rows (`P1,P4`).

use std::fs::OpenOptions;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use windows_threadpool::io::{AsyncIo, open_file};
use windows_threadpool::{task, time};

use crate::async_workload::{BLOCK, offsets, read_file};
use crate::report::{Cell, Table};
use crate::workloads::Config;

/// The two columns; ratios are against the second (submitted).
pub const COLUMNS: [&str; 2] = ["in place", "submitted (WINDOWS_THREADPOOL_NO_INPLACE=1)"];
pub const SUBMITTED: usize = 1;

/// Set (to anything) in the child that measures the submitted column.
const CHILD: &str = "WTP_BENCH_INPLACE_CHILD";

fn us(t: Instant) -> f64 {
    t.elapsed().as_nanos() as f64 / 1000.0
}

fn wanted(row: &str) -> bool {
    std::env::var("WTP_BENCH_INPLACE_ROWS").map_or(true, |v| v.split(',').any(|r| r.trim() == row))
}

/// Each selected row's name, title, unit and cell, measured in this process.
fn measure(cfg: &Config) -> Vec<(&'static str, String, &'static str, Cell)> {
    let mut rows = Vec::new();
    if wanted("P1") {
        let n = cfg.n(5_000);
        rows.push((
            "P1",
            format!("P1. ping-pong between two tasks over tokio::sync::mpsc, {n} round trips (default pool)"),
            "µs round trip",
            Cell::latency(channel_ping_pong(n)),
        ));
    }
    if wanted("P2") {
        let n = cfg.n(5_000);
        for depth in [1usize, 32] {
            rows.push((
                if depth == 1 { "P2/1" } else { "P2/32" },
                format!(
                    "P2. 4 KiB AsyncIo::read_at at random offsets of a 64 MiB file, {n} reads, depth {depth} (one \
                     spawned task per lane; row 18's reads in tasks)"
                ),
                "µs/read",
                Cell::trials((0..cfg.trials).map(|_| reads(n, depth)).collect()),
            ));
        }
    }
    if wanted("P3") {
        let n = cfg.n(5_000);
        rows.push((
            "P3",
            format!("P3. N1's TCP ping-pong (64 B each way, client and echo server as tasks), {n} round trips"),
            "µs/round trip",
            crate::net_workload::crate_ping_pong(n),
        ));
    }
    if wanted("P4") {
        let n = cfg.n(500);
        rows.push((
            "P4",
            format!("P4. sleep(1 ms) awaited {n} times in a row in a spawned task (row 14 in a task)"),
            "µs call→wake",
            Cell::latency(sleeps(n)),
        ));
    }
    rows
}

/// Rounds of both columns, alternated (submitted, in place, submitted, ...):
/// a machine whose load changes during the run moves both columns alike.
const ROUNDS: usize = 3;

pub fn run(cfg: &Config, table: &mut Table) {
    if std::env::var_os(CHILD).is_some() {
        for (name, _, _, cell) in measure(cfg) {
            println!("IP\t{name}\t{}\t{}", cell.value, cell.spread);
        }
        return;
    }
    let mut rows: Vec<(&'static str, String, &'static str, [Vec<f64>; 2])> = Vec::new();
    for round in 0..ROUNDS {
        eprintln!("bench: in-place round {} of {ROUNDS}", round + 1);
        let child = submitted_child();
        for (name, title, unit, cell) in measure(cfg) {
            let i = match rows.iter().position(|r| r.0 == name) {
                Some(i) => i,
                None => {
                    rows.push((name, title, unit, Default::default()));
                    rows.len() - 1
                }
            };
            rows[i].3[0].push(cell.value);
            if let Some(v) = child.iter().find(|(n, _)| *n == name).map(|(_, v)| *v) {
                rows[i].3[SUBMITTED].push(v);
            }
        }
    }
    for (_, title, unit, [on, off]) in rows {
        let cell = |v: Vec<f64>| (!v.is_empty()).then(|| rounds(v));
        table.add(title, unit, [cell(on), cell(off)]);
    }
}

/// The median of the rounds' headline values, with each round's value.
fn rounds(v: Vec<f64>) -> Cell {
    let each: Vec<String> = v.iter().map(|x| crate::report::fmt(*x)).collect();
    let mut sorted = v;
    sorted.sort_by(f64::total_cmp);
    Cell { value: sorted[sorted.len() / 2], spread: format!("rounds {}", each.join(", ")) }
}

/// Runs this program again with in-place polling off; each row's headline
/// value by name.
fn submitted_child() -> Vec<(String, f64)> {
    let exe = std::env::current_exe().expect("current_exe");
    let out = crate::start::output(
        Command::new(exe)
            .args(std::env::args().skip(1))
            .env(CHILD, "1")
            .env("WINDOWS_THREADPOOL_NO_INPLACE", "1")
            .stdin(Stdio::null())
            .stderr(Stdio::inherit()),
    )
    .expect("running the submitted column's child");
    assert!(out.status.success(), "the submitted column's child failed: {}", out.status);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f.len() == 4 && f[0] == "IP").then(|| (f[1].to_string(), f[2].parse().unwrap()))
        })
        .collect()
}

/// P1: `n` round trips between two tasks over two unbounded channels; µs each.
fn channel_ping_pong(n: usize) -> Vec<f64> {
    use tokio::sync::mpsc;
    let (to_b, mut b_rx) = mpsc::unbounded_channel::<u64>();
    let (to_a, mut a_rx) = mpsc::unbounded_channel::<u64>();
    let b = task::spawn(async move {
        while let Some(x) = b_rx.recv().await {
            if to_a.send(x + 1).is_err() {
                break;
            }
        }
    });
    let warm = n / 10;
    let a = task::spawn(async move {
        let mut v = Vec::with_capacity(n + warm);
        for i in 0..(n + warm) as u64 {
            let t = Instant::now();
            to_b.send(i).unwrap();
            assert_eq!(a_rx.recv().await, Some(i + 1));
            v.push(us(t));
        }
        v.drain(..warm);
        v
    });
    let v = task::block_on(a).unwrap();
    task::block_on(b).unwrap();
    v
}

/// P2: `n` 4 KiB reads over `depth` spawned tasks; µs per read.
fn reads(n: usize, depth: usize) -> f64 {
    use std::sync::{Arc, OnceLock};
    static PATH: OnceLock<std::path::PathBuf> = OnceLock::new();
    let path = PATH.get_or_init(read_file);
    let offs = offsets(n);
    let file = Arc::new(AsyncIo::new(open_file(path, OpenOptions::new().read(true)).unwrap()).unwrap());
    let t = Instant::now();
    let lanes: Vec<_> = (0..depth)
        .map(|l| {
            let lane: Vec<u64> = offs.iter().copied().skip(l).step_by(depth).collect();
            let file = Arc::clone(&file);
            task::spawn(async move {
                let mut buf = vec![0u8; BLOCK];
                let mut total = 0;
                for off in lane {
                    let (r, b) = file.read_at(buf, off).await;
                    total += r.unwrap();
                    buf = b;
                }
                total
            })
        })
        .collect();
    let total: usize = lanes.into_iter().map(|h| task::block_on(h).unwrap()).sum();
    let per = us(t) / n as f64;
    assert_eq!(total, n * BLOCK);
    per
}

/// P4: `n` sleeps of 1 ms in one spawned task; µs from each call to its wake.
fn sleeps(n: usize) -> Vec<f64> {
    task::block_on(task::spawn(async move {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            time::sleep(Duration::from_millis(1)).await;
            v.push(us(t));
        }
        v
    }))
    .unwrap()
}
