//! The CSV format's private pools (v2): `# pool.NAME: KIND A,B [OPTIONS]`
//! declarations before the header row, and rows that name a pool in the
//! id column:
//!
//! ```text
//! # vramlab trace v2
//! # pool.g: graph 0,1
//! # pool.m: mempool 0,2 use_on_oom
//! action,id,size,stream
//! capture_begin,g,,7
//! alloc,a,4096,7
//! capture_end,g
//! pool_create,m
//! pool_enter,m
//! alloc,b,1048576
//! pool_exit,m
//! pool_release,g
//! ```

use crate::model::{Event, PoolIndex, StreamIndex};
use crate::pools::PoolDecl;

/// The actions of pool rows, as the format spells them (the last two,
/// an engine pool's, from v4).
pub(crate) const POOL_ACTIONS: [&str; 8] = [
    "pool_create",
    "capture_begin",
    "capture_end",
    "pool_enter",
    "pool_exit",
    "pool_release",
    "pool_sleep",
    "pool_wake",
];

/// The header key prefix of a pool declaration (`# pool.NAME: …`).
pub(crate) const DECL_PREFIX: &str = "pool.";

/// The fields of a pool row: id (the pool's name), size, stream.
pub(crate) type PoolFields<'a> = [std::borrow::Cow<'a, str>; 3];

/// The pools a reader has seen declared, and which are open.
#[derive(Debug, Default)]
pub(crate) struct PoolNames {
    names: Vec<String>,
    /// Per pool: a capture or `use_mem_pool` context is open on it.
    open: Vec<bool>,
    /// Per pool: an engine pool, and whether it sleeps.
    engine: Vec<bool>,
    asleep: Vec<bool>,
}

impl PoolNames {
    /// A header comment (without `#`, trimmed) that declares a pool:
    /// `Some` with the outcome; `None` for any other comment.
    pub(crate) fn header_line(
        &mut self,
        comment: &str,
        pools: &mut Vec<PoolDecl>,
    ) -> Option<Result<(), String>> {
        let (name, decl) = comment.strip_prefix(DECL_PREFIX)?.split_once(':')?;
        Some(self.declare(name.trim(), decl.trim(), pools))
    }

    /// Declares pool `name`; `Err` when the name is taken or the
    /// declaration is malformed.
    pub(crate) fn declare(
        &mut self,
        name: &str,
        decl: &str,
        pools: &mut Vec<PoolDecl>,
    ) -> Result<(), String> {
        if name.is_empty() {
            return Err("a pool declaration needs a name: '# pool.NAME: graph A,B'".into());
        }
        if self.names.iter().any(|n| n == name) {
            return Err(format!("pool '{name}' is declared twice"));
        }
        let d = PoolDecl::from_csv(decl).map_err(|m| format!("pool '{name}': {m}"))?;
        if let Some(other) = pools.iter().position(|p| p.id == d.id) {
            return Err(format!(
                "pool '{name}' has the id {} of pool '{}'",
                d.id_text(),
                self.names.get(other).map_or("?", String::as_str)
            ));
        }
        self.names.push(name.to_string());
        self.open.push(false);
        self.engine
            .push(d.kind == crate::pools::PrivatePoolKind::Engine);
        self.asleep.push(false);
        pools.push(d);
        Ok(())
    }

    /// The event of a pool row (any other action is unknown); the
    /// pool's name in the id column, no size, and the capturing stream
    /// (capture_begin only, default 0), read by `stream_of`.
    pub(crate) fn event(
        &mut self,
        action: &str,
        [name, size, stream]: &PoolFields<'_>,
        stream_of: impl FnOnce(&str) -> Result<StreamIndex, String>,
    ) -> Result<Event, String> {
        if !POOL_ACTIONS.contains(&action) {
            return Err(format!(
                "unknown action '{action}' (expected alloc, free, free_requested, free_completed, empty_cache, a pool action: {}, a pinned host action: host_alloc, host_free, host_free_requested, host_free_completed, host_empty_cache, or raw_alloc, raw_free)",
                POOL_ACTIONS.join(", ")
            ));
        }
        if !size.is_empty() {
            return Err(format!("{action} takes no size"));
        }
        let stream = if action == "capture_begin" {
            Some(stream_of(if stream.is_empty() { "0" } else { stream })?)
        } else if !stream.is_empty() {
            return Err(format!(
                "{action} takes no stream (only capture_begin does)"
            ));
        } else {
            None
        };
        let name: &str = name;
        if name.is_empty() {
            return Err(format!("{action} needs a pool name in the id column"));
        }
        let Some(i) = self.names.iter().position(|n| n == name) else {
            return Err(if self.names.is_empty() {
                format!(
                    "{action} of pool '{name}', but the file declares no pools ('# pool.{name}: graph A,B' before the header row)"
                )
            } else {
                format!(
                    "{action} of pool '{name}', which is not declared (declared: {})",
                    self.names.join(", ")
                )
            });
        };
        let pool = i as PoolIndex;
        if action == "pool_sleep" || action == "pool_wake" {
            return self.sleep_or_wake(action, name, i);
        }
        let Some(open) = self.open.get_mut(i) else {
            return Err(format!("pool '{name}' has no state (a reader bug)"));
        };
        let ev = match action {
            "pool_create" => Event::PoolCreate { pool },
            "capture_begin" | "pool_enter" => {
                if *open {
                    return Err(format!(
                        "{action} of pool '{name}', which a capture or use_mem_pool context already routes to (PyTorch: 'already recording to mempool_id')"
                    ));
                }
                *open = true;
                if action == "pool_enter" {
                    Event::PoolEnter { pool }
                } else {
                    Event::CaptureBegin {
                        pool,
                        stream: stream.ok_or("capture_begin needs the capturing stream")?,
                    }
                }
            }
            "capture_end" | "pool_exit" => {
                if !*open {
                    return Err(format!(
                        "{action} of pool '{name}', which no capture or use_mem_pool context routes to"
                    ));
                }
                *open = false;
                if action == "pool_exit" {
                    Event::PoolExit { pool }
                } else {
                    Event::CaptureEnd { pool }
                }
            }
            _ => Event::PoolRelease { pool },
        };
        Ok(ev)
    }

    /// A `pool_sleep` or `pool_wake` row of pool `i`: only an engine pool
    /// sleeps, and only one that is awake (and wakes only when asleep).
    fn sleep_or_wake(&mut self, action: &str, name: &str, i: usize) -> Result<Event, String> {
        if !self.engine.get(i).copied().unwrap_or(false) {
            return Err(format!(
                "{action} of pool '{name}', which is not an engine pool (declare it '# pool.{name}: engine A,B')"
            ));
        }
        let Some(asleep) = self.asleep.get_mut(i) else {
            return Err(format!("pool '{name}' has no state (a reader bug)"));
        };
        let sleep = action == "pool_sleep";
        if *asleep == sleep {
            return Err(format!(
                "{action} of pool '{name}', which is already {}",
                if sleep { "asleep" } else { "awake" }
            ));
        }
        *asleep = sleep;
        let pool = i as PoolIndex;
        Ok(if sleep {
            Event::PoolSleep { pool }
        } else {
            Event::PoolWake { pool }
        })
    }
}

/// The CSV row of a pool event (`capture_begin,3,,7`), pools named by
/// their index; `None` for other events.
pub(crate) fn row(ev: &Event, streams: &[u64]) -> Option<String> {
    let (action, pool, stream) = match *ev {
        Event::PoolCreate { pool } => ("pool_create", pool, None),
        Event::CaptureBegin { pool, stream } => ("capture_begin", pool, Some(stream)),
        Event::CaptureEnd { pool } => ("capture_end", pool, None),
        Event::PoolEnter { pool } => ("pool_enter", pool, None),
        Event::PoolExit { pool } => ("pool_exit", pool, None),
        Event::PoolRelease { pool } => ("pool_release", pool, None),
        Event::PoolSleep { pool } => ("pool_sleep", pool, None),
        Event::PoolWake { pool } => ("pool_wake", pool, None),
        _ => return None,
    };
    Some(match stream {
        Some(s) => format!(
            "{action},{pool},,{}",
            streams.get(s as usize).copied().unwrap_or(0)
        ),
        None => format!("{action},{pool},,"),
    })
}
