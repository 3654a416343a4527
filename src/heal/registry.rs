//! The registry and the healer (feature `self-heal`); see the parent module.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use core::time::Duration;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::callback_env::CallbackEnviron;
use crate::pool::{Pool, PoolRef};
use crate::timer::PeriodicTimer;
use crate::work::Work;

/// How long a submitted repair may stay unstarted before it is overdue.
pub(crate) const OVERDUE_AFTER: Duration = Duration::from_secs(5);
/// The healer's period and coalescing window.
pub(crate) const HEALER_PERIOD: Duration = Duration::from_millis(250);

/// The monotonic clock stamps are taken from, in 100 ns units.
pub(crate) fn now() -> u64 {
    let mut t = 0u64;
    // SAFETY: valid out pointer; the call cannot fail for one.
    unsafe { windows_sys::Win32::System::WindowsProgramming::QueryUnbiasedInterruptTime(&mut t) };
    t
}

fn units(d: Duration) -> u64 {
    (d.as_nanos() / 100) as u64
}

/// The per-pool bookkeeping the repair callback shares with the healer.
#[derive(Debug, Default)]
pub(crate) struct Stamps {
    last_cancel: AtomicU64,
    last_repair_started: AtomicU64,
    last_repair_submitted: AtomicU64,
    /// Submitted repairs not yet started.
    unstarted: AtomicUsize,
    overdue_episodes: AtomicUsize,
}

impl Stamps {
    // Every stamp is published through one of these: `fetch_max`, so a
    // stamp taken earlier but published later never lowers one.
    fn stamp_cancel(&self, t: u64) {
        self.last_cancel.fetch_max(t, SeqCst);
    }
    fn stamp_started(&self, t: u64) {
        self.last_repair_started.fetch_max(t, SeqCst);
    }
    fn stamp_submitted(&self, t: u64) {
        self.last_repair_submitted.fetch_max(t, SeqCst);
    }

    fn owes_repair(&self) -> bool {
        let cancel = self.last_cancel.load(SeqCst);
        cancel != 0 && cancel >= self.last_repair_started.load(SeqCst)
    }
}

pub(crate) struct PoolEntry {
    key: usize,
    pool: PoolRef,
    /// Objects holding a [`Registration`] for this pool. Changed under the registry lock.
    users: AtomicUsize,
    stamps: Arc<Stamps>,
    /// `None` when creating it failed; retried at cancellation time.
    repair: Mutex<Option<Work>>,
}

impl PoolEntry {
    fn new(key: usize, pool: PoolRef) -> Self {
        let e = Self { key, pool, users: AtomicUsize::new(0), stamps: Arc::default(), repair: Mutex::new(None) };
        let created = e.ensure_repair();
        trace_record!("heal", "registered", key, created);
        e
    }

    fn repair(&self) -> MutexGuard<'_, Option<Work>> {
        self.repair.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates the repair object if it does not exist yet; whether it exists.
    fn ensure_repair(&self) -> bool {
        let mut slot = self.repair();
        if slot.is_none() && !hooks::repair_creation_fails(self.key) {
            let stamps = Arc::clone(&self.stamps);
            let key = self.key;
            let env = CallbackEnviron::for_pool_ref(self.pool.clone());
            *slot = Work::new_in(
                move |_| {
                    let t = now();
                    stamps.stamp_started(t);
                    let _ = stamps.unstarted.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1));
                    trace_record!("heal", "repair-started", key, t);
                    hooks::hold_if_requested(key);
                },
                &env,
            )
            .ok();
        }
        slot.is_some()
    }

    /// Submits the repair; false when there is no repair object.
    fn submit_repair(&self) -> bool {
        let slot = self.repair();
        let Some(work) = slot.as_ref() else { return false };
        self.stamps.stamp_submitted(now());
        let unstarted = self.stamps.unstarted.fetch_add(1, SeqCst) + 1;
        work.submit();
        trace_record!("heal", "repair-submitted", self.key, unstarted);
        true
    }
}

/// Whether an entry can leave the registry: no object uses it, it owes no
/// repair, and no submitted repair is still waiting to start. The one
/// predicate every retirement site uses.
fn retirable(e: &PoolEntry) -> bool {
    e.users.load(SeqCst) == 0 && !e.stamps.owes_repair() && e.stamps.unstarted.load(SeqCst) == 0
}

static REGISTRY: Mutex<Vec<Arc<PoolEntry>>> = Mutex::new(Vec::new());

fn registry() -> MutexGuard<'static, Vec<Arc<PoolEntry>>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

fn pool_key(pool: &PoolRef) -> usize {
    pool.as_ref().map_or(0, |p| p.raw() as usize)
}

/// Removes `entry` if [`retirable`]; the caller drops the result outside the lock.
fn retire_locked(reg: &mut Vec<Arc<PoolEntry>>, entry: &Arc<PoolEntry>) -> Option<Arc<PoolEntry>> {
    if !retirable(entry) {
        return None;
    }
    let i = reg.iter().position(|e| Arc::ptr_eq(e, entry))?;
    trace_record!("heal", "retired", entry.key, 0);
    Some(reg.swap_remove(i))
}

/// An object's claim on its pool's registry entry (zero-sized with the
/// feature off).
pub(crate) struct Registration {
    entry: Arc<PoolEntry>,
}

impl Registration {
    /// Registers an object using `pool`, creating the pool's entry (and its
    /// repair object) on first use.
    pub(crate) fn new(pool: &PoolRef) -> Self {
        let key = pool_key(pool);
        let mut reg = registry();
        let entry = match reg.iter().find(|e| e.key == key) {
            Some(e) => Arc::clone(e),
            None => {
                let e = Arc::new(PoolEntry::new(key, pool.clone()));
                reg.push(Arc::clone(&e));
                e
            }
        };
        entry.users.fetch_add(1, SeqCst);
        Self { entry }
    }

    /// Call after a cancelling call has returned: stamps the pool as owing a
    /// repair and makes sure something will repair it.
    pub(crate) fn after_cancel(&self) {
        let e = &self.entry;
        let t = now();
        e.stamps.stamp_cancel(t);
        trace_record!("heal", "cancel-stamped", e.key, t);
        if !e.ensure_repair() {
            trace_record!("heal", "cancel-untracked", e.key, 0);
            return;
        }
        if !ensure_healer(e.key) {
            trace_record!("heal", "healer-unavailable", e.key, 0);
            e.submit_repair();
        }
    }

    /// Whether this registration is for `pool`.
    pub(crate) fn is_for(&self, pool: &PoolRef) -> bool {
        self.entry.key == pool_key(pool)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let retired = {
            let mut reg = registry();
            self.entry.users.fetch_sub(1, SeqCst);
            retire_locked(&mut reg, &self.entry)
        };
        // Outside the lock: dropping the entry drains its repair object.
        drop(retired);
    }
}

struct Healer {
    _timer: PeriodicTimer,
    _pool: Pool,
}

static HEALER: Mutex<Option<Healer>> = Mutex::new(None);

/// Starts the healer if it is not running; whether it runs.
fn ensure_healer(key: usize) -> bool {
    let mut healer = HEALER.lock().unwrap_or_else(|e| e.into_inner());
    if healer.is_some() {
        return true;
    }
    if hooks::healer_start_fails(key) {
        return false;
    }
    let start = || -> std::io::Result<Healer> {
        let pool = Pool::new()?;
        pool.set_max_threads(1)?;
        pool.set_min_threads(1)?;
        let env = CallbackEnviron::new().with_pool(&pool);
        let timer = PeriodicTimer::new_in(HEALER_PERIOD, |_| tick(now()), &env)?;
        timer.arm_with_window(HEALER_PERIOD, HEALER_PERIOD);
        Ok(Healer { _timer: timer, _pool: pool })
    };
    match start() {
        Ok(h) => {
            trace_record!("heal", "healer-started", 0, 0);
            *healer = Some(h);
            true
        }
        Err(_) => false,
    }
}

/// One healer tick at time `now`.
fn tick(now: u64) {
    let retired: Vec<Arc<PoolEntry>> = {
        let mut reg = registry();
        for e in reg.iter() {
            tick_entry(e, now);
        }
        let done: Vec<Arc<PoolEntry>> = reg.iter().filter(|e| retirable(e)).cloned().collect();
        done.iter().filter_map(|e| retire_locked(&mut reg, e)).collect()
    };
    drop(retired);
}

fn tick_entry(e: &PoolEntry, now: u64) {
    if !e.stamps.owes_repair() {
        return;
    }
    if e.stamps.unstarted.load(SeqCst) > 0 {
        let overdue_after = hooks::overdue_after_for(e.key);
        let waited = now.saturating_sub(e.stamps.last_repair_submitted.load(SeqCst));
        if waited < units(overdue_after) {
            return;
        }
        let episode = e.stamps.overdue_episodes.fetch_add(1, SeqCst) + 1;
        trace_record!("heal", "repair-overdue", e.key, episode);
        #[cfg(feature = "fail-fast")]
        if episode >= 2 {
            panic!(
                "windows-threadpool self-heal: a repair of pool {:#x} stayed unstarted for {overdue_after:?} twice; \
                 the pool is not dispatching",
                e.key
            );
        }
    }
    e.submit_repair();
}

/// The injection points as the live paths consult them: with the
/// `test-hooks` feature off they are constants, so a repair, a cancellation
/// and a healer tick check nothing and take no lock for them.
#[cfg(not(any(test, feature = "test-hooks")))]
mod hooks {
    use core::time::Duration;

    #[inline(always)]
    pub(super) fn repair_creation_fails(_pool: usize) -> bool {
        false
    }
    #[inline(always)]
    pub(super) fn healer_start_fails(_pool: usize) -> bool {
        false
    }
    #[inline(always)]
    pub(super) fn overdue_after_for(_pool: usize) -> Duration {
        super::OVERDUE_AFTER
    }
    #[inline(always)]
    pub(super) fn hold_if_requested(_pool: usize) {}
}

#[cfg(any(test, feature = "test-hooks"))]
use testing as hooks;

/// Test-only injection points, each keyed to one pool so that it cannot
/// disturb unrelated tests, and read-only views of the registry. Only the
/// crate's own tests see it (feature `test-hooks`).
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub mod testing {
    use super::*;

    static FAIL_REPAIR: AtomicUsize = AtomicUsize::new(usize::MAX);
    /// Pools whose cancellations may not start the healer.
    static FAIL_HEALER: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    static HOLD: Mutex<Option<(usize, bool)>> = Mutex::new(None);
    static HOLD_CV: std::sync::Condvar = std::sync::Condvar::new();
    /// A pool whose repairs are overdue sooner, and after how long (in 100 ns units).
    static OVERDUE_POOL: AtomicUsize = AtomicUsize::new(usize::MAX);
    static OVERDUE_UNITS: AtomicU64 = AtomicU64::new(0);

    /// How long a submitted repair may stay unstarted before the healer
    /// submits another.
    pub const OVERDUE_AFTER: Duration = super::OVERDUE_AFTER;

    /// Creating `pool`'s repair object fails.
    pub fn fail_repair_creation(pool: usize) {
        FAIL_REPAIR.store(pool, SeqCst);
    }
    /// Creating `pool`'s repair object succeeds again.
    pub fn allow_repair_creation() {
        FAIL_REPAIR.store(usize::MAX, SeqCst);
    }
    /// The healer does not start for a cancellation on `pool` (in addition to
    /// the pools already named).
    pub fn fail_healer_start(pool: usize) {
        FAIL_HEALER.lock().unwrap_or_else(|e| e.into_inner()).push(pool);
    }
    /// Cancellations on every pool may start the healer again.
    pub fn allow_healer_start() {
        FAIL_HEALER.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
    /// Repairs of `pool` become overdue after `after` instead of
    /// [`OVERDUE_AFTER`], for the healer's own ticks too.
    pub fn overdue_after(pool: usize, after: Duration) {
        OVERDUE_UNITS.store(units(after), SeqCst);
        OVERDUE_POOL.store(pool, SeqCst);
    }
    /// Repairs of `pool` block inside their dispatch, after stamping their
    /// start, until [`release_repairs`].
    pub fn hold_repairs(pool: usize) {
        *HOLD.lock().unwrap() = Some((pool, true));
    }
    /// Lets held repairs finish.
    pub fn release_repairs() {
        if let Some((_, held)) = HOLD.lock().unwrap().as_mut() {
            *held = false;
        }
        HOLD_CV.notify_all();
    }

    pub(super) fn repair_creation_fails(pool: usize) -> bool {
        FAIL_REPAIR.load(SeqCst) == pool
    }
    pub(super) fn healer_start_fails(pool: usize) -> bool {
        FAIL_HEALER.lock().unwrap_or_else(|e| e.into_inner()).contains(&pool)
    }
    pub(super) fn overdue_after_for(pool: usize) -> Duration {
        if OVERDUE_POOL.load(SeqCst) == pool {
            Duration::from_nanos(OVERDUE_UNITS.load(SeqCst) * 100)
        } else {
            super::OVERDUE_AFTER
        }
    }
    pub(super) fn hold_if_requested(pool: usize) {
        let g = HOLD.lock().unwrap();
        drop(HOLD_CV.wait_while(g, |h| matches!(h, Some((p, true)) if *p == pool)).unwrap());
    }

    /// A snapshot of one pool's entry.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct EntryView {
        pub users: usize,
        pub has_repair: bool,
        pub last_cancel: u64,
        pub last_repair_started: u64,
        pub last_repair_submitted: u64,
        pub unstarted: usize,
        pub overdue_episodes: usize,
        pub owes_repair: bool,
    }

    /// The registry entry of `pool` (0: the default pool), if registered.
    pub fn entry(pool: usize) -> Option<EntryView> {
        let reg = registry();
        let e = reg.iter().find(|e| e.key == pool)?;
        let s = &e.stamps;
        Some(EntryView {
            users: e.users.load(SeqCst),
            has_repair: e.repair().is_some(),
            last_cancel: s.last_cancel.load(SeqCst),
            last_repair_started: s.last_repair_started.load(SeqCst),
            last_repair_submitted: s.last_repair_submitted.load(SeqCst),
            unstarted: s.unstarted.load(SeqCst),
            overdue_episodes: s.overdue_episodes.load(SeqCst),
            owes_repair: s.owes_repair(),
        })
    }

    /// Runs one healer tick now, on this thread, as if `ahead` had passed.
    pub fn tick_ahead(ahead: Duration) {
        tick(now() + units(ahead));
    }

    /// Whether the healer has started.
    pub fn healer_running() -> bool {
        HEALER.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// The registry's clock, in 100 ns units.
    pub fn clock() -> u64 {
        now()
    }

    /// A registration for `pool` held by the test, as an object would hold one.
    pub struct TestRegistration(Registration);

    impl core::fmt::Debug for TestRegistration {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("TestRegistration").finish_non_exhaustive()
        }
    }

    /// Registers a use of `pool` (None: the default pool).
    pub fn register(pool: Option<&Pool>) -> TestRegistration {
        TestRegistration(Registration::new(&pool.map(Pool::share)))
    }

    impl TestRegistration {
        /// What a cancelling call does after returning.
        pub fn after_cancel(&self) {
            self.0.after_cancel();
        }
        /// Publishes a cancellation stamp `stamp` the way a cancellation
        /// does (for ordering tests).
        pub fn stamp_cancel_at(&self, stamp: u64) {
            self.0.entry.stamps.stamp_cancel(stamp);
        }
        /// Publishes a repair start stamp `stamp` the way a repair does.
        pub fn stamp_repair_started_at(&self, stamp: u64) {
            self.0.entry.stamps.stamp_started(stamp);
        }
    }
}
