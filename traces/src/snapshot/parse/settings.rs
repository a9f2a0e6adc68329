//! `allocator_settings`: the allocator's configuration as the snapshot
//! recorded it (≈2.4+).

use crate::pickle::{ValueRef, View};
use crate::snapshot::model::AllocatorSettings;

use super::{P, R, boolean, dict, problem, sint, string, text, uint};

/// Converts the top-level `allocator_settings` dict.
pub(super) fn settings(v: ValueRef<'_>) -> R<AllocatorSettings> {
    let path = &P::Root("allocator_settings");
    let d = dict(&v, path)?;
    let mut s = AllocatorSettings::default();
    for (k, val) in d.iter() {
        let key = text(&k);
        s.keys.push(key.clone());
        let kp = path.field(&key);
        match key.as_str() {
            "PYTORCH_CUDA_ALLOC_CONF" | "PYTORCH_ALLOC_CONF" => {
                s.conf_string = if val.is_none() {
                    None
                } else {
                    Some(string(&val, &kp)?)
                }
            }
            "max_split_size" => s.max_split_size = Some(sint(&val, &kp)?),
            "garbage_collection_threshold" => {
                s.garbage_collection_threshold = Some(val.as_f64().ok_or_else(|| {
                    problem(kp, format!("is a {}, expected a float", val.type_name()))
                })?)
            }
            "expandable_segments" => s.expandable_segments = Some(boolean(&val, &kp)?),
            "roundup_power2_divisions" => {
                let rd = dict(&val, &kp)?;
                for (ik, iv) in rd.iter() {
                    let label = match ik.view() {
                        View::Str(t) => t.parse::<u64>().ok(),
                        View::Int(n) if n >= 0 => Some(n as u64),
                        _ => None,
                    }
                    .ok_or_else(|| {
                        problem(
                            kp,
                            format!("has key {}, expected an interval label", text(&ik)),
                        )
                    })?;
                    s.roundup_power2_divisions
                        .insert(label, uint(&iv, &kp.index(label as usize))?);
                }
            }
            _ => {
                s.other.insert(key, text(&val));
            }
        }
    }
    Ok(s)
}
