//! Private memory pools of a trace: CUDA graphs' pools and
//! `torch.cuda.MemPool`s, and the events that route requests to them.
//!
//! PyTorch's allocator keeps, beside its default pool, one private pool per
//! `MempoolId_t`. Requests go to one while a capture or a `use_mem_pool`
//! context has it registered (`beginAllocateToPool` … `endAllocateToPool`);
//! its memory returns to the device only after the last graph or MemPool
//! holding it lets go (`releasePool`) and the cache is emptied. A trace
//! declares its pools in [`Trace::pools`](crate::Trace::pools) and names
//! them by [`PoolIndex`] in its pool events.

use serde::{Deserialize, Serialize};

/// Index into [`Trace::pools`](crate::Trace::pools).
pub type PoolIndex = u32;

/// What made a private pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PrivatePoolKind {
    /// A CUDA graph's pool (`torch.cuda.graph`, `CUDAGraph.capture_begin`,
    /// shared through `torch.cuda.graph_pool_handle()`): created by the
    /// first capture into it.
    Graph,
    /// A `torch.cuda.MemPool`: created with the object, entered with
    /// `torch.cuda.use_mem_pool`.
    MemPool,
    /// A `torch.cuda.MemPool` with its own allocator functions
    /// (`CUDAPluggableAllocator`), as an inference engine keeps its weights
    /// and KV cache in (vLLM's `CuMemAllocator`, torch_memory_saver): a
    /// MemPool whose segments are never expandable, and whose physical
    /// memory can sleep and wake ([`Event::PoolSleep`](crate::Event::PoolSleep)).
    Engine,
}

impl PrivatePoolKind {
    /// The word the CSV format and the JSON use (`graph`, `mempool`).
    pub fn name(self) -> &'static str {
        match self {
            PrivatePoolKind::Graph => "graph",
            PrivatePoolKind::MemPool => "mempool",
            PrivatePoolKind::Engine => "engine",
        }
    }

    /// A `torch.cuda.MemPool` (plain or an engine's): made with its
    /// object, entered with `use_mem_pool`, emptied when deleted.
    pub fn is_mempool(self) -> bool {
        matches!(self, PrivatePoolKind::MemPool | PrivatePoolKind::Engine)
    }

    /// The kind a word names ([`PrivatePoolKind::name`]).
    pub fn from_name(s: &str) -> Option<PrivatePoolKind> {
        match s {
            "graph" => Some(PrivatePoolKind::Graph),
            "mempool" => Some(PrivatePoolKind::MemPool),
            "engine" => Some(PrivatePoolKind::Engine),
            _ => None,
        }
    }
}

/// One private pool of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PoolDecl {
    /// PyTorch's `MempoolId_t` as recorded (never `(0, 0)`, the default
    /// pool): `(n, 0)` for a graph's own pool, `(0, n)` for a pool handle
    /// or a MemPool.
    pub id: (u64, u64),
    /// Graph pool or MemPool.
    pub kind: PrivatePoolKind,
    /// MemPool `use_on_oom`: its cached blocks may serve a request outside
    /// it that would otherwise fail.
    pub use_on_oom: bool,
    /// MemPool `no_split`: its blocks are never split.
    pub no_split: bool,
}

impl PoolDecl {
    /// A graph pool with this id.
    pub fn graph(id: (u64, u64)) -> PoolDecl {
        PoolDecl {
            id,
            kind: PrivatePoolKind::Graph,
            use_on_oom: false,
            no_split: false,
        }
    }

    /// A MemPool with this id and no options.
    pub fn mempool(id: (u64, u64)) -> PoolDecl {
        PoolDecl {
            id,
            kind: PrivatePoolKind::MemPool,
            use_on_oom: false,
            no_split: false,
        }
    }

    /// `(a,b)`, as PyTorch prints a pool id.
    pub fn id_text(&self) -> String {
        format!("({},{})", self.id.0, self.id.1)
    }

    /// The declaration as the CSV header writes it after `# pool.N:`:
    /// `graph 0,1` or `mempool 0,2 use_on_oom no_split`.
    pub fn to_csv(&self) -> String {
        let mut s = format!("{} {},{}", self.kind.name(), self.id.0, self.id.1);
        if self.use_on_oom {
            s.push_str(" use_on_oom");
        }
        if self.no_split {
            s.push_str(" no_split");
        }
        s
    }

    /// Reads [`PoolDecl::to_csv`]'s form; `Err` says what is wrong.
    pub fn from_csv(text: &str) -> Result<PoolDecl, String> {
        let mut words = text.split_whitespace();
        let kind_word = words.next().ok_or("empty pool declaration")?;
        let kind = PrivatePoolKind::from_name(kind_word).ok_or_else(|| {
            format!("pool kind '{kind_word}' (expected graph, mempool or engine)")
        })?;
        let id_word = words
            .next()
            .ok_or("the pool id is missing (e.g. 'graph 0,1')")?;
        let (a, b) = id_word
            .split_once(',')
            .ok_or_else(|| format!("pool id '{id_word}' is not two numbers 'A,B'"))?;
        let num = |s: &str| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| format!("pool id '{id_word}' is not two whole numbers"))
        };
        let id = (num(a)?, num(b)?);
        if id == (0, 0) {
            return Err("pool id 0,0 is the default pool, not a private one".into());
        }
        let mut d = PoolDecl {
            id,
            kind,
            use_on_oom: false,
            no_split: false,
        };
        for w in words {
            match w {
                "use_on_oom" => d.use_on_oom = true,
                "no_split" => d.no_split = true,
                other => {
                    return Err(format!(
                        "pool option '{other}' (expected use_on_oom or no_split)"
                    ));
                }
            }
        }
        if kind == PrivatePoolKind::Graph && (d.use_on_oom || d.no_split) {
            return Err("use_on_oom and no_split are MemPool options, not a graph pool's".into());
        }
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_read_back() {
        for d in [
            PoolDecl::graph((0, 1)),
            PoolDecl::graph((7, 0)),
            PoolDecl {
                use_on_oom: true,
                no_split: true,
                ..PoolDecl::mempool((0, 3))
            },
            PoolDecl {
                kind: PrivatePoolKind::Engine,
                ..PoolDecl::mempool((0, 4))
            },
        ] {
            assert_eq!(PoolDecl::from_csv(&d.to_csv()), Ok(d));
        }
    }

    #[test]
    fn bad_declarations_say_why() {
        for (text, why) in [
            ("", "empty"),
            ("cuda 0,1", "pool kind 'cuda'"),
            ("graph", "id is missing"),
            ("graph 1", "not two numbers"),
            ("graph a,1", "whole numbers"),
            ("graph 0,0", "default pool"),
            ("mempool 0,1 fast", "option 'fast'"),
            ("graph 0,1 no_split", "MemPool options"),
        ] {
            let e = PoolDecl::from_csv(text).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }
}
