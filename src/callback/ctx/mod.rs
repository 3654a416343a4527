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
//! is what keeps create + drop near the raw calls' cost.
//!
//! Nothing here calls Windows, so the module also builds on the host, with a
//! stand-in [`Placement`]: its unit tests run under Miri there, which checks
//! the type erasure (the header projection through `Shared<H, ()>`, the
//! trampoline's cast back) and the block cache against the aliasing rules.

use core::alloc::Layout;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use crate::callback::local::Local;
#[cfg(windows)]
use crate::placement::Placement;

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

/// Blocks for objects that are all freed at once (a cleanup group's members
/// and their contexts, freed by its release): one heap allocation per chunk
/// instead of one per block, which under Wine costs about as much as the
/// object's creation itself. A block is cut from the current chunk by one
/// compare-exchange; the lock is taken only to add a chunk (an uncontended
/// lock and unlock costs 19 ns under Wine, a member takes two blocks).
#[derive(Default)]
pub(crate) struct Arena {
    /// The chunk blocks are cut from (null before the first); published
    /// with its header written.
    current: AtomicPtr<Chunk>,
    /// Every chunk, for freeing; held to add one.
    chunks: std::sync::Mutex<Vec<NonNull<Chunk>>>,
}

// SAFETY: the chunks are plain memory owned by the arena (the values in
// them are owned and dropped by their users). A chunk's header is written
// once, before the chunk is published, and never again but for `used`,
// which is atomic; chunks are freed only by the arena's `&mut` methods.
unsafe impl Send for Arena {}
// SAFETY: as above; `alloc` is the only `&self` access: it reads a header
// only after the `Acquire` load of `current` that pairs with the `Release`
// store publishing it (or under the lock it was pushed under), and cuts
// blocks by compare-exchange on `used`.
unsafe impl Sync for Arena {}

/// A chunk's header; its blocks follow it, from [`Chunk::data`] bytes on.
struct Chunk {
    /// The whole allocation's layout (header included).
    layout: Layout,
    /// Bytes of blocks cut so far.
    used: AtomicUsize,
}

impl Chunk {
    /// Where the blocks of a chunk aligned to `align` start: past the
    /// header, at a multiple of `align`.
    const fn data_at(align: usize) -> usize {
        size_of::<Chunk>().next_multiple_of(align)
    }

    fn data(&self) -> usize {
        Self::data_at(self.layout.align())
    }

    /// Bytes of blocks it holds.
    fn cap(&self) -> usize {
        self.layout.size() - self.data()
    }

    /// Reserves `layout` in this chunk; the offset of the block from
    /// `data`, or `None` if it does not fit.
    fn cut(&self, layout: Layout) -> Option<usize> {
        // The blocks start aligned for the allocation, so an offset aligned
        // for `layout` is an aligned address if it asks no more.
        if layout.align() > self.layout.align() {
            return None;
        }
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let at = used.next_multiple_of(layout.align());
            let end = at.checked_add(layout.size().max(1)).filter(|&e| e <= self.cap())?;
            // Relaxed: the range is exclusive by the compare-exchange alone;
            // what is written into it is published by its users.
            match self.used.compare_exchange_weak(used, end, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(at),
                Err(now) => used = now,
            }
        }
    }
}

impl Arena {
    /// The first chunk's capacity; each next one doubles, up to [`Self::MAX_CHUNK`].
    const FIRST_CHUNK: usize = 512;
    const MAX_CHUNK: usize = 32 * 1024;
    const CHUNK_ALIGN: usize = 64;

    fn chunks(&self) -> std::sync::MutexGuard<'_, Vec<NonNull<Chunk>>> {
        // A panic while it is held (a `Vec` growth, the allocation error
        // hook) leaves the list consistent: a chunk is pushed before it is
        // published, and a poisoned lock is recovered.
        self.chunks.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A block of `layout`, valid until the arena's chunks are freed. At
    /// most two cuts and one chunk allocation: a new chunk holds the
    /// caller's block before it is published.
    pub(crate) fn alloc(&self, layout: Layout) -> NonNull<u8> {
        if let Some(block) = self.cut_current(layout) {
            return block;
        }
        let mut chunks = self.chunks();
        // Only this lock adds chunks: one more cut finds any chunk another
        // thread added since.
        if let Some(block) = self.cut_current(layout) {
            return block;
        }
        // SAFETY: every listed chunk's header is initialised.
        let last = chunks.last().map(|c| unsafe { c.as_ref() }.cap());
        let next = last.map_or(Self::FIRST_CHUNK, |c| (c * 2).min(Self::MAX_CHUNK));
        let cap = next.max(layout.size()).max(1);
        let align = Self::CHUNK_ALIGN.max(layout.align());
        let data = Chunk::data_at(align);
        let full = data
            .checked_add(cap)
            .and_then(|size| Layout::from_size_align(size, align).ok())
            .unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        // SAFETY: `full` has a non-zero size.
        let chunk = NonNull::new(unsafe { std::alloc::alloc(full) }.cast::<Chunk>())
            .unwrap_or_else(|| std::alloc::handle_alloc_error(full));
        // The caller's block is the chunk's first: cut before publication.
        let used = AtomicUsize::new(layout.size().max(1));
        // SAFETY: the allocation is aligned for a `Chunk` (at least 64) and
        // larger than one (`data` is at least its size).
        unsafe { chunk.as_ptr().write(Chunk { layout: full, used }) };
        chunks.push(chunk);
        // A chunk made for a block larger than the next chunk would have
        // been is full already: the current one keeps its free space.
        if layout.size() <= next {
            self.current.store(chunk.as_ptr(), Ordering::Release);
        }
        // SAFETY: `data + size <= data + cap == full.size()`: within the
        // live, non-null allocation.
        unsafe { NonNull::new_unchecked(chunk.as_ptr().cast::<u8>().add(data)) }
    }

    /// A block of `layout` cut from the current chunk, if it has room.
    fn cut_current(&self, layout: Layout) -> Option<NonNull<u8>> {
        let current = self.current.load(Ordering::Acquire);
        // SAFETY: a published chunk's header is initialised (the `Release`
        // store in `alloc` pairs with this load) and never written again but
        // for its atomic `used`; a chunk leaves the arena only through `take`
        // or `drop`, which take `&mut self`.
        let chunk = unsafe { current.as_ref() }?;
        let at = chunk.cut(layout)?;
        // SAFETY: `cut` reserved `at..at + size` with `at + size <= cap`, and
        // the blocks start `data` bytes into an allocation of `data + cap`:
        // within the live, non-null allocation.
        Some(unsafe { NonNull::new_unchecked(current.cast::<u8>().add(chunk.data() + at)) })
    }

    /// Takes every chunk, leaving the arena empty: what was allocated
    /// before lives until the returned arena is dropped.
    pub(crate) fn take(&mut self) -> Arena {
        let chunks = core::mem::take(self.chunks.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner));
        let current = core::mem::replace(self.current.get_mut(), core::ptr::null_mut());
        Arena { current: AtomicPtr::new(current), chunks: std::sync::Mutex::new(chunks) }
    }

    /// How many chunks it holds (one heap allocation each).
    #[cfg(test)]
    fn chunk_count(&self) -> usize {
        self.chunks().len()
    }
}

impl Drop for Arena {
    /// Frees the chunks: by the contract of [`Blocks::arena`] and of its
    /// other users, nothing in them is used again. Dropped by an unwind, it
    /// leaks them instead: the panic may have cut short the code that was
    /// to close the native objects pointing into them first.
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        for chunk in self.chunks.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).drain(..) {
            // SAFETY: allocated by `alloc` with the layout its header holds,
            // freed once, here.
            unsafe { std::alloc::dealloc(chunk.as_ptr().cast(), chunk.as_ref().layout) };
        }
    }
}

/// Blocks of freed contexts, kept per thread (in its [`Local`]) for reuse
/// by layout.
pub(crate) mod blocks {
    use core::alloc::Layout;
    use core::cell::Cell;
    use core::ptr::NonNull;
    use std::alloc::{alloc, dealloc, handle_alloc_error};

    use crate::callback::local::{self, Local};

    /// Blocks kept per thread: enough for a thread that creates and drops
    /// objects of a few kinds in turn, little enough to hold no real memory.
    const KEPT: usize = 8;
    /// The largest block kept: a callback that captures more is rare, and
    /// its allocation costs little next to what it captured.
    const KEPT_SIZE: usize = 256;

    /// One thread's kept blocks: a fixed set of slots (no allocation of
    /// its own, and `Cell`s, so a use nested in another cannot conflict).
    pub(crate) struct Kept([Slot; KEPT]);

    /// A kept block and its layout, or nothing.
    type Slot = Cell<Option<(Layout, NonNull<u8>)>>;

    impl Kept {
        pub(crate) const fn new() -> Self {
            Self([const { Cell::new(None) }; KEPT])
        }
    }

    impl Drop for Kept {
        fn drop(&mut self) {
            for (layout, block) in self.0.iter().filter_map(Cell::take) {
                // SAFETY: every kept block came from `alloc(layout)` and is
                // owned by the cache alone.
                unsafe { dealloc(block.as_ptr(), layout) };
                #[cfg(test)]
                probe_count(layout, -1);
            }
        }
    }

    /// The layout only the tests use, and how many blocks of it all threads
    /// keep (a layout of its own, so tests running beside it in one process
    /// do not move the count).
    #[cfg(test)]
    pub(crate) const PROBE: Layout = match Layout::from_size_align(192, 64) {
        Ok(l) => l,
        Err(_) => panic!(),
    };
    #[cfg(test)]
    pub(crate) static PROBES_KEPT: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);
    #[cfg(test)]
    fn probe_count(layout: Layout, delta: isize) {
        if layout == PROBE {
            PROBES_KEPT.fetch_add(delta, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// How many blocks this thread keeps.
    #[cfg(test)]
    pub(crate) fn kept() -> usize {
        local::with(|here| here.map_or(0, |l| l.kept.0.iter().filter(|s| s.get().is_some()).count()))
    }

    /// A block for `layout` (not zero-sized): a kept one if this thread has
    /// one, a new allocation otherwise.
    pub(crate) fn take(layout: Layout) -> NonNull<u8> {
        let kept = local::with(|here| {
            let slot = here?.kept.0.iter().find(|s| s.get().is_some_and(|(l, _)| l == layout))?;
            #[cfg(test)]
            probe_count(layout, -1);
            slot.take().map(|(_, block)| block)
        });
        if let Some(block) = kept {
            return block;
        }
        // `alloc` with a zero-sized layout is undefined; contexts never have
        // one (a placement comes first), and this keeps the function safe.
        assert!(layout.size() != 0, "zero-sized context block");
        // SAFETY: `layout` is not zero-sized (checked above).
        NonNull::new(unsafe { alloc(layout) }).unwrap_or_else(|| handle_alloc_error(layout))
    }

    /// Gives back a block from [`take`] whose value has been dropped: kept
    /// in `here` (this thread's state, `None` once it is gone) if there is
    /// room, deallocated otherwise.
    ///
    /// # Safety
    /// `block` came from [`take`] with `layout`, holds no live value, and is
    /// not used again by the caller.
    pub(crate) unsafe fn give_back(here: Option<&Local>, block: NonNull<u8>, layout: Layout) {
        let free =
            here.filter(|_| layout.size() <= KEPT_SIZE).and_then(|l| l.kept.0.iter().find(|s| s.get().is_none()));
        if let Some(slot) = free {
            slot.set(Some((layout, block)));
            #[cfg(test)]
            probe_count(layout, 1);
            return;
        }
        // SAFETY: guaranteed by the caller: allocated with `layout`.
        unsafe { dealloc(block.as_ptr(), layout) };
    }

    /// [`give_back`] with this thread's state read here.
    ///
    /// # Safety
    /// As for [`give_back`].
    #[cfg(test)]
    pub(crate) unsafe fn release(block: NonNull<u8>, layout: Layout) {
        // SAFETY: guaranteed by the caller.
        local::with(|here| unsafe { give_back(here, block, layout) })
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

    #[test]
    fn a_freed_block_is_reused_for_the_same_layout_only() {
        let small = Layout::new::<[u64; 4]>();
        let other = Layout::new::<[u64; 5]>();
        let a = blocks::take(small);
        // SAFETY: from `take` with this layout, no value in it, not used again.
        unsafe { blocks::release(a, small) };
        let b = blocks::take(other);
        assert_ne!(a, b, "a block of another layout was handed out");
        assert_eq!(blocks::take(small), a, "the kept block was not reused");
        // SAFETY: as above, for each block.
        unsafe {
            blocks::release(a, small);
            blocks::release(b, other);
        }
    }

    /// A thread's kept blocks are freed when the thread exits.
    #[test]
    fn a_threads_kept_blocks_are_freed_when_it_exits() {
        use std::sync::atomic::Ordering::SeqCst;
        std::thread::spawn(|| {
            let a = blocks::take(blocks::PROBE);
            // SAFETY: from `take` with this layout, no value in it, not used again.
            unsafe { blocks::release(a, blocks::PROBE) };
            assert_eq!(blocks::PROBES_KEPT.load(SeqCst), 1);
        })
        .join()
        .unwrap();
        assert_eq!(blocks::PROBES_KEPT.load(SeqCst), 0, "an exited thread's blocks were kept");
    }

    #[test]
    fn large_blocks_and_blocks_beyond_the_cap_are_not_kept() {
        // The test thread is fresh: nothing kept yet.
        std::thread::spawn(|| {
            assert_eq!(blocks::kept(), 0);
            let large = Layout::from_size_align(4096, 8).unwrap();
            let a = blocks::take(large);
            // SAFETY: from `take` with this layout, no value in it, not used again.
            unsafe { blocks::release(a, large) };
            assert_eq!(blocks::kept(), 0, "a large block was kept");
            let small = Layout::new::<[u64; 3]>();
            let many: Vec<_> = (0..20).map(|_| blocks::take(small)).collect();
            for p in many {
                // SAFETY: as above.
                unsafe { blocks::release(p, small) };
            }
            assert_eq!(blocks::kept(), 8, "the cache keeps exactly its cap");
        })
        .join()
        .unwrap();
    }

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
    fn an_arena_hands_out_aligned_disjoint_blocks_from_few_chunks() {
        let arena = Arena::default();
        let mut blocks = Vec::new();
        // Fewer under Miri, which checks every byte written (8 s for 1,000).
        for i in 0..if cfg!(miri) { 300 } else { 1000usize } {
            let layout =
                [Layout::new::<[u64; 9]>(), Layout::new::<u8>(), Layout::from_size_align(48, 32).unwrap()][i % 3];
            let p = arena.alloc(layout);
            assert_eq!(p.as_ptr().addr() % layout.align(), 0, "block {i} is misaligned for {layout:?}");
            // SAFETY: the block is valid for `layout.size()` bytes.
            unsafe { p.as_ptr().write_bytes(i as u8, layout.size()) };
            blocks.push((p, layout, i as u8));
        }
        for (p, layout, v) in &blocks {
            // SAFETY: as above; nothing else wrote it if the blocks are disjoint.
            let bytes = unsafe { core::slice::from_raw_parts(p.as_ptr(), layout.size()) };
            assert!(bytes.iter().all(|b| b == v), "two blocks overlap");
        }
        // 1,000 blocks of 41 bytes on average: 512, 1 KiB, ..., 32 KiB, 32 KiB.
        assert!(arena.chunk_count() <= 8, "{} chunks for {} small blocks", arena.chunk_count(), blocks.len());
    }

    #[test]
    fn blocks_aligned_beyond_a_chunks_default_share_a_chunk_aligned_for_them() {
        let arena = Arena::default();
        let layout = Layout::from_size_align(160, 128).unwrap();
        // 256 bytes apart: 2 in the first chunk, then 4, 8 and 6.
        for _ in 0..20 {
            assert_eq!(arena.alloc(layout).as_ptr().addr() % 128, 0);
        }
        assert!(arena.chunk_count() <= 4, "{} chunks for 20 blocks of 160 bytes", arena.chunk_count());
    }

    #[test]
    fn an_arena_dropped_by_an_unwind_leaks_its_chunks() {
        let arena = Arena::default();
        let p = arena.alloc(Layout::new::<u64>()).cast::<u64>();
        let unwound = std::panic::catch_unwind(core::panic::AssertUnwindSafe(move || {
            let _arena = arena;
            panic!("unwinds through the arena");
        }));
        assert!(unwound.is_err());
        let data = Chunk::data_at(Arena::CHUNK_ALIGN);
        // SAFETY: the chunk was leaked, not freed: still valid for a u64
        // (Miri reports a use after free otherwise). The block is the first
        // of the first chunk, which is freed here with its layout.
        unsafe {
            p.as_ptr().write(7);
            let chunk = p.as_ptr().cast::<u8>().sub(data);
            std::alloc::dealloc(chunk, Layout::from_size_align(data + Arena::FIRST_CHUNK, Arena::CHUNK_ALIGN).unwrap());
        }
    }

    #[test]
    fn threads_cutting_blocks_at_once_never_share_one() {
        struct Block(NonNull<u8>, usize);
        // SAFETY: a block is plain memory the test reads after the threads end.
        unsafe impl Send for Block {}
        let arena = Arena::default();
        let per_thread = if cfg!(miri) { 40 } else { 2000 };
        let blocks: Vec<Vec<Block>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4u8)
                .map(|t| {
                    let arena = &arena;
                    s.spawn(move || {
                        (0..per_thread)
                            .map(|i| {
                                // Small blocks of three alignments, a zero-sized one, one
                                // aligned beyond a chunk's 64, and one larger than a chunk.
                                let layout = match i % 50 {
                                    // Under Miri, which reads it byte by byte, still larger
                                    // than the chunks of its 40 blocks.
                                    0 => Layout::from_size_align(if cfg!(miri) { 2_000 } else { 40_000 }, 8).unwrap(),
                                    n if n % 7 == 1 => Layout::from_size_align(0, 256).unwrap(),
                                    n if n % 7 == 2 => Layout::from_size_align(160, 128).unwrap(),
                                    _ => Layout::from_size_align(8 + (i % 5) * 24, 8 << (i % 3)).unwrap(),
                                };
                                let p = arena.alloc(layout);
                                assert_eq!(p.as_ptr().addr() % layout.align(), 0);
                                // SAFETY: the block is valid for `layout.size()` bytes.
                                unsafe { p.as_ptr().write_bytes(t, layout.size()) };
                                Block(p, layout.size())
                            })
                            .collect()
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        // A zero-sized block takes a byte too: no two share an address.
        let mut spans: Vec<(usize, usize)> =
            blocks.iter().flatten().map(|b| (b.0.as_ptr().addr(), b.1.max(1))).collect();
        spans.sort_unstable();
        for w in spans.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "blocks {:#x}+{} and {:#x} overlap", w[0].0, w[0].1, w[1].0);
        }
        for (t, list) in blocks.iter().enumerate() {
            for b in list {
                // SAFETY: the block is alive (the arena is) and its thread
                // wrote all of it (joined above).
                let bytes = unsafe { core::slice::from_raw_parts(b.0.as_ptr(), b.1) };
                assert!(bytes.iter().all(|&v| usize::from(v) == t), "a block of thread {t} was written by another");
            }
        }
    }

    #[test]
    fn an_arena_block_larger_than_a_chunk_gets_a_chunk_of_its_own() {
        let mut arena = Arena::default();
        let small = arena.alloc(Layout::new::<u64>());
        let big = Layout::from_size_align(100_000, 128).unwrap();
        let p = arena.alloc(big);
        assert_eq!(p.as_ptr().addr() % 128, 0);
        // SAFETY: valid for the whole layout.
        unsafe { p.as_ptr().write_bytes(1, big.size()) };
        assert_eq!(arena.chunk_count(), 2);
        // The first chunk still takes small blocks.
        let next = arena.alloc(Layout::new::<u64>());
        assert_eq!(next.as_ptr().addr(), small.as_ptr().addr() + 8, "the big block's chunk became the current one");
        assert_eq!(arena.chunk_count(), 2);
        let taken = arena.take();
        assert_eq!((arena.chunk_count(), taken.chunk_count()), (0, 2), "take left chunks behind");
        // SAFETY: the taken chunks are alive until `taken` drops.
        unsafe { small.cast::<u64>().as_ptr().write(7) };
        drop(taken);
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
