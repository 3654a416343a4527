//! The heap context handed to the OS with each pool object.
//!
//! A pool object's callback receives one `*mut c_void` context. [`Context`]
//! owns that allocation: a [`Shared`] made of a non-generic header `H` (state
//! both the owner and the trampoline use, such as the drain obligation) and
//! the user's callback `F`, after the object's [`Placement`]. `F` is erased
//! so the public object types are not generic over the callback; the
//! trampoline, which is generic, casts the pointer back with [`get`].
//! `Shared` is `repr(C)` with the placement first, then the function that
//! frees the block, then the header, so the per-callback scope reads the
//! placement knowing neither `H` nor `F`, and the owner reaches the header
//! and frees the block without knowing `F`. A [`Context`] is then one
//! pointer, which keeps the cores that hold it small enough to be moved in
//! registers (a create and drop pair moves its core three times).
//!
//! The owner frees the context only after the object has been drained and
//! closed, which is what makes a callback unable to outlive the state it
//! captured.
//!
//! Freeing drops the header and callback at once; the block itself goes to
//! a small per-thread cache ([`blocks`]) that the next context of the same
//! layout created on that thread reuses. Under Wine a heap allocation plus
//! free costs about as much as creating and closing a work object, so this
//! is what keeps create + drop near the raw calls' cost. Objects that are
//! all freed at once (a cleanup group's members) take their blocks from an
//! [`Arena`] instead, cut from a few chunks the group frees after them.
//!
//! Nothing here calls Windows, so the module also builds on the host, with a
//! stand-in [`Placement`]: its unit tests run under Miri there, which checks
//! the type erasure (the header projection through `Shared<H, ()>`, the
//! trampoline's cast back) and the block cache against the aliasing rules.

use core::alloc::Layout;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::callback::local::Local;
#[cfg(windows)]
use crate::placement::Placement;

mod arena;
pub(crate) mod blocks;
pub(crate) use arena::Arena;

/// Off Windows there is nothing to place a callback with: a plain value of
/// `GROUP_AFFINITY`'s size and alignment stands in, so the layout the
/// tests check is shaped like the real one.
#[cfg(not(windows))]
#[derive(Clone, Copy)]
pub(crate) struct Placement([u64; 2]);

#[cfg(not(windows))]
impl Placement {
    pub(crate) const NONE: Self = Self([0; 2]);
}

/// Contexts alive in the process (for tests: every context is freed exactly
/// once). Counted only when the tests can read it.
#[cfg(any(test, feature = "test-hooks"))]
static LIVE: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// How many callback contexts (of work, timers, waits, I/O objects and
/// cleanup group members, whether owned or handed to a teardown) are alive in
/// this process. A test hook, not API.
#[cfg(any(test, feature = "test-hooks"))]
#[cfg_attr(not(windows), allow(unreachable_pub, dead_code))] // re-exported on Windows only
#[doc(hidden)]
pub fn live_contexts() -> usize {
    LIVE.load(core::sync::atomic::Ordering::SeqCst)
}

/// One context more (`true`) or fewer alive; nothing unless the tests count.
#[inline(always)]
fn count_context(allocated: bool) {
    #[cfg(any(test, feature = "test-hooks"))]
    if allocated {
        LIVE.fetch_add(1, core::sync::atomic::Ordering::SeqCst);
    } else {
        LIVE.fetch_sub(1, core::sync::atomic::Ordering::SeqCst);
    }
    #[cfg(not(any(test, feature = "test-hooks")))]
    let _ = allocated;
}

/// What a context points to.
#[repr(C)]
pub(crate) struct Shared<H, F> {
    /// First: read by `placement::enter` through the bare context pointer.
    placement: Placement,
    /// How the block is freed, read by [`Context`]'s drop through
    /// `Shared<H, ()>`: kept here rather than in the owner, so that a core
    /// is small enough to move in registers.
    free: Free,
    pub(crate) header: H,
    pub(crate) callback: F,
}

/// Owns one [`Shared`] block: one pointer, the callback's type erased.
pub(crate) struct Context<H> {
    ptr: NonNull<c_void>,
    _header: PhantomData<H>,
}

// SAFETY: `Context::new` only accepts `H` and `F` that are `Send + Sync`, and
// the allocation is only reached through shared references (owner and
// callbacks) or by the owner's drop, which may run on any thread (`F: Send`
// covers dropping the callback there; a kept block then joins that thread's
// cache, an arena's block stays in the arena, which is `Send` itself).
unsafe impl<H: Send + Sync> Send for Context<H> {}
// SAFETY: as above.
unsafe impl<H: Send + Sync> Sync for Context<H> {}

impl<H: Send + Sync + 'static> Context<H> {
    pub(crate) fn new<F: Send + Sync + 'static>(
        blocks: Blocks<'_>,
        placement: Placement,
        header: H,
        callback: F,
    ) -> Self {
        let layout = Layout::new::<Shared<H, F>>();
        let (block, free) = match blocks.0 {
            None => (blocks::take(layout), drop_kept::<Shared<H, F>> as Free),
            Some(arena) => (arena.alloc(layout), drop_only::<Shared<H, F>> as Free),
        };
        let block = block.cast::<Shared<H, F>>();
        // SAFETY: `block` is valid for writes of a `Shared<H, F>` (its layout).
        unsafe { block.as_ptr().write(Shared { placement, free, header, callback }) };
        count_context(true);
        return Self { ptr: block.cast(), _header: PhantomData };

        /// # Safety
        /// `p` holds a `T` made by `new` from an arena, not used again.
        unsafe fn drop_only<T>(p: NonNull<c_void>) -> Option<Layout> {
            // SAFETY: `p` holds a `T` written by `new` and is dropped once,
            // here; its arena frees the block later (`Blocks::arena`).
            unsafe { core::ptr::drop_in_place(p.cast::<T>().as_ptr()) };
            None
        }
        /// # Safety
        /// `p` holds a `T` made by `new` from the kept blocks, not used again.
        unsafe fn drop_kept<T>(p: NonNull<c_void>) -> Option<Layout> {
            // SAFETY: `p` holds a `T` written by `new` and is dropped once,
            // here. (If the value's drop panics, the block leaks: safe, and
            // rare.)
            unsafe { core::ptr::drop_in_place(p.cast::<T>().as_ptr()) };
            Some(Layout::new::<T>())
        }
    }
}

/// Drops a context's value in place; returns the layout of its block if
/// the block is to be given back to the kept blocks (`None`: an arena's).
type Free = unsafe fn(NonNull<c_void>) -> Option<Layout>;

/// Where a context's block comes from: the thread's kept blocks and the
/// heap ([`Blocks::KEPT`]), or an [`Arena`].
#[derive(Clone, Copy)]
pub(crate) struct Blocks<'a>(Option<&'a Arena>);

impl Blocks<'static> {
    /// The thread's kept blocks, else the heap; freed one by one.
    pub(crate) const KEPT: Self = Self(None);
}

impl<'a> Blocks<'a> {
    /// Blocks bump-allocated from `arena`; a context made from them drops
    /// its value when it is dropped and leaves the block to the arena.
    ///
    /// # Safety
    /// Every context made from the result is dropped (or leaked) before
    /// `arena` frees its chunks (when it, or what [`Arena::take`] took from
    /// it, is dropped), and the native object given its pointer is closed
    /// by then.
    pub(crate) unsafe fn arena(arena: &'a Arena) -> Self {
        Self(Some(arena))
    }
}

impl<H> Context<H> {
    pub(crate) fn as_ptr(&self) -> *mut c_void {
        self.ptr.as_ptr()
    }

    pub(crate) fn header(&self) -> &H {
        // SAFETY: the allocation is a live `repr(C)` `Shared<H, F>`; the
        // offset of `header` depends only on the fields before it and on
        // `H`, so it is the same in `Shared<H, ()>`. Only the header's place
        // is projected, never the whole struct.
        unsafe { &*core::ptr::addr_of!((*self.ptr.as_ptr().cast::<Shared<H, ()>>()).header) }
    }
}

impl<H> Context<H> {
    /// Frees the context as dropping it does, giving its block back to the
    /// kept blocks of `here` (this thread's state, read by the caller; see
    /// `crate::callback::local`).
    pub(crate) fn free_in(self, here: Option<&Local>) {
        let this = core::mem::ManuallyDrop::new(self);
        let give_back = |block, layout| {
            // SAFETY: from `take` with `layout` (a kept context's), its value
            // dropped; given back once, by `free_block`.
            unsafe { blocks::give_back(here, block, layout) }
        };
        // SAFETY: `this` is never dropped, so the block is freed once, here.
        unsafe { this.free_block(give_back) }
    }

    /// Drops the value and gives the block to `give_back` if it is a kept
    /// one.
    ///
    /// # Safety
    /// Called once; the context is not used afterwards.
    unsafe fn free_block(&self, give_back: impl FnOnce(NonNull<u8>, Layout)) {
        // SAFETY: as in `header`: `free`'s offset does not depend on `F`,
        // the block, allocated for a `Shared<H, F>`, is aligned for it, and it
        // is live until `free` runs, below.
        let free = unsafe { *core::ptr::addr_of!((*self.ptr.as_ptr().cast::<Shared<H, ()>>()).free) };
        // SAFETY: `free` was instantiated for the type `ptr` was allocated
        // with, and runs once (the caller's contract).
        if let Some(layout) = unsafe { free(self.ptr) } {
            give_back(self.ptr.cast(), layout);
        }
        count_context(false);
    }
}

impl<H> Drop for Context<H> {
    fn drop(&mut self) {
        let give_back = |block, layout| {
            // SAFETY: as in `free_in`.
            crate::callback::local::with(|here| unsafe { blocks::give_back(here, block, layout) })
        };
        // SAFETY: dropped once; `self` is not used again.
        unsafe { self.free_block(give_back) }
    }
}

/// Recovers the typed context inside a trampoline.
///
/// # Safety
/// `ptr` must be the pointer of a live [`Context`] created from a
/// `Shared<H, F>`, and the returned reference must not be used after that
/// context is freed (owners free it only after draining every callback).
pub(crate) unsafe fn get<'a, H, F>(ptr: *mut c_void) -> &'a Shared<H, F> {
    // SAFETY: guaranteed by the caller.
    unsafe { &*ptr.cast::<Shared<H, F>>() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// What a pool thread does with the bare pointer (placement read
    /// through the first field, the typed cast, the callback run) while the
    /// owner holds its header, on two threads; then the owner frees. Under
    /// Miri this checks the erased accesses against the aliasing rules.
    #[test]
    fn the_owner_and_a_trampoline_share_the_context() {
        use std::sync::atomic::{AtomicU32, Ordering};

        /// A header aligned more than the placement, so its offset is padded.
        #[repr(align(32))]
        struct Header(AtomicU32);

        let captured = Arc::new(AtomicU32::new(0));
        let c = Arc::clone(&captured);
        let callback = move |h: &Header| {
            h.0.fetch_add(1, Ordering::SeqCst);
            c.fetch_add(1, Ordering::SeqCst);
        };
        fn typed<F>(_: &F) -> fn(*mut c_void) -> usize
        where
            F: Fn(&Header),
        {
            |ptr| {
                // SAFETY: `ptr` is a live context's, whose block starts with
                // its placement (what `placement::enter` relies on): 16
                // bytes, all zero for `Placement::NONE`.
                let placement = unsafe { *ptr.cast::<[u64; 2]>() };
                assert_eq!(placement, [0; 2]);
                // SAFETY: the context was made from a `Shared<Header, F>` and
                // outlives this call.
                let shared = unsafe { get::<Header, F>(ptr) };
                (shared.callback)(&shared.header);
                core::ptr::addr_of!(shared.header) as usize
            }
        }
        let trampoline = typed(&callback);
        let ctx = Context::new(Blocks::KEPT, Placement::NONE, Header(AtomicU32::new(0)), callback);
        let header = ctx.header();
        let seen = std::thread::scope(|s| {
            let ctx = &ctx;
            let pool = s.spawn(move || trampoline(ctx.as_ptr()));
            header.0.fetch_add(1, Ordering::SeqCst);
            pool.join().unwrap()
        });
        assert_eq!(seen, header as *const Header as usize, "the owner and the trampoline see two headers");
        assert_eq!(header.0.load(Ordering::SeqCst), 2);
        assert_eq!(trampoline(ctx.as_ptr()), seen);
        assert_eq!(captured.load(Ordering::SeqCst), 2);
        // Dropped on another thread, as a teardown handed off does.
        std::thread::spawn(move || drop(ctx)).join().unwrap();
        assert_eq!(Arc::strong_count(&captured), 1);
    }

    #[test]
    fn freeing_a_context_drops_its_callback_at_once() {
        let captured = Arc::new(());
        let c = Arc::clone(&captured);
        let ctx = Context::new(Blocks::KEPT, Placement::NONE, 7u32, move || {
            let _ = &c;
        });
        assert_eq!(*ctx.header(), 7);
        assert_eq!(Arc::strong_count(&captured), 2);
        drop(ctx);
        assert_eq!(Arc::strong_count(&captured), 1, "the callback was not dropped with its context");
    }

    #[test]
    fn a_context_in_an_arena_drops_its_callback_and_leaves_the_block() {
        let arena = Arena::default();
        let captured = Arc::new(());
        let c = Arc::clone(&captured);
        // SAFETY: the context is dropped below, before the arena.
        let from = unsafe { Blocks::arena(&arena) };
        let ctx = Context::new(from, Placement::NONE, 7u32, move || {
            let _ = &c;
        });
        let kept = blocks::kept();
        assert_eq!(arena.chunk_count(), 1, "the context was not made in the arena");
        drop(ctx);
        assert_eq!(Arc::strong_count(&captured), 1, "the callback was not dropped with its context");
        assert_eq!(blocks::kept(), kept, "an arena block went to the thread's kept blocks");
    }
}
