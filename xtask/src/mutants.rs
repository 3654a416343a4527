//! `cargo xtask mutants`: mutation testing of the library with cargo-mutants,
//! module by module, and `docs/mutants.md` generated from the results.
//!
//! Each mutant costs an incremental build and a test run under Wine, so a
//! module is tested only with the test targets that exercise it (the
//! configuration that compiles the mutated code: the default features), and
//! every mutant has a timeout: one that hangs counts as caught by timeout.
//! `--shard k/n` splits a module's mutants for CI-sized runs. Results land in
//! `target/mutants/<module>/mutants.out`; `--report` rewrites
//! `docs/mutants.md` from every module's latest results and the explanations
//! in `xtask/mutants-equivalent.txt` (one line per missed mutant that cannot
//! matter: `<mutant as cargo-mutants prints it> | <why>`; an explanation that
//! names no current mutant fails it). A module with no results on this
//! machine keeps its row of the report before, marked *(kept)*: a full run
//! takes hours under Wine, so a report may renew some modules only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::env::{self, Platform, Result, cargo, workspace_root};
use crate::setup;
use crate::{LIB, WIN_TARGET};

/// A module under mutation: its files, the tests that cover it (see
/// [`target_args`] and [`filter`]), and the features its code
/// needs to be observable: the objects' drain obligations are checked only
/// with `fail-fast`, and some of their teardown is seen only in the trace's
/// records, so those modules are mutated with `fail-fast` (and `trace`) on.
pub struct Module {
    pub name: &'static str,
    pub files: &'static [&'static str],
    /// `lib` (the unit tests), a test binary (`alloc`), or one module of an
    /// area's test binary (`objects::work`).
    pub tests: &'static [&'static str],
    pub features: &'static str,
}

pub const MODULES: &[Module] = &[
    Module {
        name: "obligation",
        files: &["src/callback/obligation.rs"],
        tests: &["lib", "objects::self_teardown", "objects::harness", "objects::work", "objects::timer"],
        features: "fail-fast",
    },
    Module {
        name: "waker_slot",
        files: &["src/callback/waker_slot.rs"],
        tests: &["lib", "tasks::async_task", "tasks::async_time"],
        features: "",
    },
    Module {
        name: "ctx",
        files: &["src/callback/ctx/mod.rs", "src/callback/ctx/arena.rs", "src/callback/ctx/blocks.rs"],
        // lifecycle: the context count the models and leak checks rely on;
        // cleanup_group: the arena its members' contexts live in.
        tests: &["lib", "objects::work", "alloc", "objects::lifecycle", "objects::cleanup_group"],
        features: "",
    },
    Module {
        name: "work",
        files: &["src/work.rs"],
        // cleanup_group: a member's release frees its context; pool:
        // prewarm_default_pool.
        tests: &[
            "lib",
            "objects::work",
            "objects::self_teardown",
            "objects::debug",
            "objects::cleanup_group",
            "objects::pool",
            "objects::trace",
        ],
        // trace: a released group member's `drop-closed` record.
        features: "fail-fast,trace",
    },
    Module {
        name: "timer",
        files: &["src/timer/mod.rs", "src/timer/timercore.rs", "src/timer/periodic.rs", "src/callback/arming.rs"],
        tests: &["lib", "objects::timer", "objects::self_teardown", "objects::debug", "objects::trace"],
        // trace: which target (one-shot or periodic) a timer's records name.
        features: "fail-fast,trace",
    },
    Module {
        name: "wait",
        files: &["src/wait/mod.rs", "src/wait/waitcore.rs", "src/wait/future.rs", "src/handle.rs"],
        tests: &[
            "lib",
            "objects::wait",
            "tasks::async_wait",
            "objects::self_teardown",
            "objects::debug",
            "objects::trace",
        ],
        features: "fail-fast,trace",
    },
    Module {
        name: "io",
        files: &[
            "src/io/handles.rs",
            "src/io/iocore.rs",
            "src/io/object.rs",
            "src/io/operation.rs",
            "src/io/future.rs",
            "src/io/op/mod.rs",
            "src/io/op/fs.rs",
        ],
        // child_stdio, process: the pipes for a child's standard handles
        // and the overlapped-handle checks they pass.
        tests: &["lib", "io::io", "async_io", "alloc", "objects::debug", "io::child_stdio", "io::process"],
        features: "fail-fast",
    },
    // The registry is a plain data structure with its own unit tests (a
    // randomised model of the table, run under Miri too); the I/O tests add
    // nothing it can fail but time, and a broken probe loop hangs.
    Module { name: "io_registry", files: &["src/io/registry.rs"], tests: &["lib"], features: "" },
    Module {
        name: "cleanup_group",
        files: &["src/cleanup_group/mod.rs", "src/cleanup_group/members.rs"],
        tests: &["lib", "objects::cleanup_group", "objects::debug", "objects::self_teardown", "objects::self_heal"],
        features: "fail-fast",
    },
    Module {
        name: "heal",
        files: &["src/heal/mod.rs", "src/heal/registry.rs"],
        tests: &["lib", "objects::self_heal"],
        features: "fail-fast",
    },
    Module {
        name: "task",
        files: &[
            "src/task/header.rs",
            "src/task/blocking.rs",
            "src/task/scoped.rs",
            "src/task/parallel.rs",
            "src/task/chunked.rs",
            "src/task/future.rs",
            "src/task/current_thread.rs",
        ],
        tests: &["lib", "tasks::spawn", "tasks::async_task", "alloc", "objects::debug"],
        // With the trace: the tests that read which thread closed a task's pool.
        features: "trace",
    },
    Module {
        name: "time",
        files: &[
            "src/sys/deadline.rs",
            "src/time/driver.rs",
            "src/time/delay.rs",
            "src/time/ticks.rs",
            "src/time/limit.rs",
        ],
        tests: &["lib", "tasks::async_time", "objects::timer"],
        features: "",
    },
];

/// The module `cargo xtask test` runs one shard of, to keep this command
/// working, and its one mutant (`is_owed` answering `false`, chosen by name so
/// the choice survives changes to the module's list) that the
/// tests must catch.
pub const SMOKE: &str = "obligation";
pub const SMOKE_MUTANT: &str = "is_owed -> bool with false";

/// One shard of [`SMOKE`], into its own output directory: fails unless
/// cargo-mutants ran and every viable mutant of the shard was caught.
pub fn smoke(p: &Platform) -> Result<()> {
    ensure_installed()?;
    let m = module(SMOKE)?;
    let target = p.target.clone().unwrap_or_else(|| WIN_TARGET.to_string());
    let out = out_root().join("smoke");
    let status = command(m, None, 300, &target, &out)
        .args(["--re", SMOKE_MUTANT])
        .status()
        .map_err(|e| format!("cargo mutants: {e}"))?;
    let o = Outcome::read(&out).ok_or_else(|| format!("cargo mutants wrote no results ({status})"))?;
    if o.caught.len() + o.timeout.len() == 0 || !o.missed.is_empty() {
        return Err(format!("expected the shard's mutant caught, got {o:?}"));
    }
    println!("mutants: smoke ({SMOKE}: {SMOKE_MUTANT}): {}", o.summary());
    Ok(())
}

pub fn module(name: &str) -> Result<&'static Module> {
    MODULES.iter().find(|m| m.name == name).ok_or_else(|| {
        format!("no module {name:?}; one of: {}", MODULES.iter().map(|m| m.name).collect::<Vec<_>>().join(", "))
    })
}

/// The mutants of `m` in the code as it is now (`cargo mutants --list`), or
/// `None` if cargo-mutants cannot list them.
fn current_mutants(m: &Module) -> Option<std::collections::BTreeSet<String>> {
    let mut c = cargo();
    c.args(["mutants", "--list", "--package", LIB]);
    for f in m.files {
        c.args(["--file", f]);
    }
    let out = c.output().ok().filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect())
}

/// Installs cargo-mutants from crates.io if it is missing.
pub fn ensure_installed() -> Result<()> {
    setup::cargo_install_if_missing("mutants", "cargo-mutants")
}

pub fn out_dir(m: &Module) -> PathBuf {
    out_root().join(m.name)
}

/// The cargo-mutants command for one module (and shard).
pub fn command(m: &Module, shard: Option<&str>, timeout_s: u32, target: &str, out: &Path) -> Command {
    // cargo-mutants creates `out/mutants.out` but not `out` itself.
    let _ = std::fs::create_dir_all(out);
    let mut c = cargo();
    c.args(["mutants", "--package", LIB, "--test-tool", "nextest", "--no-shuffle", "--baseline", "skip"]);
    c.args(["--timeout", &timeout_s.to_string(), "--build-timeout", "600"]);
    for f in m.files {
        c.args(["--file", f]);
    }
    if let Some(s) = shard {
        c.args(["--shard", s]);
    }
    c.arg("--output").arg(out);
    // Passed to every cargo command cargo-mutants runs (build and test).
    c.arg(format!("--cargo-arg=--target={target}"));
    for a in target_args(m.tests) {
        c.arg(format!("--cargo-arg={a}"));
    }
    // Only to the test run: of the binaries built, only the module's tests.
    c.arg("--cargo-test-arg=-E").arg(format!("--cargo-test-arg={}", filter(m.tests)));
    if !m.features.is_empty() {
        c.arg(format!("--features={}", m.features));
    }
    // The project's nextest profile runs every test after a failure; a
    // mutant needs only the first.
    c.arg("--cargo-test-arg=--fail-fast");
    // The module's own tests first: a mutant they catch ends the run sooner.
    let priorities = out.join("nextest-priorities.toml");
    if std::fs::write(&priorities, priority_config(m, timeout_s)).is_ok() {
        let path = std::path::absolute(&priorities).unwrap_or(priorities);
        c.arg("--cargo-test-arg=--tool-config-file").arg(format!("--cargo-test-arg=xtask-mutants:{}", path.display()));
    }
    // The copied trees share one target directory, so dependencies are built once.
    c.env("CARGO_TARGET_DIR", out_root().join("build"));
    c
}

/// A nextest tool configuration that runs `m`'s own tests before the rest
/// of its filter: the unit tests of its files, then the first area module
/// it names (its integration tests). The order changes only how soon a
/// caught mutant's run stops, never what is run. A test that hangs fails
/// after half the run's `timeout` (seconds): a mutant that makes one hang
/// is caught then, rather than by the whole run's timeout.
fn priority_config(m: &Module, timeout: u32) -> String {
    let mut paths: Vec<String> = m
        .files
        .iter()
        .map(|f| {
            let p = f.trim_start_matches("src/").trim_end_matches(".rs").trim_end_matches("/mod");
            format!("{}::", p.replace('/', "::"))
        })
        .collect();
    // Sorted, a module's path comes before its submodules', which it covers.
    paths.sort();
    let mut own: Vec<String> = Vec::new();
    for p in paths {
        if !own.iter().any(|o| p.starts_with(o.as_str())) {
            own.push(p);
        }
    }
    let mut s = format!(
        "# Written by `cargo xtask mutants` for the module {}.\n\
         [[profile.default.overrides]]\nfilter = 'kind(lib) & test(/^({})/)'\npriority = 100\n",
        m.name,
        own.join("|")
    );
    if let Some(own) = m.tests.iter().find(|t| **t != "lib") {
        s += &format!("\n[[profile.default.overrides]]\nfilter = '{}'\npriority = 90\n", filter(&[own]));
    }
    let period = (timeout / 4).max(1);
    s += &format!(
        "\n[[profile.default.overrides]]\nfilter = 'all()'\nslow-timeout = {{ period = \"{period}s\", terminate-after = 2 }}\n"
    );
    s
}

/// `tests` (see [`Module::tests`]) by test binary, in order: each binary
/// (`lib` for the unit tests) with the modules named of it (none: all of it).
fn by_binary<'a>(tests: &[&'a str]) -> Vec<(&'a str, Vec<&'a str>)> {
    let mut binaries: Vec<(&str, Vec<&str>)> = Vec::new();
    for t in tests {
        let (binary, module) = t.split_once("::").map_or((*t, None), |(b, m)| (b, Some(m)));
        match binaries.iter_mut().find(|(b, _)| *b == binary) {
            Some((_, modules)) => modules.extend(module),
            None => binaries.push((binary, module.into_iter().collect())),
        }
    }
    binaries
}

/// Cargo's target arguments for `tests`: `--lib` and `--test` for each
/// binary, so only those are built.
fn target_args(tests: &[&str]) -> Vec<String> {
    by_binary(tests)
        .into_iter()
        .flat_map(|(binary, _)| match binary {
            "lib" => vec!["--lib".to_string()],
            binary => vec!["--test".to_string(), binary.to_string()],
        })
        .collect()
}

/// The nextest filter that runs exactly `tests`: an area's binary holds
/// many modules, of which a mutant needs only some.
fn filter(tests: &[&str]) -> String {
    let terms: Vec<String> = by_binary(tests)
        .into_iter()
        .map(|(binary, modules)| match binary {
            "lib" => "kind(lib)".to_string(),
            binary if modules.is_empty() => format!("binary({binary})"),
            binary => format!("(binary({binary}) & test(/^({})::/))", modules.join("|")),
        })
        .collect();
    terms.join(" | ")
}

fn out_root() -> PathBuf {
    env::layout().map(|l| l.target_dir.join("mutants")).unwrap_or_else(|_| workspace_root().join("target/mutants"))
}

/// Every unviable mutant of a module's runs so far (see [`Outcome::read`]).
const UNVIABLE_ALL: &str = "unviable-all.txt";

/// What cargo-mutants recorded for a module.
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    pub caught: Vec<String>,
    pub missed: Vec<String>,
    pub timeout: Vec<String>,
    pub unviable: Vec<String>,
    /// Mutants of the current code with no result: their code moved since
    /// the module's last run. Counted as not caught.
    pub untested: Vec<String>,
}

impl Outcome {
    pub fn read(dir: &Path) -> Option<Self> {
        // Each mutant once: a list can name one twice (seen in heal's missed.txt).
        let file = |path: PathBuf| -> Option<Vec<String>> {
            let text = std::fs::read_to_string(path).ok()?;
            let mut v: Vec<String> = text.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect();
            v.sort();
            v.dedup();
            Some(v)
        };
        let lines = |f: &str| file(dir.join("mutants.out").join(f));
        // An `--iterate` run lists the earlier runs' caught *and unviable*
        // mutants together in `previously_caught.txt`, and its own
        // `unviable.txt` only the new ones: the unviable ones are known from
        // the run before (`mutants.out.old`) and from what this command kept
        // of earlier iterations (`unviable-all.txt`).
        let mut unviable = lines("unviable.txt")?;
        unviable.extend(file(dir.join("mutants.out.old").join("unviable.txt")).unwrap_or_default());
        unviable.extend(file(dir.join(UNVIABLE_ALL)).unwrap_or_default());
        unviable.sort();
        unviable.dedup();
        let mut caught = lines("caught.txt")?;
        caught.extend(lines("previously_caught.txt").unwrap_or_default());
        caught.retain(|m| unviable.binary_search(m).is_err());
        caught.sort();
        caught.dedup();
        Some(Self { caught, missed: lines("missed.txt")?, timeout: lines("timeout.txt")?, unviable, untested: vec![] })
    }

    /// Keeps this outcome's unviable mutants for the next `--iterate` run
    /// of the module in `dir`, which will not list them again.
    fn keep_unviable(&self, dir: &Path) -> Result<()> {
        std::fs::write(dir.join(UNVIABLE_ALL), self.unviable.join("\n") + "\n")
            .map_err(|e| format!("{}: {e}", dir.join(UNVIABLE_ALL).display()))
    }

    /// Keeps only the mutants `current` names, and lists those of `current`
    /// with no result as untested.
    fn retain(&mut self, current: &std::collections::BTreeSet<String>) {
        for list in [&mut self.caught, &mut self.missed, &mut self.timeout, &mut self.unviable] {
            list.retain(|m| current.contains(m));
        }
        let known: std::collections::BTreeSet<&String> =
            [&self.caught, &self.missed, &self.timeout, &self.unviable].into_iter().flatten().collect();
        self.untested = current.iter().filter(|m| !known.contains(m)).cloned().collect();
    }

    /// One line: the counts and the score.
    pub fn summary(&self) -> String {
        format!(
            "{} caught, {} timeout, {} missed, {} unviable ({:.1} % of viable caught)",
            self.caught.len(),
            self.timeout.len(),
            self.missed.len(),
            self.unviable.len(),
            self.score()
        )
    }

    /// Caught (including by timeout) out of viable mutants, in percent; an
    /// untested mutant counts as viable and not caught.
    pub fn score(&self) -> f64 {
        let viable = self.caught.len() + self.missed.len() + self.timeout.len() + self.untested.len();
        if viable == 0 { 100.0 } else { 100.0 * (self.caught.len() + self.timeout.len()) as f64 / viable as f64 }
    }
}

/// Whether an explanation says its mutant is equivalent (cannot change a result).
fn is_equivalent(why: &str) -> bool {
    !why.starts_with("Not equivalent")
}

/// `<mutant> | <why>` lines of `xtask/mutants-equivalent.txt`. A mutant's
/// name can itself hold ` | ` (`replace | with ^`), never followed by a
/// capital: the reason starts with one, after the first such separator.
pub fn explanations(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let (at, _) =
                l.match_indices(" | ").find(|&(i, _)| l[i + 3..].starts_with(|c: char| c.is_ascii_uppercase()))?;
            Some((l[..at].trim().to_string(), l[at + 3..].trim().to_string()))
        })
        .collect()
}

/// The explained mutants that no module's current mutants name: their code
/// moved (a new line or column) or went, so the explanation no longer applies.
fn stale_explanations<'a>(
    why: &BTreeMap<String, String>,
    current: impl IntoIterator<Item = &'a std::collections::BTreeSet<String>>,
) -> Vec<String> {
    let current: Vec<_> = current.into_iter().collect();
    why.keys().filter(|m| !current.iter().any(|c| c.contains(*m))).cloned().collect()
}

/// The cells after the module's name in its row of the report `previous`,
/// unless that row says it was not run.
fn kept_row<'a>(previous: &'a str, name: &str) -> Option<&'a str> {
    previous.lines().find_map(|l| {
        let rest = l.strip_prefix(&format!("| {name} |")).or_else(|| l.strip_prefix(&format!("| {name} (kept) |")))?;
        (!rest.trim_start().starts_with("not run yet")).then_some(rest)
    })
}

/// The section `## <kind> `<name>`` of the report `previous`, with the
/// blank line before it, or nothing.
fn kept_section(previous: &str, kind: &str, name: &str) -> String {
    let heading = format!("\n## {kind} `{name}`");
    let Some(at) = previous.find(&format!("{heading}\n")).or_else(|| previous.find(&format!("{heading} ("))) else {
        return String::new();
    };
    let body = &previous[at + 1..];
    // Up to the blank line before the next section.
    let end = body[1..].find("\n## ").map_or(body.len(), |e| e + 1);
    format!("\n{}", &body[..end])
}

/// `docs/mutants.md` from the outcomes found (modules not run yet say so).
///
/// A module without results keeps what `previous` (the report before) says
/// of it, marked *(kept)*.
pub fn report(outcomes: &[(&Module, Option<Outcome>)], why: &BTreeMap<String, String>, previous: &str) -> String {
    let mut s = String::from(
        "# Mutation testing\n\nGenerated by `cargo xtask mutants --report` from the latest results of \
         `cargo xtask mutants` (cargo-mutants under Wine, each module tested with the test targets that cover it). \
         A mutant that hangs is caught by its timeout. Goal: at least 90 % of viable mutants caught per module; every \
         missed mutant is listed below, explained (`xtask/mutants-equivalent.txt`: why it cannot change a result, or \
         why no deterministic test can reach it) or \
         marked *open* until a test catches it.\n\n\
         The last column leaves out the missed mutants explained as equivalent (they cannot change a result), as \
         mutation scores conventionally do; an explanation starting \"Not equivalent\" still counts as missed.\n\n\
         A mutant of the current code that has no result yet (its code moved since the module's last run) is \
         *untested* and counts as not caught.\n\n\
         A module marked *(kept)* has no results on the machine that wrote this report: its row and its lists are \
         copied from the report before, measured on the code of that time (its mutants keep the names they had).\n\n\
         | module | caught | timeout | missed | of which equivalent | unviable | untested | caught of viable | caught of viable, equivalents left out |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for (m, o) in outcomes {
        match o {
            Some(o) => {
                let equivalent = o.missed.iter().filter(|m| why.get(*m).is_some_and(|w| is_equivalent(w))).count();
                let killed = (o.caught.len() + o.timeout.len()) as f64;
                let without = killed + (o.missed.len() - equivalent + o.untested.len()) as f64;
                s += &format!(
                    "| {} | {} | {} | {} | {} | {} | {} | {:.1} % | {:.1} % |\n",
                    m.name,
                    o.caught.len(),
                    o.timeout.len(),
                    o.missed.len(),
                    equivalent,
                    o.unviable.len(),
                    o.untested.len(),
                    o.score(),
                    if without == 0.0 { 100.0 } else { 100.0 * killed / without }
                )
            }
            None => match kept_row(previous, m.name) {
                Some(rest) => s += &format!("| {} (kept) |{rest}\n", m.name),
                None => s += &format!("| {} | not run yet | | | | | | | |\n", m.name),
            },
        }
    }
    for (m, o) in outcomes {
        let Some(o) = o else {
            if kept_row(previous, m.name).is_none() {
                continue;
            }
            for kind in ["Untested in", "Missed in"] {
                s += &kept_section(previous, kind, m.name);
            }
            continue;
        };
        if !o.untested.is_empty() {
            s += &format!("\n## Untested in `{}` (code moved since its last run)\n\n", m.name);
            for mutant in &o.untested {
                s += &format!("- `{mutant}`\n");
            }
        }
        if o.missed.is_empty() {
            continue;
        }
        s += &format!("\n## Missed in `{}`\n\n", m.name);
        for mutant in &o.missed {
            match why.get(mutant) {
                Some(w) => s += &format!("- `{mutant}`: explained: {w}\n"),
                None => s += &format!("- `{mutant}`: *open*\n"),
            }
        }
    }
    s
}

/// `cargo xtask mutants [--module NAME].. [--shard k/n] [--timeout S] [--iterate] [--report]`.
pub fn mutants(target: Option<&str>, rest: &[String]) -> Result<()> {
    let mut names = Vec::new();
    let (mut shard, mut timeout, mut report_only, mut iterate) = (None, 120u32, false, false);
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--module" => names.push(it.next().ok_or("--module needs a name")?.clone()),
            "--shard" => shard = Some(it.next().ok_or("--shard needs k/n")?.clone()),
            "--timeout" => {
                timeout = it.next().ok_or("--timeout needs seconds")?.parse().map_err(|e| format!("--timeout: {e}"))?
            }
            "--report" => report_only = true,
            "--iterate" => iterate = true,
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    if !report_only {
        let p = setup::setup(target)?;
        ensure_installed()?;
        let target = p.target.clone().unwrap_or_else(|| WIN_TARGET.to_string());
        let modules: Vec<&Module> = if names.is_empty() {
            MODULES.iter().collect()
        } else {
            names.iter().map(|n| module(n)).collect::<Result<_>>()?
        };
        for m in modules {
            println!("mutants: {} ({})", m.name, m.files.join(", "));
            // cargo-mutants exits non-zero when a mutant is missed: that is a
            // result to report, not a failure of this command.
            let mut c = command(m, shard.as_deref(), timeout, &target, &out_dir(m));
            if iterate {
                // Only the mutants the module's last results did not catch (or
                // that moved), accumulated into those results.
                c.arg("--iterate");
            }
            let status = c.status().map_err(|e| format!("cargo mutants: {e}"))?;
            let o = Outcome::read(&out_dir(m)).ok_or_else(|| format!("cargo mutants wrote no results ({status})"))?;
            o.keep_unviable(&out_dir(m))?;
            println!("mutants: {}: {}", m.name, o.summary());
        }
    }
    let why = explanations(
        &std::fs::read_to_string(workspace_root().join("xtask/mutants-equivalent.txt")).unwrap_or_default(),
    );
    let current: Vec<_> = MODULES.iter().map(current_mutants).collect();
    if current.iter().all(Option::is_some) {
        let stale = stale_explanations(&why, current.iter().flatten());
        if !stale.is_empty() {
            return Err(format!(
                "xtask/mutants-equivalent.txt explains mutants the code no longer has (re-key or remove them):\n{}",
                stale.join("\n")
            ));
        }
    }
    let outcomes: Vec<_> = MODULES
        .iter()
        .zip(&current)
        .map(|(m, current)| {
            let o = Outcome::read(&out_dir(m)).map(|mut o| {
                // Results of earlier runs name mutants by line: those whose
                // code has moved since are counted under their new names.
                if let Some(current) = current {
                    o.retain(current);
                }
                o
            });
            (m, o)
        })
        .collect();
    let previous = std::fs::read_to_string(workspace_root().join("docs/mutants.md")).unwrap_or_default();
    std::fs::write(workspace_root().join("docs/mutants.md"), report(&outcomes, &why, &previous))
        .map_err(|e| format!("docs/mutants.md: {e}"))?;
    println!("mutants: wrote docs/mutants.md");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_file_exists() {
        for m in MODULES {
            for f in m.files {
                assert!(workspace_root().join(f).is_file(), "{}: {f} does not exist", m.name);
            }
        }
        assert!(module(SMOKE).is_ok());
    }

    #[test]
    fn every_module_names_tests_that_exist() {
        let tests = workspace_root().join("tests");
        for m in MODULES {
            for t in m.tests {
                let exists = match t.split_once("::") {
                    None => *t == "lib" || tests.join(format!("{t}.rs")).is_file(),
                    Some((binary, module)) => {
                        tests.join(binary).join("main.rs").is_file()
                            && tests.join(binary).join(format!("{module}.rs")).is_file()
                    }
                };
                assert!(exists, "{}: no test binary or module {t}", m.name);
            }
        }
    }

    #[test]
    fn a_module_builds_its_binaries_and_runs_only_its_tests() {
        let m = module(SMOKE).unwrap();
        assert_eq!(target_args(m.tests), ["--lib", "--test", "objects"]);
        assert_eq!(filter(m.tests), "kind(lib) | (binary(objects) & test(/^(self_teardown|harness|work|timer)::/))");
        let io = module("io").unwrap();
        assert_eq!(
            target_args(io.tests),
            ["--lib", "--test", "io", "--test", "async_io", "--test", "alloc", "--test", "objects"]
        );
        assert_eq!(
            filter(io.tests),
            "kind(lib) | (binary(io) & test(/^(io|child_stdio|process)::/)) | binary(async_io) | binary(alloc) | (binary(objects) & test(/^(debug)::/))"
        );
    }

    #[test]
    fn a_module_runs_its_own_tests_first() {
        let c = priority_config(module("ctx").unwrap(), 120);
        assert!(c.contains("filter = 'kind(lib) & test(/^(callback::ctx::)/)'\npriority = 100"), "{c}");
        assert!(c.contains("filter = 'all()'\nslow-timeout = { period = \"30s\", terminate-after = 2 }"), "{c}");
        assert!(c.contains("filter = '(binary(objects) & test(/^(work)::/))'\npriority = 90"), "{c}");
        let c = priority_config(module("wait").unwrap(), 60);
        assert!(c.contains("period = \"15s\""), "{c}");
        assert!(c.contains("test(/^(handle::|wait::)/)"), "{c}");
        let c = priority_config(module("io_registry").unwrap(), 120);
        assert!(c.contains("test(/^(io::registry::)/)") && !c.contains("priority = 90"), "{c}");
    }

    #[test]
    fn an_iterated_run_counts_the_earlier_catches() {
        let dir = std::env::temp_dir().join(format!("xtask-mutants-{}", std::process::id()));
        let (out, old) = (dir.join("mutants.out"), dir.join("mutants.out.old"));
        std::fs::create_dir_all(&out).unwrap();
        std::fs::create_dir_all(&old).unwrap();
        // The earlier runs' unviable `u0` and `u1` are among the previously caught.
        for (f, text) in [
            ("caught.txt", "new\n"),
            ("previously_caught.txt", "old\nnew\nu0\nu1\n"),
            ("missed.txt", "m\nm\n"),
            ("timeout.txt", ""),
            ("unviable.txt", "u\n"),
        ] {
            std::fs::write(out.join(f), text).unwrap();
        }
        std::fs::write(old.join("unviable.txt"), "u0\n").unwrap();
        std::fs::write(dir.join(UNVIABLE_ALL), "u1\n").unwrap();
        let o = Outcome::read(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(o.caught, ["new", "old"]);
        assert_eq!(o.missed, ["m"]);
        assert_eq!(o.unviable, ["u", "u0", "u1"]);
    }

    #[test]
    fn the_report_counts_and_explains() {
        let m = &MODULES[0];
        let o = Outcome {
            caught: vec!["a".into(), "b".into(), "c".into()],
            missed: vec!["x".into(), "y".into()],
            timeout: vec!["t".into()],
            unviable: vec!["u".into()],
            untested: vec![],
        };
        assert!((o.score() - 66.666).abs() < 0.01);
        let why = explanations("# header\nx | It only changes a log line\n");
        let r = report(&[(m, Some(o)), (&MODULES[1], None)], &why, "");
        // x is equivalent, y open: 4 of 6 viable, 4 of 5 without x.
        assert!(r.contains("| obligation | 3 | 1 | 2 | 1 | 1 | 0 | 66.7 % | 80.0 % |"), "{r}");
        let why2 = explanations("x | Not equivalent: no test reaches it\n");
        let r2 = report(&[(m, Some(Outcome { missed: vec!["x".into()], ..Outcome::default() }))], &why2, "");
        assert!(r2.contains("| obligation | 0 | 0 | 1 | 0 | 0 | 0 | 0.0 % | 0.0 % |"), "{r2}");
        assert!(r.contains("- `x`: explained: It only changes a log line"));
        assert!(r.contains("- `y`: *open*"));
        assert!(r.contains("| waker_slot | not run yet |"));
    }

    #[test]
    fn a_module_without_results_keeps_its_row_and_lists_from_the_report_before() {
        let previous = "# Mutation testing\n\n| module | caught |\n|---|---|\n\
            | obligation | 9 | 0 | 0 | 0 | 2 | 0 | 100.0 % | 100.0 % |\n\
            | waker_slot | 6 | 0 | 1 | 0 | 8 | 0 | 85.7 % | 85.7 % |\n\
            \n## Missed in `obligation`\n\n- `o`: *open*\n\
            \n## Missed in `waker_slot`\n\n- `w`: *open*\n- `v`: *open*\n\
            \n## Missed in `ctx`\n\n- `c`: *open*\n";
        let o = Outcome { caught: vec!["a".into()], ..Outcome::default() };
        let r = report(&[(&MODULES[0], Some(o)), (&MODULES[1], None), (&MODULES[2], None)], &BTreeMap::new(), previous);
        assert!(r.contains("| obligation | 1 | 0 | 0 |"), "{r}");
        assert!(!r.contains("`o`"), "a module run anew keeps nothing: {r}");
        assert!(r.contains("| waker_slot (kept) | 6 | 0 | 1 | 0 | 8 | 0 | 85.7 % | 85.7 % |\n"), "{r}");
        assert!(r.ends_with("\n## Missed in `waker_slot`\n\n- `w`: *open*\n- `v`: *open*\n"), "{r}");
        assert!(r.contains("| ctx | not run yet |"), "{r}");
        // Kept again, a row is marked once.
        let again = report(&[(&MODULES[1], None)], &BTreeMap::new(), &r);
        assert!(again.contains("| waker_slot (kept) | 6 |"), "{again}");
        assert!(again.contains("\n## Missed in `waker_slot`\n\n- `w`: *open*\n- `v`: *open*\n"), "{again}");
    }

    #[test]
    fn explanations_of_mutants_the_code_no_longer_has_are_stale() {
        let why =
            explanations("src/a.rs:1:1: replace f -> bool with true | Why.\nsrc/b.rs:9:9: replace g with () | Gone.\n");
        let now: std::collections::BTreeSet<String> =
            ["src/a.rs:1:1: replace f -> bool with true", "src/b.rs:10:9: replace g with ()"]
                .into_iter()
                .map(str::to_string)
                .collect();
        assert_eq!(stale_explanations(&why, [&now]), ["src/b.rs:9:9: replace g with ()"]);
    }

    #[test]
    fn an_explained_mutant_may_hold_the_separator() {
        let why = explanations(
            "f.rs:1:2: replace | with ^ in g | Equivalent: ^ and | agree here\nh.rs:3:4: replace || with && in k | Not equivalent\n",
        );
        assert_eq!(
            why.get("f.rs:1:2: replace | with ^ in g").map(String::as_str),
            Some("Equivalent: ^ and | agree here")
        );
        assert_eq!(why.get("h.rs:3:4: replace || with && in k").map(String::as_str), Some("Not equivalent"));
    }

    #[test]
    fn mutants_whose_code_moved_are_untested_and_not_caught() {
        let mut o = Outcome { caught: vec!["a:1".into(), "b:1".into()], ..Outcome::default() };
        // `b` moved to line 2 and `c` is new; `a` kept its place.
        o.retain(&["a:1".to_string(), "b:2".into(), "c:1".into()].into());
        assert_eq!((o.caught.clone(), o.untested.clone()), (vec!["a:1".to_string()], vec!["b:2".into(), "c:1".into()]));
        let r = report(&[(&MODULES[0], Some(o))], &BTreeMap::new(), "");
        assert!(r.contains("| obligation | 1 | 0 | 0 | 0 | 0 | 2 | 33.3 % | 33.3 % |"), "{r}");
        assert!(r.contains("## Untested in `obligation`") && r.contains("- `c:1`"), "{r}");
    }
}
