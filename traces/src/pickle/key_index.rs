//! The hash index of larger dicts and sets: a small open-addressing table
//! over entry positions. It knows only hashes; what the keys are and how
//! they compare is in `keys`.

/// Dicts and sets with more entries than this get a hash index; smaller
/// ones are searched linearly.
pub(crate) const INDEX_THRESHOLD: usize = 8;

/// Hash table over the entries of one dict or set: `table` holds entry
/// index + 1 (0 = free slot), `hashes` the hash of each entry's key.
#[derive(Debug, Default)]
pub(crate) struct KeyIndex {
    table: Vec<u32>,
    hashes: Vec<u64>,
}

impl KeyIndex {
    fn mask(&self) -> usize {
        self.table.len().wrapping_sub(1)
    }

    /// Inserts entry `entry` (already pushed by the caller) with hash `h`,
    /// growing the table to keep it at most half full.
    pub(crate) fn insert(&mut self, entry: usize, h: u64) {
        self.hashes.push(h);
        if (self.hashes.len()) * 2 > self.table.len() {
            let cap = (self.hashes.len() * 4).next_power_of_two();
            self.table = vec![0; cap];
            for (i, &hh) in self.hashes.iter().enumerate() {
                Self::place(&mut self.table, i, hh);
            }
        } else {
            Self::place(&mut self.table, entry, h);
        }
    }

    // Indexing: `place` is only called from `insert`, on a table whose
    // length is a power of two of at least 2. `insert` has just pushed the
    // entry's hash, so an empty table (or any table less than twice the
    // number of entries) is first replaced by one of
    // `(4 * entries).next_power_of_two() >= 4` slots; every table is built
    // that way. With `len` a power of two, `i & (len - 1) < len`.
    #[allow(clippy::indexing_slicing)]
    fn place(table: &mut [u32], entry: usize, h: u64) {
        let mask = table.len().wrapping_sub(1);
        let mut i = (h as usize) & mask;
        // Terminates: the table is never more than half full.
        loop {
            if table[i] == 0 {
                table[i] = (entry + 1) as u32; // entry < nodes-bounded u32 range
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Entries whose key has hash `h`, in probe order.
    pub(crate) fn candidates(&self, h: u64) -> impl Iterator<Item = usize> + '_ {
        let mask = self.mask();
        let mut i = (h as usize) & mask;
        let mut done = self.table.is_empty();
        std::iter::from_fn(move || {
            while !done {
                let slot = *self.table.get(i)?;
                if slot == 0 {
                    done = true;
                    return None;
                }
                i = (i + 1) & mask;
                let e = slot as usize - 1;
                if self.hashes.get(e) == Some(&h) {
                    return Some(e);
                }
            }
            None
        })
    }
}
