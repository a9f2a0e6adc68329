#!/usr/bin/env python3
"""csv_to_rmm_log.py: a native CSV trace written as a RAPIDS RMM log
(`Thread,Time,Action,Pointer,Size,Stream`), for testing the RMM reader on
traces of any size: each allocation at a pointer of its own, a deferred
free logged when it completes, times one microsecond apart.

    python3 scripts/csv_to_rmm_log.py TRACE.csv OUT.csv
"""
import sys


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    live = {}  # id -> (pointer, size)
    ids = {}  # id text -> number
    n = 0
    with open(src) as f, open(dst, "w") as out:
        out.write("Thread,Time,Action,Pointer,Size,Stream\n")
        for line in f:
            if line.startswith("#") or line.startswith("action,"):
                continue
            cells = line.rstrip("\n").split(",")
            action = cells[0]
            secs, us = 36000 + n // 1_000_000, n % 1_000_000
            time = f"{secs // 3600}:{secs // 60 % 60:02}:{secs % 60:02}.{us:06}"
            if action == "alloc":
                ptr = 0x7F00_0000_0000 + len(ids) * 0x1000
                ids[cells[1]] = len(ids)
                stream = int(cells[3]) if len(cells) > 3 and cells[3] else 0
                live[cells[1]] = (ptr, cells[2])
                out.write(f"1,{time},allocate,{ptr:#x},{cells[2]},{stream:#x}\n")
            elif action in ("free", "free_completed"):
                ptr, size = live.pop(cells[1])
                out.write(f"1,{time},free,{ptr:#x},{size},0x0\n")
            else:
                continue
            n += 1


if __name__ == "__main__":
    main()
