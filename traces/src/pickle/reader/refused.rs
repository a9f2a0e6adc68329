//! Opcodes that import, construct or call objects: refused with an error
//! that names the opcode, its offset and, for imports, what would have
//! been imported. Nothing is executed.

use crate::pickle::doc::Slot;
use crate::pickle::error::PickleError;

use super::Machine;

impl Machine<'_> {
    /// `GLOBAL` and `INST`, which name `module\nname\n` in their argument.
    #[cold]
    pub(super) fn refuse_global(&mut self) -> PickleError {
        // Best effort at naming what would be imported.
        let module = self
            .line()
            .map(|r| lossy(self.input.bytes(r)))
            .unwrap_or_else(|_| "?".into());
        let name = self
            .line()
            .map(|r| lossy(self.input.bytes(r)))
            .unwrap_or_else(|_| "?".into());
        PickleError::Global {
            module,
            name,
            offset: self.op_start,
            opcode: self.name(),
        }
    }

    /// `STACK_GLOBAL`, which takes the module and name from the stack.
    #[cold]
    pub(super) fn refuse_stack_global(&self) -> PickleError {
        let n = self.stack.len();
        let text = |i: Option<usize>| {
            i.and_then(|i| self.stack.get(i))
                .and_then(|&s| match s {
                    Slot::Str(sp) => Some(self.doc.str_of(sp).to_owned()),
                    _ => None,
                })
                .unwrap_or_else(|| "?".into())
        };
        PickleError::Global {
            module: text(n.checked_sub(2)),
            name: text(n.checked_sub(1)),
            offset: self.op_start,
            opcode: self.name(),
        }
    }

    /// `REDUCE`, `BUILD`, `OBJ`, `NEWOBJ`, `NEWOBJ_EX`, `PERSID`,
    /// `BINPERSID`, `EXT1`, `EXT2`, `EXT4`, `NEXT_BUFFER`,
    /// `READONLY_BUFFER`.
    #[cold]
    pub(super) fn refuse_not_plain_data(&self) -> PickleError {
        PickleError::NotPlainData {
            opcode: self.name(),
            offset: self.op_start,
        }
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
