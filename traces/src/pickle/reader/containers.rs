//! Containers: the empty ones (`EMPTY_LIST`, `EMPTY_TUPLE`, `EMPTY_DICT`,
//! `EMPTY_SET`), those built from the values above a MARK (`LIST`,
//! `TUPLE`, `DICT`, `FROZENSET`) or the top of the stack (`TUPLE1`-`3`),
//! and the additions to the container below (`APPEND`, `APPENDS`,
//! `SETITEM`, `SETITEMS`, `ADDITEMS`), with Python's rules for dict keys
//! and set elements.

use crate::pickle::doc::{DictNode, Node, PickleDoc, SetNode, Slot, TupleNode};
use crate::pickle::key_index::{INDEX_THRESHOLD, KeyIndex};
use crate::pickle::keys::Keys;
use crate::pickle::opcodes as op;

use super::nesting::Meta;
use super::{Machine, Result};

impl Machine<'_> {
    // ---- building ----

    /// Stores `node`: at an id a sink freed, if there is one, else at the
    /// end of the arena.
    pub(super) fn new_node(&mut self, node: Node) -> Slot {
        if let Some(id) = self.free_ids.pop() {
            if let (Some(n), Some(m)) = (
                self.doc.nodes.get_mut(id as usize),
                self.meta.get_mut(id as usize),
            ) {
                *n = node;
                *m = Meta::FRESH;
                return Slot::Node(id);
            }
        }
        let id = self.doc.nodes.len() as u32; // < input length <= 1 GiB
        self.doc.nodes.push(node);
        self.meta.push(Meta::FRESH);
        Slot::Node(id)
    }

    fn new_tuple(&mut self, items: Vec<Slot>) -> Slot {
        let hashable = items.iter().all(|&s| self.doc.is_hashable(s));
        let s = self.new_node(Node::Tuple(TupleNode {
            items: Vec::new(),
            hashable,
            hash: std::cell::Cell::new(None),
        }));
        if let Slot::Node(id) = s {
            self.adopt_items(id, &items);
            if let Some(Node::Tuple(t)) = self.doc.nodes.get_mut(id as usize) {
                t.items = items;
            }
        }
        s
    }

    /// `dict[key] = value` (Python semantics: an existing key keeps its
    /// position and gets the new value).
    fn dict_set(&mut self, id: u32, key: Slot, value: Slot) -> Result<()> {
        if !self.doc.is_hashable(key) {
            return Err(self.unhashable(key));
        }
        let doc = &self.doc;
        let Some(Node::Dict(d)) = doc.nodes.get(id as usize) else {
            return Err(self.underflow());
        };
        let (found, h, new_index) = locate(doc, Keys::of_dict(&d.entries), d.index.as_deref(), key);
        let Some(Node::Dict(d)) = self.doc.nodes.get_mut(id as usize) else {
            return Err(self.underflow());
        };
        match found {
            Some(i) => {
                if let Some(e) = d.entries.get_mut(i) {
                    e[1] = value;
                }
                // The old value's height no longer counts.
                self.full_check = true;
            }
            None => {
                d.entries.push([key, value]);
                if let Some(ix) = new_index {
                    d.index = Some(ix);
                } else if let (Some(ix), Some(h)) = (d.index.as_deref_mut(), h) {
                    ix.insert(d.entries.len() - 1, h);
                }
            }
        }
        Ok(())
    }

    fn set_add(&mut self, id: u32, item: Slot) -> Result<()> {
        if !self.doc.is_hashable(item) {
            return Err(self.unhashable(item));
        }
        let doc = &self.doc;
        let (Some(Node::Set(s)) | Some(Node::FrozenSet(s))) = doc.nodes.get(id as usize) else {
            return Err(self.underflow());
        };
        let (found, h, new_index) = locate(doc, Keys::of_set(&s.items), s.index.as_deref(), item);
        let (Some(Node::Set(s)) | Some(Node::FrozenSet(s))) = self.doc.nodes.get_mut(id as usize)
        else {
            return Err(self.underflow());
        };
        if found.is_none() {
            s.items.push(item);
            if let Some(ix) = new_index {
                s.index = Some(ix);
            } else if let (Some(ix), Some(h)) = (s.index.as_deref_mut(), h) {
                ix.insert(s.items.len() - 1, h);
            }
        }
        Ok(())
    }

    /// Sets `dict[k] = v` for the pairs `stack[mark..]`, then drops them.
    fn set_items(&mut self, id: u32, mark: usize) -> Result<()> {
        let n = self.stack.len().saturating_sub(mark);
        if n % 2 != 0 {
            return Err(self.invalid("odd number of values for dict keys and values"));
        }
        self.before_change(id);
        self.adopted(id, mark, self.stack.len());
        if let Some(Node::Dict(d)) = self.doc.nodes.get_mut(id as usize) {
            d.entries.reserve(n / 2);
        }
        let mut i = mark;
        while let (Some(&k), Some(&v)) = (self.stack.get(i), self.stack.get(i + 1)) {
            self.dict_set(id, k, v)?;
            i += 2;
        }
        self.stack.truncate(mark);
        Ok(())
    }

    /// Adds the elements `stack[mark..]` to the set or frozenset `id`,
    /// then drops them.
    fn add_items(&mut self, id: u32, mark: usize) -> Result<()> {
        let mut i = mark;
        while let Some(&item) = self.stack.get(i) {
            self.set_add(id, item)?;
            i += 1;
        }
        self.stack.truncate(mark);
        Ok(())
    }

    // ---- empty containers ----

    #[inline(always)]
    pub(super) fn load_empty_dict(&mut self) {
        let s = self.new_node(Node::Dict(DictNode::default()));
        self.push(s);
    }

    #[inline(always)]
    pub(super) fn load_empty_list(&mut self) {
        let s = self.new_node(Node::List(Vec::new()));
        self.push(s);
    }

    #[inline(always)]
    pub(super) fn load_empty_tuple(&mut self) {
        let s = self.new_tuple(Vec::new());
        self.push(s);
    }

    #[inline(always)]
    pub(super) fn load_empty_set(&mut self) {
        let s = self.new_node(Node::Set(SetNode::default()));
        self.push(s);
    }

    // ---- dicts ----

    #[inline(always)]
    pub(super) fn load_setitems(&mut self) -> Result<()> {
        let mark = self.pop_mark()?;
        let (_, target) = self.target_below(mark)?;
        match target {
            Slot::Node(id) if matches!(self.doc.node(id), Some(Node::Dict(_))) => {
                self.set_items(id, mark)
            }
            other => Err(self.wrong_type("dict", other)),
        }
    }

    #[inline(always)]
    pub(super) fn load_setitem(&mut self) -> Result<()> {
        let v = self.pop()?;
        let k = self.pop()?;
        match self.top()? {
            Slot::Node(id) if matches!(self.doc.node(id), Some(Node::Dict(_))) => {
                self.before_change(id);
                self.adopt_items(id, &[k, v]);
                self.dict_set(id, k, v)
            }
            other => Err(self.wrong_type("dict", other)),
        }
    }

    #[inline(always)]
    pub(super) fn load_dict(&mut self) -> Result<()> {
        let mark = self.pop_mark()?;
        let s = self.new_node(Node::Dict(DictNode::default()));
        let Slot::Node(id) = s else {
            return Err(self.underflow());
        };
        self.set_items(id, mark)?;
        self.push(s);
        Ok(())
    }

    // ---- lists ----

    #[inline(always)]
    pub(super) fn load_appends(&mut self) -> Result<()> {
        let mark = self.pop_mark()?;
        let (t, target) = self.target_below(mark)?;
        if let Slot::Node(id) = target {
            self.before_change(id);
            if self.sink.is_some() && self.sink_takes(t, id)? {
                self.sink_items(id, mark, self.stack.len())?;
                self.stack.truncate(mark);
                return Ok(());
            }
            self.adopted(id, mark, self.stack.len());
        }
        let list = match target {
            Slot::Node(id) => match self.doc.nodes.get_mut(id as usize) {
                Some(Node::List(l)) => Some(l),
                _ => None,
            },
            _ => None,
        };
        let Some(list) = list else {
            return Err(self.wrong_type("list", target));
        };
        // mark <= stack.len() always holds (marks record heights and the
        // stack never shrinks below an open mark); `get` keeps a broken
        // invariant from panicking.
        list.extend_from_slice(self.stack.get(mark..).unwrap_or(&[]));
        self.stack.truncate(mark);
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_append(&mut self) -> Result<()> {
        let v = self.pop()?;
        let target = self.top()?;
        if let Slot::Node(id) = target {
            self.before_change(id);
            if self.sink.is_some() && self.sink_takes(self.stack.len() - 1, id)? {
                return self.sink_item(id, v, self.stack.len());
            }
            self.adopt_items(id, &[v]);
        }
        match target {
            Slot::Node(id) => match self.doc.nodes.get_mut(id as usize) {
                Some(Node::List(l)) => l.push(v),
                _ => return Err(self.wrong_type("list", target)),
            },
            _ => return Err(self.wrong_type("list", target)),
        }
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_list(&mut self) -> Result<()> {
        let mark = self.pop_mark()?;
        let items = self.stack.split_off(mark.min(self.stack.len()));
        let s = self.new_node(Node::List(Vec::new()));
        if let Slot::Node(id) = s {
            self.adopt_items(id, &items);
            if let Some(Node::List(l)) = self.doc.nodes.get_mut(id as usize) {
                *l = items;
            }
        }
        self.push(s);
        Ok(())
    }

    // ---- tuples ----

    #[inline(always)]
    pub(super) fn load_tuple(&mut self) -> Result<()> {
        let mark = self.pop_mark()?;
        let items = self.stack.split_off(mark.min(self.stack.len()));
        let s = self.new_tuple(items);
        self.push(s);
        Ok(())
    }

    /// `TUPLE1`, `TUPLE2`, `TUPLE3` (`code`): a tuple of the top 1-3 values.
    #[inline(always)]
    pub(super) fn load_tuple_n(&mut self, code: u8) -> Result<()> {
        let n = usize::from(code - op::TUPLE1) + 1;
        if self.stack.len() < self.floor() + n {
            return Err(self.underflow());
        }
        let items = self.stack.split_off(self.stack.len() - n);
        let s = self.new_tuple(items);
        self.push(s);
        Ok(())
    }

    // ---- sets ----

    #[inline(always)]
    pub(super) fn load_additems(&mut self) -> Result<()> {
        let mark = self.pop_mark()?;
        let (_, target) = self.target_below(mark)?;
        let id = match target {
            Slot::Node(id) if matches!(self.doc.node(id), Some(Node::Set(_))) => id,
            other => return Err(self.wrong_type("set", other)),
        };
        self.before_change(id);
        self.adopted(id, mark, self.stack.len());
        self.add_items(id, mark)
    }

    #[inline(always)]
    pub(super) fn load_frozenset(&mut self) -> Result<()> {
        let mark = self.pop_mark()?;
        let s = self.new_node(Node::FrozenSet(SetNode::default()));
        let Slot::Node(id) = s else {
            return Err(self.underflow());
        };
        self.adopted(id, mark, self.stack.len());
        self.add_items(id, mark)?;
        let hash = match self.doc.node(id) {
            Some(Node::FrozenSet(fs)) => self.doc.frozenset_hash(&fs.items),
            _ => 0,
        };
        if let Some(Node::FrozenSet(fs)) = self.doc.nodes.get_mut(id as usize) {
            fs.hash = hash;
        }
        self.push(s);
        Ok(())
    }
}

/// Finds `key` among `keys`; when a hash index is (or is about to be)
/// needed, also returns the key's hash and, if the container outgrows the
/// linear search with this insertion, a freshly built index.
fn locate(
    doc: &PickleDoc,
    keys: Keys<'_>,
    index: Option<&KeyIndex>,
    key: Slot,
) -> (Option<usize>, Option<u64>, Option<Box<KeyIndex>>) {
    let grows_index = index.is_none() && keys.len() >= INDEX_THRESHOLD;
    let h = (index.is_some() || grows_index).then(|| doc.key_hash(key));
    let found = doc.find_key(keys, index, key, h);
    let new_index = match (found, grows_index, h) {
        (None, true, Some(h)) => {
            let mut ix = KeyIndex::default();
            for (i, k) in keys.iter().enumerate() {
                ix.insert(i, doc.key_hash(k));
            }
            ix.insert(keys.len(), h);
            Some(Box::new(ix))
        }
        _ => None,
    };
    (found, h, new_index)
}
