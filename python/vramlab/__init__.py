"""vramlab: replay GPU memory traces through PyTorch's CUDA caching
allocator on a simulated GPU — peak reserved memory, fragmentation and
out-of-memory points under any ``PYTORCH_ALLOC_CONF`` setting, without a
GPU.

Each function runs the same engine and command as the ``vramlab`` command
line, in this process, and returns its JSON output as dicts whose keys are
also attributes::

    import vramlab
    a, b = vramlab.replay("step.pickle", conf=["default", "expandable_segments:True"])
    print(a.peak_reserved_bytes, b.peak_reserved_bytes)
    print(vramlab.recommend("step.pickle", gpu="rtx4090").export)

Sources are paths (any format the command line reads), snapshot dicts as
``torch.cuda.memory._snapshot()`` returns them, lists of events, or
:class:`Trace` objects from :func:`load`.
"""

from ._api import (
    ConfError,
    Record,
    Rows,
    Trace,
    TraceError,
    VramlabError,
    VramlabWarning,
    load,
    run,
)
from ._commands import (
    colocate,
    diff,
    explain,
    fidelity,
    gate,
    matrix,
    oom_point,
    oracle,
    plan,
    recommend,
    replay,
    report,
    serve_budget,
    stats,
    sweep,
)
from ._fleet import Case, cases, fleet_report, read_rows, run_case
from ._native import version as _version
from ._rows import ROW_COLUMNS, ROW_SCHEMA
from ._record import record, record_script

__version__: str = _version()

__all__ = [
    "Case",
    "ConfError",
    "ROW_COLUMNS",
    "ROW_SCHEMA",
    "Record",
    "Rows",
    "Trace",
    "TraceError",
    "VramlabError",
    "VramlabWarning",
    "cases",
    "colocate",
    "diff",
    "explain",
    "fidelity",
    "fleet_report",
    "gate",
    "load",
    "matrix",
    "oom_point",
    "plan",
    "serve_budget",
    "oracle",
    "recommend",
    "read_rows",
    "record",
    "record_script",
    "replay",
    "report",
    "run",
    "run_case",
    "stats",
    "sweep",
]
