//! A short tour of the crate: `cargo xtask demo` runs it.

#[cfg(windows)]
fn main() -> std::io::Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};
    use windows_threadpool::{CallbackEnviron, Deadline, Event, PeriodicTimer, Pool, Wait, Work};

    fn thread_id() -> u32 {
        // SAFETY: GetCurrentThreadId has no preconditions.
        unsafe { windows_sys::Win32::System::Threading::GetCurrentThreadId() }
    }

    println!("tour: main thread {}", thread_id());

    // Work on a private pool of at most two threads.
    let pool = Pool::new()?;
    pool.set_max_threads(2)?;
    let env = CallbackEnviron::new().with_pool(&pool);
    let ran: Arc<Mutex<Vec<u32>>> = Arc::default();
    let log = Arc::clone(&ran);
    let work = Work::new_in(move |_| log.lock().unwrap().push(thread_id()), &env)?;
    for _ in 0..6 {
        work.submit();
    }
    work.wait();
    let threads = ran.lock().unwrap().clone();
    println!("work: 6 submissions ran on private-pool threads {threads:?}");

    // A periodic timer on the same pool: ticks every 5 ms until its fifth
    // tick stops it. (Ticks may overlap when a callback outlasts the period.)
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = Arc::clone(&ticks);
    let (tx, rx) = std::sync::mpsc::channel();
    let periodic = PeriodicTimer::new_in(
        Duration::from_millis(5),
        move |tick| {
            if t.fetch_add(1, Ordering::SeqCst) + 1 == 5 {
                tick.disarm();
                let _ = tx.send(Instant::now());
            }
        },
        &env,
    )?;
    let started = Instant::now();
    periodic.arm(periodic.period());
    let fifth = rx.recv_timeout(Duration::from_secs(10)).expect("the timer ticks");
    periodic.stop_and_drain(); // nothing running or queued after this
    println!(
        "timer: period {:?}, fifth tick after {:.1} ms, {} ticks in all, running: {}",
        periodic.period(),
        (fifth - started).as_secs_f64() * 1e3,
        ticks.load(Ordering::SeqCst),
        periodic.is_armed()
    );

    // An event-driven wait: the callback runs when the event is signalled
    // and re-arms itself for the next signal (each activation consumes the
    // arming). The wait owns its handle; we keep a clone to signal it.
    let event = Event::auto_reset()?;
    let (tx, rx) = std::sync::mpsc::channel();
    let wait = Wait::new(event.try_clone()?.into(), move |act| {
        let rearmed = act.rearm(Deadline::NEVER);
        let _ = tx.send((act.result(), thread_id(), rearmed));
    })?;
    wait.arm(Deadline::NEVER);
    let patience = Duration::from_secs(10);
    for _ in 0..3 {
        event.set()?;
        let (result, thread, rearmed) = rx.recv_timeout(patience).expect("wait callback");
        println!("wait: {result:?} on pool thread {thread}, re-armed: {rearmed}");
    }
    wait.arm(Duration::from_millis(10)); // replaces the arming: a timeout this time
    let (result, _, _) = rx.recv_timeout(patience).expect("wait callback");
    println!("wait: {result:?} after 10 ms with no signal");
    drop(wait); // refuses re-arms and disarms, drains, closes the wait, then the event handle

    io_copy()?;
    tasks();
    Ok(())
}

/// One-off tasks: a spawned task with a result, a scope borrowing the
/// stack, and a for_each over a range.
#[cfg(windows)]
fn tasks() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let h = windows_threadpool::task::spawn_blocking(|| (1..=10u64).product::<u64>());
    println!("spawn: 10! = {}", h.join().unwrap());

    let words = ["pool", "scope", "borrow"];
    let mut lengths = [0usize; 3];
    windows_threadpool::scope(|s| {
        for (w, len) in words.iter().zip(lengths.iter_mut()) {
            s.spawn(move || *len = w.len());
        }
    });
    println!("scope: lengths of {words:?} = {lengths:?}");

    let sum = AtomicUsize::new(0);
    windows_threadpool::for_each(0..1_000_000usize, |i| {
        sum.fetch_add(i & 1, Ordering::Relaxed);
    });
    println!("for_each: {} odd numbers below 1,000,000", sum.into_inner());
}

/// Copies a file through the pool: each chunk's read completion issues the
/// write of that chunk, at the same offset, on the destination.
#[cfg(windows)]
fn io_copy() -> std::io::Result<()> {
    use std::fs::OpenOptions;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use windows_threadpool::io::{self, Io, IoCompletion};

    /// A chunk of the file: where it belongs, and its bytes.
    struct Chunk {
        offset: u64,
        buf: Vec<u8>,
        len: usize,
    }
    impl AsMut<[u8]> for Chunk {
        fn as_mut(&mut self) -> &mut [u8] {
            &mut self.buf
        }
    }
    impl AsRef<[u8]> for Chunk {
        fn as_ref(&self) -> &[u8] {
            &self.buf[..self.len]
        }
    }

    const CHUNK: usize = 64 * 1024;
    let dir = std::env::temp_dir();
    let (from, to) =
        (dir.join(format!("tour-src-{}", std::process::id())), dir.join(format!("tour-dst-{}", std::process::id())));
    let contents: Vec<u8> = (0..1_000_003u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&from, &contents)?;

    let written = Arc::new(AtomicUsize::new(0));
    let w = Arc::clone(&written);
    let dst = Arc::new(Io::new(
        io::open_file(&to, OpenOptions::new().write(true).create(true).truncate(true))?,
        move |c: &IoCompletion| {
            let n = c.result().unwrap_or_else(|e| panic!("write failed: {e}"));
            w.fetch_add(n, Ordering::Relaxed);
        },
    )?);
    let d = Arc::clone(&dst);
    let src = Io::new(io::open_file(&from, OpenOptions::new().read(true))?, move |c: &IoCompletion| {
        let n = c.result().unwrap_or_else(|e| panic!("read failed: {e}"));
        let mut chunk = c.claim::<Chunk>().expect("reads carry a Chunk").into_payload();
        chunk.len = n;
        d.write_at(chunk.offset, chunk).expect("issue the write");
    })?;
    let chunks = contents.len().div_ceil(CHUNK);
    for i in 0..chunks {
        let offset = (i * CHUNK) as u64;
        src.read_at(offset, Chunk { offset, buf: vec![0; CHUNK], len: 0 })?;
    }
    src.wait(); // every read completed, so every write was issued
    dst.wait();
    let same = std::fs::read(&to)? == contents;
    println!(
        "io: copied {} bytes in {chunks} chunks through the pool; copy identical: {same}",
        written.load(Ordering::Relaxed)
    );
    drop((src, dst));
    std::fs::remove_file(&from)?;
    std::fs::remove_file(&to)?;
    assert!(same);
    Ok(())
}

#[cfg(not(windows))]
fn main() {
    eprintln!("the tour runs on Windows; on Linux use `cargo xtask demo`, which runs it under Wine");
}
