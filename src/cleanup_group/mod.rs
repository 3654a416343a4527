//! Cleanup groups (`TP_CLEANUP_GROUP`): many pool objects released in one step.
//!
//! `CloseThreadpoolCleanupGroupMembers` drains and closes every member of a
//! group at once. Each member owns a heap callback context that may only be
//! freed after that bulk release has finished, a moment an individual object
//! cannot observe. So the group **creates and owns** its members: a member
//! type ([`WorkMember`], ...) is a borrow of the group, and
//! [`CleanupGroup::close_members`] takes `&mut self`, which makes using a
//! member after the release a borrow-check error:
//!
//! ```compile_fail,E0502
//! use windows_threadpool::cleanup_group::CleanupGroup;
//! let mut group = CleanupGroup::new()?;
//! let work = group.create_work(|_| {})?;
//! group.close_members();
//! work.submit(); // error[E0502]: `group` is borrowed by `work`
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The release runs in this order (`crate::callback::owner`): every member stops what
//! could queue another callback (timers and waits disarm, suppress re-arms
//! and drain), the native release drains (`fCancelPendingCallbacks = FALSE`)
//! and closes all members, then the group frees their contexts and closes
//! their wait targets.
//! A group can be reused after a release; `Drop` releases what is left, then
//! closes the group.
//!
//! An explicit release ([`CleanupGroup::close_members`] or a cancelling one)
//! is the members' `stop_and_drain`: it settles whatever drain they owed.
//! Dropping a group whose members still owed a drain (armed, or with
//! callbacks pending, and never released) is what the `fail-fast` feature
//! reports, after the group has been closed.
//!
//! A member's callback may drop the group: the release, which would wait for
//! that callback, is handed whole to another thread and completes once the
//! callback has returned. [`CleanupGroup::close_members`] (or a cancelling
//! variant) called from a member's callback panics instead, as does a
//! member's own drain called from its callback: each would wait for itself
//! (see the [crate docs](crate#a-callback-that-reaches-its-own-object)).
//!
//! Thread-pool I/O is deliberately not a member type: a `TP_IO` must not be
//! closed while an operation is outstanding, which a bulk release cannot
//! guarantee. Use the `io` module's `Io` on its own.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use windows_threadpool::cleanup_group::CleanupGroup;
//!
//! let mut group = CleanupGroup::new()?;
//! let count = Arc::new(AtomicUsize::new(0));
//! for _ in 0..100 {
//!     let c = Arc::clone(&count);
//!     let member = group.create_work(move |_| { c.fetch_add(1, Ordering::Relaxed); })?;
//!     member.submit();
//!     member.wait();
//! }
//! assert_eq!(count.load(Ordering::Relaxed), 100);
//! assert_eq!(group.owned_resources(), 100);
//! group.close_members(); // closes all 100 and frees their callbacks
//! assert_eq!(group.owned_resources(), 0);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Circular imports
//! `members` is the other half of [`CleanupGroup`]: the member types and the
//! group's `create_*` methods, which need the group, while the group owns its
//! members through the `Member` trait defined here. One type over two files.
use core::alloc::Layout;
use core::ffi::c_void;
use core::ptr::NonNull;
use std::io;
use std::sync::Mutex;

use windows_sys::Win32::System::Threading::{
    CloseThreadpoolCleanupGroup, CloseThreadpoolCleanupGroupMembers, CreateThreadpoolCleanupGroup, PTP_CLEANUP_GROUP,
};

use crate::callback::ctx::{Arena, Blocks};
use crate::callback::owner::{self, Lifecycle, Released};
use crate::callback::reentry;
use crate::callback_env::CallbackEnviron;
use crate::heal::Registration;
use crate::sys;

mod members;
pub use members::{PeriodicTimerMember, TimerMember, WaitMember, WorkMember};

/// What the group needs from each member it owns, as a trait object: every
/// kind the group can own ([`Released`]) is one.
trait Member: Send + Sync {
    /// The context pointer, which identifies the member to its callbacks.
    fn context(&self) -> *const c_void;
    /// Readies the member for the native release (`cancel`: the release
    /// discards queued callbacks); returns the member type's name if it
    /// still owed a drain.
    fn before_release(&self, cancel: bool) -> Option<&'static str>;
    /// The non-blocking part of a teardown from the member's own callback
    /// (`owner::stop_in_own_callback`: what a tick already stopped is
    /// settled, then whatever could queue another callback is stopped).
    fn stop_in_own_callback(&self);
    /// After the native release closed the object: frees what it owned.
    ///
    /// # Safety
    /// `CloseThreadpoolCleanupGroupMembers` has returned (the object is
    /// closed, no callback of it runs), the arena holding the member is not
    /// freed yet, and this is the last use of the member: it is moved out
    /// of its place, which is never used again.
    unsafe fn after_release(&mut self);
}

impl<C: Released> Member for C {
    fn context(&self) -> *const c_void {
        Lifecycle::context(self)
    }
    fn before_release(&self, cancel: bool) -> Option<&'static str> {
        owner::before_release(self, cancel).then(|| self.owner_name())
    }
    fn stop_in_own_callback(&self) {
        // Whether a drain is owed is decided again by the handed-off release.
        let _ = owner::stop_in_own_callback(self);
    }
    unsafe fn after_release(&mut self) {
        // SAFETY: guaranteed by the caller: the place is not used again.
        owner::after_release(unsafe { core::ptr::read(self) });
    }
}

/// A member as the group owns it: a core in the group's arena.
///
/// The member is held as a raw pointer, not as a reference or a `Box`: the
/// group lends out references derived from that pointer for as long as it
/// is borrowed, and frees the member only at release, when no lent
/// reference can be alive.
struct Owned {
    member: NonNull<dyn Member>,
}

impl Owned {
    fn member(&self) -> &dyn Member {
        // SAFETY: `member` was written by `adopt` and is moved out only by
        // `after_release`, which consumes `self`; `release` and `Drop` move
        // the member list and the arena together and free the arena only
        // after the list (`Owned` has no `Drop`: a list dropped by an unwind
        // leaks its members, and the arena, dropped by the unwind, leaks too).
        unsafe { self.member.as_ref() }
    }

    /// Moves the member out of the arena and finishes its release.
    ///
    /// # Safety
    /// As [`Member::after_release`], and no reference lent out by `adopt`
    /// for this member may be alive.
    unsafe fn after_release(mut self) {
        // SAFETY: `self` is consumed, so this runs once; the caller
        // guarantees the rest of `Member::after_release`'s contract and
        // that no lent reference remains, so the access is unique.
        unsafe { self.member.as_mut().after_release() }
    }
}

/// The members a group owns, and one claim on the self-heal registry entry
/// of each pool they use (which also keeps that pool open through a
/// cancelling release). Claims are per pool, not per member: a member's
/// claim would cost a registry lock at its creation and at its release.
#[derive(Default)]
struct Members {
    owned: Vec<Owned>,
    claims: Vec<Registration>,
}

/// A cleanup group that creates, owns and releases its members.
#[cfg_attr(
    not(feature = "self-heal"),
    doc = r#"
Without the `self-heal` feature the healing cancelling release does not
exist; only `close_members_cancelling_without_heal` does:

```compile_fail,E0599
let mut group = windows_threadpool::cleanup_group::CleanupGroup::new()?;
group.close_members_cancelling();
# Ok::<(), std::io::Error>(())
```
"#
)]
#[must_use = "dropping it releases every member and closes the group"]
pub struct CleanupGroup {
    raw: PTP_CLEANUP_GROUP,
    members: Mutex<Members>,
    /// The members' cores and their contexts: one heap allocation per
    /// chunk rather than two per member. Its chunks are freed by a release,
    /// after the members it released.
    arena: Arena,
}

// SAFETY: a `PTP_CLEANUP_GROUP` may be used from any thread; the members list
// is behind a mutex and its elements are `Send + Sync`; the arena is `Send +
// Sync` itself.
unsafe impl Send for CleanupGroup {}
// SAFETY: as above.
unsafe impl Sync for CleanupGroup {}
impl core::fmt::Debug for CleanupGroup {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CleanupGroup")
            .field("raw", &(self.raw as *const c_void))
            .field("owned_resources", &self.owned_resources())
            .finish()
    }
}

impl CleanupGroup {
    /// Creates an empty group (`CreateThreadpoolCleanupGroup`).
    pub fn new() -> io::Result<Self> {
        let raw = trace_call!("CreateThreadpoolCleanupGroup", 0, 0, {
            // SAFETY: no preconditions.
            sys::created(unsafe { CreateThreadpoolCleanupGroup() })
        })?;
        trace_record!("group", "created", raw, 0);
        Ok(Self { raw, members: Mutex::new(Members::default()), arena: Arena::default() })
    }

    /// Whether this thread is inside the callback of one of the members: a
    /// release from here would wait for that callback, that is for itself.
    fn in_member_callback(&self) -> bool {
        reentry::in_callback_of(self.lock().owned.iter().map(|m| m.member().context()))
    }

    /// Panics if this thread is inside a member's callback (`call` would wait
    /// for itself).
    #[track_caller]
    fn forbid_release_in_member_callback(&self, method: &str) {
        if self.in_member_callback() {
            reentry::drain_would_wait_for_itself("CleanupGroup", method, "a member's");
        }
    }

    /// The number of members the group currently owns (created and not yet
    /// released).
    pub fn owned_resources(&self) -> usize {
        self.lock().owned.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Members> {
        self.members.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the caller's environment (or a default one) that binds new
    /// objects to this group. The caller's environment is never changed.
    fn member_env(&self, env: Option<&CallbackEnviron>) -> CallbackEnviron {
        let e = env.cloned().unwrap_or_default();
        // SAFETY: `e` is never cloned and lives only until the member is
        // created; the group outlives that (`&self`), and only a release,
        // which requires that no member borrow is alive, releases members.
        unsafe { e.with_cleanup_group(self.raw, None) }
    }

    /// Makes a member's core with `create`, from the group's arena, stores
    /// it and lends it to the caller for as long as the group is borrowed.
    fn adopt<C: Released>(
        &self,
        env: &CallbackEnviron,
        create: impl FnOnce(Blocks<'_>) -> io::Result<C>,
    ) -> io::Result<&C> {
        // SAFETY: a context made from the arena is dropped inside `create`
        // on an error, or belongs to the core, which a release frees after
        // closing its object and before freeing the arena's chunks; a panic
        // below leaks the core in the arena with its object still in the
        // group, which the next release closes before freeing the chunks.
        let core = create(unsafe { Blocks::arena(&self.arena) })?;
        let pool = env.pool_ref();
        let claimed = |m: &Members| m.claims.iter().any(|c| c.is_for(pool));
        let ptr = self.arena.alloc(Layout::new::<C>()).cast::<C>();
        // SAFETY: a fresh block of the arena, valid for writes of a `C`.
        unsafe { ptr.as_ptr().write(core) };
        // Declared before the guard, so dropped after it: a claim's drop
        // takes the registry's lock, never taken under the group's.
        let mut spare = None;
        let mut members = self.lock();
        if !claimed(&members) {
            // The registry's lock is never taken under the group's.
            drop(members);
            let claim = Registration::new(pool);
            members = self.lock();
            // A claim another thread made meanwhile makes this one spare.
            if claimed(&members) {
                spare.replace(claim);
            } else {
                members.claims.push(claim);
            }
        }
        members.owned.push(Owned { member: ptr });
        trace_record!("group", "member-created", self.raw, members.owned.len());
        drop(members);
        // SAFETY: the member is moved out only by a release, which takes
        // `&mut self` (or runs in `Drop`, or in the teardown `Drop` hands off
        // from a member's callback, which moves the list and the arena only
        // once `Drop` has excluded every borrow) and so cannot run while the
        // returned borrow of `self` is alive; the arena never moves a block.
        Ok(unsafe { ptr.as_ref() })
    }
    /// Releases every member: stops them, drains every queued and running
    /// callback (`CloseThreadpoolCleanupGroupMembers(.., FALSE, ..)`), closes
    /// them, then frees their contexts and closes their wait targets. The
    /// group can create new members afterwards.
    ///
    /// This is the group's explicit draining release, its members'
    /// `stop_and_drain`: it settles every drain they owed. A member still
    /// armed (a wait never signalled, a timer not yet due) or with callbacks
    /// queued is stopped and drained here, which is not a drain owed, so the
    /// `fail-fast` feature has nothing to report. Only dropping a group whose
    /// members were never released this way reports.
    ///
    /// # Panics
    /// If called from a member's callback: it would wait for itself.
    pub fn close_members(&mut self) {
        self.forbid_release_in_member_callback("close_members");
        // An explicit release settles what was owed: nothing to report.
        let _settled = self.release(false, false);
    }

    /// Releases every member like [`close_members`](Self::close_members) but
    /// discards queued callbacks that have not started
    /// (`CloseThreadpoolCleanupGroupMembers(.., TRUE, ..)`), then has the
    /// self-heal machinery repair every pool the members used (see
    /// `docs/self-heal.md`). Requires the default `self-heal` feature.
    ///
    /// # Panics
    /// If called from a member's callback: it would wait for itself.
    #[cfg(feature = "self-heal")]
    pub fn close_members_cancelling(&mut self) {
        self.forbid_release_in_member_callback("close_members_cancelling");
        let _settled = self.release(true, true);
    }

    /// Releases every member, discarding queued callbacks that have not
    /// started, without the self-heal repair that `close_members_cancelling`
    /// schedules.
    ///
    /// # Liveness
    /// On Windows a cancelled wait callback can leave a pool with no worker,
    /// so that nothing queued to it runs until work is submitted to it.
    /// Nothing here repairs that: make each pool the members used dispatch
    /// again yourself, for instance by submitting work to it. A wedged pool
    /// hangs; it corrupts no memory.
    ///
    /// # Panics
    /// If called from a member's callback: it would wait for itself.
    pub fn close_members_cancelling_without_heal(&mut self) {
        self.forbid_release_in_member_callback("close_members_cancelling_without_heal");
        let _settled = self.release(true, false);
    }

    /// The one release path; `cancel` discards queued callbacks, `heal`
    /// stamps the members' pools as owing a repair after the release.
    /// Returns the type name of the first member that owed a drain (recorded
    /// as `drain-owed` by the member); only `Drop` reports it.
    fn release(&mut self, cancel: bool, heal: bool) -> Option<&'static str> {
        // Taking the members takes their pools' claims too: the pools stay
        // registered (and open) until the release has been marked.
        let Members { owned: members, claims } = std::mem::take(&mut *self.lock());
        trace_record!("group", "release-begin", self.raw, members.len());
        // The members' drains and the release wait for callbacks, which may
        // wait for a task parked here.
        crate::callback::inplace::flush();
        let mut owed = None;
        for m in &members {
            if let Some(type_name) = m.member().before_release(cancel) {
                owed.get_or_insert(type_name);
            }
        }
        trace_call!("CloseThreadpoolCleanupGroupMembers", self.raw, cancel, {
            // SAFETY: the group is live; every member was created in it and is
            // not closed individually (member types have no `Drop`).
            unsafe { CloseThreadpoolCleanupGroupMembers(self.raw, cancel.into(), core::ptr::null_mut()) }
        });
        // Taken only now that every member is closed (a panic before leaves
        // it in the group, for the next release), and freed last, after the
        // members that live in it.
        let arena = self.arena.take();
        #[cfg(feature = "self-heal")]
        if heal {
            claims.iter().for_each(Registration::after_cancel);
        }
        #[cfg(not(feature = "self-heal"))]
        let _ = heal;
        // The platform has closed every member: freeing their contexts is now safe.
        let n = members.len();
        for m in members {
            // SAFETY: the members are closed (above), the arena is freed
            // only below, each is released once, and a release runs under
            // `&mut self` (or in `Drop`), so no reference `adopt` lent out
            // is alive.
            unsafe { m.after_release() };
        }
        drop(arena);
        drop(claims);
        trace_record!("group", "release-ended", self.raw, n);
        owed
    }
}

impl Drop for CleanupGroup {
    /// Releases what is left, closes the group, and only then reports a
    /// drain the members still owed: a `fail-fast` panic must not leave the
    /// group open. A group whose members were all released by
    /// `close_members` (or a cancelling release) has nothing to report.
    fn drop(&mut self) {
        let mut members = self.lock();
        if let Some(own) = members.owned.iter().find(|m| reentry::in_own_callback(m.member().context())) {
            // The release would wait for the callback running this drop: stop
            // that member now, as an owner dropped in its own callback is
            // stopped (a re-arm after the drop is refused, not owed; a tick
            // that disarmed its timer owes nothing), then hand the whole
            // ordinary teardown, members and all, to another thread.
            own.member().stop_in_own_callback();
            let rest = Mutex::new(std::mem::take(&mut *members));
            drop(members);
            // The members live in the arena: it goes with them.
            let rest = CleanupGroup { raw: self.raw, members: rest, arena: self.arena.take() };
            reentry::hand_off(move || drop(rest));
            return;
        }
        drop(members);
        let owed = self.release(false, false);
        // SAFETY: the members were released above; the group is closed once.
        trace_call!("CloseThreadpoolCleanupGroup", self.raw, 0, { unsafe { CloseThreadpoolCleanupGroup(self.raw) } });
        trace_record!("group", "closed", self.raw, 0);
        if let Some(type_name) = owed {
            crate::callback::obligation::report_drain_owed(type_name);
        }
    }
}
