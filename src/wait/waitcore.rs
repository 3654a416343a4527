//! The wait's core, shared by [`Wait`](super::Wait) and the cleanup
//! group's wait member: the context header the owner and the trampoline
//! share, the trampoline, arming and disarming, the stops with the Wine
//! flush (see the [module docs](super#teardown)), and the teardown phases.

use core::ffi::c_void;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use windows_sys::Win32::Foundation::{FILETIME, WAIT_TIMEOUT};
use windows_sys::Win32::System::Threading::{
    CloseThreadpoolWait, CreateThreadpoolWait, PTP_CALLBACK_INSTANCE, PTP_WAIT, SetThreadpoolWait,
    WaitForThreadpoolWaitCallbacks,
};

use super::{WaitActivation, WaitResult};
use crate::callback::arming::{ArmGate, Gated};
use crate::callback::ctx::{self, Blocks, Context};
use crate::callback::local::Local;
use crate::callback::obligation::DrainObligation;
use crate::callback::owner::{Access, DrainLock, Lifecycle, Phase, Released};
use crate::callback::reentry;
use crate::callback::spans;
use crate::callback_env::{CallbackEnviron, env_parts};
use crate::handle::{SendHandle, WaitableHandle};
use crate::heal::Registration;
use crate::instance::CallbackInstance;
use crate::pool::PoolRef;
use crate::sys::deadline::Deadline;
use crate::sys::{self, filetime};

/// The arming state, behind the gate that arming, re-arming and stopping
/// share (`crate::callback::arming`: arms are absorbed while a stop is in progress;
/// teardown's stop never ends).
#[derive(Default)]
pub(super) struct ArmState {
    /// Armings published since the wait was last at rest. Compared with
    /// [`WaitHeader::activations`]: fewer activations than armings means an
    /// arming may still be outstanding (each arming yields at most one
    /// activation).
    armings: u64,
    /// Wine only: a flush arming is outstanding; a disarm now would remove
    /// it and leave the flush waiting for an activation that never comes.
    flushing: bool,
}

/// Wine only: the teardown flush handshake.
#[derive(Default)]
struct Flush {
    /// Read by every activation; true only while a flush is in progress.
    active: AtomicBool,
    acked: Mutex<bool>,
    cv: Condvar,
}

/// The context state the owner and the trampoline share.
pub(crate) struct WaitHeader {
    obligation: DrainObligation,
    /// The target's handle value, for re-arms (the owner keeps it open until
    /// the wait is drained and closed).
    pub(super) target: SendHandle,
    pub(super) arming: ArmGate<ArmState>,
    /// Activations of user armings since the wait was last at rest.
    activations: AtomicU64,
    flush: Flush,
    /// The span current at the latest `arm` from outside a callback: the
    /// activations' parent.
    pub(super) parent: spans::Parent,
}

impl WaitHeader {
    fn lock(&self) -> MutexGuard<'_, Gated<ArmState>> {
        self.arming.lock()
    }

    /// Publishes an arming; the caller is inside the gate's `arm` (holds the
    /// lock, no stop in progress).
    pub(super) fn publish(&self, state: &mut ArmState, wait: PTP_WAIT, timeout: Option<&FILETIME>) {
        state.armings += 1;
        let handle = self.target.0;
        let ft = timeout.map_or(core::ptr::null(), |t| t as *const FILETIME);
        self.obligation.publish_arming(|| {
            trace_call!("SetThreadpoolWait", wait, handle, {
                // SAFETY: `wait` is live (owner alive or callback running) and
                // `handle` stays open until the wait is drained and closed.
                unsafe { SetThreadpoolWait(wait, handle, ft) }
            })
        });
    }
}

unsafe extern "system" fn trampoline<F>(
    instance: PTP_CALLBACK_INSTANCE,
    context: *mut c_void,
    wait: PTP_WAIT,
    result: u32,
) where
    F: Fn(&WaitActivation<'_>) + Send + Sync + 'static,
{
    // First, so it is left last (`crate::callback::inplace`): a wait future's
    // callback arms it.
    let site = crate::callback::inplace::Site::new(instance, true);
    let _inplace = site.enter();
    let _scope = reentry::CallbackScope::enter(context);
    let result = if result == WAIT_TIMEOUT { WaitResult::TimedOut } else { WaitResult::Signalled };
    let timed_out = result == WaitResult::TimedOut;
    // SAFETY: `context` is the `Shared` this trampoline was created with; the
    // owner frees it only after draining every callback (and, on Wine,
    // flushing stale activations).
    let shared = unsafe { ctx::get::<WaitHeader, F>(context) };
    let header = &shared.header;
    if header.flush.active.load(Ordering::SeqCst) {
        trace_record!("wait", "trampoline-flush", wait, timed_out);
        *header.flush.acked.lock().unwrap_or_else(PoisonError::into_inner) = true;
        header.flush.cv.notify_all();
        return;
    }
    trace_record!("wait", "trampoline-entered", wait, timed_out);
    header.activations.fetch_add(1, Ordering::SeqCst);
    header.obligation.dispatched();
    let outcome = if timed_out { spans::Outcome::TimedOut } else { spans::Outcome::Signalled };
    let span = spans::enter(spans::Kind::Wait, wait as usize, || header.parent.get(), Some(outcome));
    (shared.callback)(&WaitActivation { header, wait, result, instance: CallbackInstance::new(instance) });
    drop(span);
    trace_record!("wait", "trampoline-left", wait, 0);
}

/// The part of a wait shared by [`Wait`](super::Wait) and the cleanup group's
/// wait member: the raw object, its context, its target and its pool.
pub(crate) struct WaitCore {
    pub(super) raw: PTP_WAIT,
    ctx: Context<WaitHeader>,
    pub(super) handle: WaitableHandle,
    pool: PoolRef,
    /// Serialises the owner's stops and cancellations, so a flush never
    /// meets another stop's disarm or a cancellation of its activation.
    /// Callbacks never take it.
    stopping: Mutex<()>,
    /// Under Wine, serialises a cancelling drain with the others, `wait` among them
    /// (see [`DrainLock`]); `stopping` already orders it with stops.
    drains: DrainLock,
    /// This wait's claim on its pool's self-heal registry entry.
    claim: Registration,
    /// The public type owning it, for reports and panics.
    pub(super) owner: &'static str,
}

impl WaitCore {
    pub(crate) fn new<F>(
        owner: &'static str,
        handle: WaitableHandle,
        callback: F,
        env: Option<&CallbackEnviron>,
        blocks: Blocks<'_>,
    ) -> io::Result<Self>
    where
        F: Fn(&WaitActivation<'_>) + Send + Sync + 'static,
    {
        let (env, pool, placement) = env_parts(env);
        let header = WaitHeader {
            obligation: DrainObligation::default(),
            target: SendHandle(handle.raw()),
            arming: ArmGate::new(ArmState::default()),
            activations: AtomicU64::new(0),
            flush: Flush::default(),
            parent: spans::Parent::new(),
        };
        let ctx = Context::new(blocks, placement, header, callback);
        let pv = ctx.as_ptr();
        // The error is read inside the bracket, before anything is freed.
        let raw = trace_call!("CreateThreadpoolWait", pv, env, {
            // SAFETY: the trampoline is instantiated for the context's type, and
            // the context outlives the object (freed only after drain and close).
            sys::created(unsafe { CreateThreadpoolWait(Some(trampoline::<F>), pv, env) })
        })?;
        trace_record!("wait", "created", raw, pv);
        let claim = Registration::new(&pool);
        Ok(Self { raw, ctx, handle, pool, stopping: Mutex::new(()), drains: DrainLock::new(), claim, owner })
    }

    fn header(&self) -> &WaitHeader {
        self.ctx.header()
    }

    pub(super) fn arm(&self, timeout: Deadline) {
        let ft = timeout.due().map(filetime);
        let h = self.header();
        h.parent.capture();
        let armed = h.arming.arm(|state| {
            trace_record!("wait", "armed", self.raw, h.target.0);
            h.publish(state, self.raw, ft.as_ref());
        });
        if armed.is_none() {
            trace_record!("wait", "arm-suppressed", self.raw, 0);
        }
    }

    pub(super) fn disarm(&self) -> Option<bool> {
        let g = self.header().lock();
        // During a flush the wait is already disarmed for the user (nothing
        // of theirs to cancel); the flush disarms its own arming when it ends.
        let cancelled = if g.state.flushing { sys::set_wait_ex().map(|_| false) } else { self.set_null() };
        drop(g);
        trace_record!("wait", "disarmed", self.raw, 0);
        cancelled
    }

    fn lock_stopping(&self) -> MutexGuard<'_, ()> {
        self.stopping.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Disarms; returns what `SetThreadpoolWaitEx` reports (whether an
    /// armed wait was cancelled) where the system has it.
    fn set_null(&self) -> Option<bool> {
        match sys::set_wait_ex() {
            Some(set_ex) => Some(trace_call!("SetThreadpoolWaitEx", self.raw, 0, {
                // SAFETY: `self.raw` is a live wait; a null handle disarms it;
                // `set_ex` is `SetThreadpoolWaitEx` (signature checked in
                // `sys`), whose reserved last argument must be null.
                unsafe { set_ex(self.raw, core::ptr::null_mut(), core::ptr::null(), core::ptr::null_mut()) != 0 }
            })),
            None => {
                trace_call!("SetThreadpoolWait", self.raw, 0, {
                    // SAFETY: `self.raw` is a live wait; a null handle disarms it.
                    unsafe { SetThreadpoolWait(self.raw, core::ptr::null_mut(), core::ptr::null()) }
                });
                None
            }
        }
    }

    /// Begins a stop (arms and re-arms are absorbed until
    /// [`Self::lift_suppression`]) and disarms, under the gate's lock.
    /// Returns whether a Wine flush is needed: an arming may still be
    /// outstanding under Wine.
    fn suppress_and_disarm(&self) -> bool {
        let h = self.header();
        let flush = h.arming.begin_stop(|state| {
            let _ = self.set_null();
            sys::on_wine() && state.armings > h.activations.load(Ordering::SeqCst)
        });
        trace_record!("wait", "suppress-and-disarm", self.raw, flush);
        flush
    }

    /// Ends a `stop_and_drain`: the wait is at rest, so the counts restart.
    fn lift_suppression(&self) {
        let h = self.header();
        h.arming.end_stop(|state| {
            // Nothing is armed, queued or running (drained, arms absorbed),
            // so no activation can race this reset.
            state.armings = 0;
            h.activations.store(0, Ordering::SeqCst);
            h.obligation.drained();
        });
    }

    /// Wine only, after `suppress_and_disarm` and a drain: makes sure no
    /// activation can still be queued (see the module docs).
    ///
    /// Wine's wait thread consumes the zero-timeout arming either when it
    /// processes the result of a wait begun before the disarm (it then
    /// queues a stale activation, and that handle array is done), or in a
    /// later pass that builds its next array (which times the arming out
    /// without including the handle). Either way the activation that follows
    /// proves no array holding the handle remains. Every activation that runs
    /// while the flush is active is taken as that proof: the drain before it
    /// finished every activation queued before the disarm, so any later one
    /// is stale or the flush's own. A final disarm and drain then settle
    /// whatever that pass queued.
    fn flush_stale_activations(&self) {
        let h = self.header();
        trace_record!("wait", "flush-begin", self.raw, 0);
        *h.flush.acked.lock().unwrap_or_else(PoisonError::into_inner) = false;
        h.flush.active.store(true, Ordering::SeqCst);
        let mut g = h.lock();
        g.state.flushing = true;
        let zero = FILETIME { dwLowDateTime: 0, dwHighDateTime: 0 };
        trace_call!("SetThreadpoolWait", self.raw, h.target.0, {
            // SAFETY: `self.raw` is live and the target is open; a zero
            // timeout makes Wine time the arming out without waiting.
            unsafe { SetThreadpoolWait(self.raw, h.target.0, &zero) }
        });
        drop(g);
        let acked = h.flush.acked.lock().unwrap_or_else(PoisonError::into_inner);
        drop(h.flush.cv.wait_while(acked, |acked| !*acked).unwrap_or_else(PoisonError::into_inner));
        let mut g = h.lock();
        let _ = self.set_null();
        g.state.flushing = false;
        drop(g);
        self.drain(false);
        h.flush.active.store(false, Ordering::SeqCst);
        trace_record!("wait", "flush-done", self.raw, 0);
    }

    /// Refuses re-arms, disarms and drains (flushing under Wine), so that on
    /// return nothing is armed, queued or running. The caller holds
    /// `stopping` or owns the core.
    fn quiesce(&self, cancel: bool) {
        let flush = self.suppress_and_disarm();
        self.drain(cancel);
        if flush {
            self.flush_stale_activations();
        }
    }

    /// The one cancellation for waits (the caller owes the pool a repair):
    /// discards queued callbacks, waits for running ones, serialised with
    /// stops so it never cancels a flush's activation.
    pub(super) fn cancel_pending(&self) {
        let _stopping = self.lock_stopping();
        self.drain(true);
    }

    /// Cancels, then stamps the pool as owing a repair and makes sure one
    /// will run (see `docs/self-heal.md`).
    #[cfg(feature = "self-heal")]
    pub(super) fn cancel_pending_and_heal(&self) {
        self.cancel_pending();
        self.claim.after_cancel();
    }
}

impl Lifecycle for WaitCore {
    fn owner_name(&self) -> &'static str {
        self.owner
    }

    fn context(&self) -> *const c_void {
        self.ctx.as_ptr()
    }

    fn record(&self, phase: Phase) {
        match phase {
            Phase::Begin => trace_record!("wait", "drop-begin", self.raw, 0),
            Phase::Drained => trace_record!("wait", "drop-drained", self.raw, 0),
            Phase::DrainOwed => trace_record!("wait", "drain-owed", self.raw, 0),
        }
    }

    /// An arming not yet dispatched or drained.
    fn obligation(&self) -> &DrainObligation {
        &self.header().obligation
    }

    /// The one drain for waits: waits for every queued and running callback,
    /// or with `cancel` discards the queued ones first.
    fn drain(&self, cancel: bool) {
        self.drains.drain(Access::Shared, cancel, || {
            trace_call!("WaitForThreadpoolWaitCallbacks", self.raw, cancel, {
                // SAFETY: `self.raw` is a live wait object.
                unsafe { WaitForThreadpoolWaitCallbacks(self.raw, cancel.into()) }
            });
        });
        trace_record!("wait", "drained", self.raw, cancel);
    }

    fn stop_and_drain(&self) {
        let _stopping = self.lock_stopping();
        self.quiesce(false);
        self.lift_suppression();
        trace_record!("wait", "stopped", self.raw, 0);
    }

    /// Refuses re-arms for good and disarms; the quiesce that follows
    /// decides on the Wine flush.
    fn stop(&self) {
        self.suppress_and_disarm();
    }

    fn quiesce(&self, cancel: bool) {
        WaitCore::quiesce(self, cancel);
    }

    fn close_and_free(self, here: Option<&Local>) {
        // SAFETY: quiesced by the owner, nothing can queue another callback;
        // the object is closed exactly once, here.
        trace_call!("CloseThreadpoolWait", self.raw, 0, { unsafe { CloseThreadpoolWait(self.raw) } });
        self.free_with(|ctx| ctx.free_in(here));
    }
}

impl Released for WaitCore {
    fn free(self) {
        self.free_with(drop);
    }
}

impl WaitCore {
    /// Closes the target, frees the context with `free`, drops the pool
    /// reference.
    fn free_with(self, free: impl FnOnce(Context<WaitHeader>)) {
        // The claim goes last: the pool stays registered until all is freed.
        let Self { raw, ctx, handle, pool, stopping: _, drains: _, claim: _claim, owner: _ } = self;
        drop(handle);
        free(ctx);
        drop(pool);
        trace_record!("wait", "drop-closed", raw, 0);
    }
}
