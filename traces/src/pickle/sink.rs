//! Lists whose items a consumer takes while the pickle is read, instead of
//! the document keeping them: a snapshot's trace entries are converted as
//! they are appended to `device_traces[d]`, and the machine frees what the
//! consumer no longer needs. Memory then holds the converted entries, not
//! the parsed dicts as well.
//!
//! The machine offers a list to [`ListSink::claim`] when the list is empty,
//! about to receive its first items, and sits where PyTorch's pickler puts
//! `device_traces[d]`: a list being built inside a list that is the value of
//! a str key of the dict at the bottom of the stack (see [`ListPlace`]). A
//! claimed list stays empty in the document; its items go to
//! [`ListSink::take`].

use super::doc::{PickleDoc, Slot};

/// Where an empty list about to receive its first items sits.
pub(crate) struct ListPlace<'a> {
    /// The dict at the bottom of the machine's stack (the pickle's root in
    /// files PyTorch writes).
    pub(crate) root: u32,
    /// The key under which the enclosing list will be set in `root`.
    pub(crate) key: &'a str,
    /// The enclosing list.
    pub(crate) outer: u32,
    /// The position the list will have in the enclosing list.
    pub(crate) index: usize,
    /// The key/value pairs above `root` on the stack, before `key`: the
    /// values to be set in `root` with `key` in the same `SETITEMS` (the
    /// pairs set earlier are in `root` already).
    pub(crate) pending: &'a [Slot],
}

/// What a sink answers to a list offered to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The sink takes the list's items.
    Take,
    /// The list fills as usual.
    Leave,
    /// The sink cannot go on: the read stops with an error, and its
    /// caller reads the file again without a sink.
    GiveUp,
}

/// A consumer of the items of lists it claims.
pub(crate) trait ListSink {
    /// Whether the sink takes the items of `list`, at `place`.
    fn claim(&mut self, doc: &PickleDoc, list: u32, place: &ListPlace<'_>) -> Claim;

    /// Takes `item`, appended to the claimed list `list`, and pushes onto
    /// `done` the containers it is done with (their contents may then be
    /// freed: a later read of one marks the document). `false` gives up:
    /// the read stops with an error.
    fn take(&mut self, doc: &PickleDoc, list: u32, item: Slot, done: &mut Vec<Done>) -> bool;
}

/// A container a sink is done with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Done {
    /// The item taken: its contents are freed, and its id is given out
    /// again when nothing can reach it any more (no container, no other
    /// place on the stack; its memo key, if any, then refuses a `GET`).
    Item(u32),
    /// A container the item holds: freed, and its id given out again, only
    /// when nothing but the item can reach it.
    Part(u32),
    /// A container the sink converted and finds again by its id (a stack
    /// list entries share): its contents are freed, its id stays its own.
    Converted(u32),
}
