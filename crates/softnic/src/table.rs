//! Object tables indexed by number: QPNs and CQNs are handed out densely
//! from a base, so a lookup on the engine's hot path is one bounds-checked
//! load instead of a tree walk. A destroyed object's number is handed out
//! again (lowest first), as a device reuses its QPNs and CQNs, so a
//! process that creates and destroys objects forever keeps the table, and
//! the engine's scan over it, as large as its most objects at once.

/// Objects numbered from `base` upwards.
#[derive(Debug)]
pub struct Table<T> {
    base: u32,
    slots: Vec<Option<T>>,
    /// Empty slots below `slots.len()`, highest first (`pop` gives the lowest).
    free: Vec<usize>,
}

impl<T> Table<T> {
    /// An empty table whose first number is `base`.
    pub fn new(base: u32) -> Self {
        Table { base, slots: Vec::new(), free: Vec::new() }
    }

    /// The number the next `push` gets.
    pub fn next_number(&self) -> u32 {
        self.base + self.free.last().copied().unwrap_or(self.slots.len()) as u32
    }

    /// Add an object under the next number.
    pub fn push(&mut self, v: T) -> u32 {
        let n = self.next_number();
        match self.free.pop() {
            Some(i) => self.slots[i] = Some(v),
            None => self.slots.push(Some(v)),
        }
        n
    }

    /// Remove the object numbered `n`; its number will be handed out again.
    pub fn remove(&mut self, n: &u32) -> Option<T> {
        let i = self.index(*n)?;
        let v = self.slots.get_mut(i)?.take()?;
        // Keep `free` sorted highest first, so the lowest number goes next.
        let at = self.free.partition_point(|&f| f > i);
        self.free.insert(at, i);
        Some(v)
    }

    /// Objects in the table.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    fn index(&self, n: u32) -> Option<usize> {
        n.checked_sub(self.base).map(|i| i as usize)
    }

    /// The object numbered `n`.
    pub fn get(&self, n: &u32) -> Option<&T> {
        self.slots.get(self.index(*n)?)?.as_ref()
    }

    /// The object numbered `n`, mutably.
    pub fn get_mut(&mut self, n: &u32) -> Option<&mut T> {
        let i = self.index(*n)?;
        self.slots.get_mut(i)?.as_mut()
    }

    /// Whether `n` exists.
    pub fn contains_key(&self, n: &u32) -> bool {
        self.get(n).is_some()
    }

    /// Every number a live object may have (some may have been removed).
    pub fn number_range(&self) -> std::ops::Range<u32> {
        self.base..self.base + self.slots.len() as u32
    }

    /// Every object.
    pub fn values(&self) -> impl Iterator<Item = &T> + '_ {
        self.slots.iter().flatten()
    }
}

impl<T> std::ops::Index<&u32> for Table<T> {
    type Output = T;
    fn index(&self, n: &u32) -> &T {
        self.get(n).expect("object number checked by the caller")
    }
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn a_removed_number_is_handed_out_again_lowest_first() {
        let mut t = Table::new(0x100);
        let n: Vec<u32> = (0..4).map(|i| t.push(i)).collect();
        assert_eq!(n, [0x100, 0x101, 0x102, 0x103]);
        assert_eq!(t.remove(&0x102), Some(2));
        assert_eq!(t.remove(&0x101), Some(1));
        assert_eq!(t.remove(&0x101), None, "removed twice");
        assert_eq!(t.len(), 2);
        assert_eq!(t.next_number(), 0x101);
        assert_eq!(t.push(10), 0x101);
        assert_eq!(t.push(11), 0x102);
        assert_eq!(t.push(12), 0x104);
        assert_eq!(t.number_range(), 0x100..0x105);
        assert_eq!(t.get(&0x102), Some(&11));
    }
}
