//! A short tour of the crate: `cargo xtask demo` runs it.

#[cfg(windows)]
fn main() -> std::io::Result<()> {
    use std::sync::Mutex;
    use std::sync::Arc;
    use windows_threadpool::{CallbackEnviron, ThreadpoolPool, ThreadpoolWork};

    fn thread_id() -> u32 {
        // SAFETY: GetCurrentThreadId has no preconditions.
        unsafe { windows_sys::Win32::System::Threading::GetCurrentThreadId() }
    }

    println!("tour: main thread {}", thread_id());

    // Work on a private pool of at most two threads.
    let pool = ThreadpoolPool::new()?;
    pool.set_max_threads(2)?;
    let mut env = CallbackEnviron::new();
    env.set_pool(&pool);
    let ran: Arc<Mutex<Vec<u32>>> = Arc::default();
    let log = Arc::clone(&ran);
    let work = ThreadpoolWork::new(move || log.lock().unwrap().push(thread_id()), Some(&mut env))?;
    for _ in 0..6 {
        work.submit();
    }
    work.wait();
    let threads = ran.lock().unwrap().clone();
    println!("work: 6 submissions ran on private-pool threads {threads:?}");
    Ok(())
}

#[cfg(not(windows))]
fn main() {
    eprintln!("the tour runs on Windows; on Linux use `cargo xtask demo`, which runs it under Wine");
}
