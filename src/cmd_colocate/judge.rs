//! `colocate --oracle`: the same tenants as PyTorch processes (the
//! official wheel) on one shared fake GPU, released phase by phase in the
//! schedule's order, against the replay: each tenant's peak reserved,
//! cudaMalloc calls, retries and first OOM, the device's used memory after
//! each step, and (with --search-util) the bisection's answer.

use anyhow::Result;
use serde::Serialize;
use vramlab_allocator::Placement;
use vramlab_oracle::fake::FakeDir;
use vramlab_oracle::{
    ColocatedJudge, ColocatedJudged, ColocatedProcess, Installer, Interpreter, judge_colocated,
};
use vramlab_replay::{Step, Tenant};

use super::search::{self, UtilSearch};
use super::{ColocateOut, TenantRow};
use crate::render::table::{bytes, count};

/// The card and the judge's release.
pub(super) struct Setup<'a> {
    pub torch: &'a str,
    pub placement: Placement,
    pub capacity: u64,
    pub total: Option<u64>,
}

/// One tenant as PyTorch's process and vramlab's replay saw it.
#[derive(Debug, Serialize)]
struct JudgedRow {
    name: String,
    torch_peak_reserved_bytes: u64,
    torch_num_device_alloc: Option<u64>,
    torch_num_alloc_retries: u64,
    torch_oom_event: Option<u64>,
    exact: bool,
}

/// The device after one step, both ways.
#[derive(Debug, Serialize)]
struct JudgedStep {
    tenant: String,
    torch_device_used_bytes: u64,
    vramlab_device_used_bytes: Option<u64>,
    exact: bool,
}

/// What the judge said.
#[derive(Debug, Serialize)]
pub(super) struct Judged {
    torch_version: String,
    tenants: Vec<JudgedRow>,
    steps: Vec<JudgedStep>,
    /// The replay made as many steps as the processes.
    steps_exact: bool,
    /// The same bisection, each value a run of PyTorch's processes.
    #[serde(skip_serializing_if = "Option::is_none")]
    search: Option<JudgedSearch>,
}

/// The judge's bisection.
#[derive(Debug, Serialize)]
struct JudgedSearch {
    torch: UtilSearch,
    exact: bool,
}

impl Judged {
    /// The judge's answers, a line each, and the verdict.
    pub(super) fn print(&self) {
        for t in &self.tenants {
            outln!(
                "oracle: {} [torch {}]: peak reserved {}, cudaMalloc {}, retries {}, OOM {}: {}",
                t.name,
                self.torch_version,
                bytes(t.torch_peak_reserved_bytes),
                t.torch_num_device_alloc.map_or("-".into(), count),
                count(t.torch_num_alloc_retries),
                t.torch_oom_event
                    .map_or("none".into(), |e| format!("event {}", count(e))),
                if t.exact { "exact" } else { "DIFFERS" }
            );
        }
        let exact = self.steps.iter().filter(|s| s.exact).count();
        outln!(
            "oracle: the device's used memory after each step: {exact} of {} steps exact{}",
            self.steps.len(),
            if self.steps_exact {
                ""
            } else {
                " (the replay made a different number of steps)"
            }
        );
        if let Some(s) = &self.search {
            outln!(
                "oracle: the same bisection with PyTorch's processes: {} ({} runs): {}",
                s.torch
                    .largest_fitting
                    .map_or("fits at no utilization".into(), |u| format!("{u:.2}")),
                s.torch.tried.len(),
                if s.exact { "exact" } else { "DIFFERS" }
            );
        }
        let differing = self.differing();
        outln!(
            "{} (PyTorch's processes on one shared fake GPU vs vramlab's replay)",
            if differing == 0 {
                "every figure exact".to_string()
            } else {
                format!("{differing} figure(s) differ")
            }
        );
    }

    /// Figures that differ from the processes'.
    pub(super) fn differing(&self) -> usize {
        self.tenants.iter().filter(|t| !t.exact).count()
            + self.steps.iter().filter(|s| !s.exact).count()
            + usize::from(!self.steps_exact)
            + usize::from(self.search.as_ref().is_some_and(|s| !s.exact))
    }
}

/// The wheel and its fake device.
struct Wheel {
    interp: Interpreter,
    fake: FakeDir,
}

fn wheel(torch: &str) -> Result<Wheel> {
    let interp = Installer::default().ensure(torch)?;
    let lib = vramlab_oracle::fake::locate()?;
    let fake =
        vramlab_oracle::fake::prepare(&lib, &interp.wheel.soname, &vramlab_oracle::cache_dir())?;
    Ok(Wheel { interp, fake })
}

/// One run of the processes, tenant `searched` at `util` when given.
fn processes_run(
    w: &Wheel,
    setup: &Setup<'_>,
    tenants: &[Tenant<'_>],
    rows: &[TenantRow],
    schedule: &[Step],
    searched: Option<(usize, f64)>,
) -> Result<ColocatedJudged> {
    let scratch = crate::scratch::Scratch::new(None, "colocate");
    let processes: Vec<ColocatedProcess<'_>> = tenants
        .iter()
        .zip(rows)
        .enumerate()
        .map(|(i, (t, r))| ColocatedProcess {
            label: t.name.clone(),
            trace: t.trace,
            conf: if r.conf == "default" {
                String::new()
            } else {
                r.conf.clone()
            },
            kv_util: match searched {
                Some((s, u)) if s == i => Some(u),
                _ => t.kv_util,
            },
        })
        .collect();
    let order: Vec<(usize, bool)> = schedule.iter().map(|s| (s.tenant, s.until_mark)).collect();
    Ok(judge_colocated(
        &processes,
        &order,
        &ColocatedJudge {
            interp: &w.interp,
            fake: &w.fake,
            work: scratch.dir().to_path_buf(),
            capacity: setup.capacity,
            total: setup.total,
            placement: setup.placement,
        },
    )?)
}

/// Judges `out` (vramlab's answer for `tenants`).
pub(super) fn judge(
    setup: &Setup<'_>,
    tenants: &[Tenant<'_>],
    schedule: &[Step],
    out: &ColocateOut,
    searched: Option<usize>,
) -> Result<Judged> {
    let w = wheel(setup.torch)?;
    let torch = processes_run(&w, setup, tenants, &out.tenants, schedule, None)?;
    let torch_version = torch
        .processes
        .first()
        .map_or_else(String::new, |p| p.torch_version.clone());
    let rows = out
        .tenants
        .iter()
        .zip(&torch.processes)
        .map(|(r, t)| JudgedRow {
            exact: t.peak_reserved_bytes == r.peak_reserved_bytes
                && t.num_device_alloc.is_none_or(|n| n == r.num_device_alloc)
                && t.num_alloc_retries == r.num_alloc_retries
                && t.oom_event == r.oom_event,
            name: r.name.clone(),
            torch_peak_reserved_bytes: t.peak_reserved_bytes,
            torch_num_device_alloc: t.num_device_alloc,
            torch_num_alloc_retries: t.num_alloc_retries,
            torch_oom_event: t.oom_event,
        })
        .collect();
    let name = |i: usize| tenants.get(i).map_or(String::new(), |t| t.name.clone());
    let steps: Vec<JudgedStep> = torch
        .used_after_steps
        .iter()
        .enumerate()
        .map(|(k, &(i, used))| {
            let ours = out
                .steps
                .get(k)
                .filter(|s| s.tenant == name(i))
                .map(|s| s.device_used_bytes);
            JudgedStep {
                tenant: name(i),
                torch_device_used_bytes: used,
                vramlab_device_used_bytes: ours,
                exact: ours == Some(used),
            }
        })
        .collect();
    let steps_exact = steps.len() == out.steps.len();
    let search = match (searched, &out.search) {
        (Some(i), Some(ours)) => {
            let theirs = search::largest_fitting(&ours.tenant, |u| {
                let r = processes_run(&w, setup, tenants, &out.tenants, schedule, Some((i, u)))?;
                let no_room = r
                    .processes
                    .get(i)
                    .and_then(|p| p.oom_message.as_deref())
                    .is_some_and(|m| m.starts_with(vramlab_replay::KV_NO_ROOM));
                Ok(if r.processes.iter().all(|p| p.oom_event.is_none()) {
                    search::Outcome::Fits
                } else if no_room {
                    search::Outcome::TooSmall
                } else {
                    search::Outcome::TooBig
                })
            })?;
            Some(JudgedSearch {
                exact: theirs.largest_fitting == ours.largest_fitting
                    && theirs.smallest_with_room == ours.smallest_with_room,
                torch: theirs,
            })
        }
        _ => None,
    };
    Ok(Judged {
        torch_version,
        tenants: rows,
        steps,
        steps_exact,
        search,
    })
}
