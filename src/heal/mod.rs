//! Self-heal: repairing a pool that an explicit cancellation may have wedged.
//!
//! On Windows, cancelling a wait's queued callbacks can remove a completion
//! packet already delivered to the pool's port; when that pool has no worker
//! yet, its worker factory never creates one and nothing on the pool
//! dispatches again until some code *submits a work item*. This module makes
//! every explicit cancellation in the crate (`try_cancel_pending`,
//! `close_members_cancelling`) followed by such a submission.
//!
//! - A process-wide registry holds one entry per pool that cancellable objects
//!   use (the default pool is key 0, a private pool its `PTP_POOL`). Each entry
//!   owns a repair work object created when the pool is first registered:
//!   creating it at repair time would be too late (a creation does not release
//!   a stall; only a submission does) and would allocate on the healing path.
//! - Objects hold a `Registration` for their pool. With the feature off it is
//!   a zero-sized type with no `Drop`, so objects pay nothing.
//! - A cancellation stamps its pool (`last_cancel`) after the cancelling call
//!   returns, then makes sure the healer runs. Stamps come from
//!   `QueryUnbiasedInterruptTime` (monotonic; Wine implements it) and are
//!   published with `fetch_max`, so racing stamps never lower one. A pool owes
//!   a repair while `last_cancel >= last_repair_started`: equal stamps count as
//!   unhealed, because the clock is coarser than the race.
//! - The healer is a periodic timer (250 ms, 250 ms window) on a private pool
//!   with exactly one thread, started lazily at the first cancellation and never
//!   stopped. Each tick submits the repair of every pool that owes one, unless a
//!   repair is in flight and not yet overdue (5 s unstarted: `repair-overdue`,
//!   submit another; under `fail-fast` the second overdue episode panics, which
//!   on the healer's thread aborts the process). If the healer cannot start, the
//!   cancelling thread submits the repair itself, and the next cancellation
//!   retries the start.
//! - An entry retires when no object uses it, no repair is owed and none is
//!   outstanding (`retirable`, the one predicate every retirement site uses).
//!   It is dropped outside the registry lock: dropping drains the repair
//!   object, which must not block registrations or the healer's only thread.

#[cfg(feature = "self-heal")]
mod registry;
#[cfg(feature = "self-heal")]
pub(crate) use registry::Registration;
#[cfg(all(feature = "self-heal", any(test, feature = "test-hooks")))]
pub use registry::testing;

/// With the feature off, an object's registration costs nothing.
#[cfg(not(feature = "self-heal"))]
pub(crate) struct Registration;

#[cfg(not(feature = "self-heal"))]
impl Registration {
    pub(crate) fn new(_pool: &crate::pool::PoolRef) -> Self {
        Self
    }

    /// Whether this registration is for `pool`: one serves every pool.
    pub(crate) fn is_for(&self, _pool: &crate::pool::PoolRef) -> bool {
        true
    }
}

#[cfg(not(feature = "self-heal"))]
const _: () = assert!(size_of::<Registration>() == 0 && !core::mem::needs_drop::<Registration>());
