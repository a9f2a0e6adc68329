#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/.

Every seed is made here from scratch (tiny hand-written snapshots, CSV
traces, RMM logs, settings strings); none is a copy of a recorded trace.
The binary (.vlt) seeds are converted from the CSV and snapshot seeds by
`vramlab convert` (see scripts/fuzz.sh --seeds).

    python3 scripts/make_fuzz_seeds.py
"""

import os
import pickle
import random
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus")
BASE = 0x7F0000000000
MIB = 1 << 20


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def frames(name):
    return [{"filename": "train.py", "line": 10, "name": name}]


def entry(action, addr, size, stream=0, **kw):
    e = {"action": action, "addr": addr, "size": size, "stream": stream}
    e.update(kw)
    return e


def snapshots():
    """Small snapshots covering the shapes the converter handles."""
    fr = frames("forward")
    # 1. A recording from the start: a segment, two allocations, frees.
    seg = BASE
    s1 = {
        "segments": [
            {
                "device": 0,
                "address": seg,
                "total_size": 2 * MIB,
                "allocated_size": 512,
                "active_size": 512,
                "requested_size": 100,
                "stream": 0,
                "segment_type": "small",
                "segment_pool_id": (0, 0),
                "is_expandable": False,
                "frames": fr,
                "blocks": [
                    {"address": seg, "size": 512, "requested_size": 100,
                     "state": "active_allocated", "frames": fr},
                    {"address": seg + 512, "size": 2 * MIB - 512,
                     "state": "inactive"},
                ],
            }
        ],
        "device_traces": [[
            entry("segment_alloc", seg, 2 * MIB, frames=fr, time_us=1),
            entry("alloc", seg, 512, frames=fr, time_us=2),
            entry("alloc", seg + 512, 1024, frames=fr, time_us=3),
            entry("free_requested", seg + 512, 1024, frames=fr),
            entry("free_completed", seg + 512, 1024, frames=fr),
        ]],
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": "",
            "max_split_size": -1,
            "garbage_collection_threshold": 0.0,
            "expandable_segments": False,
            "roundup_power2_divisions": {"1": 0, "2": 0},
        },
    }
    # 2. Mid-run: the trace frees a block it never allocated.
    big = BASE + 64 * MIB
    s2 = {
        "segments": [
            {
                "device": 0, "address": big, "total_size": 20 * MIB,
                "stream": 0, "segment_type": "large", "is_expandable": False,
                "blocks": [
                    {"address": big, "size": 4 * MIB, "requested_size": 4 * MIB,
                     "state": "active_allocated"},
                    {"address": big + 4 * MIB, "size": 16 * MIB, "state": "inactive"},
                ],
            }
        ],
        "device_traces": [[
            entry("free_requested", big + 4 * MIB, 3 * MIB),
            entry("free_completed", big + 4 * MIB, 3 * MIB),
            entry("alloc", big + 4 * MIB, 2 * MIB),
            entry("free_requested", big + 4 * MIB, 2 * MIB),
            entry("free_completed", big + 4 * MIB, 2 * MIB),
            entry("segment_free", BASE + 128 * MIB, 2 * MIB),
        ]],
    }
    # 3. An OOM, a snapshot marker, an unknown action, two devices.
    s3 = {
        "segments": [],
        "device_traces": [
            [
                entry("oom", 0, 1 << 40, device_free=123),
                entry("snapshot", 0, 0),
                {"action": "user_defined", "addr": None, "size": 0, "stream": 0},
                entry("weird_action", 0, 0),
            ],
            [entry("alloc", BASE, 512, stream=7), entry("free_requested", BASE, 512, stream=7),
             entry("free_completed", BASE, 512, stream=7)],
        ],
    }
    # 4. Expandable segments: map / unmap.
    s4 = {
        "segments": [],
        "device_traces": [[
            entry("segment_map", BASE, 20 * MIB),
            entry("alloc", BASE, 3 * MIB),
            entry("free_requested", BASE, 3 * MIB),
            entry("free_completed", BASE, 3 * MIB),
            entry("segment_unmap", BASE, 20 * MIB),
        ]],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                               "expandable_segments": True},
    }
    # 5. State only (no trace), external annotations.
    s5 = {"segments": s1["segments"], "device_traces": [[]],
          "external_annotations": [{"device": 0, "stage": "START"}]}
    return [s1, s2, s3, s4, s5]


def pickles():
    """Plain-data pickles of every protocol, sharing and odd types."""
    shared = [1, 2, 3]
    values = [
        None, True, 0, -1, 255, 65535, 2**31, -(2**63), 2**64, -(2**100),
        1.5, float("inf"), "", "text", "é\u00ff\U0001F600", b"bytes", bytearray(b"ba"),
        [], (), {}, set(), frozenset(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4),
        {"a": shared, "b": shared}, [[[]]], {(1, 2): "tuple key", frozenset([1]): 2},
        {i: str(i) for i in range(40)}, set(range(40)),
    ]
    out = []
    for proto in range(0, 6):
        for i, v in enumerate(values):
            try:
                out.append((f"p{proto}-{i}", pickle.dumps(v, protocol=proto)))
            except Exception:
                pass
    return out


CSV = {
    "basic.csv": """# vramlab trace v1
# source: seed
# device_total: 1073741824
# alloc_conf: expandable_segments:True
# framework: torch 2.11
# model: tiny
action,id,size,stream
alloc,a,4096,0
alloc,b,1048576
alloc,c,0
alloc,d,25165824,7
free,a
free_requested,b
free_completed,b
empty_cache,,,
free,c
free,d
alloc,a,512,0x10
free,a
""",
    "streams.csv": "action,id,size,stream\nalloc,x,100,-1\nalloc,y,3000000,0xff\nfree_requested,x\nfree,y\nfree_completed,x\n",
    "oversize.csv": "# device: 1\naction,id,size,stream\nalloc,h,1152921504606846975\nalloc,i,1152921504606846976\nfree,h\n",
    "empty.csv": "action,id,size,stream\n",
    "crlf.csv": "action,id,size,stream\r\nalloc,1,10\r\nfree,1\r\n",
}

RMM = {
    "basic.csv": """Thread,Time,Action,Pointer,Size,Stream
1,10:00:00.000100,allocate,0x7f0000000000,256,0x0
2,10:00:00.000050,allocate,0x7f0000000100,1024,0x5
1,10:00:00.000200,free,0x7f0000000000,256,0x0
1,10:00:00.000300,allocate failure,0x0,1099511627776,0x0
2,23:59:59.999999,deallocate,0x7f0000000100,1024,0x5
1,00:00:00.000001,allocate,0x7f0000000200,4096,0x0
""",
    "reordered.csv": "Pointer,Action,Size,Stream\n123,allocate,10,0\n123,free,10,0\n",
}

SETTINGS = [
    "", "default", "expandable_segments:True", "max_split_size_mb:128",
    "roundup_power2_divisions:4", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    "garbage_collection_threshold:0.6,max_split_size_mb:200",
    "backend:cudaMallocAsync", "backend:native,expandable_segments:False",
    "max_non_split_rounding_mb:64", "large_segment_size_mb:40,max_split_size_mb:40",
    "release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:True,pinned_num_register_threads:8",
    "pinned_use_background_threads:True", "per_process_memory_fraction:0.5",
    "graph_capture_record_stream_reuse:True", "pinned_reserve_segment_size_mb:16",
    "max_split_size_mb : 128 , expandable_segments : True",
    # policy settings
    "allow_growth:true,memory_limit:8GiB,garbage_collection:true",
    "preallocate:0.5", "memory_fraction:0.9,fragmentation_fraction:0.1",
    "release_threshold:1GiB,reuse_across_streams:false", "release_threshold:max",
    "stitch:true,fragment_limit:64MiB,reuse_limit:1.5,defragment_level:2,max_pieces:8,gc_limit:10GiB",
    "max_pieces:unlimited",
]


def main():
    for i, s in enumerate(snapshots()):
        data = pickle.dumps(s, protocol=4)
        write("snapshot", f"snap{i + 1}.pickle", data)
        write("pickle", f"snap{i + 1}.pickle", data)
    for s in snapshots()[:2]:
        write("snapshot", "snap1-p2.pickle", pickle.dumps(s, protocol=2))
    for name, data in pickles():
        write("pickle", name, data)
    for name, text in CSV.items():
        write("csv", name, text)
    for name, text in RMM.items():
        write("rmm", name, text)
    for i, s in enumerate(SETTINGS):
        write("settings", f"s{i:02}", s)
    rng = random.Random(9)
    for t in ("replay", "snapshot_model"):
        for i in range(8):
            write(t, f"random{i}", bytes(rng.randrange(256) for _ in range(64 * (i + 1))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
