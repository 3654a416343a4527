//! The timer's core, one for both kinds (one-shot and periodic, told apart
//! by the header): the context header the owner and the trampolines share,
//! arming through the gate, draining, the teardown phases, and the two
//! trampolines.

use core::cell::Cell;
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::io;
use std::sync::MutexGuard;
use std::time::Duration;

use windows_sys::Win32::System::Threading::{
    CloseThreadpoolTimer, CreateThreadpoolTimer, PTP_CALLBACK_INSTANCE, PTP_TIMER, SetThreadpoolTimer,
    WaitForThreadpoolTimerCallbacks,
};

use super::TimerFiring;
use super::periodic::{Period, PeriodicTick};
use crate::callback::arming::{ArmGate, Gated};
use crate::callback::ctx::{self, Blocks, Context};
use crate::callback::local::Local;
use crate::callback::obligation::DrainObligation;
use crate::callback::owner::{Access, DrainLock, Lifecycle, Phase, Released};
use crate::callback::reentry;
use crate::callback::spans;
use crate::callback_env::{CallbackEnviron, env_parts};
use crate::instance::CallbackInstance;
use crate::pool::PoolRef;
use crate::sys::{self, filetime};

/// Records under `timer` or `timer-periodic` depending on the timer's kind.
macro_rules! record_kind {
    ($periodic:expr, $event:literal, $a:expr, $b:expr) => {
        if $periodic { trace_record!("timer-periodic", $event, $a, $b) } else { trace_record!("timer", $event, $a, $b) }
    };
}

/// Marks "no re-arm requested" and, in trace records, a NULL due time; no
/// due time this module produces is `i64::MIN`.
const NO_DUE: i64 = i64::MIN;

/// The context state shared by the owner and the trampoline.
pub(crate) struct TimerHeader {
    /// A periodic timer's period.
    pub(super) period: Option<Period>,
    obligation: DrainObligation,
    /// Taken around every `SetThreadpoolTimer` this crate issues; arms go
    /// through it so that a stop absorbs those that race it (see
    /// `crate::callback::arming`).
    gate: ArmGate<Held>,
    /// Bumped (under `lock`) by every arming and disarm from outside a
    /// callback; a firing's re-arm (or a tick's disarm) applies only if it has
    /// not changed since the firing began.
    pub(super) generation: AtomicU64,
    /// Armed by the owner or a re-arm, and not disarmed since (written under
    /// `lock`). For a one-shot this stays true after it fires.
    pub(super) armed: AtomicBool,
    /// The span current at the latest arming from outside a callback: the
    /// firings' parent.
    parent: spans::Parent,
    /// Under Wine, serialises a cancelling drain with the others (see [`DrainLock`]).
    drains: DrainLock,
    /// The public type owning it, for reports and panics.
    owner: &'static str,
    /// Keeps a private pool open until the timer is closed.
    _pool: PoolRef,
}

/// A timer's arming state is the lock alone: a `&Held` is reachable only
/// under a gate's lock, so it proves that a timer's lock is held. It does
/// not say which timer's: every use takes it from the header it then
/// modifies.
pub(super) struct Held(());

impl TimerHeader {
    fn new(owner: &'static str, period: Option<Period>, pool: PoolRef) -> Self {
        Self {
            period,
            obligation: DrainObligation::default(),
            gate: ArmGate::new(Held(())),
            generation: AtomicU64::new(0),
            armed: AtomicBool::new(false),
            parent: spans::Parent::new(),
            drains: DrainLock::new(),
            owner,
            _pool: pool,
        }
    }

    fn periodic(&self) -> bool {
        self.period.is_some()
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Gated<Held>> {
        self.gate.lock()
    }

    /// Issues `SetThreadpoolTimer`; `due == None` disarms, and then returns
    /// what `SetThreadpoolTimerEx` reports (whether the disarm cancelled a
    /// pending expiry) where the system has it. The caller holds the lock
    /// (`Held` is the proof).
    pub(super) fn set_locked(
        &self,
        _held: &Held,
        raw: PTP_TIMER,
        due: Option<i64>,
        period: u32,
        window: u32,
    ) -> Option<bool> {
        match due {
            Some(due) => {
                self.armed.store(true, Ordering::SeqCst);
                let ft = filetime(due);
                self.obligation.publish_arming(|| {
                    trace_call!("SetThreadpoolTimer", raw, due, {
                        // SAFETY: `raw` is a live timer (its owner or one of its
                        // callbacks is calling) and `ft` outlives the call.
                        unsafe { SetThreadpoolTimer(raw, &ft, period, window) }
                    });
                });
                None
            }
            None => {
                self.armed.store(false, Ordering::SeqCst);
                let cancelled = match sys::set_timer_ex() {
                    Some(set_ex) => Some(trace_call!("SetThreadpoolTimerEx", raw, 0, {
                        // SAFETY: `raw` is a live timer; a null due time disarms
                        // it; `set_ex` is `SetThreadpoolTimerEx` (signature
                        // checked in `sys`).
                        unsafe { set_ex(raw, core::ptr::null(), 0, 0) != 0 }
                    })),
                    None => {
                        trace_call!("SetThreadpoolTimer", raw, NO_DUE, {
                            // SAFETY: `raw` is a live timer; a null due time disarms it.
                            unsafe { SetThreadpoolTimer(raw, core::ptr::null(), 0, 0) }
                        });
                        None
                    }
                };
                record_kind!(self.periodic(), "disarmed", raw, 0);
                cancelled
            }
        }
    }

    /// Arms from outside a callback: supersedes any re-arm request of a
    /// firing in progress. Absorbed while a stop is in progress.
    fn arm_external(&self, raw: PTP_TIMER, due: i64, period: u32, window: u32) {
        self.parent.capture();
        let armed = self.gate.arm(|held| {
            self.generation.fetch_add(1, Ordering::SeqCst);
            record_kind!(self.periodic(), "armed", due, period);
            self.set_locked(held, raw, Some(due), period, window);
        });
        if armed.is_none() {
            record_kind!(self.periodic(), "arm-suppressed", raw, due);
        }
    }

    /// Disarms from outside a callback: supersedes any re-arm request of a
    /// firing in progress.
    fn disarm_external(&self, raw: PTP_TIMER) -> Option<bool> {
        let g = self.lock();
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.set_locked(&g.state, raw, None, 0, 0)
    }

    /// Applies a firing's re-arm request after its callback returned.
    fn apply_rearm(&self, raw: PTP_TIMER, began_at: u64, due: i64) {
        let applied = self.gate.arm(|held| {
            let current = self.generation.load(Ordering::SeqCst) == began_at;
            if current {
                trace_record!("timer", "rearm-entered", raw, due);
                self.set_locked(held, raw, Some(due), 0, 0);
                trace_record!("timer", "rearm-left", raw, 0);
            }
            current
        });
        match applied {
            None => trace_record!("timer", "rearm-suppressed", raw, 1),
            Some(false) => trace_record!("timer", "rearm-suppressed", raw, 2),
            Some(true) => {}
        }
    }

    /// Settles the drain obligation if nothing is armed (called after a drain).
    fn settle_if_disarmed(&self) {
        let _held = self.lock();
        if !self.armed.load(Ordering::SeqCst) {
            self.obligation.drained();
        }
    }
}

/// A timer's core: the raw object and its context, which holds the rest (two
/// pointers, moved in registers), for both kinds
/// (one-shot and periodic, told apart by the header). Owned by the
/// standalone types or by a cleanup group (see `crate::callback::owner`). Arming and
/// draining are defined once, here.
pub(crate) struct TimerCore {
    pub(super) raw: PTP_TIMER,
    ctx: Context<TimerHeader>,
}

const _: () = assert!(core::mem::size_of::<TimerCore>() == 2 * core::mem::size_of::<usize>());

impl TimerCore {
    fn create<F: Send + Sync + 'static>(
        owner: &'static str,
        period: Option<Period>,
        callback: F,
        trampoline: unsafe extern "system" fn(PTP_CALLBACK_INSTANCE, *mut c_void, PTP_TIMER),
        env: Option<&CallbackEnviron>,
        blocks: Blocks<'_>,
    ) -> io::Result<Self> {
        let periodic = period.is_some();
        let (env, pool, placement) = env_parts(env);
        let ctx = Context::new(blocks, placement, TimerHeader::new(owner, period, pool), callback);
        let pv = ctx.as_ptr();
        // The error is read inside the bracket, before the context is freed.
        let raw = trace_call!("CreateThreadpoolTimer", pv, env, {
            // SAFETY: `trampoline` is instantiated for the context's callback
            // type, and the context outlives the timer (freed only after the
            // timer is disarmed, drained and closed).
            sys::created(unsafe { CreateThreadpoolTimer(Some(trampoline), pv, env) })
        })?;
        record_kind!(periodic, "created", raw, pv);
        Ok(Self { raw, ctx })
    }

    pub(crate) fn new_one_shot<F>(
        owner: &'static str,
        callback: F,
        env: Option<&CallbackEnviron>,
        blocks: Blocks<'_>,
    ) -> io::Result<Self>
    where
        F: Fn(&TimerFiring<'_>) + Send + Sync + 'static,
    {
        Self::create(owner, None, callback, one_shot_trampoline::<F>, env, blocks)
    }

    /// A periodic timer; `period` is checked as
    /// [`PeriodicTimer::new`](super::PeriodicTimer::new) documents.
    pub(crate) fn new_periodic<F>(
        owner: &'static str,
        period: Duration,
        callback: F,
        env: Option<&CallbackEnviron>,
        blocks: Blocks<'_>,
    ) -> io::Result<Self>
    where
        F: Fn(&PeriodicTick<'_>) + Send + Sync + 'static,
    {
        let period = Period::new(period)?;
        Self::create(owner, Some(period), callback, periodic_trampoline::<F>, env, blocks)
    }

    pub(super) fn header(&self) -> &TimerHeader {
        self.ctx.header()
    }

    /// Arms with a raw due time (see the module docs), `period` and `window` in ms.
    pub(super) fn arm(&self, due: i64, period: u32, window: u32) {
        self.header().arm_external(self.raw, due, period, window);
    }

    pub(super) fn disarm(&self) -> Option<bool> {
        self.header().disarm_external(self.raw)
    }

    /// The one drain for timers (see [`Lifecycle::drain`]).
    fn drain_as(&self, access: Access, cancel: bool) {
        self.header().drains.drain(access, cancel, || {
            trace_call!("WaitForThreadpoolTimerCallbacks", self.raw, cancel, {
                // SAFETY: `self.raw` is a live timer.
                unsafe { WaitForThreadpoolTimerCallbacks(self.raw, cancel.into()) }
            });
        });
        record_kind!(self.header().periodic(), "drained", self.raw, cancel);
    }

    /// Begins a stop (arms and re-arms are absorbed from now on) and
    /// disarms, in one step under the arming lock; undo with
    /// `gate.end_stop`, which teardown never calls.
    fn suppress_and_disarm(&self) {
        let h = self.header();
        h.gate.begin_stop(|held| {
            h.generation.fetch_add(1, Ordering::SeqCst);
            h.set_locked(held, self.raw, None, 0, 0);
        });
    }
}

impl Lifecycle for TimerCore {
    fn owner_name(&self) -> &'static str {
        self.header().owner
    }

    fn context(&self) -> *const c_void {
        self.ctx.as_ptr()
    }

    fn record(&self, phase: Phase) {
        let periodic = self.header().periodic();
        match phase {
            Phase::Begin => record_kind!(periodic, "drop-begin", self.raw, 0),
            Phase::Drained => record_kind!(periodic, "drop-drained", self.raw, 0),
            Phase::DrainOwed => record_kind!(periodic, "drain-owed", self.raw, 0),
        }
    }

    /// An arming not yet fired or drained (a periodic timer: armed and not
    /// stopped and drained since).
    fn obligation(&self) -> &DrainObligation {
        &self.header().obligation
    }

    /// A callback cannot drain its own timer, so one that a tick has already
    /// stopped owes no drain.
    fn drain_owed_in_own_callback(&self) -> bool {
        self.header().settle_if_disarmed();
        self.drain_owed()
    }

    /// The one drain for timers: waits for every queued and running callback
    /// (`WaitForThreadpoolTimerCallbacks(.., FALSE)`), or with `cancel`
    /// discards the queued ones first. A due time in the future has queued
    /// nothing, so this does not wait for it.
    fn drain(&self, cancel: bool) {
        self.drain_as(Access::Shared, cancel);
        self.header().settle_if_disarmed();
    }

    /// Stops the timer and drains: when this returns no callback is running
    /// or queued, and none will start until the timer is armed again. Arms
    /// that race it are absorbed (see `crate::callback::arming`).
    fn stop_and_drain(&self) {
        self.suppress_and_disarm();
        self.drain(false);
        self.header().gate.end_stop(|_| {});
    }

    /// Suppresses re-arms for good and disarms.
    fn stop(&self) {
        self.suppress_and_disarm();
    }

    fn quiesce(&self, cancel: bool) {
        self.suppress_and_disarm();
        // The obligation is not settled: a teardown read it before
        // (`owner::quiesce_for_teardown`, `owner::before_release`), and
        // nothing reads it after.
        self.drain_as(Access::Owned, cancel);
    }

    fn close_and_free(self, here: Option<&Local>) {
        // SAFETY: disarmed with re-arms suppressed and drained by the owner;
        // the object is closed exactly once, here.
        trace_call!("CloseThreadpoolTimer", self.raw, 0, { unsafe { CloseThreadpoolTimer(self.raw) } });
        self.free_with(|ctx| ctx.free_in(here));
    }
}

impl Released for TimerCore {
    fn free(self) {
        self.free_with(drop);
    }
}

impl TimerCore {
    /// Frees the context with `free` once the timer is closed: its header
    /// (the pool reference among it) and callback are needed no more.
    fn free_with(self, free: impl FnOnce(Context<TimerHeader>)) {
        let periodic = self.header().periodic();
        let Self { raw, ctx } = self;
        free(ctx);
        record_kind!(periodic, "drop-closed", raw, 0);
    }
}

unsafe extern "system" fn one_shot_trampoline<F>(
    instance: PTP_CALLBACK_INSTANCE,
    context: *mut c_void,
    timer: PTP_TIMER,
) where
    F: Fn(&TimerFiring<'_>) + Send + Sync + 'static,
{
    // First, so it is left last (`crate::callback::inplace`): the time driver's timer
    // arms it.
    let site = crate::callback::inplace::Site::new(instance, true);
    let _inplace = site.enter();
    let _scope = reentry::CallbackScope::enter(context);
    trace_record!("timer", "trampoline-entered", timer, 0);
    // SAFETY: `context` is the `Shared` this trampoline was created with; the
    // owner frees it only after disarming and draining every callback.
    let shared = unsafe { ctx::get::<TimerHeader, F>(context) };
    let header = &shared.header;
    let began_at = header.generation.load(Ordering::SeqCst);
    header.obligation.dispatched();
    let span = spans::enter(spans::Kind::Timer, timer as usize, || header.parent.get(), None);
    let firing = TimerFiring { request: Cell::new(None), instance: CallbackInstance::new(instance) };
    (shared.callback)(&firing);
    if firing.request.get().is_some() {
        header.parent.follow(&span);
    }
    drop(span);
    if let Some(deadline) = firing.request.get() {
        header.apply_rearm(timer, began_at, deadline.timer_due());
    }
    trace_record!("timer", "trampoline-left", timer, 0);
}

unsafe extern "system" fn periodic_trampoline<F>(
    instance: PTP_CALLBACK_INSTANCE,
    context: *mut c_void,
    timer: PTP_TIMER,
) where
    F: Fn(&PeriodicTick<'_>) + Send + Sync + 'static,
{
    let _scope = reentry::CallbackScope::enter(context);
    trace_record!("timer-periodic", "trampoline-entered", timer, 0);
    // SAFETY: as in `one_shot_trampoline`.
    let shared = unsafe { ctx::get::<TimerHeader, F>(context) };
    // A tick does not settle the drain obligation: the timer stays owed
    // until it is stopped and drained.
    let tick = PeriodicTick {
        header: &shared.header,
        raw: timer,
        began_at: shared.header.generation.load(Ordering::SeqCst),
        instance: CallbackInstance::new(instance),
    };
    let span = spans::enter(spans::Kind::Periodic, timer as usize, || shared.header.parent.get(), None);
    (shared.callback)(&tick);
    drop(span);
    trace_record!("timer-periodic", "trampoline-left", timer, 0);
}
