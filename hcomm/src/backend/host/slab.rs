//! The slots of posted operations: reused after release, each reuse under
//! a new generation, so a stale [`OpId`] never names a later operation.

use std::ops::{Index, IndexMut};

use crate::backend::OpId;

struct Entry<T> {
    generation: u32,
    value: T,
}

/// Operation slots of type `T`, indexed by slot number.
pub(crate) struct Slab<T> {
    entries: Vec<Entry<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            entries: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    /// Stores `value` in a free slot (or a new one) and returns its id.
    pub(crate) fn insert(&mut self, value: T) -> OpId {
        if let Some(slot) = self.free.pop() {
            let e = &mut self.entries[slot as usize];
            e.generation = e.generation.wrapping_add(1);
            e.value = value;
            OpId {
                slot,
                generation: e.generation,
            }
        } else {
            self.entries.push(Entry { generation: 0, value });
            OpId {
                slot: (self.entries.len() - 1) as u32,
                generation: 0,
            }
        }
    }

    /// The id of the operation now in `slot`.
    pub(crate) fn id(&self, slot: u32) -> OpId {
        OpId {
            slot,
            generation: self.entries[slot as usize].generation,
        }
    }

    /// Makes `slot` reusable (its value stays until then).
    pub(crate) fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }

    /// The value of `id`, unless its slot was reused since.
    pub(crate) fn get(&self, id: OpId) -> Option<&T> {
        let e = self.entries.get(id.slot as usize)?;
        (e.generation == id.generation).then_some(&e.value)
    }

    /// Every slot's value, with its slot number.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        self.entries
            .iter_mut()
            .enumerate()
            .map(|(i, e)| (i as u32, &mut e.value))
    }
}

impl<T> Index<u32> for Slab<T> {
    type Output = T;

    fn index(&self, slot: u32) -> &T {
        &self.entries[slot as usize].value
    }
}

impl<T> IndexMut<u32> for Slab<T> {
    fn index_mut(&mut self, slot: u32) -> &mut T {
        &mut self.entries[slot as usize].value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reused_slots_get_new_generations() {
        let mut s = Slab::default();
        let a = s.insert('a');
        let b = s.insert('b');
        assert_eq!((s.get(a), s[b.slot]), (Some(&'a'), 'b'));
        s.release(a.slot);
        let c = s.insert('c');
        assert_eq!(c.slot, a.slot);
        assert_ne!(c.generation, a.generation);
        assert_eq!((s.get(a), s.get(c)), (None, Some(&'c')));
        assert_eq!(s.id(c.slot), c);
        s[c.slot] = 'd';
        assert_eq!(
            s.iter_mut().map(|(i, v)| (i, *v)).collect::<Vec<_>>(),
            [(0, 'd'), (1, 'b')]
        );
    }
}
