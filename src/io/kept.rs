//! Blocks an engine keeps for its next operations, so that an operation in
//! steady state allocates nothing.
//!
//! The memory of a block whose operation is over goes into one of a few
//! slots, tagged with its layout, and the next operation of the same layout
//! takes it back instead of asking the allocator. The slots are lock-free:
//! a slot holds a block or null, `swap` takes what it holds and a
//! `compare_exchange` from null puts one back, so the thread that issues an
//! operation and the pool thread that completes it can both use them. A
//! block that finds every slot taken is freed. Beside each slot, the size
//! of the block last put there spares a search the swap of a block of
//! another size; it is a hint (two threads filling one slot may leave the
//! other's), and the tag decides.
//!
//! No Windows type: it builds on the host, where its unit tests run under
//! Miri and a loom model checks that a block is held by one thread at a
//! time (`loom_tests` below).

use core::alloc::Layout;
use core::ptr::NonNull;
use std::alloc::{alloc, dealloc, handle_alloc_error};

use crate::sync::{AtomicPtr, AtomicUsize, Ordering};

/// How many blocks an engine keeps: enough for the kinds a socket or pipe
/// has in flight at once (a read, a write, a zero-byte wait, an accept)
/// without holding memory an idle connection does not need.
const KEPT: usize = 4;

/// The tag at the start of a kept block's memory.
#[repr(C)]
struct Kept {
    layout: Layout,
}

/// Kept blocks' memory, by slot. Dropping it frees what it keeps.
pub(crate) struct BlockCache {
    slots: [AtomicPtr<Kept>; KEPT],
    /// The size of the block last put in each slot (a hint).
    sizes: [AtomicUsize; KEPT],
}

impl Default for BlockCache {
    fn default() -> Self {
        Self {
            slots: core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut())),
            sizes: core::array::from_fn(|_| AtomicUsize::new(0)),
        }
    }
}

impl core::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let kept = self.slots.iter().filter(|s| !s.load(Ordering::Relaxed).is_null()).count();
        f.debug_struct("BlockCache").field("kept", &kept).finish()
    }
}

/// Whether memory of `layout` can hold the tag (every block can: it starts
/// with an `OVERLAPPED`).
fn can_keep(layout: Layout) -> bool {
    layout.size() >= size_of::<Kept>() && layout.align() >= align_of::<Kept>()
}

impl BlockCache {
    /// Memory for a block of `layout`: a kept block's, or a new
    /// allocation. Owned by the caller, uninitialised; it goes back through
    /// [`keep`](Self::keep) or `dealloc` with `layout`.
    ///
    /// # Panics
    /// If `layout`'s size is zero (a block never is).
    pub(crate) fn memory(&self, layout: Layout) -> NonNull<u8> {
        assert!(layout.size() != 0, "a block has a size");
        for i in 0..KEPT {
            // Plain loads first: an empty slot, or one holding a block of
            // another size, costs no locked instruction.
            if self.slots[i].load(Ordering::Relaxed).is_null() || self.sizes[i].load(Ordering::Relaxed) != layout.size()
            {
                continue;
            }
            let Some(kept) = NonNull::new(self.slots[i].swap(core::ptr::null_mut(), Ordering::Acquire)) else {
                continue;
            };
            // SAFETY: the swap made this thread the block's only owner; the
            // Acquire pairs with the Release that kept it, after its tag was
            // written.
            let its = unsafe { kept.as_ptr().read().layout };
            if its == layout {
                return kept.cast();
            }
            // SAFETY: owned (above), of the layout its tag says.
            unsafe { self.keep(kept.cast(), its) };
        }
        // SAFETY: the size is not zero (asserted above).
        NonNull::new(unsafe { alloc(layout) }).unwrap_or_else(|| handle_alloc_error(layout))
    }

    /// Keeps the memory at `p` for a later block of `layout`, or frees it.
    ///
    /// # Safety
    /// `p` was allocated by the global allocator with `layout`, is owned by
    /// the caller and holds nothing that needs dropping; it is not used
    /// after this call.
    pub(crate) unsafe fn keep(&self, p: NonNull<u8>, layout: Layout) {
        if can_keep(layout) {
            let kept = p.cast::<Kept>();
            // SAFETY: owned, and large and aligned enough for the tag.
            unsafe { kept.as_ptr().write(Kept { layout }) };
            for i in 0..KEPT {
                if !self.slots[i].load(Ordering::Relaxed).is_null() {
                    continue;
                }
                self.sizes[i].store(layout.size(), Ordering::Relaxed);
                let put = self.slots[i].compare_exchange(
                    core::ptr::null_mut(),
                    kept.as_ptr(),
                    Ordering::Release,
                    Ordering::Relaxed,
                );
                if put.is_ok() {
                    return;
                }
            }
        }
        // SAFETY: allocated with `layout` and owned (the caller's contract).
        unsafe { dealloc(p.as_ptr(), layout) };
    }
}

impl Drop for BlockCache {
    fn drop(&mut self) {
        for slot in &self.slots {
            if let Some(kept) = NonNull::new(slot.swap(core::ptr::null_mut(), Ordering::Acquire)) {
                // SAFETY: `&mut self`: nothing else can take it; its tag
                // holds the layout it was allocated with.
                unsafe { dealloc(kept.as_ptr().cast(), kept.as_ptr().read().layout) };
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 8).unwrap()
    }

    #[test]
    fn a_kept_block_is_given_back_for_its_layout_only() {
        let cache = BlockCache::default();
        let a = cache.memory(layout(96));
        // SAFETY: allocated with this layout, owned, not used after.
        unsafe { cache.keep(a, layout(96)) };
        let other = cache.memory(layout(104));
        assert_ne!(other, a, "a block of another layout reused");
        let again = cache.memory(layout(96));
        assert_eq!(again, a, "the kept block was not reused");
        // SAFETY: as above.
        unsafe {
            cache.keep(other, layout(104));
            cache.keep(again, layout(96));
        }
        // Dropping the cache frees both (Miri reports a leak otherwise).
    }

    #[test]
    fn blocks_beyond_the_slots_are_freed() {
        let cache = BlockCache::default();
        let blocks: Vec<_> = (0..KEPT + 3).map(|_| cache.memory(layout(64))).collect();
        for b in &blocks {
            // SAFETY: each allocated with this layout, owned, kept once.
            unsafe { cache.keep(*b, layout(64)) };
        }
        let kept = cache.slots.iter().filter(|s| !s.load(Ordering::Relaxed).is_null()).count();
        assert_eq!(kept, KEPT);
    }

    #[test]
    fn each_layout_gets_its_own_blocks_back() {
        let cache = BlockCache::default();
        let sizes = [64, 96, 64, 96];
        let blocks: Vec<_> = sizes.iter().map(|&n| cache.memory(layout(n))).collect();
        for (b, &n) in blocks.iter().zip(&sizes) {
            // SAFETY: allocated with this layout, owned, kept once.
            unsafe { cache.keep(*b, layout(n)) };
        }
        // Each take, while the blocks taken before stay out, finds a kept
        // block of its own size.
        let again: Vec<_> = sizes.iter().map(|&n| (cache.memory(layout(n)), n)).collect();
        for &(p, n) in &again {
            assert!(
                blocks.iter().zip(&sizes).any(|(b, &m)| *b == p && m == n),
                "{n} bytes: not a kept block of its size"
            );
        }
        for (p, n) in again {
            // SAFETY: as above: each block was taken back once.
            unsafe { cache.keep(p, layout(n)) };
        }
    }

    /// A block whose size hint is stale (another block's) is still told by
    /// its tag: a take of the hinted size gives it back, not its block.
    #[test]
    fn the_tag_decides_not_the_hint() {
        let cache = BlockCache::default();
        let a = cache.memory(layout(64));
        // SAFETY: allocated with this layout, owned, kept once.
        unsafe { cache.keep(a, layout(64)) };
        cache.sizes[0].store(96, Ordering::Relaxed);
        let b = cache.memory(layout(96));
        assert_ne!(a, b, "a 64-byte block given for 96 bytes");
        // SAFETY: as above.
        unsafe { cache.keep(b, layout(96)) };
    }
}

/// Two threads trading blocks through one cache, as the issuing thread and
/// a completion's do: in every interleaving loom explores, a block is held
/// by one of them at a time: each enters what it takes in a shared set,
/// which must not hold it already. Loom does not track the plain write of
/// a kept block's tag, so the Release that publishes it and the Acquire
/// that reads it are checked by reasoning (the SAFETY lines), not here.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::{Arc, Mutex};

    #[test]
    fn loom_a_block_is_held_by_one_thread_at_a_time() {
        crate::sync::model(|| {
            let cache = Arc::new(BlockCache::default());
            let held = Arc::new(Mutex::new(Vec::new()));
            let l = Layout::from_size_align(64, 8).unwrap();
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (cache, held) = (Arc::clone(&cache), Arc::clone(&held));
                    loom::thread::spawn(move || {
                        for _ in 0..2 {
                            let p = cache.memory(l);
                            let mut h = held.lock().unwrap();
                            assert!(!h.contains(&(p.as_ptr() as usize)), "a block held twice");
                            h.push(p.as_ptr() as usize);
                            drop(h);
                            held.lock().unwrap().retain(|&q| q != p.as_ptr() as usize);
                            // SAFETY: allocated with `l`, owned, kept once.
                            unsafe { cache.keep(p, l) };
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
        });
    }
}
