//! Blocks of freed contexts, kept per thread (in its [`Local`]) for reuse
//! by layout.

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
    let free = here.filter(|_| layout.size() <= KEPT_SIZE).and_then(|l| l.kept.0.iter().find(|s| s.get().is_none()));
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

#[cfg(test)]
mod tests {
    use core::alloc::Layout;

    use crate::callback::ctx::blocks;

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
}
