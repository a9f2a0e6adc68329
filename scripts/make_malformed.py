#!/usr/bin/env python3
"""Writes the malformed-input corpus of tests/malformed.rs (every file in
tests/malformed/ but README.md). Deterministic; run it from anywhere:

    python3 scripts/make_malformed.py

Each file is small and made here; tests/malformed/README.md lists what each one should
make vramlab say.
"""

import os
import pickle
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "malformed")
BASE = 0x7F0000000000
MIB = 1 << 20


def write(name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def entry(action, addr, size, **kw):
    e = {"action": action, "addr": addr, "size": size, "stream": 0}
    e.update(kw)
    return e


def snap(entries, segments=()):
    return pickle.dumps({"segments": list(segments), "device_traces": [entries]}, protocol=4)


GOOD = snap([entry("alloc", BASE, 512), entry("free_requested", BASE, 512),
             entry("free_completed", BASE, 512)])


class Evil:  # pickled by reference: GLOBAL / STACK_GLOBAL
    pass


# ---- pickles ----
write("truncated.pickle", GOOD[: len(GOOD) // 2])
bad = bytearray(GOOD)
bad[11] = 0xFF  # the first opcode after PROTO and FRAME
write("corrupted-opcode.pickle", bytes(bad))
write("global.pickle", pickle.dumps({"segments": [], "device_traces": [[os.system]]}, protocol=2))
write("stack-global.pickle", pickle.dumps({"device_traces": Evil}, protocol=4))
write("reduce.pickle", b"\x80\x04N)R.")  # NONE, EMPTY_TUPLE, REDUCE
write("not-a-dict.pickle", pickle.dumps([1, 2, 3], protocol=4))
write("no-snapshot-keys.pickle", pickle.dumps({"weights": [1.0]}, protocol=4))
# What _dump_snapshot writes with nothing on the GPU and no history.
write("empty-snapshot.pickle", pickle.dumps({"segments": [], "device_traces": [[]]}, protocol=4))
write("wrong-type-size.pickle", snap([entry("alloc", BASE, 512), entry("alloc", BASE + 512, "1024")]))
write("wrong-type-segments.pickle",
      pickle.dumps({"segments": {"a": 1}, "device_traces": []}, protocol=4))
write("negative-size.pickle", snap([entry("alloc", BASE, -5)]))
write("huge-size.pickle", snap([entry("alloc", BASE, 2**70)]))
write("unknown-block-state.pickle", snap([], [{
    "device": 0, "address": BASE, "total_size": 2 * MIB, "stream": 0,
    "segment_type": "small", "blocks": [{"address": BASE, "size": 2 * MIB, "state": "weird"}],
}]))
write("missing-addr.pickle", snap([{"action": "alloc", "size": 512, "stream": 0}]))
write("double-alloc.pickle", snap([entry("alloc", BASE, 512), entry("alloc", BASE, 512)]))
write("free-unknown-address.pickle", snap([entry("free_requested", BASE + 4096, 512),
                                           entry("free_completed", BASE + 4096, 512)]))
write("free-completed-twice.pickle", snap([
    entry("alloc", BASE, 512), entry("free_requested", BASE, 512),
    entry("free_completed", BASE, 512), entry("free_completed", BASE, 512)]))
M64 = (1 << 64) - 1
write("segment-past-address-space.pickle", snap(
    [entry("free_requested", M64 - 1000, 512), entry("free_completed", M64 - 1000, 512)],
    [{"device": 0, "address": M64 - 1000, "total_size": 4096, "stream": 0,
      "segment_type": "large",
      "blocks": [{"address": M64 - 1000, "size": 4096, "state": "active_allocated"}]}]))
write("impossible-request.pickle", snap(
    [entry("free_requested", BASE, 2**63), entry("free_completed", BASE, 2**63)],
    [{"device": 0, "address": BASE, "total_size": 20 * MIB, "stream": 0,
      "segment_type": "large", "blocks": [{"address": BASE, "size": 20 * MIB, "state": "inactive"}]}]))
deep = b"\x80\x04" + b"]" * 1200 + b"a" * 1199 + b"."  # EMPTY_LIST x1200, APPEND x1199
write("too-deep.pickle", deep)
write("cycle.pickle", b"\x80\x02]q\x00h\x00a.")  # l = []; l.append(l)
# One block, referenced 4096 times by one segment referenced 4096 times:
# 16M blocks from ~40 KB of pickle (Python's pickle memoizes the sharing).
block = {"address": BASE, "size": 512, "state": "inactive"}
seg = {"device": 0, "address": BASE, "total_size": 2 * MIB, "stream": 0,
       "segment_type": "large", "blocks": [block] * 4096}
write("shared-blocks.pickle", pickle.dumps({"segments": [seg] * 4096, "device_traces": [[]]}, protocol=4))

# ---- native CSV ----
H = "action,id,size,stream\n"
write("unknown-action.csv", H + "alloc,a,512\nrealloc,a,1024\n")
write("free-unknown-id.csv", H + "alloc,a,512\nfree,b\n")
write("double-free.csv", H + "alloc,a,512\nfree,a\nfree,a\n")
write("free-requested-twice.csv", H + "alloc,a,512\nfree_requested,a\nfree_requested,a\n")
write("free-completed-without-request.csv", H + "alloc,a,512\nfree_completed,a\n")
write("negative-size.csv", H + "alloc,a,-5\n")
write("huge-size.csv", H + "alloc,a,99999999999999999999\n")
write("text-size.csv", H + "alloc,a,12MB\n")
write("bad-stream.csv", H + "alloc,a,512,main\n")
write("too-many-columns.csv", H + "alloc,a,512,0,extra\n")
write("no-header.csv", "alloc,a,512\n")
write("wrong-version.csv", "# vramlab trace v7\n" + H)
write("bad-device-total.csv", "# device_total: -1\n" + H)
write("binary-garbage.csv", (H + "alloc,a,512\n").encode() + b"\xff\xfe\x00\x01 not text\n")

# ---- RMM logs ----
R = "Thread,Time,Action,Pointer,Size,Stream\n"
write("rmm-bad-size.csv", R + "1,10:00:00.000001,allocate,0x7f00,12kb,0x0\n")
write("rmm-negative-size.csv", R + "1,10:00:00.000001,allocate,0x7f00,-512,0x0\n")
write("rmm-free-unknown.csv", R + "1,10:00:00.000001,free,0x7f00,512,0x0\n")
write("rmm-double-allocate.csv", R + "1,10:00:00.000001,allocate,0x7f00,512,0x0\n"
      "1,10:00:00.000002,allocate,0x7f00,512,0x0\n")
write("rmm-missing-column.csv", R + "1,10:00:00.000001,allocate\n")
write("rmm-unknown-action.csv", R + "1,10:00:00.000001,reallocate,0x7f00,512,0x0\n")
write("rmm-bad-pointer.csv", R + "1,10:00:00.000001,allocate,nowhere,512,0x0\n")


# ---- native binary (.vlt) ----
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def meta(num_ids, num_events, streams=(0,)):
    # Meta { header { source, device_total, alloc_conf, framework, device,
    # extra }, streams, initial, num_ids, expected, notes, frames,
    # alloc_frames, num_events } in postcard.
    m = varint(1) + b"m" + b"\x00\x00\x00" + varint(0) + varint(0)
    m += varint(len(streams)) + b"".join(varint(s) for s in streams)
    m += b"\x00" + varint(num_ids) + b"\x00" + varint(0) + varint(0) + varint(0)
    return m + varint(num_events)


def alloc(i, size, stream=0):
    return b"\x00" + varint(i) + varint(stream) + varint(size)


def free(i):
    return b"\x01" + varint(i)


def vlt(m, events, count=None, version=1, flags=0, meta_len=None):
    body = struct.pack("<I", len(m) if meta_len is None else meta_len) + m
    if events:
        enc = varint(len(events)) + b"".join(events)
        n = len(events) if count is None else count
        body += struct.pack("<II", n, len(enc)) + enc
    body += struct.pack("<II", 0, 0)
    return b"VRAMLABT" + struct.pack("<HH", version, flags) + body


GOOD_VLT = vlt(meta(1, 2), [alloc(0, 512), free(0)])
write("truncated.vlt", GOOD_VLT[:-10])
write("bad-magic.vlt", b"VRAMLABX" + GOOD_VLT[8:])
write("future-version.vlt", vlt(meta(1, 2), [alloc(0, 512), free(0)], version=9))
write("unknown-flags.vlt", vlt(meta(1, 2), [alloc(0, 512), free(0)], flags=0x8))
write("huge-metadata-length.vlt", vlt(meta(1, 2), [alloc(0, 512), free(0)], meta_len=0xFFFFFFFF))
write("billions-of-events.vlt", vlt(meta(1, 4_000_000_000), [alloc(0, 512), free(0)]))
write("too-many-events.vlt", vlt(meta(1, 1 << 40), [alloc(0, 512), free(0)]))
write("fewer-events-declared.vlt", vlt(meta(1, 1), [alloc(0, 512), free(0)]))
write("huge-chunk.vlt", vlt(meta(1, 2), [alloc(0, 512), free(0)], count=1_000_000))
write("billions-of-ids.vlt", vlt(meta(4_000_000_000, 2), [alloc(0, 512), free(0)]))
write("id-out-of-range.vlt", vlt(meta(1, 2), [alloc(0, 512), free(7)]))
write("stream-out-of-range.vlt", vlt(meta(1, 2), [alloc(0, 512, stream=3), free(0)]))
write("free-before-alloc.vlt", vlt(meta(2, 3), [alloc(0, 512), free(1), alloc(1, 512)]))
write("double-free.vlt", vlt(meta(1, 3), [alloc(0, 512), free(0), free(0)]))

# ---- settings strings (passed to `vramlab conf` or `--conf`) ----
write("conf-not-a-number.conf", "max_split_size_mb:abc")
write("conf-too-small.conf", "max_split_size_mb:4")
write("conf-bad-bool.conf", "expandable_segments:Maybe")
write("conf-unknown-key.conf", "max_split_size:128")
write("conf-bad-divisions.conf", "roundup_power2_divisions:[256:3]")
write("conf-gc-out-of-range.conf", "garbage_collection_threshold:1.5")
write("conf-bad-backend.conf", "backend:hipMallocAsync")
write("bfc-bad-limit.conf", "memory_limit:lots")
write("stitch-bad-level.conf", "defragment_level:7")
write("async-unknown-key.conf", "release_threshold:1GiB,pool:default")
