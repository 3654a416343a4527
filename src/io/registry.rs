//! The registry of an object's outstanding operations.
//!
//! Plain data under the header's lock; no Windows type, so it also builds
//! on the host, where its unit tests run under Miri and a loom model checks
//! the slot/generation protocol the submit, completion and cancel paths
//! follow around it (`loom_tests` below).

pub(super) enum Slot {
    Live { address: usize, generation: u64 },
    Free { next: usize },
}

/// Outstanding operations by slot, with a free list, and an index from a
/// live operation's address to its slot. Slots are reused, so the vector
/// grows only to the largest number outstanding at once, and the index with
/// it: after that, nothing here allocates.
///
/// The index is an open-addressing table with linear probing, holding
/// `slot + 1` (0 is empty) and kept at most half full, so a lookup by address
/// is a few probes. Deletion shifts the following entries back rather than
/// leaving tombstones, so probe runs never grow with churn.
#[derive(Default)]
pub(super) struct Registry {
    pub(super) slots: Vec<Slot>,
    pub(super) free: Option<usize>,
    /// Length 0 or a power of two at least twice `slots.len()`.
    pub(super) index: Vec<usize>,
}

impl Registry {
    pub(super) fn insert(&mut self, address: usize, generation: u64) -> usize {
        let live = Slot::Live { address, generation };
        let slot = match self.free {
            Some(i) => {
                let Slot::Free { next } = core::mem::replace(&mut self.slots[i], live) else {
                    unreachable!("the free list holds free slots")
                };
                self.free = (next != usize::MAX).then_some(next);
                i
            }
            None => {
                self.slots.push(live);
                self.slots.len() - 1
            }
        };
        if self.index.len() < 2 * self.slots.len() {
            self.rebuild_index();
        } else {
            let mut i = self.home(address);
            while self.index[i] != 0 {
                i = (i + 1) & (self.index.len() - 1);
            }
            self.index[i] = slot + 1;
        }
        slot
    }

    pub(super) fn remove(&mut self, slot: usize) {
        let Slot::Live { address, .. } = self.slots[slot] else { unreachable!("only a live slot is removed") };
        let i = self.position(address).expect("a live slot is indexed");
        self.remove_at(i);
    }

    /// Removes the live slot named by index entry `i`.
    pub(super) fn remove_at(&mut self, i: usize) {
        let slot = self.index[i] - 1;
        self.unindex(i);
        self.slots[slot] = Slot::Free { next: self.free.unwrap_or(usize::MAX) };
        self.free = Some(slot);
    }

    /// The slot and generation of the live operation at `address`, removed
    /// from the registry; `None` when no operation at `address` is live. Only
    /// compares addresses: `address` is never dereferenced.
    pub(super) fn take(&mut self, address: usize) -> Option<(usize, u64)> {
        let i = self.position(address)?;
        let slot = self.index[i] - 1;
        let Slot::Live { generation, .. } = self.slots[slot] else { unreachable!("the index holds live slots") };
        self.remove_at(i);
        Some((slot, generation))
    }

    /// The address of the live slot an index entry names.
    pub(super) fn address_of(&self, entry: usize) -> usize {
        match self.slots[entry - 1] {
            Slot::Live { address, .. } => address,
            Slot::Free { .. } => unreachable!("the index holds live slots"),
        }
    }

    /// Where a probe for `address` starts (Fibonacci hashing: the high bits
    /// of the product, since blocks are aligned and their low bits constant).
    pub(super) fn home(&self, address: usize) -> usize {
        let bits = self.index.len().trailing_zeros();
        ((address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
    }

    /// The index entry naming `address`, if it is live.
    pub(super) fn position(&self, address: usize) -> Option<usize> {
        if self.index.is_empty() {
            return None;
        }
        let mask = self.index.len() - 1;
        let mut i = self.home(address);
        loop {
            match self.index[i] {
                0 => return None,
                e if self.address_of(e) == address => return Some(i),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Empties entry `hole`, shifting back the entries after it that would
    /// otherwise no longer be reached from their home position.
    pub(super) fn unindex(&mut self, mut hole: usize) {
        let mask = self.index.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let e = self.index[j];
            if e == 0 {
                break;
            }
            let home = self.home(self.address_of(e));
            // The entry stays if its home lies cyclically in (hole, j].
            let stays = if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
            if !stays {
                self.index[hole] = e;
                hole = j;
            }
        }
        self.index[hole] = 0;
    }

    /// Resizes the index to twice the number of slots (rounded up to a power
    /// of two, at least 8) and reinserts every live slot.
    pub(super) fn rebuild_index(&mut self) {
        let len = (2 * self.slots.len()).next_power_of_two().max(8);
        self.index.clear();
        self.index.resize(len, 0);
        let mask = len - 1;
        for slot in 0..self.slots.len() {
            if let Slot::Live { address, .. } = self.slots[slot] {
                let mut i = self.home(address);
                while self.index[i] != 0 {
                    i = (i + 1) & mask;
                }
                self.index[i] = slot + 1;
            }
        }
    }

    /// Whether the operation `(slot, address, generation)` (an
    /// `OperationId`'s parts) is still outstanding: a slot reused for a
    /// block at the same address has another generation.
    pub(super) fn is_live(&self, slot: usize, address: usize, generation: u64) -> bool {
        matches!(self.slots.get(slot), Some(&Slot::Live { address: a, generation: g })
            if a == address && g == generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn registry_reuses_slots_and_rejects_stale_generations() {
        let mut r = Registry::default();
        let a = r.insert(0x100, 1);
        let b = r.insert(0x200, 2);
        assert!(r.is_live(a, 0x100, 1) && r.is_live(b, 0x200, 2));
        r.remove(a);
        assert!(!r.is_live(a, 0x100, 1));
        let c = r.insert(0x100, 3);
        assert_eq!(c, a, "a freed slot is reused before the registry grows");
        assert!(!r.is_live(a, 0x100, 1), "a stale generation at a live address");
        assert!(r.is_live(c, 0x100, 3));
        assert!(!r.is_live(7, 0x100, 3), "an unknown slot");
        r.remove(b);
        r.remove(c);
        assert_eq!((r.insert(0x300, 4), r.insert(0x400, 5), r.insert(0x500, 6)), (c, b, 2));
    }

    #[test]
    fn registry_finds_exactly_the_live_addresses() {
        // Churn against a model: addresses cluster like heap blocks (aligned,
        // close together) and are reused after removal.
        let mut r = Registry::default();
        let mut model: HashMap<usize, (usize, u64)> = HashMap::new();
        let mut seed = 0x2545_F491_4F6C_DD1D_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        // The registry is safe code: Miri adds little to the native run's
        // 20,000 rounds and interprets every probe (20 s for 1,500), so a
        // few hundred keep it to the churn's first inserts, takes and reuses.
        let rounds = if cfg!(miri) { 300 } else { 20_000u64 };
        for generation in 1..rounds {
            let address = 0x10_0000 + (next() % 300) as usize * 48;
            if let Some(&(slot, g)) = model.get(&address) {
                assert_eq!(r.take(address), Some((slot, g)), "live address {address:#x}");
                model.remove(&address);
                assert_eq!(r.take(address), None, "a taken address is no longer live");
            } else {
                assert_eq!(r.take(address), None, "address {address:#x} was never inserted or was taken");
                model.insert(address, (r.insert(address, generation), generation));
            }
            if generation % 500 == 0 {
                for (&a, &(slot, g)) in &model {
                    assert!(r.is_live(slot, a, g));
                }
                assert!(r.index.len() >= 2 * r.slots.len());
                assert_eq!(r.index.iter().filter(|&&e| e != 0).count(), model.len());
            }
        }
        assert_eq!(r.take(0), None, "null is never live");
    }

    #[test]
    fn registry_deletes_correctly_in_runs_that_wrap_around() {
        // At most 4 live, so the index keeps its 8 entries; every address
        // hashes to one of the last two entries or the first, so probe runs
        // wrap past the end and deletions shift entries across it.
        let mut r = Registry::default();
        r.insert(0, 0);
        r.remove(0);
        assert_eq!(r.index.len(), 8);
        let pool: Vec<usize> = (0x1000..).step_by(16).filter(|&a| matches!(r.home(a), 6 | 7 | 0)).take(12).collect();
        let mut model: HashMap<usize, (usize, u64)> = HashMap::new();
        let mut seed = 0x9E37_79B9_u64;
        // Under Miri, as above (73 s for 1,000 rounds); runs wrap within
        // the first few dozen steps.
        let rounds = if cfg!(miri) { 150 } else { 20_000u64 };
        for generation in 1..rounds {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let address = pool[(seed % pool.len() as u64) as usize];
            if let Some(&(slot, g)) = model.get(&address) {
                assert_eq!(r.take(address), Some((slot, g)), "live address {address:#x}");
                model.remove(&address);
            } else if model.len() < 4 {
                assert_eq!(r.take(address), None, "address {address:#x} is not live");
                model.insert(address, (r.insert(address, generation), generation));
            }
            for &a in &pool {
                assert_eq!(r.position(a).is_some(), model.contains_key(&a), "address {a:#x} after step {generation}");
            }
        }
        assert_eq!(r.index.len(), 8);
    }
}

/// The slot/generation protocol under every interleaving loom explores
/// (up to three preemptions, `crate::sync::model`): the registry
/// behind a lock as `IoHeader` holds it, a completion that takes an
/// operation, frees its block and reuses the address for a new operation,
/// and a `cancel` or a second (foreign) completion racing it.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::AtomicU64;
    use loom::sync::atomic::Ordering::Relaxed;
    use loom::sync::{Arc, Mutex};

    const A: usize = 0x1000;

    struct Header {
        registry: Mutex<Registry>,
        next_generation: AtomicU64,
        /// The block at address `A`: which operation owns it (0: freed).
        block: UnsafeCell<u32>,
    }

    impl Header {
        /// `IoHeader::register`: a fresh generation, then the insertion.
        fn register(&self, address: usize) -> (usize, usize, u64) {
            let generation = self.next_generation.fetch_add(1, Relaxed);
            let slot = self.registry.lock().unwrap().insert(address, generation);
            (slot, address, generation)
        }
    }

    fn header() -> Arc<Header> {
        Arc::new(Header {
            registry: Mutex::new(Registry::default()),
            next_generation: AtomicU64::new(1),
            block: UnsafeCell::new(1),
        })
    }

    /// A stale id never reaches a block reused at its address: `cancel`
    /// (which calls `CancelIoEx` on the address under the lock) finds the
    /// id live only while the block is still the first operation's. An
    /// `is_live` that ignores the generation fails it.
    #[test]
    fn loom_a_stale_id_never_cancels_the_operation_that_reused_its_address() {
        crate::sync::model(|| {
            let h = header();
            let (slot, address, generation) = h.register(A);
            let completion = {
                let h = Arc::clone(&h);
                loom::thread::spawn(move || {
                    // `deliver_in`: membership decided and removed under the lock.
                    let taken = h.registry.lock().unwrap().take(A);
                    assert_eq!(taken, Some((slot, generation)));
                    // The callback returns; the block is freed and the
                    // allocator hands the address to the next operation.
                    // SAFETY: the block is this thread's since `take`.
                    h.block.with_mut(|b| unsafe { *b = 0 });
                    // SAFETY: as above; the new operation is not issued yet.
                    h.block.with_mut(|b| unsafe { *b = 2 });
                    h.register(A)
                })
            };
            let cancelled = {
                let h = Arc::clone(&h);
                loom::thread::spawn(move || {
                    let registry = h.registry.lock().unwrap();
                    if registry.is_live(slot, address, generation) {
                        // `CancelIoEx(handle, A)` here must name operation 1.
                        // SAFETY: the lock is held and the operation is live,
                        // so its block is not being freed or reused.
                        assert_eq!(h.block.with(|b| unsafe { *b }), 1, "a stale id cancelled the reused block");
                        true
                    } else {
                        false
                    }
                })
            };
            let second = completion.join().unwrap();
            let _ = cancelled.join().unwrap();
            assert_eq!((second.0, second.1), (slot, A), "the freed slot is reused");
            let registry = h.registry.lock().unwrap();
            assert!(!registry.is_live(slot, address, generation));
            assert!(registry.is_live(second.0, second.1, second.2));
        });
    }

    /// Two completions carrying the same address (the real one and a
    /// duplicate): exactly one is delivered. Deciding membership and
    /// removing under two lock acquisitions fails it.
    #[test]
    fn loom_an_operation_is_delivered_at_most_once() {
        crate::sync::model(|| {
            let h = header();
            let id = h.register(A);
            let deliver = || {
                let h = Arc::clone(&h);
                loom::thread::spawn(move || h.registry.lock().unwrap().take(A))
            };
            let (one, two) = (deliver(), deliver());
            let delivered = [one.join().unwrap(), two.join().unwrap()];
            assert_eq!(delivered.iter().flatten().count(), 1, "{delivered:?}");
            assert!(delivered.contains(&Some((id.0, id.2))));
        });
    }
}
