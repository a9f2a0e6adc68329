//! Several tenants on one simulated GPU (`replay_colocated`): each
//! tenant's allocator sees what the others hold, frees its own cache and
//! retries when `cudaMalloc` fails (PyTorch's path), then runs out of
//! memory. The figures follow PyTorch's rules for large requests (a
//! request above 10 MiB gets a segment of its size rounded to 2 MiB) on a
//! 64 MiB device.

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::{ReplayOptions, Scenario, Step, Tenant, replay_colocated};
use vramlab_traces::{Trace, read_csv};

const MIB: u64 = 1 << 20;

fn trace(csv: &str) -> Trace {
    read_csv(csv.as_bytes(), "t.csv").unwrap()
}

fn tenant<'t>(name: &str, t: &'t Trace) -> Tenant<'t> {
    Tenant {
        name: name.into(),
        trace: t,
        scenario: Scenario::native(AllocConf::new(TorchVersion::new(2, 15))),
        kv_util: None,
    }
}

/// A's first phase, then B's, then what is left of each.
fn a_then_b() -> Vec<Step> {
    vec![
        Step {
            tenant: 0,
            until_mark: true,
        },
        Step {
            tenant: 1,
            until_mark: false,
        },
    ]
}

fn opts() -> ReplayOptions {
    ReplayOptions::default()
}

#[test]
fn a_tenant_that_over_commits_runs_out_where_the_other_holds_the_memory() {
    let a =
        trace("action,id,size,stream\n# phase: load\nalloc,w,41943040,0\n# phase: train\nfree,w\n");
    let b = trace("action,id,size,stream\nalloc,kv,31457280,0\nfree,kv\n");
    let tenants = [tenant("trainer", &a), tenant("rollout", &b)];
    let run = replay_colocated(&tenants, Some(64 * MIB), None, &a_then_b(), &opts()).unwrap();
    // 24 MiB free for a 30 MiB segment, and B has no cache to give back.
    assert_eq!(run.first_oom, Some((1, 0)));
    assert!(run.runs[1].oom.is_some());
    assert_eq!(run.runs[0].summary.peak_reserved_bytes, 40 * MIB);
    assert_eq!(run.device_peak, 40 * MIB);
}

#[test]
fn another_tenants_cache_is_invisible_until_it_empties_it() {
    let cached =
        trace("action,id,size,stream\n# phase: load\nalloc,w,41943040,0\nfree,w\n# phase: sync\n");
    let b = trace("action,id,size,stream\nalloc,kv,31457280,0\nfree,kv\n");
    let tenants = [tenant("trainer", &cached), tenant("rollout", &b)];
    let run = replay_colocated(&tenants, Some(64 * MIB), None, &a_then_b(), &opts()).unwrap();
    // A's free block stays reserved: B cannot have it.
    assert_eq!(run.first_oom, Some((1, 0)));
    assert_eq!(run.steps[0].reserved, vec![40 * MIB, 0]);

    let emptied = trace(
        "action,id,size,stream\n# phase: load\nalloc,w,41943040,0\nfree,w\nempty_cache\n# phase: sync\n",
    );
    let tenants = [tenant("trainer", &emptied), tenant("rollout", &b)];
    let run = replay_colocated(&tenants, Some(64 * MIB), None, &a_then_b(), &opts()).unwrap();
    assert_eq!(run.first_oom, None);
    assert_eq!(run.runs[1].summary.peak_reserved_bytes, 30 * MIB);
    assert_eq!(run.steps[0].reserved, vec![0, 0]);
    assert_eq!(run.steps[1].reserved, vec![0, 30 * MIB]);
}

#[test]
fn a_tenant_frees_its_own_cache_and_retries_when_the_device_is_full() {
    let a =
        trace("action,id,size,stream\n# phase: load\nalloc,w,31457280,0\n# phase: end\nfree,w\n");
    // B caches 20 MiB, then asks 30 MiB: 14 MiB free, so its cache goes
    // back and the request is retried (num_alloc_retries 1).
    let b =
        trace("action,id,size,stream\nalloc,x,20971520,0\nfree,x\nalloc,y,31457280,0\nfree,y\n");
    let tenants = [tenant("trainer", &a), tenant("rollout", &b)];
    let run = replay_colocated(&tenants, Some(64 * MIB), None, &a_then_b(), &opts()).unwrap();
    assert_eq!(run.first_oom, None);
    let rb = &run.runs[1].summary;
    assert_eq!(rb.num_alloc_retries, 1);
    assert_eq!(rb.peak_reserved_bytes, 30 * MIB);
    assert_eq!(run.device_peak, 60 * MIB);
}

#[test]
fn a_schedule_that_names_no_such_tenant_is_refused() {
    let a = trace("action,id,size,stream\nalloc,w,1024,0\n");
    let tenants = [tenant("only", &a)];
    let bad = [Step {
        tenant: 3,
        until_mark: false,
    }];
    let err = replay_colocated(&tenants, Some(64 * MIB), None, &bad, &opts()).unwrap_err();
    assert_eq!(err.to_string(), "the schedule names tenant 3, of 1");
}
