//! Trace format v4 (CSV) and version 6 (`.vlt`): engine pools that sleep
//! and wake, and device memory outside PyTorch, read, written and read
//! back; and every malformed row refused with its line and reason.

use vramlab_traces::{Event, PrivatePoolKind, read_binary, read_csv, write_binary, write_csv};

const HYBRID: &str = "# vramlab trace v4
# pool.engine: engine 0,1
action,id,size,stream
raw_alloc,nccl,67108864
pool_create,engine
pool_enter,engine
alloc,w,209715200,0
pool_exit,engine
pool_sleep,engine
alloc,act,629145600,0
free,act
empty_cache
pool_wake,engine
raw_free,nccl
";

#[test]
fn engine_pools_and_outside_memory_read_and_write_back() {
    let t = read_csv(HYBRID.as_bytes(), "h.csv").unwrap();
    assert_eq!(t.pools.len(), 1);
    assert_eq!(t.pools[0].kind, PrivatePoolKind::Engine);
    assert!(t.has_tenant_events());
    assert_eq!(
        t.events[0],
        Event::RawAlloc {
            id: 0,
            size: 64 << 20
        }
    );
    assert_eq!(t.events[5], Event::PoolSleep { pool: 0 });
    assert_eq!(t.events[9], Event::PoolWake { pool: 0 });
    assert_eq!(t.events[10], Event::RawFree { id: 0 });
    assert_eq!(t.num_allocs(), 2, "outside memory is no PyTorch allocation");

    let mut csv = Vec::new();
    write_csv(&t, &mut csv, "out.csv").unwrap();
    let text = String::from_utf8(csv).unwrap();
    assert!(text.starts_with("# vramlab trace v4\n"), "{text}");
    assert!(text.contains("# pool.0: engine 0,1\n"), "{text}");
    assert!(
        text.contains("raw_alloc,0,67108864,\npool_create,0,,"),
        "{text}"
    );
    let again = read_csv(text.as_bytes(), "out.csv").unwrap();
    assert_eq!(again.events, t.events);

    let mut vlt = Vec::new();
    write_binary(&t, &mut vlt, false, "out.vlt").unwrap();
    assert_eq!(u16::from_le_bytes([vlt[8], vlt[9]]), 6, "version 6");
    let back = read_binary(&vlt[..], "out.vlt").unwrap();
    assert_eq!(back.events, t.events);
    assert_eq!(back.pools, t.pools);
}

#[test]
fn bad_rows_name_their_line_and_reason() {
    let cases = [
        (
            "action,id,size,stream\nraw_alloc,a,5\n",
            "t.csv:2: raw_alloc: rows of engine pools and of memory outside PyTorch need the format line '# vramlab trace v4' at the top of the file",
        ),
        (
            "# vramlab trace v3\n# pool.e: engine 0,1\naction,id,size,stream\n",
            "t.csv:2: engine pools need the format line '# vramlab trace v4' at the top of the file",
        ),
        (
            "# vramlab trace v4\naction,id,size,stream\nraw_alloc,a,5\nfree,a\n",
            "t.csv:4: free of id 'a', which is memory outside PyTorch (free it with raw_free)",
        ),
        (
            "# vramlab trace v4\naction,id,size,stream\nalloc,a,5\nraw_free,a\n",
            "t.csv:4: raw_free of id 'a', which is a device allocation (free it with free)",
        ),
        (
            "# vramlab trace v4\naction,id,size,stream\nraw_alloc,a,5,7\n",
            "t.csv:3: raw_alloc takes no stream",
        ),
        (
            "# vramlab trace v4\n# pool.m: mempool 0,1\naction,id,size,stream\npool_sleep,m\n",
            "t.csv:4: pool_sleep of pool 'm', which is not an engine pool (declare it '# pool.m: engine A,B')",
        ),
        (
            "# vramlab trace v4\n# pool.e: engine 0,1\naction,id,size,stream\npool_wake,e\n",
            "t.csv:4: pool_wake of pool 'e', which is already awake",
        ),
        (
            "# vramlab trace v4\n# pool.e: engine 0,1\naction,id,size,stream\npool_sleep,e\npool_sleep,e\n",
            "t.csv:5: pool_sleep of pool 'e', which is already asleep",
        ),
    ];
    for (input, want) in cases {
        let got = read_csv(input.as_bytes(), "t.csv").unwrap_err().to_string();
        assert_eq!(got, want, "input: {input:?}");
    }
}
