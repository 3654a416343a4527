//! The arena: blocks for the contexts of objects that are all freed at
//! once (a cleanup group's members), cut from a few chunks.

use core::alloc::Layout;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

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
    pub(super) fn chunk_count(&self) -> usize {
        self.chunks().len()
    }
}

impl Drop for Arena {
    /// Frees the chunks: by the contract of
    /// [`Blocks::arena`](super::Blocks::arena) and of its other users,
    /// nothing in them is used again. Dropped by an unwind, it
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
