//! Timer stress scenarios, opt-in: nothing runs (or is even listed) unless
//! `WINDOWS_THREADPOOL_STRESS` is set; `WINDOWS_THREADPOOL_STRESS_SCALE`
//! multiplies every load count. `cargo xtask stress` runs them one at a time
//! and prints their reports. See `tests/support/stress.rs` for the harness.
//!
//! Scenarios assert invariants only: no overlap where the type promises it,
//! quiescence after a drain, every callback accounted for, no hang (each has
//! a deadline). Rates and latencies are reported, never asserted. A scenario
//! that needs firings waits past a due time at intervals and asserts a floor
//! on the count, so it cannot degenerate into exercising only the arming
//! calls.
//!
//! Quiescence is shown with a witness: a one-shot on the default pool due a
//! little later. Timers expire in due-time order, so once the witness fired,
//! anything a stopped timer could still have queued would have been queued;
//! a following `wait()` covers it.

#[cfg(windows)]
#[path = "support/rng.rs"]
mod rng;
#[cfg(windows)]
#[path = "support/stress.rs"]
mod stress;
#[cfg(windows)]
mod support;

#[cfg(not(windows))]
fn main() {}

#[cfg(windows)]
fn main() -> std::process::ExitCode {
    scenarios::main()
}

#[cfg(windows)]
mod scenarios {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::{Arc, Barrier, Condvar, Mutex};
    use std::time::{Duration, Instant, SystemTime};

    use windows_threadpool::{PeriodicTimer, Timer};

    use crate::stress::{self, Ctx, Rng, Scenario};
    use crate::support;

    pub fn main() -> std::process::ExitCode {
        let s = |name, secs, run| Scenario { name, deadline: Duration::from_secs(secs), run };
        stress::main(&[
            s("one_shot_self_rearm_chains", 60, one_shot_self_rearm_chains),
            s("one_shot_past_instant_rearm_at_chains", 60, one_shot_past_instant_rearm_at_chains),
            s("one_shot_external_arming_churn_8_threads", 60, one_shot_external_arming_churn_8_threads),
            s("one_shot_arm_disarm_races", 60, one_shot_arm_disarm_races),
            s("one_shot_arm_fire_cycles", 60, one_shot_arm_fire_cycles),
            s("one_shot_large_population", 60, one_shot_large_population),
            s("one_shot_coalescing_windows", 60, one_shot_coalescing_windows),
            s("one_shot_drop_racing_the_due_time", 60, one_shot_drop_racing_the_due_time),
            s("one_shot_drop_mid_callback_with_rearm_pending", 60, one_shot_drop_mid_callback_with_rearm_pending),
            s("concurrent_teardown_8_threads", 60, concurrent_teardown_8_threads),
            s("periodic_sustained_ticking", 60, periodic_sustained_ticking),
            s("periodic_deliberate_overlap", 60, periodic_deliberate_overlap),
            s("periodic_self_stop", 60, periodic_self_stop),
            s("periodic_start_stop_churn", 60, periodic_start_stop_churn),
            s("periodic_drop_while_ticking_and_mid_tick", 60, periodic_drop_while_ticking_and_mid_tick),
            s("periodic_large_population", 60, periodic_large_population),
            s("periodic_invalid_period_rejection", 60, periodic_invalid_period_rejection),
            s("mixed", 60, mixed),
        ])
    }

    /// Bound on waiting for something that must happen.
    const PATIENCE: Duration = Duration::from_secs(20);

    /// Polls `cond` until it holds; panics after [`PATIENCE`].
    #[track_caller]
    fn wait_until(what: &str, cond: impl Fn() -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Returns once a one-shot on the default pool, due `d` from now, fired.
    fn witness_after(d: Duration) {
        let fired = Arc::new((Mutex::new(false), Condvar::new()));
        let f = Arc::clone(&fired);
        let w = Timer::new(move |_| {
            *f.0.lock().unwrap() = true;
            f.1.notify_all();
        })
        .unwrap();
        w.arm(d);
        let g = fired.0.lock().unwrap();
        let (g, _) = fired.1.wait_timeout_while(g, PATIENCE, |f| !*f).unwrap();
        assert!(*g, "the witness timer never fired");
    }

    /// What every callback reports to: entries, exits, overlap, and entries
    /// after the owner declared the object torn down.
    #[derive(Default)]
    struct Probe {
        started: AtomicUsize,
        finished: AtomicUsize,
        running: AtomicUsize,
        peak: AtomicUsize,
        torn_down: AtomicBool,
        late: AtomicUsize,
    }

    impl Probe {
        fn enter(&self) -> usize {
            if self.torn_down.load(SeqCst) {
                self.late.fetch_add(1, SeqCst);
            }
            let now = self.running.fetch_add(1, SeqCst) + 1;
            self.peak.fetch_max(now, SeqCst);
            self.started.fetch_add(1, SeqCst) + 1
        }
        fn leave(&self) {
            self.running.fetch_sub(1, SeqCst);
            self.finished.fetch_add(1, SeqCst);
        }
        fn started(&self) -> usize {
            self.started.load(SeqCst)
        }
        /// After a drain or teardown: nothing running, every entry left.
        #[track_caller]
        fn assert_quiet(&self, what: &str) {
            assert_eq!(self.running.load(SeqCst), 0, "{what}: a callback is still running");
            assert_eq!(self.started.load(SeqCst), self.finished.load(SeqCst), "{what}: entries and exits differ");
            assert_eq!(self.late.load(SeqCst), 0, "{what}: a callback ran after teardown");
        }
    }

    fn spin(d: Duration) {
        let t = Instant::now();
        while t.elapsed() < d {
            std::hint::spin_loop();
        }
    }

    // ---- one-shot --------------------------------------------------------------------

    /// `chains` timers re-arm themselves `per` times each with `rearm`.
    fn rearm_chains(
        ctx: &Ctx,
        chains: usize,
        per: usize,
        rearm: fn(&windows_threadpool::timer::TimerFiring<'_>, usize),
    ) {
        let gaps: Arc<Mutex<Vec<Duration>>> = Arc::default();
        let mut timers = Vec::new();
        let mut probes = Vec::new();
        for _ in 0..chains {
            let probe = Arc::new(Probe::default());
            let last_end: Arc<Mutex<Option<Instant>>> = Arc::default();
            let (p, g, e) = (Arc::clone(&probe), Arc::clone(&gaps), last_end);
            let t = Timer::new(move |firing| {
                let n = p.enter();
                if let Some(end) = e.lock().unwrap().take() {
                    g.lock().unwrap().push(end.elapsed());
                }
                if n < per {
                    rearm(firing, n);
                }
                *e.lock().unwrap() = Some(Instant::now());
                p.leave();
            })
            .unwrap();
            timers.push(t);
            probes.push(probe);
        }
        let t0 = Instant::now();
        for t in &timers {
            t.arm(Duration::ZERO);
        }
        wait_until("every chain to finish", || probes.iter().all(|p| p.started() >= per));
        let took = t0.elapsed();
        for t in &timers {
            t.wait();
        }
        witness_after(Duration::from_millis(20));
        for (t, p) in timers.iter().zip(&probes) {
            t.wait();
            assert_eq!(p.started(), per, "a chain fired more often than it re-armed");
            assert_eq!(p.peak.load(SeqCst), 1, "self-re-armed firings overlapped");
            p.assert_quiet("chain");
        }
        ctx.report("firings", chains * per);
        ctx.report("rate", format_args!("{:.0} firings/s", (chains * per) as f64 / took.as_secs_f64()));
        ctx.report("gap from callback end to next entry", stress::summary(&mut gaps.lock().unwrap()));
    }

    fn one_shot_self_rearm_chains(ctx: &Ctx) {
        rearm_chains(ctx, 8, ctx.n(250), |firing, n| {
            // Mostly immediate; every 50th waits 1 ms, so the chain also crosses due times.
            let d = if n % 50 == 0 { Duration::from_millis(1) } else { Duration::ZERO };
            firing.rearm(d);
        });
    }

    fn one_shot_past_instant_rearm_at_chains(ctx: &Ctx) {
        rearm_chains(ctx, 4, ctx.n(250), |firing, n| {
            let past = if n % 2 == 0 { SystemTime::UNIX_EPOCH } else { SystemTime::now() - Duration::from_secs(1) };
            firing.rearm(past);
        });
    }

    fn one_shot_external_arming_churn_8_threads(ctx: &Ctx) {
        let probe = Arc::new(Probe::default());
        let p = Arc::clone(&probe);
        let timer = Timer::new(move |_| {
            p.enter();
            p.leave();
        })
        .unwrap();
        let mut rng = Rng::from_time(ctx);
        let rounds = ctx.n(20);
        let per_thread = 200;
        let t0 = Instant::now();
        for _ in 0..rounds {
            std::thread::scope(|s| {
                for _ in 0..8 {
                    let mut rng = Rng::new(rng.next());
                    let timer = &timer;
                    s.spawn(move || {
                        for _ in 0..per_thread {
                            let d = rng.duration(Duration::from_micros(300));
                            match rng.below(4) {
                                0 => timer.arm(d),
                                1 => timer.arm(SystemTime::now() + d),
                                2 => timer.arm_with_window(d, Duration::from_millis(rng.below(3))),
                                _ => {
                                    let _ = timer.disarm();
                                }
                            }
                        }
                    });
                }
            });
            // Floor: after each round of churn the timer still fires.
            let before = probe.started();
            timer.arm(Duration::ZERO);
            wait_until("a firing after a churn round", || probe.started() > before);
        }
        let took = t0.elapsed();
        timer.stop_and_drain();
        probe.assert_quiet("after stop_and_drain");
        let settled = probe.started();
        witness_after(Duration::from_millis(20));
        timer.wait();
        assert_eq!(probe.started(), settled, "a firing started after stop_and_drain");
        assert!(settled >= rounds, "fewer firings ({settled}) than rounds ({rounds})");
        let calls = rounds * 8 * per_thread;
        ctx.report("arming calls", calls);
        ctx.report("rate", format_args!("{:.0} calls/s from 8 threads", calls as f64 / took.as_secs_f64()));
        ctx.report("firings", settled);
        ctx.report("peak concurrent firings (outside arming may overlap them)", probe.peak.load(SeqCst));
    }

    fn one_shot_arm_disarm_races(ctx: &Ctx) {
        const TIMERS: usize = 16;
        let probes: Vec<Arc<Probe>> = (0..TIMERS).map(|_| Arc::default()).collect();
        let timers: Vec<Timer> = probes
            .iter()
            .map(|p| {
                let p = Arc::clone(p);
                Timer::new(move |_| {
                    p.enter();
                    p.leave();
                })
                .unwrap()
            })
            .collect();
        let mut rng = Rng::from_time(ctx);
        let blocks = ctx.n(10);
        let per_block = 50;
        let mut raced = 0;
        for _ in 0..blocks {
            let before: Vec<usize> = probes.iter().map(|p| p.started()).collect();
            let barrier = Barrier::new(2);
            let (mut ra, mut rb) = (Rng::new(rng.next()), Rng::new(rng.next()));
            std::thread::scope(|s| {
                s.spawn(|| {
                    barrier.wait();
                    for _ in 0..per_block {
                        for t in &timers {
                            t.arm(ra.duration(Duration::from_micros(200)));
                        }
                    }
                });
                s.spawn(|| {
                    barrier.wait();
                    for _ in 0..per_block {
                        for t in &timers {
                            spin(rb.duration(Duration::from_micros(20)));
                            t.disarm();
                        }
                    }
                });
            });
            raced += probes.iter().zip(&before).map(|(p, b)| p.started() - b).sum::<usize>();
            // Floor: every timer still fires when armed after the race.
            for t in &timers {
                t.arm(Duration::ZERO);
            }
            for (p, b) in probes.iter().zip(&before) {
                wait_until("a firing after the race", || p.started() > *b);
            }
        }
        for t in &timers {
            t.disarm();
            t.wait();
        }
        let settled: Vec<usize> = probes.iter().map(|p| p.started()).collect();
        witness_after(Duration::from_millis(20));
        for ((t, p), s) in timers.iter().zip(&probes).zip(settled) {
            t.wait();
            assert!(!t.is_armed(), "disarmed timer reports a due time");
            assert_eq!(p.started(), s, "a firing after disarm and drain");
            p.assert_quiet("after disarm and drain");
        }
        ctx.report("arm/disarm pairs", blocks * per_block * TIMERS);
        ctx.report("firings that won the race", raced);
    }

    fn one_shot_arm_fire_cycles(ctx: &Ctx) {
        let fired: Arc<(Mutex<Option<Instant>>, Condvar)> = Arc::default();
        let probe = Arc::new(Probe::default());
        let (f, p) = (Arc::clone(&fired), Arc::clone(&probe));
        let timer = Timer::new(move |_| {
            p.enter();
            *f.0.lock().unwrap() = Some(Instant::now());
            f.1.notify_all();
            p.leave();
        })
        .unwrap();
        ctx.report("platform", if support::on_wine() { "Wine" } else { "Windows" });
        let cycles = ctx.n(100);
        let mut total = 0;
        let delays = [
            Duration::ZERO,
            Duration::from_micros(100),
            Duration::from_millis(1),
            Duration::from_millis(2),
            Duration::from_millis(5),
        ];
        for (absolute, delay) in delays.iter().map(|d| (false, *d)).chain([(true, Duration::from_millis(1))]) {
            let mut lat = Vec::with_capacity(cycles);
            for _ in 0..cycles {
                *fired.0.lock().unwrap() = None;
                let t0 = Instant::now();
                if absolute {
                    timer.arm(SystemTime::now() + delay);
                } else {
                    timer.arm(delay);
                }
                let g = fired.0.lock().unwrap();
                let (g, _) = fired.1.wait_timeout_while(g, PATIENCE, |f| f.is_none()).unwrap();
                let at = g.expect("the armed timer fired");
                lat.push(at - t0);
                drop(g);
                timer.wait();
                total += 1;
                assert_eq!(probe.started(), total, "one arming, one firing");
            }
            let how = if absolute { "set_at(now +" } else { "set_after(" };
            ctx.report(&format!("{how} {delay:?}) arm-to-fire"), stress::summary(&mut lat));
        }
        probe.assert_quiet("cycles");
    }

    fn one_shot_large_population(ctx: &Ctx) {
        let n = ctx.n(2000);
        let mut rng = Rng::from_time(ctx);
        let probe = Arc::new(Probe::default());
        let once: Arc<Vec<AtomicUsize>> = Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect());
        let lateness: Arc<Mutex<Vec<Duration>>> = Arc::default();
        let t0 = Instant::now();
        let mut timers = Vec::with_capacity(n);
        let mut dues = Vec::with_capacity(n);
        for i in 0..n {
            let (p, o, l) = (Arc::clone(&probe), Arc::clone(&once), Arc::clone(&lateness));
            let due_slot: Arc<Mutex<Option<Instant>>> = Arc::default();
            let d = Arc::clone(&due_slot);
            timers.push(
                Timer::new(move |_| {
                    p.enter();
                    o[i].fetch_add(1, SeqCst);
                    if let Some(due) = *d.lock().unwrap() {
                        l.lock().unwrap().push(Instant::now().saturating_duration_since(due));
                    }
                    p.leave();
                })
                .unwrap(),
            );
            dues.push(due_slot);
        }
        let created = t0.elapsed();
        let t1 = Instant::now();
        for (t, due) in timers.iter().zip(&dues) {
            let delay = Duration::from_micros(rng.below(50_000));
            *due.lock().unwrap() = Some(Instant::now() + delay);
            t.arm(delay);
        }
        let armed = t1.elapsed();
        wait_until("every timer to fire", || probe.started() >= n);
        let all_fired = t1.elapsed();
        witness_after(Duration::from_millis(20));
        let t2 = Instant::now();
        drop(timers);
        let dropped = t2.elapsed();
        probe.assert_quiet("population");
        assert!(once.iter().all(|c| c.load(SeqCst) == 1), "a timer fired other than exactly once");
        assert_eq!(Arc::strong_count(&probe), 1, "a dropped timer kept its callback");
        ctx.report("timers", n);
        ctx.report("create", format_args!("{:.1} us/timer", created.as_secs_f64() * 1e6 / n as f64));
        ctx.report("arm", format_args!("{:.1} us/timer", armed.as_secs_f64() * 1e6 / n as f64));
        ctx.report("all fired after", format_args!("{all_fired:?} (due times spread over 50 ms)"));
        ctx.report("drop", format_args!("{:.1} us/timer", dropped.as_secs_f64() * 1e6 / n as f64));
        ctx.report("lateness past due", stress::summary(&mut lateness.lock().unwrap()));
    }

    fn one_shot_coalescing_windows(ctx: &Ctx) {
        let windows_ms = [0u64, 1, 5, 20, 50];
        let per = ctx.n(100);
        let delay = Duration::from_millis(20);
        for &w in &windows_ms {
            let lateness: Arc<Mutex<Vec<Duration>>> = Arc::default();
            let probe = Arc::new(Probe::default());
            let mut timers = Vec::with_capacity(per);
            for _ in 0..per {
                let (p, l) = (Arc::clone(&probe), Arc::clone(&lateness));
                let due: Arc<Mutex<Option<Instant>>> = Arc::default();
                let d = Arc::clone(&due);
                let t = Timer::new(move |_| {
                    p.enter();
                    let due = d.lock().unwrap().expect("due set before arming");
                    l.lock().unwrap().push(Instant::now().saturating_duration_since(due));
                    p.leave();
                })
                .unwrap();
                *due.lock().unwrap() = Some(Instant::now() + delay);
                t.arm_with_window(delay, Duration::from_millis(w));
                timers.push(t);
            }
            wait_until("every windowed timer to fire", || probe.started() >= per);
            witness_after(Duration::from_millis(5));
            for t in &timers {
                t.wait();
            }
            assert_eq!(probe.started(), per, "a windowed one-shot fired twice");
            probe.assert_quiet("windowed");
            ctx.report(&format!("window {w} ms: lateness past due"), stress::summary(&mut lateness.lock().unwrap()));
            drop(timers);
        }
    }

    fn one_shot_drop_racing_the_due_time(ctx: &Ctx) {
        let n = ctx.n(1000);
        let mut rng = Rng::from_time(ctx);
        let mut probes = Vec::with_capacity(n);
        let mut fired_before_drop = 0;
        for i in 0..n {
            let probe = Arc::new(Probe::default());
            let p = Arc::clone(&probe);
            let t = Timer::new(move |_| {
                p.enter();
                p.leave();
            })
            .unwrap();
            t.arm(rng.duration(Duration::from_micros(400)));
            if i % 10 == 0 {
                // Floor: one in ten is dropped only after it fired.
                wait_until("a firing before the drop", || probe.started() > 0);
            } else {
                spin(rng.duration(Duration::from_micros(400)));
            }
            // Owed unless the firing was dispatched first.
            support::teardown_maybe_owing("Timer", || drop(t));
            probe.torn_down.store(true, SeqCst);
            probe.assert_quiet("right after drop");
            assert_eq!(Arc::strong_count(&probe), 1, "drop did not free the callback");
            fired_before_drop += probe.started();
            probes.push(probe);
        }
        witness_after(Duration::from_millis(20));
        for p in &probes {
            p.assert_quiet("after the witness");
            assert!(p.started() <= 1, "a one-shot fired twice");
        }
        assert!(fired_before_drop >= n / 10);
        ctx.report("timers dropped around their due time", n);
        ctx.report("fired before the drop", format_args!("{fired_before_drop} ({} forced)", n.div_ceil(10)));
    }

    fn one_shot_drop_mid_callback_with_rearm_pending(ctx: &Ctx) {
        let n = ctx.n(200);
        let mut rng = Rng::from_time(ctx);
        let mut probes = Vec::with_capacity(n);
        let mut firings = 0;
        let t0 = Instant::now();
        for _ in 0..n {
            let probe = Arc::new(Probe::default());
            let dwell = rng.duration(Duration::from_micros(300));
            let p = Arc::clone(&probe);
            let t = Timer::new(move |firing| {
                p.enter();
                firing.rearm(Duration::ZERO);
                spin(dwell);
                p.leave();
            })
            .unwrap();
            t.arm(Duration::ZERO);
            // Drop once a firing has been entered; usually one is mid-callback.
            wait_until("the first firing", || probe.started() > 0);
            // Owed if an applied re-arm has not fired yet.
            support::teardown_maybe_owing("Timer", || drop(t));
            probe.torn_down.store(true, SeqCst);
            probe.assert_quiet("right after drop");
            assert_eq!(Arc::strong_count(&probe), 1, "drop did not free the callback");
            firings += probe.started();
            probes.push(probe);
        }
        witness_after(Duration::from_millis(20));
        for p in &probes {
            p.assert_quiet("after the witness");
        }
        ctx.report("timers dropped mid-chain", n);
        ctx.report("firings before the drops", firings);
        ctx.report("per drop", format_args!("{:.0} us", t0.elapsed().as_secs_f64() * 1e6 / n as f64));
    }

    fn concurrent_teardown_8_threads(ctx: &Ctx) {
        // One timer re-arming itself without end; 8 threads stop_and_drain it at once.
        let probe = Arc::new(Probe::default());
        let p = Arc::clone(&probe);
        let timer = Timer::new(move |firing| {
            p.enter();
            firing.rearm(Duration::ZERO);
            p.leave();
        })
        .unwrap();
        let rounds = ctx.n(30);
        for _ in 0..rounds {
            let before = probe.started();
            timer.arm(Duration::ZERO);
            wait_until("the chain to run", || probe.started() > before + 2);
            // A ninth thread re-arms the chain while the drains run: each
            // drain must still end (re-arms stay suppressed while any
            // stop_and_drain is in progress, not just the first).
            let barrier = Barrier::new(9);
            std::thread::scope(|s| {
                for _ in 0..8 {
                    s.spawn(|| {
                        barrier.wait();
                        timer.stop_and_drain();
                    });
                }
                s.spawn(|| {
                    barrier.wait();
                    for _ in 0..20 {
                        timer.arm(Duration::ZERO);
                        spin(Duration::from_micros(50));
                    }
                });
            });
            timer.stop_and_drain();
            probe.assert_quiet("after 8 concurrent stop_and_drain");
            assert!(!timer.is_armed());
            let settled = probe.started();
            witness_after(Duration::from_millis(5));
            timer.wait();
            assert_eq!(probe.started(), settled, "a re-arm landed after concurrent stop_and_drain");
        }
        ctx.report("rounds of 8 concurrent stop_and_drain racing an arming thread", rounds);

        // 8 threads each drop their own running timers at once.
        let per_thread = ctx.n(25);
        let barrier = Barrier::new(8);
        let all_probes: Mutex<Vec<Arc<Probe>>> = Mutex::default();
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let mut one_shots = Vec::new();
                    let mut periodics = Vec::new();
                    let mut probes = Vec::new();
                    for _ in 0..per_thread {
                        let (a, b) = (Arc::new(Probe::default()), Arc::new(Probe::default()));
                        let (pa, pb) = (Arc::clone(&a), Arc::clone(&b));
                        let t = Timer::new(move |firing| {
                            pa.enter();
                            firing.rearm(Duration::from_micros(200));
                            pa.leave();
                        })
                        .unwrap();
                        t.arm(Duration::ZERO);
                        let pt = PeriodicTimer::new(Duration::from_millis(1), move |_| {
                            pb.enter();
                            pb.leave();
                        })
                        .unwrap();
                        pt.arm(Duration::ZERO);
                        one_shots.push(t);
                        periodics.push(pt);
                        probes.extend([a, b]);
                    }
                    wait_until("every timer to fire", || probes.iter().all(|p| p.started() > 0));
                    barrier.wait();
                    // One at a time: under fail-fast a report while a Vec
                    // drops its other elements would be a panic during a panic.
                    for t in one_shots {
                        support::teardown_maybe_owing("Timer", || drop(t));
                    }
                    for t in periodics {
                        support::teardown_owing("PeriodicTimer", || drop(t));
                    }
                    for p in &probes {
                        p.torn_down.store(true, SeqCst);
                        p.assert_quiet("after concurrent drops");
                        assert_eq!(Arc::strong_count(p), 1);
                    }
                    all_probes.lock().unwrap().extend(probes);
                });
            }
        });
        witness_after(Duration::from_millis(20));
        for p in all_probes.lock().unwrap().iter() {
            p.assert_quiet("after the witness");
        }
        ctx.report("timers dropped concurrently by 8 threads", 8 * per_thread * 2);
        ctx.report("phase took", format_args!("{:?}", t0.elapsed()));
    }

    // ---- periodic --------------------------------------------------------------------

    fn periodic_sustained_ticking(ctx: &Ctx) {
        let periods = [1u64, 2, 5, 10];
        let ticks = ctx.n(200);
        let mut timers = Vec::new();
        let mut logs = Vec::new();
        let mut probes = Vec::new();
        for &ms in &periods {
            let probe = Arc::new(Probe::default());
            let log: Arc<Mutex<Vec<Instant>>> = Arc::default();
            let (p, l) = (Arc::clone(&probe), Arc::clone(&log));
            let t = PeriodicTimer::new(Duration::from_millis(ms), move |_| {
                p.enter();
                l.lock().unwrap().push(Instant::now());
                p.leave();
            })
            .unwrap();
            timers.push(t);
            logs.push(log);
            probes.push(probe);
        }
        for t in &timers {
            t.arm(t.period());
        }
        wait_until("every timer's ticks", || probes.iter().all(|p| p.started() >= ticks));
        for t in &timers {
            t.stop_and_drain();
            assert!(!t.is_armed());
        }
        let settled: Vec<usize> = probes.iter().map(|p| p.started()).collect();
        witness_after(Duration::from_millis(30));
        for (((t, p), s), (ms, log)) in timers.iter().zip(&probes).zip(settled).zip(periods.iter().zip(&logs)) {
            t.wait();
            p.assert_quiet("after stop_and_drain");
            assert_eq!(p.started(), s, "a tick after stop_and_drain");
            let log = log.lock().unwrap();
            let mut intervals: Vec<Duration> = log.windows(2).map(|w| w[1] - w[0]).collect();
            ctx.report(&format!("period {ms} ms: tick-to-tick"), stress::summary(&mut intervals));
            ctx.report(&format!("period {ms} ms: peak overlapping ticks"), p.peak.load(SeqCst));
        }
    }

    fn periodic_deliberate_overlap(ctx: &Ctx) {
        let probe = Arc::new(Probe::default());
        let p = Arc::clone(&probe);
        let timer = PeriodicTimer::new(Duration::from_millis(1), move |_| {
            p.enter();
            // Ten times the period: the pool keeps queueing ticks meanwhile.
            std::thread::sleep(Duration::from_millis(10));
            p.leave();
        })
        .unwrap();
        let ticks = ctx.n(100);
        timer.arm(Duration::ZERO);
        wait_until("the ticks", || probe.started() >= ticks);
        timer.stop_and_drain();
        probe.assert_quiet("after stop_and_drain");
        let settled = probe.started();
        witness_after(Duration::from_millis(20));
        timer.wait();
        assert_eq!(probe.started(), settled, "a tick after stop_and_drain");
        ctx.report("ticks", settled);
        ctx.report("peak concurrent ticks of one timer (1 ms period, 10 ms callback)", probe.peak.load(SeqCst));
    }

    fn periodic_self_stop(ctx: &Ctx) {
        let n = ctx.n(100);
        let mut rng = Rng::from_time(ctx);
        let mut timers = Vec::with_capacity(n);
        let mut probes = Vec::with_capacity(n);
        let mut stops = Vec::with_capacity(n);
        for _ in 0..n {
            let probe = Arc::new(Probe::default());
            let stop_at = 1 + rng.below(5) as usize;
            let p = Arc::clone(&probe);
            let t = PeriodicTimer::new(Duration::from_millis(1 + rng.below(5)), move |tick| {
                if p.enter() == stop_at {
                    tick.disarm();
                }
                p.leave();
            })
            .unwrap();
            t.arm(t.period());
            timers.push(t);
            probes.push(probe);
            stops.push(stop_at);
        }
        wait_until("every timer to stop itself", || timers.iter().all(|t| !t.is_armed()));
        for t in &timers {
            t.wait();
        }
        let settled: Vec<usize> = probes.iter().map(|p| p.started()).collect();
        witness_after(Duration::from_millis(20));
        let mut extra = 0;
        for (((t, p), s), k) in timers.iter().zip(&probes).zip(settled).zip(stops) {
            t.wait();
            p.assert_quiet("after self-stop");
            assert_eq!(p.started(), s, "a tick after the timer stopped itself and was drained");
            assert!(s >= k, "stopped before its stopping tick");
            extra += s - k;
        }
        ctx.report("timers", n);
        ctx.report("ticks after the stopping tick (already queued or overlapping)", extra);
    }

    fn periodic_start_stop_churn(ctx: &Ctx) {
        let probe = Arc::new(Probe::default());
        let p = Arc::clone(&probe);
        let timer = PeriodicTimer::new(Duration::from_millis(1), move |_| {
            p.enter();
            p.leave();
        })
        .unwrap();
        let mut rng = Rng::from_time(ctx);
        let rounds = ctx.n(20);
        let per_thread = 100;
        for _ in 0..rounds {
            std::thread::scope(|s| {
                for _ in 0..8 {
                    let mut rng = Rng::new(rng.next());
                    let timer = &timer;
                    s.spawn(move || {
                        for _ in 0..per_thread {
                            match rng.below(4) {
                                0 => timer.arm(timer.period()),
                                1 => timer.arm(rng.duration(Duration::from_millis(2))),
                                2 => timer.arm_with_window(Duration::ZERO, Duration::from_millis(rng.below(3))),
                                _ => {
                                    let _ = timer.disarm();
                                }
                            }
                        }
                    });
                }
            });
            // Floor: the timer ticks after every round of churn.
            let before = probe.started();
            timer.arm(Duration::ZERO);
            wait_until("a tick after a churn round", || probe.started() >= before + 2);
        }
        timer.stop_and_drain();
        assert!(!timer.is_armed());
        probe.assert_quiet("after stop_and_drain");
        let settled = probe.started();
        witness_after(Duration::from_millis(20));
        timer.wait();
        assert_eq!(probe.started(), settled, "a tick after stop_and_drain");
        ctx.report("start/stop calls from 8 threads", rounds * 8 * per_thread);
        ctx.report("ticks", settled);
    }

    fn periodic_drop_while_ticking_and_mid_tick(ctx: &Ctx) {
        let n = ctx.n(200);
        let mut probes = Vec::with_capacity(n);
        let mut mid = 0;
        for i in 0..n {
            let probe = Arc::new(Probe::default());
            let p = Arc::clone(&probe);
            let dwell = if i % 2 == 0 { Duration::ZERO } else { Duration::from_micros(300) };
            let t = PeriodicTimer::new(Duration::from_millis(1), move |_| {
                p.enter();
                spin(dwell);
                p.leave();
            })
            .unwrap();
            t.arm(Duration::ZERO);
            if i % 2 == 0 {
                wait_until("ticking", || probe.started() >= 2);
            } else {
                // Mid-tick: drop while a tick is inside its dwell.
                wait_until("a tick in progress", || probe.running.load(SeqCst) > 0);
                mid += 1;
            }
            support::teardown_owing("PeriodicTimer", || drop(t));
            probe.torn_down.store(true, SeqCst);
            probe.assert_quiet("right after drop");
            assert_eq!(Arc::strong_count(&probe), 1, "drop did not free the callback");
            probes.push(probe);
        }
        witness_after(Duration::from_millis(20));
        for p in &probes {
            p.assert_quiet("after the witness");
        }
        ctx.report("periodic timers dropped while ticking", n - mid);
        ctx.report("dropped with a tick in progress", mid);
    }

    fn periodic_large_population(ctx: &Ctx) {
        let n = ctx.n(1000);
        let mut rng = Rng::from_time(ctx);
        let probe = Arc::new(Probe::default());
        let counts: Arc<Vec<AtomicUsize>> = Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect());
        let t0 = Instant::now();
        let timers: Vec<PeriodicTimer> = (0..n)
            .map(|i| {
                let (p, c) = (Arc::clone(&probe), Arc::clone(&counts));
                // Periods grow with the population so the tick rate the pool
                // must sustain stays the same: this measures population, not
                // overload.
                PeriodicTimer::new(Duration::from_millis((5 + rng.below(16)) * ctx.scale() as u64), move |_| {
                    p.enter();
                    c[i].fetch_add(1, SeqCst);
                    p.leave();
                })
                .unwrap()
            })
            .collect();
        let created = t0.elapsed();
        let t1 = Instant::now();
        for t in &timers {
            t.arm(t.period());
        }
        let started = t1.elapsed();
        wait_until("three ticks from every timer", || counts.iter().all(|c| c.load(SeqCst) >= 3));
        let took = t1.elapsed();
        for t in &timers {
            t.stop_and_drain();
        }
        probe.assert_quiet("after stopping all");
        let settled = probe.started();
        witness_after(Duration::from_millis(30));
        drop(timers);
        assert_eq!(probe.started(), settled, "a tick after stop_and_drain");
        assert_eq!(Arc::strong_count(&probe), 1);
        let per = |d: Duration| format!("{:.1} us/timer", d.as_secs_f64() * 1e6 / n as f64);
        ctx.report("periodic timers", n);
        ctx.report("create", per(created));
        ctx.report("start (while the earlier ones tick)", per(started));
        ctx.report("until every timer ticked 3 times", format_args!("{took:?}"));
        ctx.report("ticks", settled);
        ctx.report("rate", format_args!("{:.0} ticks/s", settled as f64 / took.as_secs_f64()));
    }

    fn periodic_invalid_period_rejection(ctx: &Ctx) {
        let n = ctx.n(20_000);
        let mut rng = Rng::from_time(ctx);
        let (mut rejected, mut accepted) = (0, 0);
        for _ in 0..n {
            let period = match rng.below(5) {
                0 => Duration::from_nanos(rng.below(1_000_000)),
                1 => Duration::from_millis(1 + rng.below(1000)) + Duration::from_nanos(1 + rng.below(999_999)),
                2 => PeriodicTimer::MAX_PERIOD + Duration::from_millis(1 + rng.below(1 << 40)),
                3 => Duration::new(rng.next(), 0).max(PeriodicTimer::MAX_PERIOD + Duration::from_secs(1)),
                _ => Duration::from_millis(1 + rng.below(u64::from(u32::MAX))),
            };
            let whole_ms = period.subsec_nanos().is_multiple_of(1_000_000);
            let valid = period >= PeriodicTimer::MIN_PERIOD && period <= PeriodicTimer::MAX_PERIOD && whole_ms;
            match PeriodicTimer::new(period, |_| {}) {
                Ok(t) => {
                    assert!(valid, "accepted {period:?}");
                    assert_eq!(t.period(), period);
                    accepted += 1;
                }
                Err(e) => {
                    assert!(!valid, "rejected {period:?}: {e}");
                    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
                    let why = if period < PeriodicTimer::MIN_PERIOD {
                        "below the minimum"
                    } else if !whole_ms {
                        "whole number of milliseconds"
                    } else {
                        "above the maximum"
                    };
                    assert!(e.to_string().contains(why), "{period:?}: {e}");
                    rejected += 1;
                }
            }
        }
        ctx.report("rejected", rejected);
        ctx.report("accepted", accepted);
    }

    fn mixed(ctx: &Ctx) {
        let goal = ctx.n(300);
        let stop = AtomicBool::new(false);
        let chain_probe = Arc::new(Probe::default());
        let tick_probe = Arc::new(Probe::default());
        let churn_probe = Arc::new(Probe::default());
        let cycled = AtomicUsize::new(0);
        let cp = Arc::clone(&chain_probe);
        let chain = Timer::new(move |firing| {
            cp.enter();
            firing.rearm(Duration::from_micros(100));
            cp.leave();
        })
        .unwrap();
        let tp = Arc::clone(&tick_probe);
        let ticker = PeriodicTimer::new(Duration::from_millis(1), move |_| {
            tp.enter();
            tp.leave();
        })
        .unwrap();
        let hp = Arc::clone(&churn_probe);
        let churned = Timer::new(move |_| {
            hp.enter();
            hp.leave();
        })
        .unwrap();
        chain.arm(Duration::ZERO);
        ticker.arm(Duration::ZERO);
        let mut rng = Rng::from_time(ctx);
        let t0 = Instant::now();
        std::thread::scope(|s| {
            let mut r = Rng::new(rng.next());
            let (churned, churn_probe, stop) = (&churned, &churn_probe, &stop);
            s.spawn(move || {
                let mut i = 0usize;
                while !stop.load(SeqCst) {
                    i += 1;
                    if i.is_multiple_of(64) {
                        // Floor: wait past a due time now and then.
                        let before = churn_probe.started();
                        churned.arm(Duration::ZERO);
                        wait_until("a churned firing", || churn_probe.started() > before);
                    } else if r.below(3) == 0 {
                        churned.disarm();
                    } else {
                        churned.arm(r.duration(Duration::from_micros(500)));
                    }
                }
            });
            let cycled = &cycled;
            s.spawn(move || {
                while !stop.load(SeqCst) {
                    let probe = Arc::new(Probe::default());
                    let p = Arc::clone(&probe);
                    let t = Timer::new(move |firing| {
                        p.enter();
                        firing.rearm(Duration::ZERO);
                        p.leave();
                    })
                    .unwrap();
                    t.arm(Duration::ZERO);
                    wait_until("a cycled timer to fire", || probe.started() > 0);
                    support::teardown_maybe_owing("Timer", || drop(t));
                    probe.torn_down.store(true, SeqCst);
                    probe.assert_quiet("cycled timer after drop");
                    cycled.fetch_add(1, SeqCst);
                }
            });
            wait_until("every component to reach its goal", || {
                chain_probe.started() >= goal
                    && tick_probe.started() >= goal
                    && churn_probe.started() >= goal / 64
                    && cycled.load(SeqCst) >= goal / 10
            });
            stop.store(true, SeqCst);
        });
        let took = t0.elapsed();
        chain.stop_and_drain();
        ticker.stop_and_drain();
        churned.stop_and_drain();
        let settled = [chain_probe.started(), tick_probe.started(), churn_probe.started()];
        witness_after(Duration::from_millis(20));
        for (t, (p, s)) in [&chain, &churned].iter().zip([(&chain_probe, settled[0]), (&churn_probe, settled[2])]) {
            t.wait();
            p.assert_quiet("after stop_and_drain");
            assert_eq!(p.started(), s, "a firing after stop_and_drain");
        }
        ticker.wait();
        tick_probe.assert_quiet("ticker after stop_and_drain");
        assert_eq!(tick_probe.started(), settled[1], "a tick after stop_and_drain");
        assert_eq!(chain_probe.peak.load(SeqCst), 1, "the self-re-arming chain overlapped itself");
        ctx.report("chain firings", settled[0]);
        ctx.report("periodic ticks", settled[1]);
        ctx.report("churned firings", settled[2]);
        ctx.report("timers created, fired and dropped", cycled.load(SeqCst));
        ctx.report("took", format_args!("{took:?}"));
    }
}
