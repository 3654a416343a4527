//! The small service of `examples/service.rs`, written with `async`: a
//! health check on an interval, a child process whose exit is awaited (its
//! status still read through the `Child`), file reads with owned buffers,
//! and CPU fan-out. Every future is completed by the pool, and every task
//! runs on it: no runtime thread is started.
//!
//! `cargo run --example async_service` (under Wine on Linux). The health
//! check runs every 30 s in a real service; here every 50 ms, three times.
#[cfg(windows)]
fn main() -> std::io::Result<()> {
    use std::fs::OpenOptions;
    use std::process::Command;
    use std::time::Duration;

    use windows_threadpool::io::{self, AsyncIo};
    use windows_threadpool::{task, time, wait};

    if std::env::args().any(|a| a == "--child") {
        std::thread::sleep(Duration::from_millis(100));
        std::process::exit(3);
    }

    let path = std::env::temp_dir().join(format!("wtp-async-service-{}", std::process::id()));
    std::fs::write(&path, vec![7u8; 64 * 1024])?;

    let result = task::block_on(async {
        // The health check: its own task, ticking on schedule.
        let health = task::spawn(async {
            let mut every = time::interval(Duration::from_millis(50));
            let mut checks = 0;
            for _ in 0..3 {
                every.tick().await;
                checks += 1; // a real check would probe a dependency
            }
            checks
        });

        // CPU fan-out: closure tasks on pool threads, awaited without blocking.
        let parts: Vec<_> =
            (0..8u64).map(|c| task::spawn_blocking(move || (c * 1000..(c + 1) * 1000).sum::<u64>())).collect();

        // A child whose exit we await, bounded by a timeout.
        let mut child = Command::new(std::env::current_exe()?).arg("--child").spawn()?;
        let status = time::timeout(Duration::from_secs(30), wait::process_exit(&mut child)).await??;
        assert_eq!(status.code(), Some(3));
        assert_eq!(child.wait()?.code(), Some(3)); // still ours

        // Sixteen reads in flight at once; each buffer comes back with its result.
        let file = AsyncIo::new(io::open_file(&path, OpenOptions::new().read(true))?)?;
        let reads = futures::future::join_all((0..16u64).map(|i| file.read_at(vec![0u8; 4096], i * 4096))).await;
        let mut read = 0;
        for (n, buf) in reads {
            let n = n?;
            assert!(buf[..n].iter().all(|&b| b == 7));
            read += n;
        }
        assert_eq!(read, 64 * 1024);

        let mut sum = 0;
        for p in parts {
            sum += p.await.expect("a fan-out task panicked");
        }
        assert_eq!(sum, (0..8000u64).sum::<u64>());
        let checks = health.await.expect("the health check panicked");
        assert_eq!(checks, 3);
        println!("async service: {checks} health checks, child exited with 3, read {read} bytes, fan-out sum {sum}");
        Ok::<(), std::io::Error>(())
    });
    std::fs::remove_file(&path)?;
    result
}

#[cfg(not(windows))]
fn main() {
    eprintln!("this example runs on Windows (or under Wine: `cargo xtask demo`)");
}
