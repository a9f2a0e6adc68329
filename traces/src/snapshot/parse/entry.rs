//! One trace entry (`device_traces[d][i]`) converted from its dict.
//!
//! The dict's values are sorted by key in one pass over its keys
//! ([`EntryValues`]): a snapshot holds up to millions of entries, and a
//! lookup per field compared every key's text again for each of them.

use super::{
    Ctx, P, R, frames, note_unknown, opt_uint, pool_id, problem, sample_keys, sint, string, uint,
};
use crate::pickle::{DictRef, ValueRef};
use crate::snapshot::model::{Action, TraceEntry};

/// The keys PyTorch writes in a trace entry.
const ENTRY_KEYS: &[&str] = &[
    "action",
    "addr",
    "device_free",
    "size",
    "stream",
    "time_us",
    "frames",
    "compile_context",
    "user_metadata",
    "pool_id",
];

/// Where the keys of trace entries are counted.
const PREFIX: &str = "device_traces[][].";

/// An entry dict's values, by the key they are under.
#[derive(Default)]
struct EntryValues<'d> {
    action: Option<ValueRef<'d>>,
    addr: Option<ValueRef<'d>>,
    device_free: Option<ValueRef<'d>>,
    size: Option<ValueRef<'d>>,
    stream: Option<ValueRef<'d>>,
    time_us: Option<ValueRef<'d>>,
    frames: Option<ValueRef<'d>>,
    compile_context: Option<ValueRef<'d>>,
    user_metadata: Option<ValueRef<'d>>,
    pool_id: Option<ValueRef<'d>>,
}

impl<'d> EntryValues<'d> {
    /// The values of `d`; its text keys that are not [`ENTRY_KEYS`] are
    /// counted as unknown (every key, text or not, where `d` has more keys
    /// than those).
    fn of(ctx: &mut Ctx, d: &DictRef<'d>) -> Self {
        let many = d.len() > ENTRY_KEYS.len();
        if many {
            note_unknown(ctx, d, ENTRY_KEYS, PREFIX);
        }
        let mut e = EntryValues::default();
        for (k, v) in d.iter() {
            let Some(key) = k.as_str() else {
                continue;
            };
            let slot = match key {
                "action" => &mut e.action,
                "addr" => &mut e.addr,
                "device_free" => &mut e.device_free,
                "size" => &mut e.size,
                "stream" => &mut e.stream,
                "time_us" => &mut e.time_us,
                "frames" => &mut e.frames,
                "compile_context" => &mut e.compile_context,
                "user_metadata" => &mut e.user_metadata,
                "pool_id" => &mut e.pool_id,
                other => {
                    if !many {
                        *ctx.unknown.entry(format!("{PREFIX}{other}")).or_default() += 1;
                    }
                    continue;
                }
            };
            *slot = Some(v);
        }
        e
    }
}

/// Entry `i` of a device's list (`dev_path`).
pub(super) fn entry(ctx: &mut Ctx, v: ValueRef<'_>, dev_path: &P<'_>, i: usize) -> R<TraceEntry> {
    let path = dev_path.index(i);
    let d = super::dict(&v, &path)?;
    sample_keys(ctx, &d, PREFIX);
    let e = EntryValues::of(ctx, &d);
    let action = e
        .action
        .ok_or_else(|| problem(path, "has no 'action' key"))?;
    let action = Action::from_name(&string(&action, &path.field("action"))?);
    let addr = match e.addr {
        Some(a) if !a.is_none() => Some(sint(&a, &path.field("addr"))? as u64),
        _ => None,
    };
    if addr.is_none()
        && !matches!(
            action,
            Action::Oom | Action::UserDefined | Action::Annotate | Action::Other(_)
        )
    {
        return Err(problem(
            path,
            format!("a '{}' entry has no 'addr'", action.name()),
        ));
    }
    Ok(TraceEntry {
        addr,
        device_free: opt_uint(e.device_free, &path.field("device_free"))?,
        size: match e.size {
            Some(s) => uint(&s, &path.field("size"))?,
            None if matches!(
                action,
                Action::UserDefined | Action::Annotate | Action::Other(_)
            ) =>
            {
                0
            }
            None => return Err(problem(path, "has no 'size' key")),
        },
        stream: match e.stream {
            Some(s) if !s.is_none() => sint(&s, &path.field("stream"))? as u64,
            _ => 0,
        },
        time_us: match e.time_us {
            Some(t) if !t.is_none() => Some(sint(&t, &path.field("time_us"))?),
            _ => None,
        },
        frames: frames(ctx, e.frames, &path.field("frames"))?,
        compile_context: e
            .compile_context
            .and_then(|v| v.as_str().map(|s| ctx.shared_text(s))),
        user_metadata: e
            .user_metadata
            .and_then(|v| v.as_str().map(|s| ctx.shared_text(s))),
        pool_id: pool_id(e.pool_id, &path.field("pool_id"))?,
        action,
    })
}
