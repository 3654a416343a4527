//! The environment every command works in: the platform tests build and
//! run for, the paths cargo decides, the cargo commands that honour them,
//! the project's Wine prefix, and small process helpers. `cargo xtask
//! setup` (`crate::setup`) prepares the machine; this module only names
//! what is there.
//!
//! Every path into the build comes from `cargo metadata` ([`layout`]), never
//! from an assumed `./target`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::WIN_TARGET;
use crate::json::{self, Json};

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
            metadata_layout(&String::from_utf8_lossy(&out.stdout))
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

/// The paths in `cargo metadata`'s output: its top-level members (a
/// package's own metadata may hold members of the same names).
fn metadata_layout(text: &str) -> Result<Layout> {
    let doc = json::parse(text).map_err(|e| format!("cargo metadata: {e}"))?;
    let field = |key: &str| {
        doc.get(key)
            .and_then(Json::as_str)
            .map(PathBuf::from)
            .ok_or_else(|| format!("cargo metadata: no {key} in its output"))
    };
    Ok(Layout { workspace_root: field("workspace_root")?, target_dir: field("target_directory")? })
}

/// The project's Wine prefix, read by `xtask/wine-run` too.
pub(crate) const PREFIX_VAR: &str = "WINDOWS_THREADPOOL_WINEPREFIX";

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

/// What a process bounded by [`output_within`] printed, and how it ended.
pub(crate) struct Bounded {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` (its output piped here), ending it if it has not exited
/// within `limit`: a watchdog for a hung tool, so that a check fails on
/// time and never passes by it. `Err` says which.
pub(crate) fn output_within(cmd: &mut Command, limit: std::time::Duration) -> Result<Bounded> {
    use std::io::Read;
    let what = format!("{:?}", cmd.get_program());
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {what}: {e}"))?;
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = read(Box::new(child.stdout.take().expect("piped")));
    let stderr = read(Box::new(child.stderr.take().expect("piped")));
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        match child.try_wait().map_err(|e| format!("{what}: {e}"))? {
            Some(status) => break status,
            None if std::time::Instant::now() < deadline => std::thread::sleep(std::time::Duration::from_millis(50)),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what} did not finish within {limit:?}"));
            }
        }
    };
    Ok(Bounded { status, stdout: stdout.join().unwrap_or_default(), stderr: stderr.join().unwrap_or_default() })
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

/// The Windows-gnu target, run under Wine by the runner `.cargo/config.toml` names.
pub(crate) fn wine_platform() -> Platform {
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
pub(crate) fn windows_platform(target: Option<&str>) -> Platform {
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
pub(crate) fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// `cargo xtask exec <program> [args]`: runs a program as it is and exits
/// with its exit code (the whole 32-bit code on Windows). The test runner
/// for the Windows-gnu target on a Windows host (see [`windows_platform`]).
pub fn exec(args: &[String]) -> Result<()> {
    let (program, rest) = args.split_first().ok_or("usage: xtask exec <program> [args...]")?;
    let status = Command::new(program).args(rest).status().map_err(|e| format!("{program}: {e}"))?;
    std::process::exit(status.code().unwrap_or(1))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_paths_are_its_top_level_members_unescaped() {
        let json = r#"{"packages":[{"metadata":{"target_directory":"nested"}}],"target_directory":"C:\\a \"b\"\/c\u00e9\ud83d\ude00","workspace_root":"/w"}"#;
        let l = metadata_layout(json).unwrap();
        assert_eq!(l.target_dir, PathBuf::from("C:\\a \"b\"/cé😀"));
        assert_eq!(l.workspace_root, PathBuf::from("/w"));
        let late = r#"{"workspace_root":"/w","target_directory":"/t","packages":[{"target_directory":"nested"}]}"#;
        assert_eq!(metadata_layout(late).unwrap().target_dir, PathBuf::from("/t"));
        assert!(metadata_layout(r#"{"target_directory":"/t"}"#).unwrap_err().contains("no workspace_root"));
        assert!(metadata_layout(r#"{"workspace_root":"/w","target_directory":"unterminated"#).is_err());
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
