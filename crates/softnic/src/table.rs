//! Object tables indexed by number: QPNs and CQNs are handed out densely
//! from a base, so a lookup on the engine's hot path is one bounds-checked
//! load instead of a tree walk.

/// Objects numbered from `base` upwards.
#[derive(Debug)]
pub struct Table<T> {
    base: u32,
    slots: Vec<Option<T>>,
}

impl<T> Table<T> {
    /// An empty table whose first number is `base`.
    pub fn new(base: u32) -> Self {
        Table { base, slots: Vec::new() }
    }

    /// The number the next `push` gets.
    pub fn next_number(&self) -> u32 {
        self.base + self.slots.len() as u32
    }

    /// Add an object under the next number.
    pub fn push(&mut self, v: T) -> u32 {
        self.slots.push(Some(v));
        self.next_number() - 1
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

    /// Every number handed out so far (some may have been removed).
    pub fn number_range(&self) -> std::ops::Range<u32> {
        self.base..self.next_number()
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
