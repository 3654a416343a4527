//! `cargo xtask setup`: idempotent preparation of the machine.
//!
//! On Windows there is nothing to do. On Linux the Windows target runs under
//! Wine, and a fresh prefix is not fit for that until three things are fixed
//! (see `shared/wine-facts.md`): Rust's std imports `ProcessPrng` from a DLL
//! Wine 8 lacks (we build a shim), Wine's auto-debugger can turn a crash into
//! exit code 0 (we clear it), and output capture is slow without a persistent
//! wineserver (we start one). Each fix is then proved by a probe executable.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::WIN_TARGET;

pub type Result<T> = std::result::Result<T, String>;

/// How tests run on this machine.
pub struct Platform {
    /// `Some(target)` when cross-compiling (Linux host), `None` natively on Windows.
    pub target: Option<&'static str>,
}

impl Platform {
    pub fn target_args(&self) -> Vec<&'static str> {
        match self.target {
            Some(t) => vec!["--target", t],
            None => vec![],
        }
    }
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

pub fn wine_prefix() -> PathBuf {
    if let Some(p) = std::env::var_os("WINDOWS_THREADPOOL_WINEPREFIX") {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache"));
    cache.join("windows-threadpool").join("wineprefix")
}

/// A `Command` for a Wine program in the project's prefix, with Wine's own logging off.
pub fn wine_cmd(program: &str) -> Command {
    let mut c = Command::new(program);
    c.env("WINEPREFIX", wine_prefix()).env("WINEDEBUG", "-all").env("WINEDLLOVERRIDES", "mscoree,mshtml=");
    c
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn run_quiet(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd.output().map_err(|e| format!("{what}: cannot start: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

pub fn setup() -> Result<Platform> {
    if cfg!(windows) {
        println!("setup: native Windows, nothing to do");
        return Ok(Platform { target: None });
    }
    let t0 = std::time::Instant::now();
    install_packages()?;
    add_rust_target()?;
    init_prefix()?;
    install_shim()?;
    clear_auto_debugger()?;
    start_persistent_server()?;
    prove_prefix()?;
    println!("setup: Wine prefix {} ready and proved ({:.1}s)", wine_prefix().display(), t0.elapsed().as_secs_f64());
    Ok(Platform { target: Some(WIN_TARGET) })
}

fn install_packages() -> Result<()> {
    let wanted = [("wine", "wine64"), ("wineserver", "wine64"), ("x86_64-w64-mingw32-gcc", "gcc-mingw-w64-x86-64")];
    let mut missing: Vec<&str> = wanted.iter().filter(|(bin, _)| !have(bin)).map(|(_, pkg)| *pkg).collect();
    missing.dedup();
    if missing.is_empty() {
        return Ok(());
    }
    let pkgs = missing.join(" ");
    if !is_root() {
        return Err(format!(
            "missing packages; run as root:\n  apt-get update\n  DEBIAN_FRONTEND=noninteractive apt-get install -y {pkgs}"
        ));
    }
    println!("setup: installing {pkgs}");
    run_quiet(Command::new("apt-get").arg("update").arg("-q"), "apt-get update")?;
    run_quiet(
        Command::new("apt-get").args(["install", "-y", "-q"]).args(&missing).env("DEBIAN_FRONTEND", "noninteractive"),
        "apt-get install",
    )
}

fn add_rust_target() -> Result<()> {
    let out = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| format!("rustup: {e} (the Windows target needs rustup: rustup target add {WIN_TARGET})"))?;
    if String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == WIN_TARGET) {
        return Ok(());
    }
    println!("setup: adding Rust target {WIN_TARGET}");
    run_quiet(Command::new("rustup").args(["target", "add", WIN_TARGET]), "rustup target add")
}

fn init_prefix() -> Result<()> {
    let prefix = wine_prefix();
    if prefix.join("system.reg").is_file() && prefix.join("drive_c/windows/system32").is_dir() {
        return Ok(());
    }
    println!("setup: creating Wine prefix {}", prefix.display());
    std::fs::create_dir_all(&prefix).map_err(|e| format!("create {}: {e}", prefix.display()))?;
    run_quiet(wine_cmd("wineboot").arg("--init").stdin(Stdio::null()), "wineboot --init")?;
    // wineboot returns before the prefix is written out; wait for the server to finish.
    run_quiet(wine_cmd("wineserver").arg("-w"), "wineserver -w")
}

fn install_shim() -> Result<()> {
    let root = workspace_root();
    let out_dir = root.join("target").join("xtask");
    std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
    let built = out_dir.join("bcryptprimitives.dll");
    run_quiet(
        Command::new("x86_64-w64-mingw32-gcc")
            .args(["-shared", "-O2", "-Wl,--no-insert-timestamp", "-o"])
            .arg(&built)
            .arg(root.join("xtask/shim/bcryptprimitives.c"))
            .arg(root.join("xtask/shim/bcryptprimitives.def"))
            .arg("-ladvapi32"),
        "building the ProcessPrng shim",
    )?;
    let installed = wine_prefix().join("drive_c/windows/system32/bcryptprimitives.dll");
    let new = std::fs::read(&built).map_err(|e| e.to_string())?;
    if std::fs::read(&installed).ok().as_deref() != Some(&new[..]) {
        println!("setup: installing the ProcessPrng shim into {}", installed.display());
        std::fs::write(&installed, &new).map_err(|e| format!("install shim: {e}"))?;
    }
    Ok(())
}

const AEDEBUG: &str = r"HKLM\Software\Microsoft\Windows NT\CurrentVersion\AeDebug";

fn clear_auto_debugger() -> Result<()> {
    for (name, value) in [("Debugger", ""), ("Auto", "0")] {
        run_quiet(
            wine_cmd("wine")
                .args(["reg", "add", AEDEBUG, "/v", name, "/t", "REG_SZ", "/d", value, "/f"])
                .stdin(Stdio::null()),
            "clearing the AeDebug auto-debugger",
        )?;
    }
    Ok(())
}

/// Starting Wine while the caller captures output is slow (Wine's services
/// inherit and hold the pipes); a persistent server started with no pipes,
/// and one process to start the services, makes later starts cheap.
fn start_persistent_server() -> Result<()> {
    wine_cmd("wineserver")
        .arg("-p900")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("wineserver: {e}"))?;
    wine_cmd("wine")
        .args(["cmd", "/c", "exit"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("wine cmd: {e}"))?;
    Ok(())
}

fn prove_prefix() -> Result<()> {
    let root = workspace_root();
    run_quiet(
        Command::new("cargo").current_dir(&root).args(["build", "--quiet", "-p", "wine-probe", "--target", WIN_TARGET]),
        "building the probe executable",
    )?;
    let exe = root.join("target").join(WIN_TARGET).join("debug").join("wine-probe.exe");
    let probe = |mode: &str| -> Result<(Option<i32>, String)> {
        let out = wine_cmd("wine")
            .arg(&exe)
            .arg(mode)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("probe {mode}: cannot start wine: {e}"))?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        Ok((out.status.code(), text))
    };
    let (code, text) = probe("hello")?;
    if code != Some(0) || !text.contains("hello from a Windows process") {
        let hint = if text.contains("bcryptprimitives") || text.contains("c0000135") {
            " (the ProcessPrng shim is not being loaded)"
        } else {
            ""
        };
        return Err(format!("probe hello: expected exit 0 and its greeting, got {code:?}{hint}:\n{text}"));
    }
    for mode in ["null-write", "abort"] {
        let (code, text) = probe(mode)?;
        let debugger = text.contains("Register dump") || text.contains("winedbg") || text.contains("Backtrace:");
        if code == Some(0) || code.is_none() || debugger {
            return Err(format!(
                "probe {mode}: a crash must exit non-zero with no debugger attached, got exit {code:?}{}; \
                 the AeDebug auto-debugger is still active:\n{text}",
                if debugger { " and a winedbg dump" } else { "" }
            ));
        }
    }
    Ok(())
}
