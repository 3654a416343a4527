//! Scoped tasks that borrow from the stack ([`scope`]) and two-way
//! fork-join ([`join`]).

use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, Ordering};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::thread;

use super::blocking::submit;
use super::header::{DONE, Header, help_or_wait, take};
use crate::callback_env::CallbackEnviron;

/// A scope to spawn tasks that borrow from the stack; see [`scope`].
pub struct Scope<'scope, 'env: 'scope> {
    /// Tasks spawned in the scope, most recent first; each holds a reference.
    head: AtomicPtr<Header>,
    env: Option<&'env CallbackEnviron>,
    /// Invariant in both lifetimes, as `std::thread::Scope` is.
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl core::fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Scope").field("env", &self.env).finish_non_exhaustive()
    }
}

/// Runs `f` with a [`Scope`] whose tasks may borrow anything that outlives
/// the call; returns once every task spawned in it has finished.
///
/// While waiting, the calling thread runs the scope's tasks no pool thread
/// has started (see the [module docs](super)).
///
/// # Panics
/// If `f` panics, after every task has finished, with `f`'s panic.
/// Otherwise, if a task panicked and was not joined, after every task has
/// finished.
pub fn scope<'env, F, R>(f: F) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    run_scope(None, f)
}

/// [`scope`] whose tasks run on the pool and with the settings of `env`.
pub fn scope_in<'env, F, R>(f: F, env: &'env CallbackEnviron) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    run_scope(Some(env), f)
}

pub(super) fn run_scope<'env, F, R>(env: Option<&'env CallbackEnviron>, f: F) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    let scope = Scope { head: AtomicPtr::new(core::ptr::null_mut()), env, _scope: PhantomData, _env: PhantomData };
    let r = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    let unjoined_panic = scope.finish();
    match r {
        Err(payload) => resume_unwind(payload),
        Ok(_) if unjoined_panic => panic!("a scoped task panicked"),
        Ok(r) => r,
    }
}

impl<'scope> Scope<'scope, '_> {
    /// Spawns `f` in the scope: it may borrow anything that outlives the
    /// scope, and is joined before [`scope`] returns.
    ///
    /// # Panics
    /// If the system refuses the submission (`TrySubmitThreadpoolCallback`).
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        // Two references: the handle's and the scope list's.
        let h = submit(f, self.env, 1).expect("windows-threadpool: TrySubmitThreadpoolCallback failed");
        // SAFETY: `submit` returned a live task with our references.
        let header = unsafe { h.as_ref() };
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            header.next.store(head, Ordering::Relaxed);
            match self.head.compare_exchange_weak(head, h.as_ptr(), Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => head = now,
            }
        }
        ScopedJoinHandle { task: h, _scope: PhantomData }
    }

    /// Finishes every task; drops the results nobody joined and returns
    /// whether one of them was a panic. Runs once, after the scope's closure.
    fn finish(&self) -> bool {
        let mut unjoined_panic = false;
        // Dropping a result runs user code, which may spawn again into the
        // scope (a result may hold `&Scope`): repeat until nothing is left.
        loop {
            let done = self.wait_all();
            if done.is_null() {
                return unjoined_panic;
            }
            unjoined_panic |= Self::discard_all(done);
        }
    }

    /// Runs or waits for every task on the list until it stays empty; returns
    /// them, linked through `next`. No result is dropped before all are done:
    /// a running task may still join another.
    fn wait_all(&self) -> *mut Header {
        let mut done: *mut Header = core::ptr::null_mut();
        loop {
            let mut batch = self.head.swap(core::ptr::null_mut(), Ordering::Acquire);
            if batch.is_null() {
                return done;
            }
            while let Some(h) = NonNull::new(batch) {
                // SAFETY: the list holds a reference to every task on it.
                let header = unsafe { h.as_ref() };
                batch = header.next.load(Ordering::Relaxed);
                // SAFETY: as above.
                unsafe { help_or_wait(h) };
                header.next.store(done, Ordering::Relaxed);
                done = h.as_ptr();
            }
        }
    }

    /// Drops the results nobody took and the list's references.
    ///
    /// A handle kept in another task's result may still join its task, from
    /// that result's `Drop` (here, or on another thread it hands the handle
    /// to). So results are dropped first where the task's scoped join
    /// handle is gone, in rounds, which lets such a `Drop` find its task's
    /// result still there; what remains when a round drops nothing (a
    /// handle forgotten, or kept in its own task's result) is dropped then.
    /// Either way `take_claim` decides who owns a result.
    fn discard_all(mut left: *mut Header) -> bool {
        let mut unjoined_panic = false;
        let mut force = false;
        while !left.is_null() {
            let (mut kept, mut cur, mut dropped_any) = (core::ptr::null_mut::<Header>(), left, false);
            while let Some(h) = NonNull::new(cur) {
                // SAFETY: the list's reference; every task has finished.
                unsafe {
                    cur = h.as_ref().next.load(Ordering::Relaxed);
                    let vt = h.as_ref().vtable;
                    if !force && h.as_ref().handle_alive.load(Ordering::Acquire) != 0 {
                        h.as_ref().next.store(kept, Ordering::Relaxed);
                        kept = h.as_ptr();
                        continue;
                    }
                    unjoined_panic |= (vt.discard)(h);
                    (vt.release)(h);
                }
                dropped_any = true;
            }
            left = kept;
            force = !dropped_any;
        }
        unjoined_panic
    }
}

/// A permission to join a scoped task; see [`JoinHandle`](super::JoinHandle).
pub struct ScopedJoinHandle<'scope, T> {
    task: NonNull<Header>,
    _scope: PhantomData<&'scope T>,
}

// SAFETY: as for `JoinHandle`.
unsafe impl<T: Send> Send for ScopedJoinHandle<'_, T> {}
// SAFETY: as for `JoinHandle`.
unsafe impl<T: Send> Sync for ScopedJoinHandle<'_, T> {}

impl<T> core::fmt::Debug for ScopedJoinHandle<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ScopedJoinHandle").field("finished", &self.is_finished()).finish()
    }
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Waits for the task and returns its result, or the payload of its
    /// panic (which the scope then no longer reports). If no pool thread has
    /// started the task yet, it runs here.
    pub fn join(self) -> thread::Result<T> {
        // SAFETY: the handle holds a reference.
        unsafe { help_or_wait(self.task) };
        // SAFETY: finished now; the handle holds a reference.
        unsafe { take::<T>(self.task) }
    }

    /// Whether the task has finished (returned or panicked).
    pub fn is_finished(&self) -> bool {
        // SAFETY: the handle holds a reference.
        unsafe { self.task.as_ref() }.state.load(Ordering::Acquire) >= DONE
    }
}

impl<T> Drop for ScopedJoinHandle<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the handle holds a reference.
        unsafe { self.task.as_ref() }.handle_alive.store(0, Ordering::Release);
        // SAFETY: the handle's own reference, given up once.
        unsafe { (self.task.as_ref().vtable.release)(self.task) };
    }
}

/// Runs `a` here and `b` as a task on the default pool, and returns both
/// results. If no pool thread has started `b` once `a` returns, `b` runs
/// here too.
///
/// # Panics
/// With `a`'s panic if `a` panicked, else with `b`'s; always after both
/// have finished.
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    join_with(None, a, b)
}

/// [`join`] with `b` on the pool and with the settings of `env`.
pub fn join_in<A, B, RA, RB>(a: A, b: B, env: &CallbackEnviron) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    join_with(Some(env), a, b)
}

fn join_with<A, B, RA, RB>(env: Option<&CallbackEnviron>, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let (ra, rb) = run_scope(env, |s| {
        let hb = s.spawn(b);
        let ra = catch_unwind(AssertUnwindSafe(a));
        (ra, hb.join())
    });
    match (ra, rb) {
        (Err(p), _) | (Ok(_), Err(p)) => resume_unwind(p),
        (Ok(ra), Ok(rb)) => (ra, rb),
    }
}
