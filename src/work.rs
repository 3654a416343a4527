//! Work objects (`TP_WORK`): a callback that runs once per submission.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use windows_threadpool::Work;
//!
//! let count = Arc::new(AtomicUsize::new(0));
//! let c = Arc::clone(&count);
//! let work = Work::new(move |_| {
//!     c.fetch_add(1, Ordering::Relaxed);
//! })?;
//! for _ in 0..10 {
//!     work.submit();
//! }
//! work.wait();
//! assert_eq!(count.load(Ordering::Relaxed), 10);
//! # Ok::<(), std::io::Error>(())
//! ```

use core::ffi::c_void;
use core::time::Duration;
use std::io;
use std::sync::{Arc, Condvar, Mutex};

use windows_sys::Win32::System::Threading::{
    CloseThreadpoolWork, CreateThreadpoolWork, PTP_CALLBACK_INSTANCE, PTP_WORK, SubmitThreadpoolWork,
    WaitForThreadpoolWorkCallbacks,
};

use crate::callback::ctx::{self, Blocks, Context};
use crate::callback::local::Local;
use crate::callback::obligation::DrainObligation;
use crate::callback::owner::{self, Access, DrainLock, Lifecycle, Owner, Phase, Released};
use crate::callback::reentry;
use crate::callback::spans;
use crate::callback_env::{CallbackEnviron, env_parts};
use crate::instance::CallbackInstance;
use crate::pool::PoolRef;
use crate::sys;

/// A work object's core: the raw object and its context, which holds the
/// rest. Owned by [`Work`] or by a cleanup group (see `crate::callback::owner`). Two
/// pointers, so that a create and drop pair moves it in registers.
pub(crate) struct WorkCore {
    raw: PTP_WORK,
    ctx: Context<WorkHeader>,
}

const _: () = assert!(core::mem::size_of::<WorkCore>() == 2 * core::mem::size_of::<usize>());

/// The context state the owner and the trampoline share, and what the owner
/// keeps there to stay small.
pub(crate) struct WorkHeader {
    obligation: DrainObligation,
    /// The span current at the latest submit: its callbacks' parent.
    parent: spans::Parent,
    /// Under Wine, serialises a cancelling drain with the others (see [`DrainLock`]).
    drains: DrainLock,
    /// The public type owning it, for reports and panics.
    owner: &'static str,
    /// Keeps a private pool open until the object is closed.
    _pool: PoolRef,
}

impl WorkCore {
    pub(crate) fn new<F>(
        owner: &'static str,
        callback: F,
        env: Option<&CallbackEnviron>,
        blocks: Blocks<'_>,
    ) -> io::Result<Self>
    where
        F: Fn(&WorkInvocation<'_>) + Send + Sync + 'static,
    {
        let (env, pool, placement) = env_parts(env);
        let header = WorkHeader {
            obligation: DrainObligation::default(),
            parent: spans::Parent::new(),
            drains: DrainLock::new(),
            owner,
            _pool: pool,
        };
        let ctx = Context::new(blocks, placement, header, callback);
        let pv = ctx.as_ptr();
        // The error is read inside the bracket, before the context is freed.
        let raw = trace_call!("CreateThreadpoolWork", pv, env, {
            // SAFETY: the trampoline is instantiated for the context's type, and
            // the context outlives the object (freed only after drain and close).
            sys::created(unsafe { CreateThreadpoolWork(Some(trampoline::<F>), pv, env) })
        })?;
        trace_record!("work", "created", raw, pv);
        Ok(Self { raw, ctx })
    }
}

impl WorkCore {
    /// The one drain for work objects (see [`Lifecycle::drain`]).
    fn drain_as(&self, access: Access, cancel: bool) {
        self.ctx.header().drains.drain(access, cancel, || {
            trace_call!("WaitForThreadpoolWorkCallbacks", self.raw, cancel, {
                // SAFETY: `self.raw` is a live work object.
                unsafe { WaitForThreadpoolWorkCallbacks(self.raw, cancel.into()) }
            });
        });
        self.ctx.header().obligation.drained();
        trace_record!("work", "drained", self.raw, cancel);
    }
}

impl Lifecycle for WorkCore {
    fn owner_name(&self) -> &'static str {
        self.ctx.header().owner
    }

    fn context(&self) -> *const c_void {
        self.ctx.as_ptr()
    }

    fn record(&self, phase: Phase) {
        match phase {
            Phase::Begin => trace_record!("work", "drop-begin", self.raw, 0),
            Phase::Drained => trace_record!("work", "drop-drained", self.raw, 0),
            Phase::DrainOwed => trace_record!("work", "drain-owed", self.raw, 0),
        }
    }

    /// Submissions not yet dispatched or drained.
    fn obligation(&self) -> &DrainObligation {
        &self.ctx.header().obligation
    }

    fn drain(&self, cancel: bool) {
        self.drain_as(Access::Shared, cancel);
    }

    /// A work object has nothing to stop: draining brings it to rest.
    fn quiesce(&self, cancel: bool) {
        self.drain_as(Access::Owned, cancel);
    }

    fn close_and_free(self, here: Option<&Local>) {
        // SAFETY: quiesced by the owner; the object is closed exactly once, here.
        trace_call!("CloseThreadpoolWork", self.raw, 0, { unsafe { CloseThreadpoolWork(self.raw) } });
        self.free_with(|ctx| ctx.free_in(here));
    }
}

impl Released for WorkCore {
    /// Nothing to stop, and the native release drains it.
    fn before_release(&self, _cancel: bool) {}

    fn free(self) {
        self.free_with(drop);
    }
}

impl WorkCore {
    /// Frees the context with `free` once the object is closed: its header
    /// (the pool reference among it) and callback are needed no more.
    fn free_with(self, free: impl FnOnce(Context<WorkHeader>)) {
        let Self { raw, ctx } = self;
        free(ctx);
        trace_record!("work", "drop-closed", raw, 0);
    }
}

unsafe extern "system" fn trampoline<F: Fn(&WorkInvocation<'_>) + Send + Sync + 'static>(
    instance: PTP_CALLBACK_INSTANCE,
    context: *mut c_void,
    work: PTP_WORK,
) {
    let _scope = reentry::CallbackScope::enter(context);
    trace_record!("work", "trampoline-entered", work, 0);
    // SAFETY: `context` is the `Shared` this trampoline was created with; the
    // owner frees it only after draining every callback.
    let shared = unsafe { ctx::get::<WorkHeader, F>(context) };
    shared.header.obligation.dispatched();
    let span = spans::enter(spans::Kind::Work, work as usize, || shared.header.parent.get(), None);
    (shared.callback)(&WorkInvocation { instance: CallbackInstance::new(instance) });
    drop(span);
    trace_record!("work", "trampoline-left", work, 0);
}

/// What a [`Work`]'s callback receives on each run.
///
/// Not `Send` or `Sync`: it lives for one run on one thread.
pub struct WorkInvocation<'a> {
    instance: CallbackInstance<'a>,
}

impl core::fmt::Debug for WorkInvocation<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WorkInvocation").field("instance", &self.instance).finish()
    }
}

impl<'a> WorkInvocation<'a> {
    /// The running callback's instance: what it can ask of the pool (see
    /// [`crate::instance`]).
    pub fn instance(&self) -> &CallbackInstance<'a> {
        &self.instance
    }
}

/// An owned work object (`CreateThreadpoolWork`).
///
/// Each [`submit`](WorkObject::submit) queues one invocation of the callback
/// on the pool. `Drop` drains (waits for every queued and running
/// invocation, never cancels), closes the object, then frees the callback.
/// Its methods are [`WorkObject`]'s, which the cleanup group's
/// [`WorkMember`](crate::cleanup_group::WorkMember) offers too.
///
/// The callback may drop the last owner of its own work object: the teardown
/// then completes on another thread once the callback (and every submission
/// still queued) has run. [`wait`](WorkObject::wait),
/// [`stop_and_drain`](WorkObject::stop_and_drain) and
/// [`cancel_pending`](WorkObject::cancel_pending) called from the callback
/// panic instead: they would wait for themselves (see the
/// [crate docs](crate#a-callback-that-reaches-its-own-object)).
#[must_use = "dropping a work object waits for its submissions and closes it"]
pub struct Work {
    core: Owner<WorkCore>,
}

view! {
    /// A work object's methods, shared by its owners: [`Work`] and the
    /// cleanup group's [`WorkMember`](crate::cleanup_group::WorkMember) both
    /// dereference to it.
    pub struct WorkObject(WorkCore); owned by Work
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Work>();
    send_sync::<WorkObject>();
};

impl core::fmt::Debug for WorkObject {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct(self.0.owner_name()).field("raw", &(self.0.raw as *const c_void)).finish()
    }
}

impl Work {
    /// Creates a work object whose callback is `callback`, on the process
    /// default pool.
    pub fn new<F>(callback: F) -> io::Result<Self>
    where
        F: Fn(&WorkInvocation<'_>) + Send + Sync + 'static,
    {
        Ok(Self { core: Owner::new(WorkCore::new("Work", callback, None, Blocks::KEPT)?) })
    }

    /// Creates a work object whose callback is `callback`, on the pool and
    /// with the settings of `env`.
    pub fn new_in<F>(callback: F, env: &CallbackEnviron) -> io::Result<Self>
    where
        F: Fn(&WorkInvocation<'_>) + Send + Sync + 'static,
    {
        Ok(Self { core: Owner::new(WorkCore::new("Work", callback, Some(env), Blocks::KEPT)?) })
    }
}

impl WorkObject {
    /// Queues one invocation of the callback (`SubmitThreadpoolWork`).
    /// Allocation-free.
    pub fn submit(&self) {
        let core = &self.0;
        trace_record!("work", "submitted", core.raw, 0);
        core.ctx.header().parent.capture();
        core.ctx.header().obligation.publish_submission(|| {
            // SAFETY: `core.raw` is a live work object.
            trace_call!("SubmitThreadpoolWork", core.raw, 0, { unsafe { SubmitThreadpoolWork(core.raw) } });
        });
    }

    /// Returns after every invocation submitted so far, queued ones included,
    /// has run.
    ///
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    pub fn wait(&self) {
        owner::wait(&self.0);
    }

    /// Same as [`wait`](Self::wait): a work object has nothing to stop, so
    /// draining is all that brings it to rest. Kept for symmetry with the other
    /// object types.
    ///
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    pub fn stop_and_drain(&self) {
        owner::stop_and_drain(&self.0);
    }

    /// Discards queued invocations that have not started and waits for the
    /// running ones (`WaitForThreadpoolWorkCallbacks(.., TRUE)`).
    ///
    /// Under Wine it first waits for a drain of the same object racing it
    /// on another thread, and then for what that drain waits for, so from a
    /// callback on a pool with no other free thread it can deadlock:
    /// `docs/wine.md`, the row "A cancelling drain ... while another thread
    /// is blocked in a drain of the same object".
    ///
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    pub fn cancel_pending(&self) {
        owner::cancel_pending(&self.0);
    }

    /// The raw `PTP_WORK`, valid while its owner is alive.
    pub fn as_raw(&self) -> PTP_WORK {
        self.0.raw
    }
}

/// How long [`prewarm_default_pool`] waits for its work item.
pub const PREWARM_TIMEOUT: Duration = Duration::from_secs(2);

/// Submits one work item to the process default pool and waits at most
/// [`PREWARM_TIMEOUT`] for it to run; returns whether it ran.
///
/// Calling this early in a program makes the default pool create its first
/// worker through a work submission, the one path measured to always do so.
/// On timeout the queued invocation is cancelled before the work object is
/// torn down, so the call never blocks past its bound.
pub fn prewarm_default_pool() -> bool {
    prewarm(None, PREWARM_TIMEOUT)
}

/// [`prewarm_default_pool`] on the pool of `env`, waiting at most `timeout`.
fn prewarm(env: Option<&CallbackEnviron>, timeout: Duration) -> bool {
    let ran = Arc::new((Mutex::new(false), Condvar::new()));
    let signal = Arc::clone(&ran);
    let ran_now = move |_: &WorkInvocation<'_>| {
        let (lock, cv) = &*signal;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    };
    let made = match env {
        Some(env) => Work::new_in(ran_now, env),
        None => Work::new(ran_now),
    };
    let Ok(work) = made else {
        return false;
    };
    work.submit();
    let (lock, cv) = &*ran;
    let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
    let (guard, _) = cv.wait_timeout_while(guard, timeout, |ran| !*ran).unwrap_or_else(|e| e.into_inner());
    let ran = *guard;
    drop(guard);
    if !ran {
        trace_record!("pool", "prewarm-timeout", 0, 0);
        work.cancel_pending();
    }
    ran
}

#[cfg(test)]
mod prewarm_tests {
    use super::*;
    use crate::Pool;
    use std::sync::mpsc;

    /// The timeout path: the pool's only thread is held, so the prewarm item
    /// stays queued; prewarm must cancel it and return `false` without waiting
    /// for the held thread. Without the cancel, its teardown would drain the
    /// queued item, which cannot run until the gate opens, and the opener
    /// below opens it only after its deadline, which the test then reports.
    #[test]
    fn prewarm_gives_up_and_cancels_when_no_thread_runs_its_item() {
        let pool = Pool::new().unwrap();
        pool.set_max_threads(1).unwrap();
        let env = CallbackEnviron::new().with_pool(&pool);
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let (entered_tx, entered_rx) = mpsc::channel();
        let g = Arc::clone(&gate);
        let blocker = Work::new_in(
            move |_| {
                entered_tx.send(()).unwrap();
                let (lock, cv) = &*g;
                let _open = cv.wait_while(lock.lock().unwrap(), |open| !*open).unwrap();
            },
            &env,
        )
        .unwrap();
        blocker.submit();
        entered_rx.recv().unwrap();
        let (returned_tx, returned_rx) = mpsc::channel::<()>();
        let g = Arc::clone(&gate);
        let opener = std::thread::spawn(move || {
            // Deadline only: it decides the hang case, never the pass.
            let in_time = returned_rx.recv_timeout(Duration::from_secs(30)).is_ok();
            *g.0.lock().unwrap() = true;
            g.1.notify_all();
            in_time
        });
        let ran = prewarm(Some(&env), Duration::from_millis(20));
        returned_tx.send(()).unwrap();
        assert!(opener.join().unwrap(), "prewarm waited for the held thread instead of cancelling its item");
        assert!(!ran, "prewarm reported a run although the pool's only thread was held");
        blocker.wait();
    }
}
