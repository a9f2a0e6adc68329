//! The machine's side of a [`ListSink`]: offering lists to it, handing it
//! the items of the lists it claimed, and freeing what it gives back.

use crate::pickle::doc::{Node, PickleDoc, Slot};
use crate::pickle::error::PickleError;
use crate::pickle::sink::{Claim, Done, ListPlace};

use super::memo::FREED;
use super::nesting::{MANY_MEMOS, NO_MEMO};
use super::{Machine, Result};

impl Machine<'_> {
    /// Whether the sink takes the items appended to `list`, which sits at
    /// `stack[t]` (the innermost open mark, if any, is that of the list's
    /// own batch and already popped).
    pub(super) fn sink_takes(&mut self, t: usize, list: u32) -> Result<bool> {
        if self.claimed.contains(&list) {
            return Ok(true);
        }
        // Only a list that is still empty: its items all reach the sink.
        if !matches!(self.doc.nodes.get(list as usize), Some(Node::List(l)) if l.is_empty()) {
            return Ok(false);
        }
        let Some(place) = place_of(&self.stack, &self.marks, &self.doc, t) else {
            return Ok(false);
        };
        let Some(sink) = self.sink.as_deref_mut() else {
            return Ok(false);
        };
        match sink.claim(&self.doc, list, &place) {
            Claim::Take => {
                self.claimed.push(list);
                Ok(true)
            }
            Claim::Leave => Ok(false),
            Claim::GiveUp => Err(self.gave_up()),
        }
    }

    /// Hands `item`, appended to the claimed `list`, to the sink and frees
    /// the containers it is done with. `stack[..stable]` is the part of
    /// the stack below the values being appended.
    pub(super) fn sink_item(&mut self, list: u32, item: Slot, stable: usize) -> Result<()> {
        self.raise_over(list, item);
        let Some(sink) = self.sink.as_deref_mut() else {
            return Err(self.gave_up());
        };
        let mut done = std::mem::take(&mut self.done);
        done.clear();
        let took = sink.take(&self.doc, list, item, &mut done);
        if took {
            for &d in &done {
                match d {
                    Done::Item(id) => {
                        let unreachable = self.unreachable(id, 0, stable);
                        self.free_node(id, unreachable);
                    }
                    Done::Part(id) => {
                        if self.unreachable(id, 1, stable) {
                            self.free_node(id, true);
                        }
                    }
                    Done::Converted(id) => self.free_node(id, false),
                }
            }
        }
        self.done = done;
        if took { Ok(()) } else { Err(self.gave_up()) }
    }

    /// Hands `stack[from..to]`, appended to the claimed `list`, to the sink.
    pub(super) fn sink_items(&mut self, list: u32, from: usize, to: usize) -> Result<()> {
        for i in from..to {
            let Some(&item) = self.stack.get(i) else {
                break;
            };
            self.sink_item(list, item, from)?;
        }
        Ok(())
    }

    /// Whether nothing can reach container `id` once the `parents`
    /// containers known to hold it are gone: no other container, no place
    /// on `stack[..stable]`; its memo key, if it has one, is then made to
    /// refuse a `GET` ([`FREED`]).
    fn unreachable(&mut self, id: u32, parents: u8, stable: usize) -> bool {
        /// Beyond this many values below the batch, the stack is not searched.
        const STACK_SEARCHED: usize = 64;
        let Some(&m) = self.meta.get(id as usize) else {
            return false;
        };
        if m.parents != parents || m.memo == MANY_MEMOS || stable > STACK_SEARCHED {
            return false;
        }
        let on_stack = self
            .stack
            .get(..stable)
            .unwrap_or(&[])
            .iter()
            .any(|s| matches!(s, Slot::Node(x) if *x == id));
        if on_stack {
            return false;
        }
        if m.memo != NO_MEMO {
            let key = m.memo as usize;
            let cell = match self.memo.get_mut(key) {
                Some(c) => c.as_mut(),
                None => self.sparse_memo.get_mut(&u64::from(m.memo)),
            };
            if let Some(cell) = cell {
                if matches!(cell, Slot::Node(x) if *x == id) {
                    *cell = Slot::Node(FREED);
                }
            }
        }
        true
    }

    /// Frees container `id`'s contents; with `reuse`, its id is given to
    /// the next new container.
    fn free_node(&mut self, id: u32, reuse: bool) {
        if let Some(n) = self.doc.nodes.get_mut(id as usize) {
            *n = Node::Retired;
            self.retired_any = true;
            if reuse {
                self.free_ids.push(id);
            }
        }
    }

    pub(super) fn gave_up(&self) -> PickleError {
        self.invalid("the snapshot reader stopped taking trace entries as they were read")
    }
}

/// The place of the list at `stack[t]`, when it is one a sink may claim:
/// `[root, k, v, …, key, outer, (done lists…), list]`, where `root` is a
/// dict, `key` a str, `outer` a list, and the only open marks are those of
/// `root`'s batch (at 1) and `outer`'s (after `outer`).
fn place_of<'m>(
    stack: &'m [Slot],
    marks: &[usize],
    doc: &'m PickleDoc,
    t: usize,
) -> Option<ListPlace<'m>> {
    // `outer`'s batch: the innermost open mark, when it is at or below `t`.
    let base = match marks.last() {
        Some(&b) if b >= 3 && b <= t => b,
        _ => t,
    };
    if base < 3 || !marks.iter().all(|&k| k == 1 || k == base) {
        return None;
    }
    let (Some(Slot::Node(root)), Some(Slot::Str(key)), Some(Slot::Node(outer))) =
        (stack.first(), stack.get(base - 2), stack.get(base - 1))
    else {
        return None;
    };
    // Pairs between the root and the key.
    let pending = stack.get(1..base - 2)?;
    if pending.len() % 2 != 0 {
        return None;
    }
    let Some(Node::Dict(_)) = doc.nodes.get(*root as usize) else {
        return None;
    };
    let Some(Node::List(done)) = doc.nodes.get(*outer as usize) else {
        return None;
    };
    Some(ListPlace {
        root: *root,
        key: doc.str_of(*key),
        outer: *outer,
        index: done.len() + (t - base),
        pending,
    })
}
