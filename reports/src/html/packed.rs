//! Integer columns packed into one binary blob for the page: each column
//! stored in the narrowest typed array that holds it exactly
//! (`value = base + scale × stored`), at an 8-byte-aligned offset so the
//! page can view it without copying.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

use serde::Serialize;

/// Where a column lies in the blob and how to read it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct Column {
    /// `u8`, `u16`, `u32` or `f64` (the JavaScript typed array).
    pub dtype: &'static str,
    /// Byte offset in the blob (a multiple of 8).
    pub offset: usize,
    /// Number of values.
    pub len: usize,
    /// Added to every stored value.
    pub base: i64,
    /// Every stored value is multiplied by this first.
    pub scale: i64,
}

impl Column {
    /// The value at `i`, read back from `blob` (what the page computes).
    #[cfg(test)]
    pub(super) fn get(&self, blob: &[u8], i: usize) -> Option<f64> {
        let width = match self.dtype {
            "u8" => 1,
            "u16" => 2,
            "u32" => 4,
            _ => 8,
        };
        let at = self.offset + i * width;
        let b = blob.get(at..at + width)?;
        let stored = match self.dtype {
            "u8" => f64::from(*b.first()?),
            "u16" => f64::from(u16::from_le_bytes(b.try_into().ok()?)),
            "u32" => f64::from(u32::from_le_bytes(b.try_into().ok()?)),
            _ => f64::from_le_bytes(b.try_into().ok()?),
        };
        Some(self.base as f64 + self.scale as f64 * stored)
    }
}

/// The blob under construction and the columns in it, by name.
#[derive(Debug, Default)]
pub(super) struct Packer {
    /// The bytes (little-endian values).
    pub blob: Vec<u8>,
    /// Each column by name.
    pub columns: BTreeMap<String, Column>,
    /// Every stored run of bytes by its hash: a column equal to an earlier
    /// one (the same block sizes under two settings) points at it.
    stored: HashMap<u64, Vec<(usize, usize)>>,
}

/// Block sizes and addresses are multiples of this; storing them divided
/// by it keeps most in 32 bits.
const GRANULE: i64 = 512;

impl Packer {
    /// Adds `values` as the column `name` (replacing one of that name).
    pub(super) fn push(&mut self, name: &str, values: impl Iterator<Item = i64> + Clone) {
        let (mut lo, mut hi, mut len) = (i64::MAX, i64::MIN, 0usize);
        for v in values.clone() {
            lo = lo.min(v);
            hi = hi.max(v);
            len += 1;
        }
        let base = if len == 0 { 0 } else { lo };
        let scale = if hi > lo
            && values
                .clone()
                .all(|v| (i128::from(v) - i128::from(base)) % i128::from(GRANULE) == 0)
        {
            GRANULE
        } else {
            1
        };
        let range = if len == 0 {
            0
        } else {
            ((i128::from(hi) - i128::from(base)) / i128::from(scale)) as u128
        };
        let (dtype, width) = match range {
            r if r <= u128::from(u8::MAX) => ("u8", 1),
            r if r <= u128::from(u16::MAX) => ("u16", 2),
            r if r <= u128::from(u32::MAX) => ("u32", 4),
            _ => ("f64", 8),
        };
        while self.blob.len() % 8 != 0 {
            self.blob.push(0);
        }
        let offset = self.blob.len();
        self.blob.reserve(len * width);
        let (base, scale) = if dtype == "f64" {
            (0, 1)
        } else {
            (base, scale)
        };
        for v in values {
            let stored = (i128::from(v) - i128::from(base)) / i128::from(scale);
            match width {
                1 => self.blob.push(stored as u8),
                2 => self.blob.extend_from_slice(&(stored as u16).to_le_bytes()),
                4 => self.blob.extend_from_slice(&(stored as u32).to_le_bytes()),
                _ => self.blob.extend_from_slice(&(v as f64).to_le_bytes()),
            }
        }
        let offset = self.reuse(offset);
        self.columns.insert(
            name.to_string(),
            Column {
                dtype,
                offset,
                len,
                base,
                scale,
            },
        );
    }

    /// The offset of an earlier copy of the bytes from `offset` to the end
    /// (which are then dropped), or `offset` (remembered).
    fn reuse(&mut self, offset: usize) -> usize {
        let new = self.blob.get(offset..).unwrap_or_default();
        if new.is_empty() {
            return offset;
        }
        let mut hasher = DefaultHasher::new();
        new.hash(&mut hasher);
        let key = hasher.finish();
        let earlier = self.stored.get(&key).and_then(|runs| {
            runs.iter()
                .find(|&&(at, len)| self.blob.get(at..at + len) == Some(new))
                .map(|&(at, _)| at)
        });
        match earlier {
            Some(at) => {
                self.blob.truncate(offset);
                at
            }
            None => {
                let len = new.len();
                self.stored.entry(key).or_default().push((offset, len));
                offset
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(values: &[i64]) -> (Column, Vec<f64>) {
        let mut p = Packer::default();
        p.push("x", values.iter().copied());
        let c = p.columns.get("x").cloned().unwrap();
        let back = (0..values.len())
            .map(|i| c.get(&p.blob, i).unwrap())
            .collect();
        (c, back)
    }

    #[test]
    fn each_column_takes_the_narrowest_exact_type() {
        let (c, back) = roundtrip(&[-1, 5, 200]);
        assert_eq!((c.dtype, c.base, c.scale), ("u8", -1, 1));
        assert_eq!(back, vec![-1.0, 5.0, 200.0]);
        // Addresses: 512-byte multiples far from 0 fit 32 bits.
        let addrs = [0x7f00_0000_0000, 0x7f00_0000_0000 + 512 * 70_000];
        let (c, back) = roundtrip(&addrs);
        assert_eq!((c.dtype, c.base, c.scale), ("u32", 0x7f00_0000_0000, 512));
        assert_eq!(back, addrs.iter().map(|&a| a as f64).collect::<Vec<_>>());
        // Requested sizes of any byte count.
        let (c, back) = roundtrip(&[3, 70_001]);
        assert_eq!((c.dtype, c.scale), ("u32", 1));
        assert_eq!(back, vec![3.0, 70_001.0]);
        // A range over 32 bits is stored as doubles, exact below 2^53.
        let (c, back) = roundtrip(&[1, 1 << 40]);
        assert_eq!((c.dtype, c.base, c.scale), ("f64", 0, 1));
        assert_eq!(back, vec![1.0, (1u64 << 40) as f64]);
    }

    #[test]
    fn columns_start_on_8_byte_boundaries() {
        let mut p = Packer::default();
        p.push("a", [1i64, 2, 3].into_iter());
        p.push("b", [1i64 << 40].into_iter());
        p.push("c", std::iter::empty());
        for c in p.columns.values() {
            assert_eq!(c.offset % 8, 0);
        }
        assert_eq!(p.columns.get("b").map(|c| c.offset), Some(8));
        assert_eq!(
            p.columns.get("c").map(|c| (c.dtype, c.len)),
            Some(("u8", 0))
        );
    }

    #[test]
    fn an_equal_column_is_stored_once() {
        let mut p = Packer::default();
        p.push("a", [512i64, 1024, 4096].into_iter());
        let size = p.blob.len();
        p.push("b", [512i64, 1024, 4096].into_iter());
        p.push("c", [512i64, 1024, 8192].into_iter());
        let (a, b, c) = (&p.columns["a"], &p.columns["b"], &p.columns["c"]);
        assert_eq!(a, b);
        assert_ne!(a.offset, c.offset);
        assert_eq!(p.blob.len(), size.next_multiple_of(8) + 3);
        assert_eq!(c.get(&p.blob, 2), Some(8192.0));
    }
}
