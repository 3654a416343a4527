//! `cargo xtask setup`: idempotent preparation of the machine, and the
//! paths and cargo commands every other command uses.
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
//!
//! Every path into the build comes from `cargo metadata` ([`layout`]), never
//! from an assumed `./target`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::{MSVC_TARGET, WIN_TARGET};

pub type Result<T> = std::result::Result<T, String>;

/// How tests build and run on this machine.
#[derive(Debug)]
pub struct Platform {
    /// The target the library's tests build for: the Windows-gnu target under
    /// Wine on Linux; on Windows the one `--target` named, or the host (`None`).
    pub target: Option<String>,
    /// Arguments every cargo command for `target` takes (`--target`, and on
    /// Windows the runner override).
    cargo_args: Vec<String>,
    /// Variables every cargo command for `target` sets (what its runner reads).
    pub(crate) env: Vec<(OsString, OsString)>,
}

impl Platform {
    /// Whether this platform's exes run under Wine (a Windows target, off Windows).
    pub fn under_wine(&self) -> bool {
        self.target.is_some() && !cfg!(windows)
    }

    /// Cargo arguments for building and running on this platform's target.
    pub fn cargo_args(&self) -> &[String] {
        &self.cargo_args
    }

    /// `cargo <args>` for this platform's target: its arguments go before any
    /// `--` (which starts the tool's own arguments). Under Wine, the runner
    /// logs every retry it makes to [`runner_log`].
    pub fn cargo(&self, args: &[&str]) -> Command {
        let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        let mut c = cargo();
        c.args(&args[..split]).args(self.cargo_args()).args(&args[split..]);
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        if self.target.as_deref() == Some(WIN_TARGET)
            && !cfg!(windows)
            && let Ok(log) = runner_log()
        {
            c.env(RUNNER_LOG_VAR, log);
        }
        c
    }

    /// The host itself, with no `--target`.
    pub fn host() -> Platform {
        Platform { target: None, cargo_args: Vec::new(), env: Vec::new() }
    }

    /// Where `cargo doc` puts this target's documentation.
    pub fn doc_dir(&self) -> Result<PathBuf> {
        let dir = layout()?.target_dir.clone();
        Ok(match &self.target {
            Some(t) => dir.join(t).join("doc"),
            None => dir.join("doc"),
        })
    }

    /// Where cargo puts this target's binaries for `profile` (`debug`, `release`).
    pub fn bin_dir(&self, profile: &str) -> Result<PathBuf> {
        let dir = layout()?.target_dir.clone();
        Ok(match &self.target {
            Some(t) => dir.join(t).join(profile),
            None => dir.join(profile),
        })
    }
}

/// A `cargo` command: the cargo that runs this xtask (`CARGO`), in the workspace root.
pub fn cargo() -> Command {
    let mut c = bare_cargo();
    c.current_dir(workspace_root());
    c
}

/// Every cargo the xtask starts runs in another directory than the one it
/// was invoked from, so a relative target directory is made absolute
/// against the invocation directory first, as the outer cargo resolved it.
/// Under Wine it also names the prefix, so `xtask/wine-run` (which resolves
/// the default from `HOME` as a shell does) uses the one setup prepared.
fn bare_cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.envs(absolute_target_dirs(|v| std::env::var_os(v), invocation_dir()));
    if !cfg!(windows) {
        c.env(PREFIX_VAR, wine_prefix());
    }
    c
}

/// The variables naming cargo's target directory that `var` sets, each
/// resolved against `cwd` (an absolute value stays as it is).
fn absolute_target_dirs(var: impl Fn(&str) -> Option<OsString>, cwd: &Path) -> Vec<(&'static str, PathBuf)> {
    ["CARGO_TARGET_DIR", "CARGO_BUILD_TARGET_DIR"]
        .into_iter()
        .filter_map(|name| var(name).filter(|d| !d.is_empty()).map(|d| (name, cwd.join(d))))
        .collect()
}

/// The directory `cargo xtask` was invoked from (`cargo run` keeps the
/// caller's), pinned by `main` before anything else runs.
pub fn invocation_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| std::env::current_dir().unwrap_or_default())
}

/// Paths cargo decides, from `cargo metadata`: honours `CARGO_TARGET_DIR`,
/// `build.target-dir` and every other way cargo is told where to build.
#[derive(Debug)]
pub struct Layout {
    pub workspace_root: PathBuf,
    pub target_dir: PathBuf,
}

pub fn layout() -> Result<&'static Layout> {
    static LAYOUT: OnceLock<std::result::Result<Layout, String>> = OnceLock::new();
    LAYOUT
        .get_or_init(|| {
            let manifest = manifest_root().join("Cargo.toml");
            let out = bare_cargo()
                .current_dir(manifest_root())
                .args(["metadata", "--format-version", "1", "--no-deps", "--manifest-path"])
                .arg(&manifest)
                .stderr(Stdio::inherit())
                .output()
                .map_err(|e| format!("cargo metadata: {e}"))?;
            if !out.status.success() {
                return Err(format!("cargo metadata failed: {}", out.status));
            }
            let text = String::from_utf8_lossy(&out.stdout);
            let field = |key: &str| {
                json_string_field(&text, key)
                    .map(PathBuf::from)
                    .ok_or_else(|| format!("cargo metadata: no {key} in its output"))
            };
            Ok(Layout { workspace_root: field("workspace_root")?, target_dir: field("target_directory")? })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Read by `xtask/runner`: the file it appends a line to for every retry.
const RUNNER_LOG_VAR: &str = "WINDOWS_THREADPOOL_RUNNER_LOG";

/// Where the Wine runner logs its retries during xtask commands.
pub fn runner_log() -> Result<PathBuf> {
    let dir = layout()?.target_dir.join("xtask");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    Ok(dir.join("wine-runner-retries.log"))
}

/// The workspace root (cargo's, falling back to this crate's parent directory
/// when `cargo metadata` cannot run; every later step then reports that error).
pub fn workspace_root() -> PathBuf {
    match layout() {
        Ok(l) => l.workspace_root.clone(),
        Err(_) => manifest_root().to_path_buf(),
    }
}

/// The workspace root as this crate was built in it.
fn manifest_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace")
}

/// The value of the last `"key":"..."` string member in `json` (compact JSON,
/// as cargo prints it), unescaped. The top-level members of `cargo metadata`
/// follow its package list, so the last occurrence is the top-level one.
pub fn json_string_field(json: &str, key: &str) -> Option<String> {
    let pattern = format!("\"{key}\":\"");
    let start = json.rfind(&pattern)? + pattern.len();
    let mut out = String::new();
    let mut chars = json[start..].chars();
    loop {
        match chars.next()? {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'u' => {
                    let mut unit = || u32::from_str_radix(&chars.by_ref().take(4).collect::<String>(), 16).ok();
                    let hi = unit()?;
                    let c = if (0xD800..0xDC00).contains(&hi) {
                        if chars.next()? != '\\' || chars.next()? != 'u' {
                            return None;
                        }
                        let lo = u32::from_str_radix(&chars.by_ref().take(4).collect::<String>(), 16).ok()?;
                        char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo.checked_sub(0xDC00)?))?
                    } else {
                        char::from_u32(hi)?
                    };
                    out.push(c);
                }
                c => out.push(c),
            },
            c => out.push(c),
        }
    }
}

/// The project's Wine prefix, read by `xtask/wine-run` too.
const PREFIX_VAR: &str = "WINDOWS_THREADPOOL_WINEPREFIX";

pub fn wine_prefix() -> PathBuf {
    if let Some(p) = std::env::var_os(PREFIX_VAR) {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache"));
    cache.join("windows-threadpool").join("wineprefix")
}

/// `xtask/wine-run`, the cargo runner, with the prefix setup prepared.
pub fn wine_run() -> Command {
    let mut c = Command::new(workspace_root().join("xtask/wine-run"));
    c.env(PREFIX_VAR, wine_prefix());
    c
}

/// A `Command` for a Wine program in the project's prefix, with Wine's own logging off.
pub fn wine_cmd(program: &str) -> Command {
    let mut c = Command::new(program);
    c.env("WINEPREFIX", wine_prefix()).env("WINEDEBUG", "-all").env("WINEDLLOVERRIDES", "mscoree,mshtml=");
    c
}

pub(crate) fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub(crate) fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

pub(crate) fn run_quiet(cmd: &mut Command, what: &str) -> Result<()> {
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

/// The Windows-gnu target, run under Wine by the runner `.cargo/config.toml` names.
fn wine_platform() -> Platform {
    Platform {
        target: Some(WIN_TARGET.into()),
        cargo_args: vec!["--target".into(), WIN_TARGET.into()],
        env: Vec::new(),
    }
}

/// On Windows nothing is prepared beyond the Rust target named: tests run
/// natively, for the host or for that target. `.cargo/config.toml` names
/// the Wine runner for the Windows-gnu target, and cargo cannot unset a
/// runner (an empty one is an error), so every cargo command for the target
/// replaces it with this program's own `exec` subcommand, which runs the
/// test binary as it is. The `--config` value is an array, as in the file,
/// so it replaces the file's entry rather than being merged with it, and a
/// path with spaces stays one argument. The host must be MSVC: on a gnu host
/// cargo would run `cargo xtask` itself through the Wine runner.
fn windows_platform(target: Option<&str>) -> Platform {
    let mut cargo_args = Vec::new();
    if let Some(t) = target {
        cargo_args.extend(["--target".to_string(), t.to_string()]);
    }
    let me = std::env::current_exe().unwrap_or_else(|_| "xtask".into());
    cargo_args.extend(["--config".to_string(), runner_override(&me.to_string_lossy())]);
    println!("setup: native Windows; testing {}", target.unwrap_or("the host target"));
    Platform { target: target.map(str::to_string), cargo_args, env: Vec::new() }
}

/// `target.<gnu>.runner=["<exe>", "exec"]`.
fn runner_override(exe: &str) -> String {
    format!("target.{WIN_TARGET}.runner=[{}, \"exec\"]", toml_string(exe))
}

/// The Windows-gnu target run through `runner` (a program taking the exe
/// and its arguments) instead of the one `.cargo/config.toml` names.
pub fn wine_platform_with_runner(runner: &Path) -> Platform {
    let mut p = wine_platform();
    let runner = format!("target.{WIN_TARGET}.runner=[{}]", toml_string(&runner.to_string_lossy()));
    p.cargo_args.extend(["--config".to_string(), runner]);
    p
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
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

/// `cargo xtask exec <program> [args]`: runs a program as it is and exits
/// with its exit code (the whole 32-bit code on Windows). The test runner
/// for the Windows-gnu target on a Windows host (see [`windows_platform`]).
pub fn exec(args: &[String]) -> Result<()> {
    let (program, rest) = args.split_first().ok_or("usage: xtask exec <program> [args...]")?;
    let status = Command::new(program).args(rest).status().map_err(|e| format!("{program}: {e}"))?;
    std::process::exit(status.code().unwrap_or(1))
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

/// Installs Debian's `curl` and `wrk` for the HTTP example's checks
/// (`cargo xtask test`: curl; `cargo xtask bench` and `stress`: wrk). Not
/// fatal, as [`install_browser`]; [`http_tool`] reports why one is missing.
fn install_http_tools() {
    for tool in ["curl", "wrk"] {
        install_optional(tool, &[tool], "the HTTP server's checks", &HTTP_TOOLS_MISSING);
    }
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

/// `program` (`curl` or `wrk`) if it is on `PATH` (on Windows, curl ships
/// with the system; wrk does not exist there); `Err` says why not.
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
        .filter(|why| why.contains(program))
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

/// `cargo +nightly <args>`, through rustup's proxy (not the `CARGO` that
/// runs this xtask, which is the stable toolchain's own binary), in the
/// workspace root.
pub fn nightly_cargo(args: &[&str]) -> Command {
    let mut c = Command::new("cargo");
    c.arg("+nightly").args(args).current_dir(workspace_root());
    // Set by the outer `cargo run`/rustup for the stable toolchain.
    for var in ["RUSTUP_TOOLCHAIN", "RUSTC", "RUSTDOC", "CARGO"] {
        c.env_remove(var);
    }
    c.envs(absolute_target_dirs(|v| std::env::var_os(v), invocation_dir()));
    c
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
    fn json_string_fields_are_unescaped_and_the_last_one_wins() {
        let json = r#"{"packages":[{"metadata":{"target_directory":"nested"}}],"target_directory":"C:\\a \"b\"\/c\u00e9\ud83d\ude00","workspace_root":"/w"}"#;
        assert_eq!(json_string_field(json, "target_directory").as_deref(), Some("C:\\a \"b\"/cé😀"));
        assert_eq!(json_string_field(json, "workspace_root").as_deref(), Some("/w"));
        assert_eq!(json_string_field(json, "missing"), None);
        assert_eq!(json_string_field(r#"{"k":"unterminated"#, "k"), None);
    }

    #[test]
    fn a_relative_target_dir_is_resolved_against_the_invocation_dir() {
        let env = |name: &str| match name {
            "CARGO_TARGET_DIR" => Some(OsString::from("reltd")),
            "CARGO_BUILD_TARGET_DIR" => Some(OsString::from("/abs/t")),
            _ => None,
        };
        assert_eq!(
            absolute_target_dirs(env, Path::new("/caller")),
            [("CARGO_TARGET_DIR", PathBuf::from("/caller/reltd")), ("CARGO_BUILD_TARGET_DIR", PathBuf::from("/abs/t"))]
        );
        assert!(absolute_target_dirs(|_| Some(OsString::new()), Path::new("/caller")).is_empty());
        assert!(absolute_target_dirs(|_| None, Path::new("/caller")).is_empty());
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

    #[test]
    fn another_runner_replaces_the_configured_one() {
        let p = wine_platform_with_runner(Path::new("/src/a \"b\"/xtask/wine10-run"));
        assert_eq!(
            p.cargo_args(),
            [
                "--target",
                WIN_TARGET,
                "--config",
                r#"target.x86_64-pc-windows-gnu.runner=["/src/a \"b\"/xtask/wine10-run"]"#
            ]
        );
    }

    #[test]
    fn the_windows_runner_override_is_one_toml_array() {
        assert_eq!(
            runner_override(r#"C:\Users\A "B"\xtask.exe"#),
            r#"target.x86_64-pc-windows-gnu.runner=["C:\\Users\\A \"B\"\\xtask.exe", "exec"]"#
        );
    }
}
