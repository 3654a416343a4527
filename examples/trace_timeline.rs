//! Writes a sample trace: a private pool of two threads runs a work object,
//! a periodic timer and a wait, then the trace is dumped as text
//! (`trace.txt`) and as a Perfetto timeline (`trace.json`).
//!
//! ```sh
//! WINDOWS_THREADPOOL_TRACE='*' cargo run --features trace --example trace_timeline
//! ```
//! (On Linux add `--target x86_64-pc-windows-gnu` after `cargo xtask setup`.)
//! Open `trace.json` at ui.perfetto.dev ("Open trace file").

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

    let timer = PeriodicTimer::new_in(Duration::from_millis(3), |_| {}, &env)?;
    timer.arm(timer.period());
    std::thread::sleep(Duration::from_millis(20));
    timer.stop_and_drain();

    let event = Event::auto_reset()?;
    let wait = Wait::new_in(event.try_clone()?.into(), |_| {}, &env)?;
    wait.arm(Deadline::NEVER);
    event.set()?;
    std::thread::sleep(Duration::from_millis(5));
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
