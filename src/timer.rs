//! Thread-pool timers (`TP_TIMER`): [`Timer`] fires once per arming,
//! [`PeriodicTimer`] ticks every period until stopped.
//!
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use windows_threadpool::Timer;
//!
//! let (tx, rx) = mpsc::channel();
//! let timer = Timer::new(move |firing| {
//!     let _ = tx.send(());
//!     // Fire again 5 ms after this firing ends; the request applies once
//!     // the callback has returned, so firings never overlap.
//!     firing.rearm(Duration::from_millis(5));
//! })?;
//! timer.arm(Duration::from_millis(1));
//! for _ in 0..3 {
//!     rx.recv_timeout(Duration::from_secs(10)).expect("the timer fires");
//! }
//! timer.stop_and_drain(); // no firing is running or will start
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Why two types
//! A one-shot timer's callback never overlaps itself unless the owner re-arms
//! it from outside while it runs; a periodic timer's ticks can overlap (the
//! pool queues the next tick on schedule whether or not the previous one has
//! returned, and runs it on another thread). A `period` argument on one type
//! would silently change that concurrency contract, so the contract is in the
//! type: [`Timer`] for self-paced repetition
//! ([`TimerFiring::rearm`] with a delay: the next firing is due that long
//! after the previous one *ended*), [`PeriodicTimer`] for a fixed cadence.
//!
//! # Arming
//! Both types, and [`Wait`](crate::Wait), share one verb family: `arm`
//! (replaces any previous arming), `arm_with_window` (timers: the pool may
//! delay a firing by up to the window to coalesce timers), `disarm`, and
//! `is_armed`. Every `arm` takes `impl Into<`[`Deadline`]`>`: a [`Duration`]
//! from now, an `Instant`, a [`SystemTime`], or [`Deadline::NEVER`]. Arming
//! never fails; the conversions (rounded up, saturating) are described in
//! [`crate::time`].
//!
//! # Periods and windows
//! Periods are whole milliseconds (`u32`); anything else is rejected with
//! `InvalidInput` where the period is given, in
//! [`PeriodicTimer::new`], the one place it is checked. A coalescing window
//! is a tolerance, so it is rounded *down* to whole milliseconds and
//! saturates at `u32::MAX` ms.
//!
//! # Re-arming from inside a firing
//! [`TimerFiring::rearm`] only records a request (the last one wins); the
//! trampoline converts it to a due time and applies it with
//! `SetThreadpoolTimer` after the callback returns, so a delay counts from
//! the end of the firing and an `Instant` is exact. An arming or disarm from
//! outside (`arm*`, `disarm`) that happens while a firing runs takes
//! precedence: that firing's re-arm request is dropped.
//!
//! # Arms racing a stop
//! Every arming, from outside or a firing's re-arm, goes through the arming
//! gate that waits share (`crate::arming`): `Drop` and
//! [`TimerObject::stop_and_drain`] raise it and disarm under its lock,
//! and an arming that takes the lock while a stop is in progress is
//! absorbed (it arms nothing and reports success, as if it had come before
//! the stop). So an arming cannot land between a stop's disarm and the end
//! of its drain.
//!
//! # Teardown
//! `Drop` stops arms, disarms, drains with
//! `WaitForThreadpoolTimerCallbacks(.., FALSE)` (never cancels), closes the
//! timer, then frees the callback. A drain waits only for callbacks already
//! queued or running: a due time still in the future has queued nothing,
//! which is why the disarm comes first.
//!
//! A callback may drop the last owner of its own timer (a one-shot that drops
//! itself after firing, a tick that ends its periodic timer): the drop
//! suppresses re-arms and disarms at once, and the drain, close and free run
//! on another thread once the callback has returned (see the
//! [crate docs](crate#a-callback-that-reaches-its-own-object)). A tick that
//! calls [`PeriodicTick::disarm`] before dropping its timer leaves no drain
//! owed. `wait`, `stop_and_drain` and `cancel_pending` called from the
//! timer's own callback panic: the drain would wait for the callback itself.
//!
//! A timer dropped while it still owes a drain (a one-shot armed and not yet
//! fired, or re-armed by its last firing; a periodic timer armed and not
//! stopped and drained since) is torn down just the same, and the debt is
//! recorded as `drain-owed`; with the `fail-fast` feature, `Drop` then panics
//! saying so. Call `stop_and_drain` first to drop a timer at rest.
//!
//! # Platform differences
//! On Windows, disarming a timer discarded a callback that had already been
//! queued but had not started, where measured (Microsoft's
//! `SetThreadpoolTimer` says instead that callbacks already queued still
//! occur, so count on neither); on Wine 8 that callback still runs. `disarm`
//! reports what it cancelled through `SetThreadpoolTimerEx` (Windows 8 and
//! later), looked up at run time; Wine 8 lacks it, and `disarm` returns
//! `None` there. Wine 8 also reads the period as a signed 32-bit
//! value, so a period above `i32::MAX` ms ticks continuously there. See
//! `docs/wine.md`.

use core::cell::Cell;
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::io;
use std::sync::MutexGuard;
use std::time::Duration;
#[cfg(doc)]
use std::time::SystemTime;

use windows_sys::Win32::System::Threading::{
    CloseThreadpoolTimer, CreateThreadpoolTimer, IsThreadpoolTimerSet, PTP_CALLBACK_INSTANCE, PTP_TIMER,
    SetThreadpoolTimer, WaitForThreadpoolTimerCallbacks,
};

use crate::arming::{ArmGate, Gated};
use crate::callback_env::{CallbackEnviron, env_parts};
use crate::ctx::{self, Blocks, Context};
use crate::instance::CallbackInstance;
use crate::local::Local;
use crate::obligation::DrainObligation;
use crate::owner::{self, Access, DrainLock, Lifecycle, Owner, Phase, Released};
use crate::pool::PoolRef;
use crate::reentry;
use crate::spans;
use crate::sys::{self, filetime};
use crate::time::Deadline;
use crate::trace::EventInfo;

pub(crate) const TRACE_EVENTS: &[EventInfo] = &[
    EventInfo {
        target: "timer",
        event: "created",
        slots: ["timer", "context"],
        meaning: "a one-shot timer was created",
    },
    EventInfo {
        target: "timer",
        event: "armed",
        slots: ["due", "period"],
        meaning: "the timer was armed from outside a firing (due: raw 100 ns FILETIME value, negative = relative)",
    },
    EventInfo {
        target: "timer",
        event: "arm-suppressed",
        slots: ["timer", "due"],
        meaning: "an arming from outside raced stop_and_drain() or teardown and was absorbed by it",
    },
    EventInfo { target: "timer", event: "disarmed", slots: ["timer", ""], meaning: "the timer was disarmed" },
    EventInfo {
        target: "timer",
        event: "trampoline-entered",
        slots: ["timer", ""],
        meaning: "a pool thread entered the callback",
    },
    EventInfo {
        target: "timer",
        event: "trampoline-left",
        slots: ["timer", ""],
        meaning: "the firing finished, re-arm applied or dropped",
    },
    EventInfo {
        target: "timer",
        event: "rearm-requested",
        slots: ["due", ""],
        meaning: "the callback asked to be re-armed (applied after it returns; due as if applied now)",
    },
    EventInfo {
        target: "timer",
        event: "rearm-entered",
        slots: ["timer", "due"],
        meaning: "the trampoline is applying a re-arm request",
    },
    EventInfo { target: "timer", event: "rearm-left", slots: ["timer", ""], meaning: "the re-arm was applied" },
    EventInfo {
        target: "timer",
        event: "rearm-suppressed",
        slots: ["timer", "reason"],
        meaning: "a re-arm request was dropped (reason 1: teardown or stop_and_drain in progress, 2: armed or disarmed from outside during the firing)",
    },
    EventInfo {
        target: "timer",
        event: "drained",
        slots: ["timer", "cancelled"],
        meaning: "every queued and running callback finished (cancelled=1: queued ones were discarded)",
    },
    EventInfo { target: "timer", event: "drop-begin", slots: ["timer", ""], meaning: "teardown started" },
    EventInfo {
        target: "timer",
        event: "drain-owed",
        slots: ["timer", ""],
        meaning: "teardown found an arming not yet fired or drained (call stop_and_drain first)",
    },
    EventInfo {
        target: "timer",
        event: "drop-drained",
        slots: ["timer", ""],
        meaning: "teardown disarmed and drained every callback",
    },
    EventInfo {
        target: "timer",
        event: "drop-closed",
        slots: ["timer", ""],
        meaning: "the timer was closed and its context freed",
    },
    EventInfo {
        target: "timer-periodic",
        event: "created",
        slots: ["timer", "context"],
        meaning: "a periodic timer was created",
    },
    EventInfo {
        target: "timer-periodic",
        event: "armed",
        slots: ["due", "period"],
        meaning: "the timer was started (due: raw 100 ns FILETIME value of the first tick; period in ms)",
    },
    EventInfo {
        target: "timer-periodic",
        event: "arm-suppressed",
        slots: ["timer", "due"],
        meaning: "a start raced stop_and_drain() or teardown and was absorbed by it",
    },
    EventInfo { target: "timer-periodic", event: "disarmed", slots: ["timer", ""], meaning: "the timer was stopped" },
    EventInfo {
        target: "timer-periodic",
        event: "trampoline-entered",
        slots: ["timer", ""],
        meaning: "a pool thread entered a tick",
    },
    EventInfo {
        target: "timer-periodic",
        event: "trampoline-left",
        slots: ["timer", ""],
        meaning: "the tick returned",
    },
    EventInfo {
        target: "timer-periodic",
        event: "disarm-requested",
        slots: ["timer", "applied"],
        meaning: "a tick called disarm (applied=0: the timer had been re-armed or disarmed from outside since the tick began)",
    },
    EventInfo {
        target: "timer-periodic",
        event: "drained",
        slots: ["timer", "cancelled"],
        meaning: "every queued and running tick finished (cancelled=1: queued ones were discarded)",
    },
    EventInfo { target: "timer-periodic", event: "drop-begin", slots: ["timer", ""], meaning: "teardown started" },
    EventInfo {
        target: "timer-periodic",
        event: "drain-owed",
        slots: ["timer", ""],
        meaning: "teardown found the timer running or stopped but not drained (call stop_and_drain first)",
    },
    EventInfo {
        target: "timer-periodic",
        event: "drop-drained",
        slots: ["timer", ""],
        meaning: "teardown stopped the timer and drained every tick",
    },
    EventInfo {
        target: "timer-periodic",
        event: "drop-closed",
        slots: ["timer", ""],
        meaning: "the timer was closed and its context freed",
    },
    EventInfo { target: "syscall", event: "CreateThreadpoolTimer", slots: ["context", "environment"], meaning: "" },
    EventInfo {
        target: "syscall",
        event: "SetThreadpoolTimer",
        slots: ["timer", "due"],
        meaning: "due is the raw FILETIME value; i64::MIN stands for NULL (disarm)",
    },
    EventInfo {
        target: "syscall",
        event: "SetThreadpoolTimerEx",
        slots: ["timer", ""],
        meaning: "a disarm (NULL due time) where the system has the call",
    },
    EventInfo { target: "syscall", event: "WaitForThreadpoolTimerCallbacks", slots: ["timer", "cancel"], meaning: "" },
    EventInfo { target: "syscall", event: "CloseThreadpoolTimer", slots: ["timer", ""], meaning: "" },
];

/// Records under `timer` or `timer-periodic` depending on the timer's kind.
macro_rules! record_kind {
    ($periodic:expr, $event:literal, $a:expr, $b:expr) => {
        if $periodic { trace_record!("timer-periodic", $event, $a, $b) } else { trace_record!("timer", $event, $a, $b) }
    };
}

/// Marks "no re-arm requested" and, in trace records, a NULL due time; no
/// due time this module produces is `i64::MIN`.
const NO_DUE: i64 = i64::MIN;

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// A period or window as the pool takes it: whole milliseconds in a `u32`.
fn whole_millis(what: &str, d: Duration) -> io::Result<u32> {
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return Err(invalid(format!(
            "timer {what} {d:?} is not a whole number of milliseconds: the pool takes it in whole milliseconds"
        )));
    }
    u32::try_from(d.as_millis()).map_err(|_| {
        invalid(format!(
            "timer {what} {d:?} is above the maximum of u32::MAX ms (about 49.7 days): the pool takes it as a \
             32-bit count of milliseconds"
        ))
    })
}

/// A coalescing window in whole milliseconds, rounded down (the pool may
/// delay a firing by the window, so never by more than asked) and
/// saturating at `u32::MAX` ms.
fn window_millis(window: Duration) -> u32 {
    u32::try_from(window.as_millis()).unwrap_or(u32::MAX)
}

/// Validates a periodic timer's period (see [`PeriodicTimer::new`]).
pub(crate) fn period_millis(period: Duration) -> io::Result<u32> {
    if period < PeriodicTimer::MIN_PERIOD {
        return Err(invalid(format!(
            "timer period {period:?} is below the minimum of 1 ms: the pool takes the period in whole \
             milliseconds, and a period of zero would mean \"do not repeat\" (use Timer for a one-shot)"
        )));
    }
    whole_millis("period", period)
}

/// The context state shared by the owner and the trampoline.
pub(crate) struct TimerHeader {
    /// A periodic timer's period.
    period: Option<Period>,
    obligation: DrainObligation,
    /// Taken around every `SetThreadpoolTimer` this crate issues; arms go
    /// through it so that a stop absorbs those that race it (see
    /// `crate::arming`).
    gate: ArmGate<Held>,
    /// Bumped (under `lock`) by every arming and disarm from outside a
    /// callback; a firing's re-arm (or a tick's disarm) applies only if it has
    /// not changed since the firing began.
    generation: AtomicU64,
    /// Armed by the owner or a re-arm, and not disarmed since (written under
    /// `lock`). For a one-shot this stays true after it fires.
    armed: AtomicBool,
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
struct Held(());

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

    fn lock(&self) -> MutexGuard<'_, Gated<Held>> {
        self.gate.lock()
    }

    /// Issues `SetThreadpoolTimer`; `due == None` disarms, and then returns
    /// what `SetThreadpoolTimerEx` reports (whether the disarm cancelled a
    /// pending expiry) where the system has it. The caller holds the lock
    /// (`Held` is the proof).
    fn set_locked(&self, _held: &Held, raw: PTP_TIMER, due: Option<i64>, period: u32, window: u32) -> Option<bool> {
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
/// standalone types or by a cleanup group (see `crate::owner`). Arming and
/// draining are defined once, here.
pub(crate) struct TimerCore {
    raw: PTP_TIMER,
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
    /// [`PeriodicTimer::new`] documents.
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

    fn header(&self) -> &TimerHeader {
        self.ctx.header()
    }

    /// Arms with a raw due time (see the module docs), `period` and `window` in ms.
    fn arm(&self, due: i64, period: u32, window: u32) {
        self.header().arm_external(self.raw, due, period, window);
    }

    fn disarm(&self) -> Option<bool> {
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
    /// that race it are absorbed (see `crate::arming`).
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
    // First, so it is left last (`crate::inplace`): the time driver's timer
    // arms it.
    let site = crate::inplace::Site::new(instance, true);
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

/// What a [`Timer`]'s callback receives: the handle for re-arming
/// the timer from inside its own firing.
///
/// A request is only recorded; it is applied after the callback returns
/// (the last request wins), so the next firing cannot overlap this one and
/// a delay counts from the end of this firing. It is dropped if the timer
/// is being dropped or drained by [`TimerObject::stop_and_drain`], or if
/// the owner armed or disarmed the timer while this firing ran.
///
/// Not `Send` or `Sync`: it lives for one firing on one thread.
pub struct TimerFiring<'a> {
    request: Cell<Option<Deadline>>,
    instance: CallbackInstance<'a>,
}

impl core::fmt::Debug for TimerFiring<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TimerFiring").field("rearm", &self.request.get()).finish()
    }
}

impl<'a> TimerFiring<'a> {
    /// The running callback's instance: what it can ask of the pool (see
    /// [`crate::instance`]).
    pub fn instance(&self) -> &CallbackInstance<'a> {
        &self.instance
    }

    /// Re-arms the timer to fire at `deadline`, applied after this firing
    /// returns: a [`Duration`] counts from then (zero: immediately after), an
    /// `Instant` or [`SystemTime`] already past fires at once. A later
    /// request in the same firing replaces this one. See [`crate::time`].
    pub fn rearm(&self, deadline: impl Into<Deadline>) {
        let deadline = deadline.into();
        trace_record!("timer", "rearm-requested", deadline.timer_due(), 0);
        self.request.set(Some(deadline));
    }
}

/// What a [`PeriodicTimer`]'s callback receives on each tick.
///
/// Not `Send` or `Sync`: it lives for one tick on one thread.
pub struct PeriodicTick<'a> {
    header: &'a TimerHeader,
    raw: PTP_TIMER,
    began_at: u64,
    instance: CallbackInstance<'a>,
}

impl core::fmt::Debug for PeriodicTick<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PeriodicTick").field("timer", &(self.raw as *const c_void)).finish()
    }
}

impl<'a> PeriodicTick<'a> {
    /// The running callback's instance: what it can ask of the pool (see
    /// [`crate::instance`]).
    pub fn instance(&self) -> &CallbackInstance<'a> {
        &self.instance
    }

    /// Disarms the timer from inside a tick, at once: no further tick is
    /// scheduled. Ticks already running keep running; on Wine 8 a tick
    /// already queued still runs (on Windows it was discarded where measured). Ignored if
    /// the owner armed or disarmed the timer since this tick began.
    pub fn disarm(&self) {
        let g = self.header.lock();
        let applied = self.header.generation.load(Ordering::SeqCst) == self.began_at;
        trace_record!("timer-periodic", "disarm-requested", self.raw, applied);
        if applied {
            self.header.generation.fetch_add(1, Ordering::SeqCst);
            let _ = self.header.set_locked(&g.state, self.raw, None, 0, 0);
        }
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Timer>();
    send_sync::<PeriodicTimer>();
    send_sync::<TimerObject>();
    send_sync::<PeriodicTimerObject>();
};

/// An owned one-shot timer (`CreateThreadpoolTimer`): each arming fires the
/// callback once. Its methods are [`TimerObject`]'s, which the cleanup
/// group's [`TimerMember`](crate::cleanup_group::TimerMember) offers too.
///
/// Arm it with [`arm`](TimerObject::arm) (a `Duration`, an `Instant` or a
/// `SystemTime`); arming again replaces the previous due time. From inside
/// the callback, [`TimerFiring::rearm`] schedules
/// the next firing without overlap. `Drop` suppresses any pending re-arm,
/// disarms, drains (never cancels), closes the timer, then frees the
/// callback; dropping an armed timer owes a drain (see
/// [the module docs](crate::timer#teardown)). The callback may drop the
/// timer's last owner (the teardown then completes once it returns);
/// draining the timer from its own callback panics.
///
/// ```
/// use std::sync::{Arc, Mutex, Condvar};
/// use std::time::{Duration, Instant};
/// use windows_threadpool::Timer;
///
/// let fired = Arc::new((Mutex::new(0), Condvar::new()));
/// let f = Arc::clone(&fired);
/// let timer = Timer::new(move |_| {
///     *f.0.lock().unwrap() += 1;
///     f.1.notify_all();
/// })?;
/// timer.arm(Instant::now() + Duration::from_millis(10));
/// let (lock, cv) = &*fired;
/// let n = cv.wait_while(lock.lock().unwrap(), |n| *n == 0).unwrap();
/// assert_eq!(*n, 1);
/// # drop(n);
/// // A delay too large to represent saturates: armed, never due in practice.
/// timer.arm(Duration::MAX);
/// assert!(timer.is_armed());
/// timer.stop_and_drain();
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "dropping it disarms, drains and closes the timer"]
pub struct Timer {
    core: Owner<TimerCore>,
}

view! {
    /// A one-shot timer's methods, shared by its owners: [`Timer`] and
    /// the cleanup group's [`TimerMember`](crate::cleanup_group::TimerMember)
    /// both dereference to it.
    pub struct TimerObject(TimerCore); owned by Timer
}

impl core::fmt::Debug for TimerObject {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct(self.0.owner_name()).field("raw", &(self.0.raw as *const c_void)).finish()
    }
}

impl Timer {
    /// Creates a disarmed timer whose callback is `callback`, on the process
    /// default pool.
    pub fn new<F>(callback: F) -> io::Result<Self>
    where
        F: Fn(&TimerFiring<'_>) + Send + Sync + 'static,
    {
        Ok(Self { core: Owner::new(TimerCore::new_one_shot("Timer", callback, None, Blocks::KEPT)?) })
    }

    /// Creates a disarmed timer whose callback is `callback`, on the pool and
    /// with the settings of `env`.
    pub fn new_in<F>(callback: F, env: &CallbackEnviron) -> io::Result<Self>
    where
        F: Fn(&TimerFiring<'_>) + Send + Sync + 'static,
    {
        Ok(Self { core: Owner::new(TimerCore::new_one_shot("Timer", callback, Some(env), Blocks::KEPT)?) })
    }
}

impl TimerObject {
    /// Arms the timer to fire once at `deadline` (a [`Duration`] from now,
    /// an `Instant`, a [`SystemTime`], or [`Deadline::NEVER`]; see
    /// [`crate::time`]), replacing any previous arming. A deadline already
    /// past fires at once; one too far off to represent saturates. An arm
    /// that races [`stop_and_drain`](Self::stop_and_drain) may be absorbed
    /// by it, as if it came first (this applies to every arming method).
    pub fn arm(&self, deadline: impl Into<Deadline>) {
        self.0.arm(deadline.into().timer_due(), 0, 0);
    }

    /// Like [`arm`](Self::arm), allowing the pool to delay the firing by up
    /// to `window` (rounded down to whole milliseconds, at most `u32::MAX`
    /// ms) to coalesce it with other timers.
    pub fn arm_with_window(&self, deadline: impl Into<Deadline>, window: Duration) {
        self.0.arm(deadline.into().timer_due(), 0, window_millis(window));
    }

    /// Disarms the timer. A firing already running continues, and its re-arm
    /// request is dropped. A firing already queued still runs on Wine 8 and
    /// was discarded on Windows where measured (see the
    /// [module docs](self#platform-differences)).
    ///
    /// Returns whether the disarm cancelled a pending expiry
    /// (`SetThreadpoolTimerEx`): `Some(true)` if the timer was armed and
    /// will not fire, `Some(false)` if it was not armed or its firing is
    /// running or about to start. `None` where the system lacks
    /// `SetThreadpoolTimerEx` (before Windows 8; Wine 8).
    pub fn disarm(&self) -> Option<bool> {
        self.0.disarm()
    }

    /// `IsThreadpoolTimerSet`: whether a due time is set. This is not "will
    /// fire again": the flag stays set after a one-shot fires (on Windows, as
    /// Wine's conformance test `test_tp_timer` records, and on Wine 8; see
    /// `tests/objects/timer.rs::is_armed_stays_true_after_a_one_shot_fires`),
    /// and is cleared only by [`disarm`](Self::disarm) and
    /// [`stop_and_drain`](Self::stop_and_drain).
    pub fn is_armed(&self) -> bool {
        // SAFETY: `self.0.raw` is a live timer.
        unsafe { IsThreadpoolTimerSet(self.0.raw) != 0 }
    }

    /// Returns after every callback already queued or running has finished
    /// (`WaitForThreadpoolTimerCallbacks(.., FALSE)`). It does not wait for a
    /// due time still in the future: that firing is not queued yet.
    ///
    /// # Panics
    /// If called from this timer's own callback: it would wait for itself.
    pub fn wait(&self) {
        owner::wait(&self.0);
    }

    /// Discards a firing that is queued but has not started and waits for a
    /// running one (`WaitForThreadpoolTimerCallbacks(.., TRUE)`). The timer
    /// stays armed: a future due time still fires.
    ///
    /// Under Wine, one that races a drain of the same object on another
    /// thread (`wait`, `stop_and_drain`, another cancellation) waits for that
    /// drain to return first, since Wine 8's raw cancellation would leave it
    /// blocked (see `docs/wine.md`); it then waits for the callbacks that
    /// drain waits for, queued ones included, so issued from a callback on a
    /// pool with no other free thread it can deadlock. On Windows it waits
    /// only for running callbacks.
    ///
    /// # Panics
    /// If called from this timer's own callback: it would wait for itself.
    pub fn cancel_pending(&self) {
        owner::cancel_pending(&self.0);
    }

    /// Disarms and drains, like `Drop` but without closing: when it returns
    /// nothing is armed, queued or running, and no firing will start until
    /// the timer is armed again (which it may be).
    ///
    /// Arms that race it from other threads (or from a firing's re-arm
    /// request) do not break that: an arm that takes effect before its
    /// disarm is undone by it, and one made after the disarm and before it
    /// returns is absorbed (it arms nothing). An
    /// arm still in progress when it returns, or made after, is a new
    /// arming, ordered after the stop.
    ///
    /// # Panics
    /// If called from this timer's own callback: it would wait for itself.
    pub fn stop_and_drain(&self) {
        owner::stop_and_drain(&self.0);
    }

    /// The raw `PTP_TIMER`, valid while its owner is alive.
    pub fn as_raw(&self) -> PTP_TIMER {
        self.0.raw
    }
}

/// An owned periodic timer: once [armed](PeriodicTimerObject::arm) it
/// ticks every [`period`](PeriodicTimerObject::period) until disarmed. Its
/// methods are [`PeriodicTimerObject`]'s, which the cleanup group's
/// [`PeriodicTimerMember`](crate::cleanup_group::PeriodicTimerMember) offers
/// too.
///
/// **Ticks may overlap.** The pool queues each tick on schedule whether or
/// not the previous one has returned, and runs it on another thread; a
/// callback that can take longer than the period must tolerate running
/// concurrently with itself. (Use [`Timer`] with
/// [`TimerFiring::rearm`] for repetition that never overlaps.)
///
/// `Drop` stops the timer, drains (never cancels), closes it, then frees the
/// callback; dropping a running timer owes a drain (see
/// [the module docs](crate::timer#teardown)). A tick may drop the timer's
/// last owner (the teardown then completes once the ticks still queued or
/// running have returned; call [`PeriodicTick::disarm`] first to owe nothing);
/// draining the timer from its own tick panics.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::time::Duration;
/// use windows_threadpool::timer::PeriodicTimer;
///
/// let ticks = Arc::new(AtomicUsize::new(0));
/// let t = Arc::clone(&ticks);
/// let timer = PeriodicTimer::new(Duration::from_millis(2), move |tick| {
///     if t.fetch_add(1, Ordering::SeqCst) + 1 == 5 {
///         tick.disarm(); // ends the timer from inside a tick
///     }
/// })?;
/// timer.arm(timer.period());
/// while timer.is_armed() {
///     std::thread::sleep(Duration::from_millis(1));
/// }
/// timer.wait(); // ticks already queued or running have finished
/// assert!(ticks.load(Ordering::SeqCst) >= 5);
/// // A period the pool cannot take is rejected with a reason.
/// let err = PeriodicTimer::new(Duration::from_micros(1500), |_| {}).unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "dropping it stops, drains and closes the timer"]
pub struct PeriodicTimer {
    core: Owner<TimerCore>,
}

view! {
    /// A periodic timer's methods, shared by its owners:
    /// [`PeriodicTimer`] and the cleanup group's
    /// [`PeriodicTimerMember`](crate::cleanup_group::PeriodicTimerMember) both
    /// dereference to it.
    pub struct PeriodicTimerObject(TimerCore); owned by PeriodicTimer
}

/// A validated period: its duration and whole milliseconds.
#[derive(Clone, Copy, Debug)]
struct Period {
    period: Duration,
    millis: u32,
}

impl Period {
    fn new(period: Duration) -> io::Result<Self> {
        Ok(Self { period, millis: period_millis(period)? })
    }
}

impl core::fmt::Debug for PeriodicTimerObject {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct(self.0.owner_name())
            .field("raw", &(self.0.raw as *const c_void))
            .field("period", &self.0.header().period)
            .finish()
    }
}

impl PeriodicTimer {
    /// The shortest period: 1 ms (the pool counts periods in whole
    /// milliseconds, and zero would mean "do not repeat").
    pub const MIN_PERIOD: Duration = Duration::from_millis(1);
    /// The longest period: `u32::MAX` ms, about 49.7 days. (Wine 8 reads the
    /// period as signed: above `i32::MAX` ms it ticks continuously there.)
    pub const MAX_PERIOD: Duration = Duration::from_millis(u32::MAX as u64);

    /// Creates a stopped periodic timer on the process default pool. This is
    /// the one place a period is checked.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`], with a message saying why, for a
    /// period below [`MIN_PERIOD`](Self::MIN_PERIOD), above
    /// [`MAX_PERIOD`](Self::MAX_PERIOD), or not a whole number of
    /// milliseconds; otherwise the OS error if `CreateThreadpoolTimer` fails.
    pub fn new<F>(period: Duration, callback: F) -> io::Result<Self>
    where
        F: Fn(&PeriodicTick<'_>) + Send + Sync + 'static,
    {
        Ok(Self { core: Owner::new(TimerCore::new_periodic("PeriodicTimer", period, callback, None, Blocks::KEPT)?) })
    }

    /// Creates a stopped periodic timer on the pool and with the settings of
    /// `env`.
    ///
    /// # Errors
    /// As for [`new`](Self::new).
    pub fn new_in<F>(period: Duration, callback: F, env: &CallbackEnviron) -> io::Result<Self>
    where
        F: Fn(&PeriodicTick<'_>) + Send + Sync + 'static,
    {
        Ok(Self {
            core: Owner::new(TimerCore::new_periodic("PeriodicTimer", period, callback, Some(env), Blocks::KEPT)?),
        })
    }
}

impl PeriodicTimerObject {
    fn period_of(&self) -> Period {
        self.0.header().period.expect("a periodic timer's core has a period")
    }

    /// The period between ticks.
    pub fn period(&self) -> Duration {
        self.period_of().period
    }

    /// Arms (or re-arms) the timer: the first tick at `first` (a
    /// [`Duration`] from now, an `Instant`, a [`SystemTime`]; see
    /// [`crate::time`]; `timer.arm(timer.period())` ticks on the period from
    /// now), then one every period, until disarmed. A first tick already
    /// past comes at once.
    pub fn arm(&self, first: impl Into<Deadline>) {
        self.0.arm(first.into().timer_due(), self.period_of().millis, 0);
    }

    /// Like [`arm`](Self::arm), allowing the pool to delay each tick by up
    /// to `window` (rounded down to whole milliseconds, at most `u32::MAX`
    /// ms) to coalesce it with other timers.
    pub fn arm_with_window(&self, first: impl Into<Deadline>, window: Duration) {
        self.0.arm(first.into().timer_due(), self.period_of().millis, window_millis(window));
    }

    /// Disarms the timer: no further tick is scheduled. Ticks already
    /// running keep running; a tick already queued still runs on Wine 8 and
    /// was discarded on Windows where measured (see the
    /// [module docs](self#platform-differences)). Use [`stop_and_drain`](Self::stop_and_drain)
    /// to also wait for them. Returns what [`TimerObject::disarm`] returns.
    pub fn disarm(&self) -> Option<bool> {
        self.0.disarm()
    }

    /// Whether the timer has been armed and not disarmed since (by
    /// [`disarm`](Self::disarm), [`PeriodicTick::disarm`] or
    /// [`stop_and_drain`](Self::stop_and_drain)). Ticks may still be running
    /// when this is false.
    pub fn is_armed(&self) -> bool {
        self.0.header().armed.load(Ordering::SeqCst)
    }

    /// Returns after every tick already queued or running has finished. A
    /// running timer keeps ticking: to stop and wait, use
    /// [`stop_and_drain`](Self::stop_and_drain).
    ///
    /// # Panics
    /// If called from this timer's own callback: it would wait for itself.
    pub fn wait(&self) {
        owner::wait(&self.0);
    }

    /// Stops the timer and drains, like `Drop` but without closing: when it
    /// returns no tick is running or queued, and none will start until the
    /// timer is armed again. Arms that race it are undone or absorbed
    /// as for [`TimerObject::stop_and_drain`].
    ///
    /// # Panics
    /// If called from this timer's own callback: it would wait for itself.
    pub fn stop_and_drain(&self) {
        owner::stop_and_drain(&self.0);
    }

    /// The raw `PTP_TIMER`, valid while its owner is alive.
    pub fn as_raw(&self) -> PTP_TIMER {
        self.0.raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_whole_milliseconds_in_range() {
        assert_eq!(period_millis(Duration::from_millis(1)).unwrap(), 1);
        assert_eq!(period_millis(PeriodicTimer::MAX_PERIOD).unwrap(), u32::MAX);
        let cases = [
            (Duration::ZERO, "do not repeat"),
            (Duration::from_micros(999), "below the minimum"),
            (Duration::from_micros(1500), "whole number of milliseconds"),
            (PeriodicTimer::MAX_PERIOD + Duration::from_millis(1), "above the maximum"),
            (Duration::MAX, "whole number of milliseconds"),
        ];
        for (p, why) in cases {
            let e = period_millis(p).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            assert!(e.to_string().contains(why), "{p:?}: {e}");
        }
    }

    #[test]
    fn windows_round_down_and_saturate() {
        assert_eq!(window_millis(Duration::ZERO), 0);
        assert_eq!(window_millis(Duration::from_micros(1999)), 1, "never a longer window than asked");
        assert_eq!(window_millis(Duration::from_millis(u32::MAX as u64)), u32::MAX);
        assert_eq!(window_millis(Duration::from_millis(u32::MAX as u64 + 1)), u32::MAX);
        assert_eq!(window_millis(Duration::MAX), u32::MAX);
    }
}
