//! Nesting depth and cycles. Every node's height (a container of scalars
//! has 1) and whether it is inside another container are kept up to date as
//! containers fill, so the depth check on the value `STOP` returns is
//! usually a lookup; when a change may have made the heights stale (a
//! contained container changed, a container put into itself, a dict value
//! replaced), `check_tree` walks the document instead.

use crate::pickle::doc::{Node, PickleDoc, Slot};
use crate::pickle::error::PickleError;

use super::{Machine, Result};

/// Height (a container of scalars has 1), containment and memo key of one
/// node.
#[derive(Clone, Copy)]
pub(super) struct Meta {
    pub(super) height: u32,
    /// How many times it was put into a container (saturating; never
    /// lowered): 0 for a node no container holds.
    pub(super) parents: u8,
    /// The memo key it was stored under: [`NO_MEMO`], one key, or
    /// [`MANY_MEMOS`].
    pub(super) memo: u32,
}

/// [`Meta::memo`] of a node never stored in the memo.
pub(super) const NO_MEMO: u32 = u32::MAX;
/// [`Meta::memo`] of a node stored under several keys (or a key beyond
/// `u32`).
pub(super) const MANY_MEMOS: u32 = u32::MAX - 1;

impl Meta {
    /// A new node's.
    pub(super) const FRESH: Meta = Meta {
        height: 1,
        parents: 0,
        memo: NO_MEMO,
    };

    /// Whether a container holds the node.
    #[inline]
    pub(super) fn contained(&self) -> bool {
        self.parents > 0
    }
}

/// Marks the node `children` as contained in `parent` and raises
/// `parent`'s height over theirs. Returns false when `parent` is among the
/// children (a self-reference).
fn adopt(meta: &mut [Meta], parent: u32, children: &[Slot]) -> bool {
    let mut tallest = 0;
    for &c in children {
        if let Slot::Node(id) = c {
            if id == parent {
                return false;
            }
            if let Some(m) = meta.get_mut(id as usize) {
                m.parents = m.parents.saturating_add(1);
                tallest = tallest.max(m.height);
            }
        }
    }
    if let Some(m) = meta.get_mut(parent as usize) {
        m.height = m.height.max(tallest.saturating_add(1));
    }
    true
}

impl Machine<'_> {
    /// Before changing container `id`: a contained one makes the cached
    /// heights of its ancestors stale.
    #[inline]
    pub(super) fn before_change(&mut self, id: u32) {
        if self.meta.get(id as usize).is_none_or(Meta::contained) {
            self.full_check = true;
        }
    }

    /// After putting `children` into container `id`.
    #[inline]
    pub(super) fn adopted(&mut self, id: u32, children_from: usize, children_to: usize) {
        let children = self.stack.get(children_from..children_to).unwrap_or(&[]);
        if !adopt(&mut self.meta, id, children) {
            self.full_check = true;
        }
    }

    /// Raises claimed list `id`'s height over `item`'s, as if it held the
    /// item (which goes to the sink instead: no container holds it).
    pub(super) fn raise_over(&mut self, id: u32, item: Slot) {
        let h = match item {
            Slot::Node(c) => self.meta.get(c as usize).map_or(0, |m| m.height),
            _ => 0,
        };
        if let Some(m) = self.meta.get_mut(id as usize) {
            m.height = m.height.max(h.saturating_add(1));
        }
    }

    pub(super) fn adopt_items(&mut self, id: u32, items: &[Slot]) {
        if !adopt(&mut self.meta, id, items) {
            self.full_check = true;
        }
    }

    /// Refuses cycles and nesting deeper than `max_depth` in the value
    /// returned by STOP.
    pub(super) fn check_root(&self, root: Slot, max_depth: usize) -> Result<()> {
        if self.full_check {
            return check_tree(&self.doc, root, max_depth);
        }
        let height = match root {
            Slot::Node(id) => self.meta.get(id as usize).map_or(0, |m| m.height),
            _ => 0,
        };
        if height as usize > max_depth {
            return Err(PickleError::LimitExceeded {
                what: "nesting depth",
                limit: max_depth,
                offset: None,
            });
        }
        Ok(())
    }
}

/// Walks the value returned by `STOP` once (shared containers once),
/// without recursion: refuses cycles and nesting deeper than `max_depth`.
fn check_tree(doc: &PickleDoc, root: Slot, max_depth: usize) -> Result<()> {
    const UNSEEN: u32 = 0;
    const OPEN: u32 = u32::MAX;
    let Slot::Node(root) = root else {
        return Ok(());
    };
    let too_deep = || PickleError::LimitExceeded {
        what: "nesting depth",
        limit: max_depth,
        offset: None,
    };
    if max_depth == 0 {
        return Err(too_deep());
    }
    // Per node: UNSEEN, OPEN (on the current path) or its height (>= 1).
    let mut state: Vec<u32> = vec![UNSEEN; doc.nodes.len()];
    // Path from the root: (node, next child position, tallest child so far).
    let mut path: Vec<(u32, usize, u32)> = vec![(root, 0, 0)];
    if let Some(s) = state.get_mut(root as usize) {
        *s = OPEN;
    }
    loop {
        let depth = path.len();
        let Some(&mut (id, ref mut pos, ref mut tallest)) = path.last_mut() else {
            break;
        };
        let node = doc.node(id);
        let mut descend = None;
        while let Some(child) = child_at(node, *pos) {
            *pos += 1;
            let Slot::Node(c) = child else { continue };
            match state.get(c as usize).copied() {
                Some(UNSEEN) => {
                    descend = Some(c);
                    break;
                }
                Some(OPEN) => return Err(PickleError::Cycle),
                Some(h) => {
                    if depth + h as usize > max_depth {
                        return Err(too_deep());
                    }
                    *tallest = (*tallest).max(h);
                }
                None => {}
            }
        }
        if let Some(c) = descend {
            if depth + 1 > max_depth {
                return Err(too_deep());
            }
            if let Some(s) = state.get_mut(c as usize) {
                *s = OPEN;
            }
            path.push((c, 0, 0));
            continue;
        }
        let height = *tallest + 1;
        path.pop();
        if let Some(s) = state.get_mut(id as usize) {
            *s = height;
        }
        if let Some((_, _, parent_tallest)) = path.last_mut() {
            *parent_tallest = (*parent_tallest).max(height);
        }
    }
    Ok(())
}

/// Child `pos` of a container (dict keys first, then values).
#[inline]
fn child_at(node: Option<&Node>, pos: usize) -> Option<Slot> {
    match node? {
        Node::List(items) => items.get(pos).copied(),
        Node::Tuple(t) => t.items.get(pos).copied(),
        Node::Dict(d) => d.entries.as_flattened().get(pos).copied(),
        Node::Set(s) | Node::FrozenSet(s) => s.items.get(pos).copied(),
        Node::ByteArray(_) | Node::Retired => None,
    }
}
