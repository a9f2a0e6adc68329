"""The ``vramlab`` command installed by the Python package: the same
program as the Rust binary, run in this process."""

from __future__ import annotations

import signal
import sys

from . import _native


def main() -> None:
    # Ctrl-C ends the command at once, as it does the Rust binary (Python's
    # own handler would wait for the engine to return), and a closed pipe
    # is the command's to handle (it stops quietly).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.stdout.flush()
    sys.exit(_native.main(["vramlab", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
