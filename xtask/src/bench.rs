//! `cargo xtask bench`: build the release benchmark program for the Windows
//! target, run it (under Wine on Linux), print its tables, and write
//! `docs/benchmarks.md` with the machine, Wine version and date: the main
//! table, then the socket table (the program prints it after [`NET_MARKER`])
//! under a heading of its own.

use std::process::{Command, Stdio};

use crate::env::{self, Platform, Result, workspace_root};
use crate::setup;

/// The line the benchmark program prints between its two tables.
const NET_MARKER: &str = "<!-- net -->";

/// The main table and the socket table of the program's output (the socket
/// table is empty if the marker is missing).
fn split_tables(out: &str) -> (String, String) {
    match out.split_once(NET_MARKER) {
        Some((main, net)) => (main.to_string(), net.trim_start_matches('\n').to_string()),
        None => (out.to_string(), String::new()),
    }
}

fn capture(cmd: &mut Command) -> String {
    cmd.stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn machine() -> String {
    if cfg!(windows) {
        return format!("Windows, {} logical processors", std::thread::available_parallelism().map_or(0, |n| n.get()));
    }
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem =
        std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| mem_total(&m)).unwrap_or_else(|| "unknown".into());
    let os = capture(Command::new("sh").args(["-c", ". /etc/os-release && echo \"$PRETTY_NAME\""]));
    let wine = capture(env::wine_cmd("wine").arg("--version"));
    format!("{os}, {cpu}, {cores} cores, {mem} memory; {wine} (the Windows program runs under Wine)")
}

/// The HTTP section: the example and tokio + hyper under wrk
/// (`http::bench`), then their memory per idle keep-alive connection
/// (`idle::bench`), or why each did not run.
fn http_section(p: &Platform) -> Result<String> {
    let wrk = match setup::http_tool("wrk") {
        Ok(wrk) => crate::http::bench(p, &wrk)?,
        Err(why) => {
            println!("bench: !!! SKIPPED the HTTP benchmark: {why}");
            format!("Not run: {why}.\n")
        }
    };
    let https = match (setup::http_tool("h2load"), setup::http_tool("wrk")) {
        (Ok(h2load), Ok(wrk)) => crate::https_load::bench(p, &h2load, &wrk)?,
        (Err(why), _) | (_, Err(why)) => {
            println!("bench: !!! SKIPPED the HTTPS benchmark: {why}");
            format!("Not run: {why}.\n")
        }
    };
    let idle = match crate::idle::cannot(p) {
        None => crate::idle::bench(p)?,
        Some(why) => {
            println!("bench: !!! SKIPPED memory per idle connection: {why}");
            format!("Memory per idle keep-alive connection: not run: {why}.\n")
        }
    };
    Ok(format!("{wrk}\n{HTTPS_LEAD}{https}\n{idle}"))
}

/// `doc` with the body of the section under `heading` (up to `until`)
/// replaced by `body`; `None` if `doc` has no such section.
fn with_section(doc: &str, heading: &str, until: &str, body: &str) -> Option<String> {
    let (head, rest) = doc.split_once(heading)?;
    let (_, tail) = rest.split_once(until)?;
    Some(format!("{head}{heading}{body}{until}{tail}"))
}

/// The HTTP section's heading and the line under it.
const HTTP_HEADING: &str = "## HTTP\n\n`examples/http_server` and the same service on tokio + hyper \
    (`wtp-bench`'s `tokio-http`), alternated under wrk; higher requests/s and lower latency are better.\n\n";

/// The line above the HTTPS table.
const HTTPS_LEAD: &str = "HTTPS, HTTP/2 and axum: `examples/https_server` (as it ships, and with `--buffered-reads`: \
    no zero-byte wait before each read, `io::Compat::set_wait_for_data(false)`) and the same axum `Router` on tokio \
    (`wtp-bench`'s `tokio-https`: tokio's sockets, tokio-rustls, hyper-util's `auto` builder), the same hyper, rustls \
    (ring) and axum, alternated under h2load (h2c, and HTTP/2 over TLS) and wrk (HTTP/1.1, cleartext).\n\n";

/// The in-place polling section's heading and the line under it.
const INPLACE_HEADING: &str = "## In-place polling\n\nA task woken by one of the crate's callbacks polled \
    on that callback's thread, against the same program with `WINDOWS_THREADPOOL_NO_INPLACE=1` (every wake \
    submitted), alternated (`wtp-bench --only-inplace`); the ratio is to the submitted column.\n\n";

/// Where the notes start.
const NOTES: &str = "<!-- notes -->";

/// `exe` run as this platform runs it: under Wine on Linux.
fn program(p: &Platform, exe: &std::path::Path) -> Command {
    match p.target {
        Some(_) if !cfg!(windows) => {
            let mut c = env::wine_run();
            c.arg(exe);
            c
        }
        _ => Command::new(exe),
    }
}

/// The in-place polling table (`wtp-bench --only-inplace`, built in release).
fn inplace_section(p: &Platform, quick: bool) -> Result<String> {
    if !p.cargo(&["build", "--release", "--quiet", "-p", "wtp-bench"]).status().map_err(|e| e.to_string())?.success() {
        return Err("building the benchmark program failed".into());
    }
    let mut run = program(p, &p.bin_dir("release")?.join("wtp-bench.exe"));
    run.arg("--only-inplace");
    if quick {
        run.arg("--quick");
    }
    let out = run.stdin(Stdio::null()).stderr(Stdio::inherit()).output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("the in-place benchmark failed: {}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The chart of `docs/benchmarks.md`'s head-to-head rows, and its name
/// beside that page.
pub const CHART: &str = "docs/benchmarks.svg";
const CHART_NAME: &str = "benchmarks.svg";

/// Draws [`CHART`] from `docs/benchmarks.md` as it is now.
fn write_chart(root: &std::path::Path) -> Result<()> {
    let doc = std::fs::read_to_string(root.join("docs/benchmarks.md")).map_err(|e| e.to_string())?;
    let svg = crate::chart::svg(&crate::chart::rows(&doc), "windows-threadpool against the raw calls and its peers");
    std::fs::write(root.join(CHART), svg).map_err(|e| format!("{CHART}: {e}"))?;
    println!("bench: wrote {CHART} ({} bars)", crate::chart::bar_count(&doc));
    Ok(())
}

pub fn bench(target: Option<&str>, rest: &[String]) -> Result<()> {
    const FLAGS: [&str; 5] = ["--quick", "--only-http", "--only-https", "--only-inplace", "--chart"];
    let quick = rest.iter().any(|a| a == "--quick");
    if let Some(a) = rest.iter().find(|a| !FLAGS.contains(&a.as_str())) {
        return Err(format!("unexpected argument {a:?}"));
    }
    let root = workspace_root();
    if rest.iter().any(|a| a == "--chart") {
        return write_chart(&root);
    }
    let p = setup::setup(target)?;
    let t0 = std::time::Instant::now();
    let only = |flag: &str| rest.iter().any(|a| a == flag);
    if only("--only-https") {
        // A look at one table between full runs: printed, not written.
        let (h2load, wrk) = (setup::http_tool("h2load")?, setup::http_tool("wrk")?);
        println!("{HTTPS_LEAD}{}", crate::https_load::bench(&p, &h2load, &wrk)?);
        return Ok(());
    }
    if only("--only-http") || only("--only-inplace") {
        let (heading, until, body) = if only("--only-http") {
            (HTTP_HEADING, NOTES, http_section(&p)?)
        } else {
            (INPLACE_HEADING, HTTP_HEADING, inplace_section(&p, quick)?)
        };
        println!("{body}");
        let doc = std::fs::read_to_string(root.join("docs/benchmarks.md")).map_err(|e| e.to_string())?;
        let doc = with_section(&doc, heading, until, &body)
            .ok_or_else(|| format!("docs/benchmarks.md has no section {:?} to replace", heading.lines().next()))?;
        std::fs::write(root.join("docs/benchmarks.md"), doc).map_err(|e| e.to_string())?;
        println!("bench: wrote one section of docs/benchmarks.md ({:.0}s)", t0.elapsed().as_secs_f64());
        return write_chart(&root);
    }
    if !p.cargo(&["build", "--release", "--quiet", "-p", "wtp-bench"]).status().map_err(|e| e.to_string())?.success() {
        return Err("building the benchmark program failed".into());
    }
    let exe = p.bin_dir("release")?.join("wtp-bench.exe");
    let runner = || program(&p, &exe);
    let mut run = runner();
    if quick {
        run.arg("--quick");
    }
    let out = run
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running the benchmarks: {e}"))?;
    if !out.status.success() {
        return Err(format!("the benchmark program failed: {}", out.status));
    }
    let (mut table, net) = split_tables(&String::from_utf8_lossy(&out.stdout));
    // The trace workload again, in a build with the recorder: disarmed, then armed.
    let mut build = p.cargo(&["build", "--release", "--quiet", "-p", "wtp-bench", "--features", "trace"]);
    if !build.status().map_err(|e| e.to_string())?.success() {
        return Err("building the benchmark program with the trace feature failed".into());
    }
    for filter in ["", "*"] {
        let mut run = runner();
        run.arg("--only-trace").env("WINDOWS_THREADPOOL_TRACE", filter);
        if quick {
            run.arg("--quick");
        }
        let out = run.stdin(Stdio::null()).stderr(Stdio::inherit()).output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("the trace benchmark failed: {}", out.status));
        }
        for row in String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with("| 8.")) {
            table.push_str(row);
            table.push('\n');
        }
    }
    // The tracing workload again, in a build with the spans: no subscriber, then a minimal one.
    let mut build = p.cargo(&["build", "--release", "--quiet", "-p", "wtp-bench", "--features", "tracing"]);
    if !build.status().map_err(|e| e.to_string())?.success() {
        return Err("building the benchmark program with the tracing feature failed".into());
    }
    for subscriber in [false, true] {
        let mut run = runner();
        run.arg("--only-tracing");
        if subscriber {
            run.env("WTP_BENCH_SUBSCRIBER", "1");
        }
        if quick {
            run.arg("--quick");
        }
        let out = run.stdin(Stdio::null()).stderr(Stdio::inherit()).output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("the tracing benchmark failed: {}", out.status));
        }
        for row in String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with("| 19.")) {
            table.push_str(row);
            table.push('\n');
        }
    }
    let inplace = inplace_section(&p, quick)?;
    let http = if quick { "Not run with `--quick`.\n".to_string() } else { http_section(&p)? };
    println!("{table}\n{net}\n{inplace}\n{http}");
    let date = utc_minute(std::time::SystemTime::now());
    let template = std::fs::read_to_string(root.join("docs/benchmarks.md")).unwrap_or_default();
    let notes = template.split_once(NOTES).map(|(_, n)| n.to_string()).unwrap_or_default();
    let doc = format!(
        "# Benchmarks\n\n\
         Generated by `cargo xtask bench`{} on {date}, in {:.0} s.\n\n\
         Machine: {}.\n\n\
         To reproduce: `cargo xtask setup && cargo xtask bench` (on Linux the program runs under Wine; on Windows natively).\n\n\
         ![The head-to-head rows: each column's cost relative to the raw call, log scale]({CHART_NAME})\n\n\
         Each cell is the median, its spread in parentheses (min..max over trials, or the p99 of latency samples), \
         and the ratio to the raw `windows-sys` column (×1.00 is the floor). Lower is better everywhere.\n\n\
         {table}\n\
         ## Sockets\n\n\
         Columns of their own; the ratio is to the raw `windows-sys` TP_IO column. Lower is better except in MB/s rows.\n\n\
         {net}\n{INPLACE_HEADING}{inplace}\n{HTTP_HEADING}{http}{NOTES}{notes}",
        if quick { " --quick" } else { "" },
        t0.elapsed().as_secs_f64(),
        machine()
    );
    std::fs::write(root.join("docs/benchmarks.md"), doc).map_err(|e| e.to_string())?;
    println!("bench: wrote docs/benchmarks.md ({:.0}s)", t0.elapsed().as_secs_f64());
    write_chart(&root)
}

/// `MemTotal` from `/proc/meminfo`, in GiB.
fn mem_total(meminfo: &str) -> Option<String> {
    let line = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(format!("{:.1} GiB", kib as f64 / (1024.0 * 1024.0)))
}

/// `YYYY-MM-DD HH:MM UTC` for `t`.
fn utc_minute(t: std::time::SystemTime) -> String {
    let secs = t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", s / 3600, s % 3600 / 60)
}

/// The proleptic Gregorian (year, month, day) of `days` since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn dates_are_computed_in_utc() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(11_017), (2000, 3, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        // 2026-08-04 13:05:59 UTC (`date -u -d @1785848759`).
        assert_eq!(utc_minute(UNIX_EPOCH + Duration::from_secs(1_785_848_759)), "2026-08-04 13:05 UTC");
    }

    #[test]
    fn the_socket_table_is_split_off_at_the_marker() {
        let out = "| a |\n| 1 |\n<!-- net -->\n| b |\n| 2 |\n";
        assert_eq!(split_tables(out), ("| a |\n| 1 |\n".to_string(), "| b |\n| 2 |\n".to_string()));
        assert_eq!(split_tables("| a |\n"), ("| a |\n".to_string(), String::new()));
    }

    #[test]
    fn a_section_is_replaced_alone() {
        let doc = format!("# B\n| a |\n{INPLACE_HEADING}| p |\n\n{HTTP_HEADING}| old |\n{NOTES}\n## Notes\n");
        let new = with_section(&doc, HTTP_HEADING, NOTES, "| new |\n").unwrap();
        assert_eq!(new, format!("# B\n| a |\n{INPLACE_HEADING}| p |\n\n{HTTP_HEADING}| new |\n{NOTES}\n## Notes\n"));
        let new = with_section(&doc, INPLACE_HEADING, HTTP_HEADING, "| q |\n\n").unwrap();
        assert_eq!(new, format!("# B\n| a |\n{INPLACE_HEADING}| q |\n\n{HTTP_HEADING}| old |\n{NOTES}\n## Notes\n"));
        assert_eq!(with_section("# B\n<!-- notes -->", HTTP_HEADING, NOTES, "| new |\n"), None);
    }

    #[test]
    fn memory_is_read_from_meminfo() {
        assert_eq!(mem_total("MemTotal:       16314372 kB\nMemFree: 1 kB\n").as_deref(), Some("15.6 GiB"));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
    }
}
