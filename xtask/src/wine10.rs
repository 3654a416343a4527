//! `cargo xtask wine10`: the suite under a second Wine, Debian trixie's Wine
//! 10.0, so that no behaviour is proven under one implementation alone.
//!
//! Debian 12 ships Wine 8.0; trixie ships 10.0. Setup (idempotent, as root)
//! bootstraps a minimal trixie root with `debootstrap`, installs `wine` and
//! `wine64` in it (no recommends), and prepares a prefix inside it as
//! `cargo xtask setup` prepares the host's: the AeDebug auto-debugger
//! cleared, the runner (`xtask/runner`) installed, a persistent wineserver,
//! and the same probes proving it. Wine 10 ships `bcryptprimitives.dll` with
//! `ProcessPrng`, so no shim is installed (the `hello` probe proves it).
//!
//! The test binaries are built on the host as always; cargo runs them
//! through `xtask/wine10-run`, which enters the root in a private mount
//! namespace with the checkout, the target directory and `/tmp` bound at
//! their own paths (see the script).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::env::{self, Platform, Result};
use crate::setup;

/// Names the root, read by `xtask/wine10-run` too.
const ROOT_VAR: &str = "WINDOWS_THREADPOOL_WINE10_ROOT";
/// One more directory `xtask/wine10-run` binds into the root.
const BIND_VAR: &str = "WINDOWS_THREADPOOL_WINE10_BIND";
/// Written into the root once its Wine is installed; holds `wine --version`.
const MARKER: &str = ".windows-threadpool-root";
/// The prefix, as a path inside the root.
const PREFIX: &str = "wineprefix";
const SUITE: &str = "trixie";
const MIRROR_VAR: &str = "WINDOWS_THREADPOOL_WINE10_MIRROR";
const MIRROR: &str = "http://deb.debian.org/debian";

/// The trixie root (`$XDG_CACHE_HOME/windows-threadpool/wine10-root`, next to the host's prefix).
pub fn root() -> PathBuf {
    if let Some(r) = std::env::var_os(ROOT_VAR) {
        return PathBuf::from(r);
    }
    env::wine_prefix().with_file_name("wine10-root")
}

fn script() -> PathBuf {
    env::workspace_root().join("xtask/wine10-run")
}

/// `xtask/wine10-run` with the root and the target directory named.
fn runner() -> Command {
    let mut c = Command::new(script());
    c.env(ROOT_VAR, root());
    if let Ok(l) = env::layout() {
        c.env(BIND_VAR, &l.target_dir);
    }
    c
}

/// `program args` inside the root (Wine's environment set), stdin closed.
fn in_root(program: &str, args: &[&str]) -> Command {
    let mut c = runner();
    c.arg("--in-root").arg(program).args(args).stdin(Stdio::null());
    c
}

/// Runs a step inside the root with its output going to a log file, not to
/// pipes: Wine's services, started by a server's first process, inherit
/// and hold the handles they are given (an `output()` would wait for them).
fn step(mut cmd: Command, what: &str) -> Result<()> {
    let dir = env::layout()?.target_dir.join("xtask");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let log = dir.join("wine10-step.log");
    let file = std::fs::File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let status = cmd.stdout(file).stderr(err).status().map_err(|e| format!("{what}: cannot start: {e}"))?;
    if status.success() {
        return Ok(());
    }
    Err(format!("{what} failed ({status}):\n{}", std::fs::read_to_string(&log).unwrap_or_default()))
}

/// Prepares (once) and proves the Wine 10 root and prefix; returns the
/// platform whose cargo commands run test binaries under Wine 10.
pub fn prepare() -> Result<Platform> {
    setup::setup(None)?;
    if cfg!(windows) {
        return Err("Wine 10 runs on Linux only".into());
    }
    if !env::is_root() {
        return Err(
            "needs root: it bootstraps a Debian root, and runs Wine in it through chroot and a mount namespace".into(),
        );
    }
    let t0 = Instant::now();
    let root = root();
    if !root.join(MARKER).is_file() {
        bootstrap(&root)?;
    }
    prepare_prefix(&root)?;
    setup::prove_with(runner)?;
    let version = std::fs::read_to_string(root.join(MARKER)).unwrap_or_default();
    println!("wine10: {} in {} ready and proved ({:.1}s)", version.trim(), root.display(), t0.elapsed().as_secs_f64());
    let mut p = env::wine_platform_with_runner(&script());
    p.env = vec![(ROOT_VAR.into(), root.into_os_string())];
    if let Ok(l) = env::layout() {
        p.env.push((BIND_VAR.into(), l.target_dir.clone().into_os_string()));
    }
    Ok(p)
}

/// A fresh root: `debootstrap`, then Wine. A root left incomplete (no
/// marker) is removed first; no bind mount ever outlives a call of
/// `xtask/wine10-run`, so removing it touches nothing outside.
fn bootstrap(root: &std::path::Path) -> Result<()> {
    let t = Instant::now();
    if !env::have("debootstrap") {
        println!("wine10: installing debootstrap");
        let apt = |args: &[&str]| {
            let mut c = Command::new("apt-get");
            c.args(args).args(["-o", "DPkg::Lock::Timeout=120"]).env("DEBIAN_FRONTEND", "noninteractive");
            c
        };
        env::run_quiet(&mut apt(&["update", "-q"]), "apt-get update")?;
        env::run_quiet(&mut apt(&["install", "-y", "-q", "debootstrap"]), "apt-get install debootstrap")?;
    }
    if root.exists() {
        if root.join("usr/bin/wineserver").exists() {
            // A server of the root's own would keep running on deleted files.
            let _ = in_root("wineserver", &["-k"]).stdout(Stdio::null()).stderr(Stdio::null()).status();
        }
        println!("wine10: removing the incomplete root {}", root.display());
        std::fs::remove_dir_all(root).map_err(|e| format!("remove {}: {e}", root.display()))?;
    }
    let mirror = std::env::var(MIRROR_VAR).unwrap_or_else(|_| MIRROR.into());
    println!("wine10: debootstrap {SUITE} into {} from {mirror} (about a minute)", root.display());
    // In a mount namespace of its own: the /proc and /sys debootstrap mounts
    // in the root vanish with it, even if it is interrupted.
    env::run_quiet(
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--", "debootstrap", "--variant=minbase", SUITE])
            .arg(root)
            .arg(&mirror)
            .stdin(Stdio::null()),
        "debootstrap",
    )?;
    println!("wine10: installing wine and wine64 in the root (about a minute)");
    let lock = ["-o", "DPkg::Lock::Timeout=120"];
    step(in_root("apt-get", &[&["update", "-q"][..], &lock].concat()), "apt-get update (root)")?;
    let install = [&["install", "-y", "-q", "--no-install-recommends"][..], &lock, &["wine", "wine64"]].concat();
    let mut install = in_root("apt-get", &install);
    install.env("DEBIAN_FRONTEND", "noninteractive");
    step(install, "apt-get install wine wine64 (root)")?;
    // The downloaded packages (about 300 MB) are not needed again.
    step(in_root("apt-get", &["clean"]), "apt-get clean (root)")?;
    let out = in_root("wine", &["--version"]).output().map_err(|e| format!("wine --version: {e}"))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !version.starts_with("wine-10") {
        return Err(format!("the root's wine is not Wine 10: {version:?} ({})", out.status));
    }
    std::fs::write(root.join(MARKER), format!("{version}\n")).map_err(|e| format!("write the marker: {e}"))?;
    println!("wine10: root ready ({:.0}s)", t.elapsed().as_secs_f64());
    Ok(())
}

/// The prefix inside the root, fixed as the host's is (see `setup`).
fn prepare_prefix(root: &std::path::Path) -> Result<()> {
    let prefix = root.join(PREFIX);
    std::fs::create_dir_all(&prefix).map_err(|e| format!("create {}: {e}", prefix.display()))?;
    // Only this root's server: a fresh persistent one (started with no pipes
    // to hold) then serves every step below, so no second server can load
    // the registry before the first saved it.
    let quiet = |mut c: Command| c.stdout(Stdio::null()).stderr(Stdio::null()).status();
    let _ = quiet(in_root("wineserver", &["-k"]));
    quiet(in_root("wineserver", &["-p900"])).map_err(|e| format!("wineserver: {e}"))?;
    if !prefix.join("system.reg").is_file() || !prefix.join("drive_c/windows/system32").is_dir() {
        println!("wine10: creating the Wine prefix {}", prefix.display());
        step(in_root("wineboot", &["--init"]), "wineboot --init (root)")?;
    }
    for (name, value) in [("Debugger", ""), ("Auto", "0")] {
        step(
            in_root("wine", &["reg", "add", setup::AEDEBUG, "/v", name, "/t", "REG_SZ", "/d", value, "/f"]),
            "clearing the AeDebug auto-debugger (root)",
        )?;
    }
    setup::install_runner_into(&prefix)?;
    quiet(in_root("wine", &["cmd", "/c", "exit"])).map_err(|e| format!("wine cmd: {e}"))?;
    Ok(())
}
