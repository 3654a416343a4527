//! `cargo xtask setup`: idempotent preparation of the machine. What the
//! other commands use of the machine once prepared (the platform, paths,
//! cargo commands, the prefix) is `crate::env`.
//!
//! Everywhere the host toolchain gets `rustfmt`, `clippy` and `cargo-nextest`
//! when they are missing. On Windows nothing else is prepared (see
//! [`windows_platform`] for the one thing cargo is told). On Linux the Windows target runs under
//! Wine, and a fresh prefix is not fit for that until three things are fixed
//! (see `shared/wine-facts.md`): Rust's std imports `ProcessPrng` from a DLL
//! Wine 8 lacks (we build a shim), Wine's auto-debugger can turn a crash into
//! exit code 0 (we clear it), and output capture is slow without a persistent
//! wineserver (we start one). Test binaries run through `xtask/wine-run`,
//! whose engine (`xtask/runner`) setup builds and installs into the prefix.
//! Each fix, and the runner, is then proved by a probe executable.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::env::{
    PREFIX_VAR, Platform, Result, cargo, have, is_root, layout, nightly_cargo, run_quiet, toml_string,
    windows_platform, wine_cmd, wine_platform, wine_prefix, wine_run, workspace_root,
};
use crate::{MSVC_TARGET, WIN_TARGET};

/// Prepares this machine to build and run `target` (`None`: the default,
/// which is the Windows-gnu target under Wine on Linux and the host on Windows).
pub fn setup(target: Option<&str>) -> Result<Platform> {
    add_rust_components()?;
    install_nextest()?;
    if cfg!(windows) {
        if let Some(t) = target {
            add_rust_target(t)?;
        }
        return Ok(windows_platform(target));
    }
    if let Some(t) = target.filter(|t| *t != WIN_TARGET) {
        return Err(format!("on Linux only {WIN_TARGET} runs (under Wine); {t} is tested natively on Windows"));
    }
    let t0 = std::time::Instant::now();
    // First: any Wine command below may be the one that starts the server.
    raise_open_file_limit()?;
    install_packages()?;
    install_browser();
    install_http_tools();
    add_rust_target(WIN_TARGET)?;
    // Only checked, never linked: `cargo xtask test` checks the library for MSVC's cfg.
    add_rust_target(MSVC_TARGET)?;
    init_prefix()?;
    install_shim()?;
    install_runner()?;
    clear_auto_debugger()?;
    start_persistent_server()?;
    prove_prefix()?;
    println!("setup: Wine prefix {} ready and proved ({:.1}s)", wine_prefix().display(), t0.elapsed().as_secs_f64());
    Ok(wine_platform())
}

/// Prints what a crate of one's own adds to its `.cargo/config.toml` to
/// build for the Windows-gnu target and run its binaries and tests under
/// Wine in this prefix (`cargo run`/`cargo test --target ..`, from any
/// directory, with any target directory): this checkout's runner and
/// the prefix by absolute path. Nothing on Windows, where they run natively.
pub fn print_user_config() {
    if cfg!(windows) {
        return;
    }
    let linker = find_program("x86_64-w64-mingw32-gcc").unwrap_or_else(|| "x86_64-w64-mingw32-gcc".into());
    let runner = workspace_root().join("xtask/wine-run");
    println!(
        "setup: to run a crate of your own under Wine, add these lines to its .cargo/config.toml \
         (README: \"Running your own program under Wine\"):\n\n{}",
        user_config(&linker, &runner, &wine_prefix())
    );
}

/// The `.cargo/config.toml` lines of [`print_user_config`]. The prefix goes
/// through `[env]`, which cargo also sets for the runner it starts.
fn user_config(linker: &Path, runner: &Path, prefix: &Path) -> String {
    let s = |p: &Path| toml_string(&p.to_string_lossy());
    format!(
        "[target.{WIN_TARGET}]\nlinker = {}\nrunner = [{}]\n\n[env]\n{PREFIX_VAR} = {}\n",
        s(linker),
        s(runner),
        s(prefix)
    )
}

/// `program`'s absolute path, from the first absolute directory of `PATH` holding it.
fn find_program(program: &str) -> Option<PathBuf> {
    let dirs = std::env::split_paths(&std::env::var_os("PATH")?).filter(|d| d.is_absolute()).collect::<Vec<_>>();
    dirs.into_iter().map(|d| d.join(program)).find(|p| p.is_file())
}

/// Runs `cmd` as root: directly when we are root, through `sudo -n` when it
/// needs no password (a CI runner), else not at all.
fn as_root(program: &str, args: &[&str], env: &[(&str, &str)]) -> Option<Command> {
    if is_root() {
        let mut c = Command::new(program);
        c.args(args).envs(env.iter().copied());
        return Some(c);
    }
    let sudo_ok = Command::new("sudo")
        .args(["-n", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    sudo_ok.then(|| {
        let mut c = Command::new("sudo");
        c.args(sudo_args(program, args, env));
        c
    })
}

/// `sudo`'s arguments for `program args` with `env` set: through `env(1)`,
/// since whether sudo itself passes `VAR=value` on depends on sudoers.
fn sudo_args(program: &str, args: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let mut v: Vec<String> = ["-n", "env"].map(String::from).into();
    v.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    v.push(program.into());
    v.extend(args.iter().map(|a| a.to_string()));
    v
}

/// The Debian packages to install, given which programs are on `PATH`.
/// `wine` provides the `wine`, `wineboot` and `wineserver` commands and
/// `wine64` the 64-bit loader; on bookworm neither pulls the other in
/// (`wine` is only a Recommends of `wine64`).
fn missing_packages(have: impl Fn(&str) -> bool) -> Vec<&'static str> {
    let mut missing = Vec::new();
    if !["wine", "wineboot", "wineserver"].iter().all(|b| have(b)) {
        missing.extend(["wine", "wine64"]);
    }
    if !have("x86_64-w64-mingw32-gcc") {
        missing.push("gcc-mingw-w64-x86-64");
    }
    // `llvm-lib`, the archiver of the MSVC target's no-link check (see
    // `run::test`): ring's build script makes a static library for any target.
    if !have("llvm-lib") {
        missing.push("llvm");
    }
    missing
}

fn install_packages() -> Result<()> {
    let missing = missing_packages(have);
    if missing.is_empty() {
        return Ok(());
    }
    let pkgs = missing.join(" ");
    // Waits for another apt (unattended upgrades) rather than failing at once.
    let lock = ["-o", "DPkg::Lock::Timeout=120"];
    let mut install = vec!["install", "-y", "-q"];
    install.extend(lock);
    install.extend(&missing);
    let noninteractive = [("DEBIAN_FRONTEND", "noninteractive")];
    let (Some(mut update), Some(mut install)) = (
        as_root("apt-get", &[&["update", "-q"][..], &lock].concat(), &[]),
        as_root("apt-get", &install, &noninteractive),
    ) else {
        return Err(format!(
            "missing packages; run as root (or with passwordless sudo):\n  apt-get update\n  \
             DEBIAN_FRONTEND=noninteractive apt-get install -y {pkgs}"
        ));
    };
    println!("setup: installing {pkgs}");
    run_quiet(&mut update, "apt-get update")?;
    run_quiet(&mut install, "apt-get install")
}

/// Why the browser check cannot run, when setup tried to install Chromium and could not.
static BROWSER_MISSING: OnceLock<String> = OnceLock::new();
/// Why the HTTP checks cannot run, when setup tried to install curl and wrk and could not.
static HTTP_TOOLS_MISSING: OnceLock<String> = OnceLock::new();

/// Programs that are a Chromium, by the names distributions give it.
const CHROMIUM_NAMES: [&str; 2] = ["chromium", "chromium-browser"];

/// Installs Debian's `chromium` for the HTML timeline's browser check when
/// no Chromium is on `PATH`. Not fatal: without it that one check is
/// skipped, loudly, and the reason kept for [`browser`] to report.
fn install_browser() {
    install_optional("chromium", &CHROMIUM_NAMES, "the HTML timeline's browser check", &BROWSER_MISSING);
}

/// Installs Debian's `curl`, `wrk` and `h2load` (package `nghttp2-client`)
/// for the HTTP examples' checks (`cargo xtask test`: curl, and h2load
/// against examples/https_server; `cargo xtask bench` and `stress`: wrk).
/// Not fatal, as [`install_browser`]; [`http_tool`] reports why one is missing.
fn install_http_tools() {
    for tool in ["curl", "wrk", "h2load"] {
        install_optional(package_of(tool), &[tool], "the HTTP servers' checks", &HTTP_TOOLS_MISSING);
    }
}

/// The Debian package that provides `program`.
fn package_of(program: &str) -> &str {
    if program == "h2load" { "nghttp2-client" } else { program }
}

/// Installs the Debian package `package` unless one of `programs` is on
/// `PATH`; on failure warns, naming `purpose`, and keeps the reason in `missing`.
fn install_optional(package: &str, programs: &[&str], purpose: &str, missing: &OnceLock<String>) {
    if programs.iter().any(|b| have(b)) {
        return;
    }
    let lock = ["-o", "DPkg::Lock::Timeout=120"];
    let install = [&["install", "-y", "-q"][..], &lock, &[package]].concat();
    let why = match (
        as_root("apt-get", &[&["update", "-q"][..], &lock].concat(), &[]),
        as_root("apt-get", &install, &[("DEBIAN_FRONTEND", "noninteractive")]),
    ) {
        (Some(mut update), Some(mut install)) => {
            println!("setup: installing {package} (for {purpose})");
            match run_quiet(&mut update, "apt-get update").and_then(|()| run_quiet(&mut install, "apt-get install")) {
                Ok(()) if programs.iter().any(|b| have(b)) => return,
                Ok(()) => format!("apt-get installed {package} but no {} is on PATH", programs[0]),
                Err(e) => format!("installing {package} failed: {e}"),
            }
        }
        _ => format!(
            "{package} is not installed and setup is neither root nor allowed passwordless sudo \
             (apt-get install {package})"
        ),
    };
    println!("setup: WARNING: {why}; {purpose} will be SKIPPED");
    let _ = missing.set(why);
}

/// `program` (`curl`, `wrk` or `h2load`) if it is on `PATH` (on Windows,
/// curl ships with the system; wrk does not exist there, and h2load only
/// if one installed it); `Err` says why not.
pub fn http_tool(program: &str) -> std::result::Result<PathBuf, String> {
    let found = if cfg!(windows) {
        Command::new(program).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
    } else {
        have(program)
    };
    if found {
        return Ok(PathBuf::from(program));
    }
    Err(HTTP_TOOLS_MISSING
        .get()
        .filter(|why| why.contains(package_of(program)))
        .cloned()
        .unwrap_or_else(|| format!("no {program} on PATH (cargo xtask setup installs it on Debian)")))
}

/// The headless browser the timeline check drives: a Chromium on `PATH`
/// (Linux; setup installs Debian's), or on Windows Chrome or Edge (both
/// Chromium, where Windows installs them). `Err` says why there is none.
pub fn browser() -> std::result::Result<PathBuf, String> {
    if cfg!(windows) {
        let mut candidates: Vec<PathBuf> = Vec::new();
        for var in ["ProgramFiles", "ProgramFiles(x86)", "LOCALAPPDATA"] {
            if let Some(dir) = std::env::var_os(var).map(PathBuf::from) {
                candidates.push(dir.join(r"Google\Chrome\Application\chrome.exe"));
                candidates.push(dir.join(r"Chromium\Application\chrome.exe"));
                candidates.push(dir.join(r"Microsoft\Edge\Application\msedge.exe"));
            }
        }
        return candidates
            .into_iter()
            .find(|c| c.is_file())
            .ok_or_else(|| "no Chrome, Chromium or Edge found under Program Files".to_string());
    }
    if let Some(name) = CHROMIUM_NAMES.iter().find(|b| have(b)) {
        return Ok(PathBuf::from(name));
    }
    Err(BROWSER_MISSING
        .get()
        .cloned()
        .unwrap_or_else(|| "no chromium on PATH (cargo xtask setup installs it on Debian)".to_string()))
}

/// The host toolchain's components `cargo xtask test` uses that `installed`
/// (`rustup component list --installed`) lacks.
fn missing_components(installed: &str) -> Vec<&'static str> {
    ["rustfmt", "clippy"]
        .into_iter()
        .filter(|c| !installed.lines().any(|l| l.trim() == *c || l.trim().starts_with(&format!("{c}-"))))
        .collect()
}

fn add_rust_components() -> Result<()> {
    let out = Command::new("rustup")
        .args(["component", "list", "--installed"])
        .output()
        .map_err(|e| format!("rustup: {e} (the tooling needs rustup: https://rustup.rs)"))?;
    let missing = missing_components(&String::from_utf8_lossy(&out.stdout));
    if missing.is_empty() {
        return Ok(());
    }
    println!("setup: adding Rust components {}", missing.join(" "));
    run_quiet(Command::new("rustup").args(["component", "add"]).args(&missing), "rustup component add")
}

/// Makes Miri ready for `cargo xtask test` (a nightly toolchain, its `miri`
/// component, and Miri's sysroot): `Err` says why it cannot be, and the
/// Miri step is then skipped, loudly. Nothing here is fatal: Miri needs a
/// nightly toolchain, which a machine may not have or want.
pub fn miri() -> std::result::Result<(), String> {
    let works = |args: &[&str]| nightly_cargo(args).output().is_ok_and(|o| o.status.success());
    if !works(&["miri", "--version"]) {
        // A nightly already there is not updated: only the component is added.
        let args: &[&str] = if works(&["--version"]) {
            &["component", "add", "--toolchain", "nightly", "miri", "rust-src"]
        } else {
            &[
                "toolchain",
                "install",
                "nightly",
                "--profile",
                "minimal",
                "--component",
                "miri",
                "--component",
                "rust-src",
            ]
        };
        println!("setup: rustup {}", args.join(" "));
        let out = Command::new("rustup").args(args).output().map_err(|e| format!("rustup: {e}"))?;
        if !out.status.success() || !works(&["miri", "--version"]) {
            return Err(format!("`rustup {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
        }
    }
    run_quiet(&mut nightly_cargo(&["miri", "setup"]), "cargo +nightly miri setup")
}

/// `cargo xtask test` runs the suite under nextest: one process per test, in
/// parallel across binaries (`cargo test` works too, serially per binary).
fn install_nextest() -> Result<()> {
    cargo_install_if_missing("nextest", "cargo-nextest")
}

/// Installs the cargo subcommand `sub` (crate `krate`) from crates.io with
/// `cargo install --locked` unless `cargo <sub> --version` already works.
pub fn cargo_install_if_missing(sub: &str, krate: &str) -> Result<()> {
    let installed = |c: &mut Command| c.stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if installed(cargo().args([sub, "--version"])) {
        return Ok(());
    }
    println!("setup: installing {krate} (cargo install {krate} --locked; a few minutes)");
    let status = cargo()
        .args(["install", krate, "--locked"])
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("cargo install {krate}: {e}"))?;
    if !status.success() {
        return Err(format!("cargo install {krate} --locked failed: {status}"));
    }
    Ok(())
}

fn add_rust_target(target: &str) -> Result<()> {
    let out = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| format!("rustup: {e} (the Windows targets need rustup: rustup target add {target})"))?;
    if String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == target) {
        return Ok(());
    }
    println!("setup: adding Rust target {target}");
    run_quiet(Command::new("rustup").args(["target", "add", target]), "rustup target add")
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

/// Copies `built` to `installed` when their bytes differ, through a
/// temporary file and a rename, so a process running the old copy is
/// never disturbed.
pub(crate) fn install_file(built: &Path, installed: &Path, executable: bool) -> Result<bool> {
    let new = std::fs::read(built).map_err(|e| format!("read {}: {e}", built.display()))?;
    if std::fs::read(installed).ok().as_deref() == Some(&new[..]) {
        return Ok(false);
    }
    let tmp = installed.with_extension("xtask-tmp");
    std::fs::write(&tmp, &new).map_err(|e| format!("write {}: {e}", tmp.display()))?;
    #[cfg(unix)]
    if executable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    }
    let _ = executable;
    std::fs::rename(&tmp, installed).map_err(|e| format!("install {}: {e}", installed.display()))?;
    Ok(true)
}

fn install_shim() -> Result<()> {
    let root = workspace_root();
    let out_dir = layout()?.target_dir.join("xtask");
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("create {}: {e}", out_dir.display()))?;
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
    if install_file(&built, &installed, false)? {
        println!("setup: installed the ProcessPrng shim into {}", installed.display());
    }
    Ok(())
}

/// Builds `xtask/runner` for the host and installs it into the prefix, where
/// `xtask/wine-run` (the cargo runner) finds it.
fn install_runner() -> Result<()> {
    install_runner_into(&wine_prefix())
}

/// Builds `xtask/runner` and installs it into `prefix` as `wine-runner`.
pub(crate) fn install_runner_into(prefix: &Path) -> Result<()> {
    run_quiet(cargo().args(["build", "--quiet", "-p", "wine-runner"]), "building the Wine runner")?;
    let built = Platform::host().bin_dir("debug")?.join("wine-runner");
    let installed = prefix.join("wine-runner");
    if install_file(&built, &installed, true)? {
        println!("setup: installed the Wine runner into {}", installed.display());
    }
    Ok(())
}

pub(crate) const AEDEBUG: &str = r"HKLM\Software\Microsoft\Windows NT\CurrentVersion\AeDebug";

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

/// Raises this process's soft limit of open files to its hard limit: the
/// idle-connection check (`crate::idle`) holds thousands of sockets open
/// here and in the Wine server. Limits pass to children across `fork` and
/// `execve` (setrlimit(2)), so a Wine server started from here keeps it: a
/// Wine process raises its own soft limit, the server never does. Returns
/// the limit now in force.
#[cfg(target_os = "linux")]
pub fn raise_open_file_limit() -> Result<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(format!("getrlimit(RLIMIT_NOFILE): {}", std::io::Error::last_os_error()));
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        // SAFETY: `raised` is a valid rlimit; raising the soft limit up to the hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(format!("setrlimit(RLIMIT_NOFILE): {}", std::io::Error::last_os_error()));
        }
        limit = raised;
    }
    Ok(limit.rlim_cur)
}

/// Elsewhere the limit is left as it is (Windows has no such limit on sockets).
#[cfg(not(target_os = "linux"))]
pub fn raise_open_file_limit() -> Result<u64> {
    Ok(u64::MAX)
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

/// Runs the probes through the cargo runner itself (`xtask/wine-run`), so the
/// proof covers the runner and the prefix together.
fn prove_prefix() -> Result<()> {
    prove_with(wine_run)
}

/// The probes of [`prove_prefix`], each run as `runner()` + the probe exe + its mode.
pub(crate) fn prove_with(runner: impl Fn() -> Command) -> Result<()> {
    let platform = wine_platform();
    run_quiet(
        cargo().args(["build", "--quiet", "-p", "wine-probe"]).args(platform.cargo_args()),
        "building the probe executable",
    )?;
    let exe = platform.bin_dir("debug")?.join("wine-probe.exe");
    let probe = |mode: &str| -> Result<(Option<i32>, String)> {
        let out = runner()
            .arg(&exe)
            .arg(mode)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("probe {mode}: cannot start the runner: {e}"))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What this process's children (the Wine server among them) inherit.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_open_file_limit_is_raised_to_the_hard_one() {
        let soft = raise_open_file_limit().unwrap();
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
        let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
        let numbers: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
        assert_eq!(numbers, [soft.to_string(), soft.to_string()], "{line}");
    }

    #[test]
    fn sudo_sets_the_environment_through_env() {
        assert_eq!(
            sudo_args("apt-get", &["install", "-y"], &[("DEBIAN_FRONTEND", "noninteractive")]),
            ["-n", "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y"]
        );
    }

    #[test]
    fn wine_is_installed_with_its_loader_and_only_when_missing() {
        assert_eq!(missing_packages(|b| b != "wineboot"), ["wine", "wine64"]);
        assert_eq!(missing_packages(|b| b != "x86_64-w64-mingw32-gcc"), ["gcc-mingw-w64-x86-64"]);
        assert!(missing_packages(|_| true).is_empty());
    }

    #[test]
    fn missing_components_are_found_by_name() {
        let listed =
            "cargo-x86_64-unknown-linux-gnu\nclippy-x86_64-unknown-linux-gnu\nrustc-x86_64-unknown-linux-gnu\n";
        assert_eq!(missing_components(listed), ["rustfmt"]);
        assert_eq!(missing_components("rustfmt-x86_64-pc-windows-msvc\nclippy\n"), Vec::<&str>::new());
        assert_eq!(missing_components(""), ["rustfmt", "clippy"]);
    }

    #[test]
    fn the_user_config_names_every_path_as_a_toml_string() {
        assert_eq!(
            user_config(Path::new("/usr/bin/gcc"), Path::new("/src/a \"b\"/xtask/wine-run"), Path::new("/h/.cache/p")),
            "[target.x86_64-pc-windows-gnu]\n\
             linker = \"/usr/bin/gcc\"\n\
             runner = [\"/src/a \\\"b\\\"/xtask/wine-run\"]\n\
             \n\
             [env]\n\
             WINDOWS_THREADPOOL_WINEPREFIX = \"/h/.cache/p\"\n"
        );
    }
}
