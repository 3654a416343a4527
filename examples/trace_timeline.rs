//! Writes a sample trace: a private pool of two threads runs a work object,
//! a periodic timer and a wait, then the trace is dumped as text
//! (`trace.txt`) and as a Perfetto timeline (`trace.json`).
//!
//! ```sh
//! WINDOWS_THREADPOOL_TRACE='*' cargo run --features trace --example trace_timeline
//! ```
//! (On Linux add `--target x86_64-pc-windows-gnu` after `cargo xtask setup`.)
//! Open `trace.json` at ui.perfetto.dev ("Open trace file").

/// Bounds each wait for a callback: a lost one fails instead of hanging.
#[cfg(windows)]
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

#[cfg(windows)]
fn main() -> std::io::Result<()> {
    use std::time::Duration;
    use windows_threadpool::{CallbackEnviron, Deadline, Event, PeriodicTimer, Pool, Wait, Work, trace};

    if !trace::enabled() {
        eprintln!("build with --features trace and set WINDOWS_THREADPOOL_TRACE='*' to record");
    }
    let pool = Pool::new()?;
    pool.set_max_threads(2)?;
    let env = CallbackEnviron::new().with_pool(&pool);

    let work = Work::new_in(|_| std::thread::sleep(Duration::from_millis(2)), &env)?;
    for _ in 0..4 {
        work.submit();
    }
    work.wait();

    // Six ticks, counted on a channel rather than guessed from a sleep, so a
    // loaded machine still records them all.
    let (tx, ticks) = std::sync::mpsc::sync_channel(16);
    let timer = PeriodicTimer::new_in(
        Duration::from_millis(3),
        move |_| {
            let _ = tx.try_send(());
        },
        &env,
    )?;
    timer.arm(timer.period());
    for _ in 0..6 {
        ticks.recv_timeout(PATIENCE).expect("the periodic timer ticks");
    }
    timer.stop_and_drain();

    let event = Event::auto_reset()?;
    let (tx, activated) = std::sync::mpsc::channel();
    let wait = Wait::new_in(event.try_clone()?.into(), move |_| tx.send(()).unwrap(), &env)?;
    wait.arm(Deadline::NEVER);
    event.set()?;
    activated.recv_timeout(PATIENCE).expect("the wait is activated");
    wait.stop_and_drain();
    drop((work, timer, wait, pool));

    std::fs::write("trace.txt", trace::dump())?;
    std::fs::write("trace.json", trace::dump_chrome_trace())?;
    println!("wrote trace.txt and trace.json");
    Ok(())
}

#[cfg(not(windows))]
fn main() {
    eprintln!("this example runs on Windows (under Wine on Linux)");
}
