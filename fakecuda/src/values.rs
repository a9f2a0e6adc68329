//! What device memory holds, as far as a host can see it: the bytes that
//! copies and sets put there, so that a value that goes to the device and
//! comes back (`torch.tensor([...]).cuda().tolist()`, a memset flag read
//! with `.item()`) round-trips, and a read of anything else is zero — never
//! whatever the host buffer held before, so that a script's control flow
//! is the same on every run.
//!
//! Kernels do not run, so what they would have written is not there:
//! a value computed on the device (`loss.item()`, `mask.any()`) reads as
//! what its memory last held by copy or set, zero for memory never
//! written. Only small writes are kept (at most [`KEPT`] bytes each, the
//! size of indices, masks, flags and scalars); a larger copy or set leaves
//! its range reading zero, so that loading a model's weights costs no host
//! memory.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// The largest copy or set whose bytes are kept.
pub(crate) const KEPT: usize = 1 << 20;

/// Written ranges, by device address; they never overlap.
static RANGES: Mutex<BTreeMap<u64, Vec<u8>>> = Mutex::new(BTreeMap::new());

fn ranges() -> std::sync::MutexGuard<'static, BTreeMap<u64, Vec<u8>>> {
    RANGES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Makes `[at, at + len)` read zero, keeping what lies outside it.
fn forget_in(map: &mut BTreeMap<u64, Vec<u8>>, at: u64, len: u64) {
    let end = at.saturating_add(len);
    // Ranges that start before `end` and end after `at`.
    let hit: Vec<u64> = map
        .range(..end)
        .rev()
        .take_while(|(start, bytes)| **start + bytes.len() as u64 > at)
        .map(|(start, _)| *start)
        .collect();
    for start in hit {
        let Some(bytes) = map.remove(&start) else {
            continue;
        };
        let stop = start + bytes.len() as u64;
        if start < at {
            let keep = (at - start) as usize;
            map.insert(start, bytes.get(..keep).unwrap_or_default().to_vec());
        }
        if stop > end {
            let skip = (end - start) as usize;
            map.insert(end, bytes.get(skip..).unwrap_or_default().to_vec());
        }
    }
}

/// Device memory at `at` now holds `bytes` (dropped, reading zero, when
/// longer than [`KEPT`]).
pub(crate) fn write(at: u64, bytes: &[u8]) {
    let mut map = ranges();
    forget_in(&mut map, at, bytes.len() as u64);
    if !bytes.is_empty() && bytes.len() <= KEPT && bytes.iter().any(|&b| b != 0) {
        map.insert(at, bytes.to_vec());
    }
}

/// `len` bytes at `at` now read zero.
pub(crate) fn forget(at: u64, len: u64) {
    forget_in(&mut ranges(), at, len);
}

/// Every byte of `[at, at + len)` set to `byte`.
pub(crate) fn set(at: u64, byte: u8, len: usize) {
    if byte == 0 || len > KEPT {
        forget(at, len as u64);
    } else {
        write(at, &vec![byte; len]);
    }
}

/// The bytes at `at`, into `out`: what was written there, zero elsewhere.
pub(crate) fn read(at: u64, out: &mut [u8]) {
    out.fill(0);
    let end = at.saturating_add(out.len() as u64);
    let map = ranges();
    let first = map.range(..=at).next_back().map_or(at, |(s, _)| *s);
    for (start, bytes) in map.range(first..end) {
        let stop = start + bytes.len() as u64;
        if stop <= at {
            continue;
        }
        let from = at.max(*start);
        let to = end.min(stop);
        let (src, dst) = ((from - start) as usize, (from - at) as usize);
        let n = (to - from) as usize;
        if let (Some(d), Some(s)) = (out.get_mut(dst..dst + n), bytes.get(src..src + n)) {
            d.copy_from_slice(s);
        }
    }
}

/// Device to device: `len` bytes from `src` to `dst`.
pub(crate) fn copy(dst: u64, src: u64, len: usize) {
    if len > KEPT {
        forget(dst, len as u64);
        return;
    }
    let mut buf = vec![0; len];
    read(src, &mut buf);
    write(dst, &buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn got(at: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0xee; len];
        read(at, &mut v);
        v
    }

    #[test]
    fn round_trips_overlaps_and_limits() {
        let base = 0x5000_0000_0000;
        assert_eq!(got(base, 4), [0, 0, 0, 0], "never written reads zero");
        write(base, &[1, 2, 3, 4, 5, 6]);
        assert_eq!(got(base + 2, 3), [3, 4, 5]);
        write(base + 2, &[9, 9]);
        assert_eq!(got(base, 8), [1, 2, 9, 9, 5, 6, 0, 0]);
        set(base + 1, 0, 4);
        assert_eq!(got(base, 6), [1, 0, 0, 0, 0, 6]);
        set(base, 7, 2);
        copy(base + 100, base, 6);
        assert_eq!(got(base + 99, 8), [0, 7, 7, 0, 0, 0, 6, 0]);
        write(base, &vec![1; KEPT + 1]);
        assert_eq!(got(base, 8), [0; 8], "a large write is not kept");
        forget(base, 1 << 40);
        assert_eq!(got(base + 100, 8), [0; 8]);
    }
}
