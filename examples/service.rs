//! A small service on the pool, as a new user would write it: a health
//! check on a fixed cadence, a wait on a child process whose exit status is
//! still read afterwards, overlapped file reads, and CPU fan-out. Everything
//! runs on the process default pool; the struct owns every object, and
//! dropping it drains each one (none is cancelled).
//!
//! `cargo run --example service` (under Wine on Linux). The health check
//! runs every 30 s in a real service; here the period is 50 ms so the
//! example ends quickly.
#[cfg(windows)]
fn main() -> std::io::Result<()> {
    use std::fs::OpenOptions;
    use std::process::{Child, Command};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    use windows_threadpool::io::{self, Io, IoCompletion};
    use windows_threadpool::{Deadline, PeriodicTimer, Wait, WaitResult, WaitableHandle, Work};

    if std::env::args().any(|a| a == "--child") {
        std::thread::sleep(Duration::from_millis(100));
        std::process::exit(3);
    }

    struct Service {
        health: PeriodicTimer,
        child_exit: Wait,
        file: Io,
        fan_out: Work,
    }

    let checks = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&checks);
    let (check_tx, check_rx) = mpsc::channel();
    let health = PeriodicTimer::new(Duration::from_millis(50), move |_| {
        c.fetch_add(1, Ordering::Relaxed); // a real check would probe a dependency
        let _ = check_tx.send(());
    })?;
    health.arm(Duration::ZERO); // first check now, then every period

    let mut child: Child = Command::new(std::env::current_exe()?).arg("--child").spawn()?;
    let (exit_tx, exit_rx) = mpsc::channel();
    let child_exit = Wait::new(WaitableHandle::from_child(&child)?, move |act| {
        exit_tx.send(act.result()).unwrap();
    })?;
    child_exit.arm(Deadline::NEVER);

    let path = std::env::temp_dir().join(format!("wtp-service-{}", std::process::id()));
    std::fs::write(&path, vec![7u8; 64 * 1024])?;
    let (read_tx, read_rx) = mpsc::channel();
    let file = Io::new(io::open_file(&path, OpenOptions::new().read(true))?, move |c: &IoCompletion| {
        read_tx.send(c.result()).unwrap();
    })?;
    for i in 0..16 {
        file.read_at(i * 4096, vec![0u8; 4096])?;
    }

    let sum = Arc::new(AtomicU64::new(0));
    let s = Arc::clone(&sum);
    let next = Arc::new(AtomicU64::new(0));
    let n = Arc::clone(&next);
    let fan_out = Work::new(move |_| {
        let chunk = n.fetch_add(1, Ordering::Relaxed);
        let part: u64 = (chunk * 1000..(chunk + 1) * 1000).sum();
        s.fetch_add(part, Ordering::Relaxed);
    })?;
    for _ in 0..8 {
        fan_out.submit();
    }

    let service = Service { health, child_exit, file, fan_out };

    service.fan_out.wait();
    assert_eq!(sum.load(Ordering::Relaxed), (0..8000u64).sum::<u64>());
    let read: usize = (0..16).map(|_| read_rx.recv().unwrap()).sum::<std::io::Result<usize>>()?;
    assert_eq!(read, 64 * 1024);
    service.file.wait(); // every completion delivered and its callback returned
    assert_eq!(service.file.outstanding(), 0);
    assert_eq!(exit_rx.recv().unwrap(), WaitResult::Signalled);
    service.child_exit.wait(); // its callback has returned
    // The wait did not take the child: its exit status is still ours.
    assert_eq!(child.wait()?.code(), Some(3));
    for _ in 0..3 {
        check_rx.recv().unwrap(); // three health checks have run
    }
    service.health.stop_and_drain();
    drop(service); // each object drains, closes and frees its callback
    std::fs::remove_file(&path)?;
    println!(
        "service: {} health checks, child exit code 3, {read} bytes read, fan-out sum {}",
        checks.load(Ordering::Relaxed),
        sum.load(Ordering::Relaxed)
    );
    Ok(())
}

#[cfg(not(windows))]
fn main() {
    eprintln!(
        "this example runs on Windows; on Linux use `cargo run --example service --target x86_64-pc-windows-gnu`"
    );
}
