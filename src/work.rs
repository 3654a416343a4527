//! Work objects (`TP_WORK`): a callback that runs once per submission.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use windows_threadpool::ThreadpoolWork;
//!
//! let count = Arc::new(AtomicUsize::new(0));
//! let c = Arc::clone(&count);
//! let work = ThreadpoolWork::new(move || { c.fetch_add(1, Ordering::Relaxed); }, None)?;
//! for _ in 0..10 {
//!     work.submit();
//! }
//! work.wait();
//! assert_eq!(count.load(Ordering::Relaxed), 10);
//! # Ok::<(), std::io::Error>(())
//! ```

use core::ffi::c_void;
use std::io;

use windows_sys::Win32::System::Threading::{
    CloseThreadpoolWork, CreateThreadpoolWork, PTP_CALLBACK_INSTANCE, PTP_WORK, SubmitThreadpoolWork,
    WaitForThreadpoolWorkCallbacks,
};

use crate::callback_env::{CallbackEnviron, env_parts};
use crate::ctx::{self, Context};
use crate::obligation::DrainObligation;
use crate::pool::PoolRef;
use crate::reentry;
use crate::sys;
use crate::trace::EventInfo;

pub(crate) const TRACE_EVENTS: &[EventInfo] = &[
    EventInfo { target: "work", event: "created", slots: ["work", "context"], meaning: "a work object was created" },
    EventInfo { target: "work", event: "submitted", slots: ["work", ""], meaning: "submit() queued one invocation" },
    EventInfo {
        target: "work",
        event: "trampoline-entered",
        slots: ["work", ""],
        meaning: "a pool thread entered the callback",
    },
    EventInfo { target: "work", event: "trampoline-left", slots: ["work", ""], meaning: "the callback returned" },
    EventInfo {
        target: "work",
        event: "drained",
        slots: ["work", "cancelled"],
        meaning: "every callback has run (cancelled=1: queued ones were discarded)",
    },
    EventInfo { target: "work", event: "drop-begin", slots: ["work", ""], meaning: "teardown started" },
    EventInfo {
        target: "work",
        event: "drain-owed",
        slots: ["work", ""],
        meaning: "teardown found submissions not yet dispatched or drained (call wait or stop_and_drain first)",
    },
    EventInfo {
        target: "work",
        event: "drop-drained",
        slots: ["work", ""],
        meaning: "teardown drained every callback",
    },
    EventInfo {
        target: "work",
        event: "drop-closed",
        slots: ["work", ""],
        meaning: "the work object was closed and its context freed",
    },
    EventInfo { target: "syscall", event: "CreateThreadpoolWork", slots: ["context", "environment"], meaning: "" },
    EventInfo { target: "syscall", event: "SubmitThreadpoolWork", slots: ["work", ""], meaning: "" },
    EventInfo { target: "syscall", event: "WaitForThreadpoolWorkCallbacks", slots: ["work", "cancel"], meaning: "" },
    EventInfo { target: "syscall", event: "CloseThreadpoolWork", slots: ["work", ""], meaning: "" },
];

/// The part of a work object shared by [`ThreadpoolWork`] and the cleanup
/// group's work member: the raw object and its context. Closing is the
/// owner's business.
pub(crate) struct WorkCore {
    raw: PTP_WORK,
    ctx: Context<WorkHeader>,
    pool: PoolRef,
}

/// The context state the owner and the trampoline share.
#[derive(Default)]
pub(crate) struct WorkHeader {
    obligation: DrainObligation,
}

impl WorkCore {
    pub(crate) fn new<F>(callback: F, env: Option<&mut CallbackEnviron<'_>>) -> io::Result<Self>
    where
        F: Fn() + Send + Sync + 'static,
    {
        reentry::ensure_slot()?;
        let (env, pool) = env_parts(env);
        let ctx = Context::new(WorkHeader::default(), callback);
        let pv = ctx.as_ptr();
        // The error is read inside the bracket, before the context is freed.
        let raw = trace_call!("CreateThreadpoolWork", pv, env, {
            // SAFETY: the trampoline is instantiated for the context's type, and
            // the context outlives the object (freed only after drain and close).
            sys::created(unsafe { CreateThreadpoolWork(Some(trampoline::<F>), pv, env) })
        })?;
        trace_record!("work", "created", raw, pv);
        Ok(Self { raw, ctx, pool })
    }

    pub(crate) fn raw(&self) -> PTP_WORK {
        self.raw
    }

    /// The context pointer, which identifies the object to its callbacks.
    pub(crate) fn context(&self) -> *const c_void {
        self.ctx.as_ptr()
    }

    pub(crate) fn submit(&self) {
        trace_record!("work", "submitted", self.raw, 0);
        self.ctx.header().obligation.publish_submission(|| {
            // SAFETY: `self.raw` is a live work object.
            trace_call!("SubmitThreadpoolWork", self.raw, 0, { unsafe { SubmitThreadpoolWork(self.raw) } });
        });
    }

    /// The one drain for work objects: waits for every queued and running
    /// callback, or with `cancel` discards the queued ones first.
    pub(crate) fn drain(&self, cancel: bool) {
        trace_call!("WaitForThreadpoolWorkCallbacks", self.raw, cancel, {
            // SAFETY: `self.raw` is a live work object.
            unsafe { WaitForThreadpoolWorkCallbacks(self.raw, cancel.into()) }
        });
        self.ctx.header().obligation.drained();
        trace_record!("work", "drained", self.raw, cancel);
    }

    /// Whether teardown finds submissions not yet dispatched or drained
    /// (recorded as `drain-owed`; reported by the owner once it has freed
    /// everything).
    pub(crate) fn drain_owed(&self) -> bool {
        let owed = self.ctx.header().obligation.is_owed();
        if owed {
            trace_record!("work", "drain-owed", self.raw, 0);
        }
        owed
    }

    /// Drains, closes the object, then frees the context, in that order;
    /// returns whether a drain was owed. (A cleanup group's release closes its
    /// members instead; dropping a core without `close` frees only the context.)
    pub(crate) fn close(self) -> bool {
        trace_record!("work", "drop-begin", self.raw, 0);
        let owed = self.drain_owed();
        self.drain(false);
        trace_record!("work", "drop-drained", self.raw, 0);
        // SAFETY: drained above; the object is closed exactly once, here.
        trace_call!("CloseThreadpoolWork", self.raw, 0, { unsafe { CloseThreadpoolWork(self.raw) } });
        let raw = self.raw;
        drop(self.ctx);
        drop(self.pool);
        trace_record!("work", "drop-closed", raw, 0);
        owed
    }
}

unsafe extern "system" fn trampoline<F: Fn() + Send + Sync + 'static>(
    _instance: PTP_CALLBACK_INSTANCE,
    context: *mut c_void,
    work: PTP_WORK,
) {
    let _scope = reentry::CallbackScope::enter(context);
    trace_record!("work", "trampoline-entered", work, 0);
    // SAFETY: `context` is the `Shared` this trampoline was created with; the
    // owner frees it only after draining every callback.
    let shared = unsafe { ctx::get::<WorkHeader, F>(context) };
    shared.header.obligation.dispatched();
    (shared.callback)();
    trace_record!("work", "trampoline-left", work, 0);
}

/// An owned work object (`CreateThreadpoolWork`).
///
/// Each [`submit`](Self::submit) queues one invocation of the callback on the
/// pool. `Drop` drains (waits for every queued and running invocation, never
/// cancels), closes the object, then frees the callback.
///
/// The callback may drop the last owner of its own work object: the teardown
/// then completes on another thread once the callback (and every submission
/// still queued) has run. [`wait`](Self::wait),
/// [`stop_and_drain`](Self::stop_and_drain) and
/// [`cancel_pending`](Self::cancel_pending) called from the callback panic
/// instead: they would wait for themselves (see the
/// [crate docs](crate#a-callback-that-reaches-its-own-object)).
pub struct ThreadpoolWork {
    core: Option<WorkCore>,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<ThreadpoolWork>();
};

impl core::fmt::Debug for ThreadpoolWork {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ThreadpoolWork").field("raw", &(self.core().raw as *const c_void)).finish()
    }
}

impl ThreadpoolWork {
    /// Creates a work object whose callback is `callback`, on the pool and
    /// with the settings of `env` (the default pool when `None`).
    pub fn new<F>(callback: F, env: Option<&mut CallbackEnviron<'_>>) -> io::Result<Self>
    where
        F: Fn() + Send + Sync + 'static,
    {
        Ok(Self { core: Some(WorkCore::new(callback, env)?) })
    }

    fn core(&self) -> &WorkCore {
        self.core.as_ref().expect("present until drop")
    }

    /// Queues one invocation of the callback (`SubmitThreadpoolWork`).
    /// Allocation-free.
    pub fn submit(&self) {
        self.core().submit();
    }

    /// Returns after every invocation submitted so far, queued ones included,
    /// has run.
    ///
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    pub fn wait(&self) {
        reentry::forbid_drain_in_own_callback(self.core().context(), "ThreadpoolWork::wait");
        self.core().drain(false);
    }

    /// Same as [`wait`](Self::wait): a work object has nothing to stop, so
    /// draining is all that brings it to rest. Kept for symmetry with the other
    /// object types.
    ///
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    pub fn stop_and_drain(&self) {
        reentry::forbid_drain_in_own_callback(self.core().context(), "ThreadpoolWork::stop_and_drain");
        self.core().drain(false);
    }

    /// Discards queued invocations that have not started and waits for the
    /// running ones (`WaitForThreadpoolWorkCallbacks(.., TRUE)`).
    ///
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    pub fn cancel_pending(&self) {
        reentry::forbid_drain_in_own_callback(self.core().context(), "ThreadpoolWork::cancel_pending");
        self.core().drain(true);
    }

    /// The raw `PTP_WORK`, valid while `self` is alive.
    pub fn as_raw(&self) -> PTP_WORK {
        self.core().raw()
    }
}

impl Drop for ThreadpoolWork {
    fn drop(&mut self) {
        if let Some(core) = self.core.take() {
            // From its own callback: nothing to stop; the rest is handed off.
            reentry::tear_down(core.context(), core, WorkCore::drain_owed, |core, owed| {
                if core.close() || owed {
                    crate::obligation::report_drain_owed("ThreadpoolWork");
                }
            });
        }
    }
}
