//! Device calls, PyTorch's (the fake device's log) and vramlab's (the
//! replay's device log), in one comparable form: the first call that
//! differs is the first segment decision on which the two allocators part.

use std::fmt;
use std::path::Path;

use serde::Serialize;
use vramlab_allocator::DeviceCallKind;
use vramlab_replay::LoggedCall;

use crate::OracleError;

/// The event number the replay script gives the clean-up after the trace.
pub(crate) const END_MARK: u64 = u64::MAX;

/// One call that changed device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Call {
    /// The trace event that made it (`None`: before the first event).
    pub event: Option<u64>,
    /// `malloc`, `free`, `reserve`, `release`, `map` or `unmap`.
    pub kind: &'static str,
    /// The address (device-local).
    pub ptr: u64,
    /// Bytes.
    pub size: u64,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {} bytes at {:#x}", self.kind, self.size, self.ptr)
    }
}

fn kind_name(k: &str) -> Option<&'static str> {
    ["malloc", "free", "reserve", "release", "map", "unmap"]
        .into_iter()
        .find(|n| *n == k)
}

/// Reads the fake device's log (lines `EVENT KIND DEVICE PTR SIZE`),
/// leaving out the clean-up after the trace.
pub(crate) fn read_fake_log(path: &Path) -> Result<Vec<Call>, OracleError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(OracleError::Io {
                path: path.into(),
                source: e,
            });
        }
    };
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let bad = || {
            OracleError::Fake(format!(
                "{}:{}: not a device-call line: {line:?}",
                path.display(),
                n + 1
            ))
        };
        let [event, kind, _device, ptr, size] = f[..] else {
            return Err(bad());
        };
        let event = match event {
            "-" => None,
            e => Some(e.parse::<u64>().map_err(|_| bad())?),
        };
        if event == Some(END_MARK) {
            continue;
        }
        let ptr = u64::from_str_radix(ptr.trim_start_matches("0x"), 16).map_err(|_| bad())?;
        out.push(Call {
            event,
            kind: kind_name(kind).ok_or_else(bad)?,
            ptr,
            size: size.parse().map_err(|_| bad())?,
        });
    }
    Ok(normalize(out))
}

/// vramlab's device calls in the same form.
pub(crate) fn from_replay(log: &[LoggedCall]) -> Vec<Call> {
    let calls = log
        .iter()
        .filter_map(|c| {
            // The fake logs what changes memory; a synchronisation does not.
            if c.kind == DeviceCallKind::Synchronize {
                return None;
            }
            let kind = c.kind.name();
            Some(Call {
                event: c.event_index.map(u64::from),
                kind,
                ptr: c.ptr,
                size: c.size,
            })
        })
        .collect();
    normalize(calls)
}

/// Merges maps (and unmaps) of adjacent ranges made for one event: PyTorch
/// maps an expandable segment one handle at a time, vramlab logs the range.
fn normalize(calls: Vec<Call>) -> Vec<Call> {
    let mut out: Vec<Call> = Vec::with_capacity(calls.len());
    for c in calls {
        if let Some(last) = out.last_mut() {
            let same =
                last.kind == c.kind && last.event == c.event && matches!(c.kind, "map" | "unmap");
            if same && last.ptr + last.size == c.ptr {
                last.size += c.size;
                continue;
            }
            if same && c.ptr + c.size == last.ptr {
                last.ptr = c.ptr;
                last.size += c.size;
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// The first place where two call sequences differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Divergence {
    /// Index of the call.
    pub call_index: usize,
    /// PyTorch's call there (`None`: PyTorch made no more).
    pub torch: Option<Call>,
    /// vramlab's call there.
    pub vramlab: Option<Call>,
}

impl Divergence {
    /// The event where they part (the earlier of the two calls' events).
    pub(crate) fn event(&self) -> Option<u64> {
        match (
            self.torch.and_then(|c| c.event),
            self.vramlab.and_then(|c| c.event),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = match self.event() {
            Some(e) => format!("at event {e}"),
            None => "before the first event".to_string(),
        };
        let side = |c: &Option<Call>| match c {
            Some(c) => c.to_string(),
            None => "no call".to_string(),
        };
        write!(
            f,
            "device call {} {at}: PyTorch {}, vramlab {}",
            self.call_index + 1,
            side(&self.torch),
            side(&self.vramlab)
        )
    }
}

/// The first difference between PyTorch's and vramlab's calls, if any.
pub(crate) fn first_difference(torch: &[Call], vramlab: &[Call]) -> Option<Divergence> {
    let n = torch.len().max(vramlab.len());
    (0..n).find_map(|i| {
        let (a, b) = (torch.get(i).copied(), vramlab.get(i).copied());
        (a != b).then_some(Divergence {
            call_index: i,
            torch: a,
            vramlab: b,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(event: u64, kind: &'static str, ptr: u64, size: u64) -> Call {
        Call {
            event: Some(event),
            kind,
            ptr,
            size,
        }
    }

    #[test]
    fn maps_of_one_event_merge_and_the_first_difference_is_named() {
        let torch = normalize(vec![
            call(3, "reserve", 0x1000_0000, 1 << 30),
            call(3, "map", 0x1000_0000, 2 << 20),
            call(3, "map", 0x1020_0000, 2 << 20),
            call(9, "map", 0x1040_0000, 2 << 20),
        ]);
        assert_eq!(torch.len(), 3);
        assert_eq!(torch[1].size, 4 << 20);
        let mut ours = torch.clone();
        assert_eq!(first_difference(&torch, &ours), None);
        ours[2].size = 20 << 20;
        let d = first_difference(&torch, &ours).unwrap();
        assert_eq!((d.call_index, d.event()), (2, Some(9)));
        assert_eq!(
            d.to_string(),
            "device call 3 at event 9: PyTorch map of 2097152 bytes at 0x10400000, vramlab map of 20971520 bytes at 0x10400000"
        );
        ours.pop();
        assert!(first_difference(&torch, &ours).unwrap().vramlab.is_none());
    }
}
