#!/usr/bin/env python3
"""The allocator-setting keys of every PyTorch release, read from the wheels.

For each release X.Y from 2.1 on (its newest patch on PyPI), reads the two
libraries of the Linux x86-64 wheel that parse `PYTORCH_ALLOC_CONF` —
`torch/lib/libc10_cuda.so` (the CUDA allocator's own keys) and
`torch/lib/libc10.so` (the device-generic `AcceleratorAllocatorConfig` of
2.10+, which also holds the pinned host allocator's newer keys) — without
downloading the wheel: HTTP range requests fetch the zip's central directory
and the two members only (about 1 MB a release). Every string of those
libraries that looks like a setting key (`word_word`, with one of the
allocator's stems) is a candidate; the first release that has it is written
to torch/data/release-keys.tsv, which torch/src/keys.rs's
table must agree with (its test says where they part).

    python3 scripts/release_keys.py            # rewrite torch/data/release-keys.tsv
    python3 scripts/release_keys.py --check    # exit 1 if it would change (releases newer
                                               # than the table's newest are named, not checked)

Needs PyPI (PIP_INDEX_URL's host is not used: the JSON API of pypi.org).
"""

import json
import pathlib
import re
import struct
import sys
import urllib.parse
import urllib.request
import zlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "torch" / "data" / "release-keys.tsv"
API = "https://pypi.org/pypi/torch/json"
MEMBERS = ("torch/lib/libc10_cuda.so", "torch/lib/libc10.so")
#: Stems of the allocator's setting keys; a string with one of them and the
#: shape of a key is a candidate.
STEMS = re.compile(
    r"^(backend|max_split_size_mb|max_non_split_rounding_mb|roundup_power2_divisions|"
    r"garbage_collection_threshold|expandable_segments\w*|release_lock_on_\w+|pinned_\w+|"
    r"graph_capture_record_stream_reuse|per_process_memory_fraction|large_segment_size_mb|"
    r"throw_on_cudamalloc_oom)$"
)
#: Strings with those stems that are not keys (function and field names).
NOT_KEYS = {"pinned_use_host_register", "pinned_memory"}


def get(url, first=None, last=None):
    headers = {} if first is None else {"Range": f"bytes={first}-{last}"}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=120) as r:
        return r.read()


def members(url, size, names):
    """The bytes of the zip members `names`, read by range requests."""
    tail = get(url, max(0, size - 65_557), size - 1)
    eocd = tail.rfind(b"PK\x05\x06")
    cd_size, cd_off = struct.unpack_from("<II", tail, eocd + 12)
    if cd_off == 0xFFFFFFFF:  # zip64
        loc = tail.rfind(b"PK\x06\x07")
        (z64,) = struct.unpack_from("<Q", tail, loc + 8)
        rec = get(url, z64, z64 + 55)
        cd_size, cd_off = struct.unpack_from("<QQ", rec, 40)
    cd = get(url, cd_off, cd_off + cd_size - 1)
    found, i = {}, 0
    while i < len(cd) and cd[i:i + 4] == b"PK\x01\x02":
        method, = struct.unpack_from("<H", cd, i + 10)
        csize, usize = struct.unpack_from("<II", cd, i + 20)
        nlen, elen, clen = struct.unpack_from("<HHH", cd, i + 28)
        (local,) = struct.unpack_from("<I", cd, i + 42)
        name = cd[i + 46:i + 46 + nlen].decode()
        extra = cd[i + 46 + nlen:i + 46 + nlen + elen]
        if name in names:
            # zip64 extra field: the 0xFFFFFFFF values, in order.
            j, vals = 0, []
            while j + 4 <= len(extra):
                tag, ln = struct.unpack_from("<HH", extra, j)
                if tag == 1:
                    vals = list(struct.unpack_from("<" + "Q" * (ln // 8), extra, j + 4))
                j += 4 + ln
            if usize == 0xFFFFFFFF:
                usize = vals.pop(0)
            if csize == 0xFFFFFFFF:
                csize = vals.pop(0)
            if local == 0xFFFFFFFF:
                local = vals.pop(0)
            head = get(url, local, local + 29)
            ln, le = struct.unpack_from("<HH", head, 26)
            start = local + 30 + ln + le
            data = get(url, start, start + csize - 1)
            found[name] = zlib.decompress(data, -15) if method == 8 else data
        i += 46 + nlen + elen + clen
    return found


def keys_of(blob):
    """Whole C strings (NUL on both sides) shaped like a key: a string the
    compiler split into immediates, or a fragment of a longer one, is not."""
    return {s.decode() for s in re.findall(rb"(?<=\x00)[a-z][a-z0-9_]{2,60}(?=\x00)", blob)
            if STEMS.match(s.decode()) and s.decode() not in NOT_KEYS
            and all(len(part) >= 2 for part in s.decode().split("_"))}


def release_wheels():
    data = json.load(urllib.request.urlopen(API, timeout=60))
    newest = {}
    for v, files in data["releases"].items():
        m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", v)
        if not m or (int(m[1]), int(m[2])) < (2, 1):
            continue
        wheels = [f for f in files if f["filename"].endswith("manylinux_2_28_x86_64.whl")
                  or f["filename"].endswith("manylinux1_x86_64.whl")
                  or f["filename"].endswith("manylinux2014_x86_64.whl")]
        wheels = [f for f in wheels if "-cp311-" in f["filename"]]
        if not wheels:
            continue
        key = (int(m[1]), int(m[2]))
        if key not in newest or int(m[3]) > newest[key][0]:
            newest[key] = (int(m[3]), urllib.parse.urljoin(API, wheels[0]["url"]), wheels[0]["size"], v)
    return [(f"{a}.{b}",) + newest[(a, b)][1:] for a, b in sorted(newest)]


def render(through=None):
    """The TSV; with `through` (X.Y), releases after it are left out (and
    named on stderr): a check must not fail the day PyTorch publishes one."""
    first = {}
    lines = ["# key\tfirst release (read from each release's wheel by scripts/release_keys.py; newest patch)"]
    for release, url, size, full in release_wheels():
        if through and tuple(map(int, release.split("."))) > through:
            print(f"torch {full} is on PyPI and not in the table: run bash scripts/new_release.sh {release}",
                  file=sys.stderr)
            continue
        libs = members(url, size, MEMBERS)
        keys = set().union(*(keys_of(b) for b in libs.values()))
        print(f"torch {full}: {len(keys)} keys in {', '.join(sorted(libs))}", file=sys.stderr)
        for k in keys:
            first.setdefault(k, release)
    order = lambda kv: (tuple(int(x) for x in kv[1].split(".")), kv[0])
    lines += [f"{k}\t{r}" for k, r in sorted(first.items(), key=order)]
    return "\n".join(lines) + "\n"


def main():
    through = None
    if "--check" in sys.argv and OUT.exists():
        rows = [l.split("\t") for l in OUT.read_text().splitlines() if l and not l.startswith("#")]
        through = max(tuple(map(int, r.split("."))) for _, r in rows)
    text = render(through)
    if "--check" in sys.argv:
        if OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run python3 scripts/release_keys.py", file=sys.stderr)
            sys.exit(1)
        return
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
