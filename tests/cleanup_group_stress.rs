//! Cleanup-group stress scenarios, opt-in: nothing runs (or is even listed)
//! unless `WINDOWS_THREADPOOL_STRESS` is set; `cargo xtask stress` runs them
//! one at a time. `WINDOWS_THREADPOOL_STRESS_SCALE` multiplies every count.
//!
//! Invariants only: every member context freed exactly once by the release,
//! no callback after a release returned, every submitted callback accounted
//! for under a draining release; rates are reported, never asserted.
#![cfg_attr(not(windows), allow(unused))]

#[cfg(windows)]
mod support;

#[cfg(windows)]
#[path = "support/rng.rs"]
mod rng;
#[cfg(windows)]
#[path = "support/stress.rs"]
mod stress;

#[cfg(not(windows))]
fn main() {}

#[cfg(windows)]
fn main() -> std::process::ExitCode {
    scenarios::main()
}

#[cfg(windows)]
mod scenarios {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::time::{Duration, Instant};

    use windows_threadpool::Deadline;
    use windows_threadpool::cleanup_group::CleanupGroup;
    use windows_threadpool::wait::{Event, WaitActivation};

    use crate::stress::{self, Ctx, Scenario};

    pub fn main() -> std::process::ExitCode {
        let s = |name, secs, run| Scenario { name, deadline: Duration::from_secs(secs), run };
        stress::main(&[
            s("group_large_population_draining_release", 120, large_population_draining),
            s("group_large_population_cancelling_release", 120, large_population_cancelling),
            s("group_left_to_drop", 120, left_to_drop),
            s("group_mixed_load", 120, mixed_load),
        ])
    }

    /// Counts live member contexts and callbacks, and callbacks that ran
    /// after their group's release returned.
    #[derive(Default)]
    struct Books {
        live: AtomicUsize,
        ran: AtomicUsize,
        after_release: AtomicUsize,
        released: AtomicBool,
    }

    struct Token(Arc<Books>);
    impl Token {
        fn new(b: &Arc<Books>) -> Self {
            b.live.fetch_add(1, SeqCst);
            Token(Arc::clone(b))
        }
        fn ran(&self) {
            self.0.ran.fetch_add(1, SeqCst);
            if self.0.released.load(SeqCst) {
                self.0.after_release.fetch_add(1, SeqCst);
            }
        }
    }
    impl Drop for Token {
        fn drop(&mut self) {
            self.0.live.fetch_sub(1, SeqCst);
        }
    }

    /// Fills `group` with `n` members, half work (each submitted `submits`
    /// times), half waits (armed, and signalled when `signal`), returning the
    /// events to keep them alive.
    fn populate(group: &CleanupGroup, books: &Arc<Books>, n: usize, submits: usize, signal: bool) -> Vec<Event> {
        let mut events = Vec::new();
        for i in 0..n {
            let tok = Token::new(books);
            if i % 2 == 0 {
                let m = group.create_work(move |_| tok.ran()).unwrap();
                for _ in 0..submits {
                    m.submit();
                }
            } else {
                let e = Event::auto_reset().unwrap();
                let m =
                    group.create_wait(e.try_clone().unwrap().into(), move |_: &WaitActivation<'_>| tok.ran()).unwrap();
                m.arm(Deadline::NEVER);
                if signal {
                    e.set().unwrap();
                }
                events.push(e);
            }
        }
        events
    }

    fn release_owing(f: impl FnOnce()) {
        // A release with submissions pending owes drains: under fail-fast
        // that is reported (after the release); the scenarios run without it.
        if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            && !cfg!(feature = "fail-fast")
        {
            std::panic::resume_unwind(p);
        }
    }

    fn large_population_draining(ctx: &Ctx) {
        let n = ctx.n(4000);
        let books = Arc::new(Books::default());
        let mut group = CleanupGroup::new().unwrap();
        let t = Instant::now();
        let _events = populate(&group, &books, n, 3, false);
        let created = t.elapsed();
        let t = Instant::now();
        release_owing(|| group.close_members());
        let released = t.elapsed();
        books.released.store(true, SeqCst);
        assert_eq!(books.live.load(SeqCst), 0, "every member context freed");
        assert_eq!(books.ran.load(SeqCst), (n / 2 + n % 2) * 3, "a draining release runs every submitted callback");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(books.after_release.load(SeqCst), 0);
        ctx.report("members", n);
        ctx.report("create µs/member", format!("{:.1}", created.as_secs_f64() * 1e6 / n as f64));
        ctx.report("release µs/member", format!("{:.1}", released.as_secs_f64() * 1e6 / n as f64));
    }

    fn large_population_cancelling(ctx: &Ctx) {
        let n = ctx.n(4000);
        let books = Arc::new(Books::default());
        let mut group = CleanupGroup::new().unwrap();
        let _events = populate(&group, &books, n, 3, true);
        let t = Instant::now();
        #[cfg(feature = "self-heal")]
        release_owing(|| group.close_members_cancelling());
        // The default pool is kept dispatching by the other scenarios' work.
        #[cfg(not(feature = "self-heal"))]
        release_owing(|| group.close_members_cancelling_without_heal());
        let released = t.elapsed();
        books.released.store(true, SeqCst);
        let ran = books.ran.load(SeqCst);
        assert_eq!(books.live.load(SeqCst), 0, "every member context freed");
        assert!(ran <= n / 2 * 3 + n / 2 + 3, "more callbacks than submissions and signals: {ran}");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(books.after_release.load(SeqCst), 0);
        ctx.report("members", n);
        ctx.report("callbacks run before the cancelling release", ran);
        ctx.report("release µs/member", format!("{:.1}", released.as_secs_f64() * 1e6 / n as f64));
    }

    fn left_to_drop(ctx: &Ctx) {
        let rounds = ctx.n(20);
        let books = Arc::new(Books::default());
        let t = Instant::now();
        for _ in 0..rounds {
            let group = CleanupGroup::new().unwrap();
            let _events = populate(&group, &books, 200, 1, true);
            release_owing(|| drop(group));
        }
        books.released.store(true, SeqCst);
        assert_eq!(books.live.load(SeqCst), 0, "dropping a group frees every member");
        assert!(books.ran.load(SeqCst) >= rounds * 100, "every submitted work callback ran");
        ctx.report("groups dropped", rounds);
        ctx.report("ms/group of 200", format!("{:.2}", t.elapsed().as_secs_f64() * 1e3 / rounds as f64));
    }

    /// Eight threads, each creating, loading and releasing groups in turn
    /// (alternately draining and letting them drop) while the others do.
    fn mixed_load(ctx: &Ctx) {
        let rounds = ctx.n(10);
        let books = Arc::new(Books::default());
        let threads: Vec<_> = (0..8)
            .map(|k| {
                let books = Arc::clone(&books);
                std::thread::spawn(move || {
                    for r in 0..rounds {
                        let mut group = CleanupGroup::new().unwrap();
                        let _events = populate(&group, &books, 100, 2, (k + r) % 2 == 0);
                        if r % 2 == 0 {
                            release_owing(|| group.close_members());
                        } else {
                            release_owing(|| drop(group));
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(books.live.load(SeqCst), 0);
        ctx.report("groups", 8 * rounds);
        ctx.report("callbacks", books.ran.load(SeqCst));
    }
}
