//! The registry of an object's outstanding operations.

use super::operation::*;

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

    pub(super) fn is_live(&self, id: OperationId) -> bool {
        matches!(self.slots.get(id.slot), Some(&Slot::Live { address, generation })
            if address == id.address && generation == id.generation)
    }
}
