//! Benchmarks: each workload measured for this crate, the raw `windows-sys`
//! calls doing the same thing (the floor), and where they apply the
//! alternatives a Rust user would otherwise pick. Prints a Markdown table,
//! then [`NET_MARKER`] and the socket table (its own columns);
//! `cargo xtask bench` writes both into `docs/benchmarks.md`.
//!
//! `wtp-bench [--quick] [--only-trace | --only-tracing | --only-io | --only-create | --only-tasks | --only-async | --only-net | --only-inplace]`:
//! `--quick` runs fewer trials and samples (a smoke run); `--only-io` runs
//! just the I/O workload (6); `--only-create` just create + drop (7);
//! `--only-tasks` just the one-off tasks (10 to 13 and 20); `--only-async` just the
//! async rows (14 to 18); `--only-net` just the socket table (N1 to N8, no marker;
//! `WTP_BENCH_NET_ROWS=N7,N7b` picks its rows);
//! `--only-inplace` just the in-place rows (P1 to P4), each in place and in
//! a child with in-place polling off (not part of the full run);
//! `--only-trace` runs just the trace-cost workload
//! (`cargo xtask bench` runs it again in a build with the `trace` feature,
//! disarmed and armed); `--only-tracing` just the `tracing` cost (19; run
//! again in a build with the `tracing` feature, without and with a subscriber).

#[cfg(windows)]
mod async_workload;
#[cfg(windows)]
mod heap;
#[cfg(windows)]
mod inplace_workload;
#[cfg(windows)]
mod io_workload;
#[cfg(windows)]
mod net_workload;
#[cfg(windows)]
mod pipe_workload;
#[cfg(windows)]
mod raw_tpio;
/// Starting a process, Wine's start-up failures started once more: the
/// tests' definition.
#[cfg(windows)]
#[path = "../../tests/support/start.rs"]
mod start;
#[cfg(windows)]
mod task_workload;
#[cfg(windows)]
mod tracing_workload;
#[cfg(windows)]
mod workloads;

#[cfg(windows)]
fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let cfg = workloads::Config { trials: if quick { 2 } else { 5 }, scale: if quick { 0.05 } else { 1.0 } };
    let mut table = report::Table::default();
    if std::env::args().any(|a| a == "--only-trace") {
        workloads::trace_cost(&cfg, &mut table);
    } else if std::env::args().any(|a| a == "--only-tracing") {
        tracing_workload::run(&cfg, &mut table);
    } else if std::env::args().any(|a| a == "--only-io") {
        io_workload::run(&cfg, &mut table);
    } else if std::env::args().any(|a| a == "--only-tasks") {
        task_workload::run(&cfg, &mut table);
    } else if std::env::args().any(|a| a == "--only-async") {
        async_workload::run(&cfg, &mut table);
    } else if std::env::args().any(|a| a == "--only-create") {
        workloads::create_rows(&cfg, &mut table);
    } else if std::env::args().any(|a| a == "--only-inplace") {
        let mut t = report::Table::new(&inplace_workload::COLUMNS, inplace_workload::SUBMITTED);
        inplace_workload::run(&cfg, &mut t);
        print!("{}", t.markdown());
        return;
    } else if std::env::args().any(|a| a == "--only-net") {
        let mut net = report::Table::new(&net_workload::COLUMNS, net_workload::RAW);
        net_workload::run(&cfg, &mut net);
        print!("{}", net.markdown());
        return;
    } else {
        workloads::run_all(&cfg, &mut table);
        let mut net = report::Table::new(&net_workload::COLUMNS, net_workload::RAW);
        net_workload::run(&cfg, &mut net);
        print!("{}{NET_MARKER}\n{}", table.markdown(), net.markdown());
        return;
    }
    print!("{}", table.markdown());
}

/// The line between the main table and the socket table in the full run's
/// output (`cargo xtask bench` splits there).
#[cfg(windows)]
const NET_MARKER: &str = "<!-- net -->";

#[cfg(not(windows))]
fn main() {
    eprintln!("wtp-bench runs on Windows; on Linux use `cargo xtask bench`, which runs it under Wine");
}

#[cfg_attr(not(windows), allow(dead_code))]
mod report {
    /// The columns of every row; `Raw` is the floor ratios are taken against.
    pub const COLUMNS: [&str; 6] =
        ["this crate", "raw windows-sys", "windows-threading", "rayon::spawn", "std threads + channel", "tokio"];
    pub const CRATE: usize = 0;
    pub const RAW: usize = 1;
    pub const WINDOWS_THREADING: usize = 2;
    pub const RAYON: usize = 3;
    pub const STD: usize = 4;
    pub const TOKIO: usize = 5;

    /// One measured cell: the headline value and how it spread.
    #[derive(Clone, Debug)]
    pub struct Cell {
        pub value: f64,
        pub spread: String,
    }

    impl Cell {
        /// Median of repeated trials, with their min..max.
        pub fn trials(mut v: Vec<f64>) -> Self {
            v.sort_by(f64::total_cmp);
            let value = v[v.len() / 2];
            Self { value, spread: format!("{}..{}", fmt(v[0]), fmt(v[v.len() - 1])) }
        }

        /// The median of `a[i] - b[i]` over paired trials, with their
        /// min..max: what one column adds to another measured in the same trial.
        pub fn difference(a: &[f64], b: &[f64]) -> Self {
            Self::trials(a.iter().zip(b).map(|(a, b)| a - b).collect())
        }

        /// Median of latency samples, with the p99.
        pub fn latency(mut v: Vec<f64>) -> Self {
            v.sort_by(f64::total_cmp);
            let value = v[v.len() / 2];
            let p99 = v[((v.len() * 99) / 100).min(v.len() - 1)];
            Self { value, spread: format!("p99 {}", fmt(p99)) }
        }
    }

    pub fn fmt(x: f64) -> String {
        if x >= 100.0 {
            format!("{x:.0}")
        } else if x >= 10.0 {
            format!("{x:.1}")
        } else {
            format!("{x:.2}")
        }
    }

    pub struct Row {
        pub workload: String,
        pub unit: &'static str,
        pub cells: Vec<Option<Cell>>,
    }

    /// Rows under a column list of their own; ratios are taken against the
    /// `floor` column.
    pub struct Table {
        pub columns: &'static [&'static str],
        pub floor: usize,
        pub rows: Vec<Row>,
    }

    impl Default for Table {
        /// The main table: [`COLUMNS`], floor [`RAW`].
        fn default() -> Self {
            Self::new(&COLUMNS, RAW)
        }
    }

    impl Table {
        pub fn new(columns: &'static [&'static str], floor: usize) -> Self {
            Self { columns, floor, rows: Vec::new() }
        }

        /// Adds a row; cells are given for the first `N` columns, the rest are n/a.
        pub fn add<const N: usize>(
            &mut self,
            workload: impl Into<String>,
            unit: &'static str,
            cells: [Option<Cell>; N],
        ) {
            let mut cells = Vec::from(cells);
            cells.resize(self.columns.len(), None);
            let row = Row { workload: workload.into(), unit, cells };
            eprintln!("bench: {}", render(&row, self.floor));
            self.rows.push(row);
        }

        pub fn markdown(&self) -> String {
            let mut s = format!(
                "| workload | unit | {} |\n|---|---|{}\n",
                self.columns.join(" | "),
                "---|".repeat(self.columns.len())
            );
            for r in &self.rows {
                s += &render(r, self.floor);
                s.push('\n');
            }
            s
        }
    }

    fn render(r: &Row, floor: usize) -> String {
        let raw = r.cells[floor].as_ref().map(|c| c.value);
        let cells: Vec<String> = r
            .cells
            .iter()
            .map(|c| match c {
                None => "n/a".into(),
                Some(c) => match raw {
                    Some(raw) if raw > 0.0 => format!("{} ({}) ×{:.2}", fmt(c.value), c.spread, c.value / raw),
                    _ => format!("{} ({})", fmt(c.value), c.spread),
                },
            })
            .collect();
        format!("| {} | {} | {} |", r.workload, r.unit, cells.join(" | "))
    }
}
