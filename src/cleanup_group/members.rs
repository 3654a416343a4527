//! The member kinds: [`WorkMember`], [`TimerMember`],
//! [`PeriodicTimerMember`] and [`WaitMember`], each a borrow of the group
//! that dereferences to its kind's view, and the group's methods that
//! create them.

use core::marker::PhantomData;
use core::time::Duration;
use std::io;
use std::os::windows::io::{AsHandle, BorrowedHandle};

use super::CleanupGroup;
use crate::callback_env::CallbackEnviron;
use crate::handle::WaitableHandle;
use crate::timer::{PeriodicTick, PeriodicTimerObject, TimerCore, TimerFiring, TimerObject};
use crate::wait::{WaitActivation, WaitCore, WaitObject};
use crate::work::{WorkCore, WorkInvocation, WorkObject};

/// A work object owned by a [`CleanupGroup`]. Its methods are
/// [`WorkObject`]'s, as [`crate::Work`]'s are.
///
/// Using it after [`CleanupGroup::close_members`] does not compile:
///
/// ```compile_fail,E0502
/// let mut group = windows_threadpool::cleanup_group::CleanupGroup::new()?;
/// let work = group.create_work(|_| {})?;
/// group.close_members();
/// work.submit();
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "the member is the only way to reach the object the group created"]
pub struct WorkMember<'g> {
    core: &'g WorkCore,
    _group: PhantomData<&'g CleanupGroup>,
}

/// A thread-pool wait owned by a [`CleanupGroup`]. Its methods are
/// [`WaitObject`]'s, as [`crate::wait::Wait`]'s are. The group closes its wait target, with its
/// own close routine, after the release has drained the member.
///
/// Using it after [`CleanupGroup::close_members`] does not compile:
///
/// ```compile_fail,E0502
/// use windows_threadpool::{cleanup_group::CleanupGroup, wait::Event};
/// let mut group = CleanupGroup::new()?;
/// let wait = group.create_wait(Event::auto_reset()?.into(), |_| {})?;
/// group.close_members();
/// wait.arm(Deadline::NEVER);
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "the member is the only way to reach the object the group created"]
pub struct WaitMember<'g> {
    core: &'g WaitCore,
    _group: PhantomData<&'g CleanupGroup>,
}

/// A one-shot timer owned by a [`CleanupGroup`]. Its methods are
/// [`TimerObject`]'s, as [`crate::timer::Timer`]'s are (its callback gets the same
/// [`TimerFiring`] token).
///
/// Using it after [`CleanupGroup::close_members`] does not compile:
///
/// ```compile_fail,E0502
/// let mut group = windows_threadpool::cleanup_group::CleanupGroup::new()?;
/// let timer = group.create_timer(|_| {})?;
/// group.close_members();
/// timer.arm(std::time::Duration::from_millis(1));
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "the member is the only way to reach the object the group created"]
pub struct TimerMember<'g> {
    core: &'g TimerCore,
    _group: PhantomData<&'g CleanupGroup>,
}

/// A periodic timer owned by a [`CleanupGroup`] (ticks may overlap). Its
/// methods are [`PeriodicTimerObject`]'s, as
/// [`crate::timer::PeriodicTimer`]'s are.
///
/// Using it after [`CleanupGroup::close_members`] does not compile:
///
/// ```compile_fail,E0502
/// let mut group = windows_threadpool::cleanup_group::CleanupGroup::new()?;
/// let timer = group.create_periodic_timer(std::time::Duration::from_millis(5), |_| {})?;
/// group.close_members();
/// timer.arm(timer.period());
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "the member is the only way to reach the object the group created"]
pub struct PeriodicTimerMember<'g> {
    core: &'g TimerCore,
    _group: PhantomData<&'g CleanupGroup>,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<CleanupGroup>();
    send_sync::<WorkMember<'static>>();
    send_sync::<TimerMember<'static>>();
    send_sync::<PeriodicTimerMember<'static>>();
    send_sync::<WaitMember<'static>>();
};

/// A member dereferences to its kind's view and debug-prints as it.
macro_rules! member_view {
    ($($ty:ident => $view:ty),*) => {$(
        deref_to_view!($ty<'_> => $view, |s| s.core);

        impl core::fmt::Debug for $ty<'_> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Debug::fmt(&**self, f)
            }
        }
    )*};
}
member_view!(
    WorkMember => WorkObject,
    TimerMember => TimerObject,
    PeriodicTimerMember => PeriodicTimerObject,
    WaitMember => WaitObject
);

/// The handle waited on, as [`WaitObject::handle`] lends it.
impl AsHandle for WaitMember<'_> {
    fn as_handle(&self) -> BorrowedHandle<'_> {
        self.handle()
    }
}

impl CleanupGroup {
    fn work_member<F>(&self, callback: F, env: Option<&CallbackEnviron>) -> io::Result<WorkMember<'_>>
    where
        F: Fn(&WorkInvocation<'_>) + Send + Sync + 'static,
    {
        let env = self.member_env(env);
        let core = self.adopt(&env, |b| WorkCore::new("WorkMember", callback, Some(&env), b))?;
        Ok(WorkMember { core, _group: PhantomData })
    }

    fn timer_member<F>(&self, callback: F, env: Option<&CallbackEnviron>) -> io::Result<TimerMember<'_>>
    where
        F: Fn(&TimerFiring<'_>) + Send + Sync + 'static,
    {
        let env = self.member_env(env);
        let core = self.adopt(&env, |b| TimerCore::new_one_shot("TimerMember", callback, Some(&env), b))?;
        Ok(TimerMember { core, _group: PhantomData })
    }

    fn periodic_member<F>(
        &self,
        period: Duration,
        callback: F,
        env: Option<&CallbackEnviron>,
    ) -> io::Result<PeriodicTimerMember<'_>>
    where
        F: Fn(&PeriodicTick<'_>) + Send + Sync + 'static,
    {
        let env = self.member_env(env);
        let core =
            self.adopt(&env, |b| TimerCore::new_periodic("PeriodicTimerMember", period, callback, Some(&env), b))?;
        Ok(PeriodicTimerMember { core, _group: PhantomData })
    }

    fn wait_member<F>(
        &self,
        handle: WaitableHandle,
        callback: F,
        env: Option<&CallbackEnviron>,
    ) -> io::Result<WaitMember<'_>>
    where
        F: Fn(&WaitActivation<'_>) + Send + Sync + 'static,
    {
        let env = self.member_env(env);
        let core = self.adopt(&env, |b| WaitCore::new("WaitMember", handle, callback, Some(&env), b))?;
        Ok(WaitMember { core, _group: PhantomData })
    }

    /// Creates a work object in the group, on the process default pool.
    pub fn create_work<F>(&self, callback: F) -> io::Result<WorkMember<'_>>
    where
        F: Fn(&WorkInvocation<'_>) + Send + Sync + 'static,
    {
        self.work_member(callback, None)
    }

    /// Creates a work object in the group, on the pool and with the settings
    /// of `env` (which is not changed: the group is set on a copy).
    pub fn create_work_in<F>(&self, callback: F, env: &CallbackEnviron) -> io::Result<WorkMember<'_>>
    where
        F: Fn(&WorkInvocation<'_>) + Send + Sync + 'static,
    {
        self.work_member(callback, Some(env))
    }

    /// Creates a disarmed one-shot timer in the group, on the process
    /// default pool.
    pub fn create_timer<F>(&self, callback: F) -> io::Result<TimerMember<'_>>
    where
        F: Fn(&TimerFiring<'_>) + Send + Sync + 'static,
    {
        self.timer_member(callback, None)
    }

    /// Creates a disarmed one-shot timer in the group, with `env`'s settings.
    pub fn create_timer_in<F>(&self, callback: F, env: &CallbackEnviron) -> io::Result<TimerMember<'_>>
    where
        F: Fn(&TimerFiring<'_>) + Send + Sync + 'static,
    {
        self.timer_member(callback, Some(env))
    }

    /// Creates a stopped periodic timer in the group, on the process default
    /// pool.
    ///
    /// # Errors
    /// As for [`PeriodicTimer::new`](crate::timer::PeriodicTimer::new):
    /// [`io::ErrorKind::InvalidInput`] for a period it refuses.
    pub fn create_periodic_timer<F>(&self, period: Duration, callback: F) -> io::Result<PeriodicTimerMember<'_>>
    where
        F: Fn(&PeriodicTick<'_>) + Send + Sync + 'static,
    {
        self.periodic_member(period, callback, None)
    }

    /// Creates a stopped periodic timer in the group, with `env`'s settings.
    ///
    /// # Errors
    /// As for [`create_periodic_timer`](Self::create_periodic_timer).
    pub fn create_periodic_timer_in<F>(
        &self,
        period: Duration,
        callback: F,
        env: &CallbackEnviron,
    ) -> io::Result<PeriodicTimerMember<'_>>
    where
        F: Fn(&PeriodicTick<'_>) + Send + Sync + 'static,
    {
        self.periodic_member(period, callback, Some(env))
    }

    /// Creates a disarmed thread-pool wait on `handle` in the group, on the
    /// process default pool. If creation fails, `handle` is closed.
    pub fn create_wait<F>(&self, handle: WaitableHandle, callback: F) -> io::Result<WaitMember<'_>>
    where
        F: Fn(&WaitActivation<'_>) + Send + Sync + 'static,
    {
        self.wait_member(handle, callback, None)
    }

    /// Creates a disarmed wait on `handle` in the group, with `env`'s
    /// settings. If creation fails, `handle` is closed.
    pub fn create_wait_in<F>(
        &self,
        handle: WaitableHandle,
        callback: F,
        env: &CallbackEnviron,
    ) -> io::Result<WaitMember<'_>>
    where
        F: Fn(&WaitActivation<'_>) + Send + Sync + 'static,
    {
        self.wait_member(handle, callback, Some(env))
    }
}

/// Each member type and its standalone counterpart dereference to the same
/// view, which holds the kind's whole method set.
const _: () = {
    const fn same_view<A, B, V>()
    where
        A: core::ops::Deref<Target = V>,
        B: core::ops::Deref<Target = V>,
    {
    }
    same_view::<crate::Work, WorkMember<'static>, WorkObject>();
    same_view::<crate::Timer, TimerMember<'static>, TimerObject>();
    same_view::<crate::PeriodicTimer, PeriodicTimerMember<'static>, PeriodicTimerObject>();
    same_view::<crate::Wait, WaitMember<'static>, WaitObject>();
};

#[cfg(test)]
mod tests {
    /// The sources holding the standalone types and the members.
    const SOURCES: &[&str] = &[
        include_str!("../work.rs"),
        include_str!("../timer/mod.rs"),
        include_str!("../timer/periodic.rs"),
        include_str!("../timer/timercore.rs"),
        include_str!("../wait/mod.rs"),
        include_str!("../wait/waitcore.rs"),
        include_str!("mod.rs"),
        include_str!("members.rs"),
    ];

    /// The `pub fn` names of every inherent `impl` block of `ty` in `src`.
    fn inherent_methods(src: &str, ty: &str) -> Vec<Vec<String>> {
        let mut blocks = Vec::new();
        let mut lines = src.lines();
        while let Some(line) = lines.next() {
            let Some(rest) = line.strip_prefix("impl") else { continue };
            let rest = rest.trim_start_matches(|c| c != ' ').trim_start();
            let names_ty = rest.strip_prefix(ty).is_some_and(|r| r.starts_with(' ') || r.starts_with('<'));
            if !names_ty || line.contains(" for ") || !line.ends_with('{') {
                continue;
            }
            let mut methods = Vec::new();
            for body in lines.by_ref().take_while(|l| *l != "}") {
                let body = body.trim_start();
                let f = body.strip_prefix("pub fn ").or_else(|| body.strip_prefix("pub unsafe fn "));
                if let Some(f) = f {
                    methods.push(f.split(['(', '<']).next().unwrap_or_default().to_string());
                }
            }
            blocks.push(methods);
        }
        blocks
    }

    /// A standalone type adds only its two constructors to its view; a member adds
    /// nothing. So every method of one is a method of the other, and a
    /// method written for one kind of owner alone cannot appear.
    #[test]
    fn standalone_types_and_members_have_only_the_view_methods() {
        let all = |ty: &str| SOURCES.iter().flat_map(|s| inherent_methods(s, ty)).collect::<Vec<_>>();
        for ty in ["Work", "Timer", "PeriodicTimer", "Wait"] {
            let blocks = all(ty);
            assert_eq!(blocks.len(), 1, "{ty}: expected one inherent impl block (its constructor)");
            assert_eq!(blocks[0], ["new", "new_in"], "{ty} has public methods outside its view");
        }
        for ty in ["WorkMember", "TimerMember", "PeriodicTimerMember", "WaitMember"] {
            assert_eq!(all(ty), Vec::<Vec<String>>::new(), "{ty} has methods outside its view");
        }
        // The scan itself finds methods.
        assert!(all("WorkObject")[0].contains(&"submit".to_string()));
    }
}
