"""The native module (Rust): the vramlab command line, in-process."""

from typing import List, Tuple

def main(argv: List[str]) -> int:
    """Runs the command line (argv[0] is the program name); returns the exit status."""

def call(args: List[str]) -> Tuple[bool, str, str, List[str]]:
    """Runs one command with its output captured: (ok, kind, text, notes)."""

def version() -> str:
    """The vramlab release this module was built from."""

def command_table() -> str:
    """The command line's commands and options as JSON (``vramlab command-table``)."""
