//! `vramlab run-case CASE` (a developer command, what `vramlab.run_case`
//! calls): one case of a sweep planned with `vramlab sweep --plan`,
//! replayed alone; prints its row as JSON, the row the whole sweep gives.
//!
//! The traces it reads stay parsed for the next case of the same file in
//! this process (the last few, keyed by file, size, modification time,
//! device and release): a worker that runs many settings of one trace
//! reads it once.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use clap::Args;
use vramlab_allocator::TorchVersion;
use vramlab_replay::{Inputs, Pick, SweepCase, run_case};
use vramlab_traces::Trace;

/// Arguments of `vramlab run-case`.
#[derive(Debug, Args)]
pub struct RunCaseArgs {
    /// The case as JSON (one element of `vramlab sweep --plan`'s list), or
    /// `@FILE` to read it from a file.
    #[arg(value_name = "CASE")]
    case: String,
}

/// What identifies a parsed trace in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    device: u32,
    torch: Option<String>,
}

/// How many parsed traces a process keeps.
const CACHED: usize = 4;

/// The traces parsed last, newest last.
static CACHE: Mutex<Vec<(Key, Arc<Trace>)>> = Mutex::new(Vec::new());

fn key(case: &SweepCase) -> Result<Key> {
    let path = PathBuf::from(&case.path);
    let meta = std::fs::metadata(&path).with_context(|| format!("cannot read {}", case.path))?;
    Ok(Key {
        path,
        len: meta.len(),
        modified: meta.modified().ok(),
        device: case.device,
        torch: case.read_torch_version.clone(),
    })
}

/// The case's trace: from the cache, or read (and cached).
fn trace_of(case: &SweepCase) -> Result<Arc<Trace>> {
    let k = key(case)?;
    if let Ok(cache) = CACHE.lock() {
        if let Some((_, t)) = cache.iter().find(|(c, _)| *c == k) {
            return Ok(Arc::clone(t));
        }
    }
    let torch: Option<TorchVersion> = match &case.read_torch_version {
        Some(v) => Some(v.parse().map_err(anyhow::Error::msg)?),
        None => None,
    };
    let loaded = Inputs::new([&k.path])
        .pick(Pick::Pool(Some(case.device)))
        .torch(torch)
        .read()?;
    let Some(input) = loaded.inputs.into_iter().find(|i| i.label == case.trace) else {
        bail!(
            "case {}: {} holds no trace named {} (device {})",
            case.index,
            case.path,
            case.trace,
            case.device
        );
    };
    let t = Arc::new(input.trace);
    if let Ok(mut cache) = CACHE.lock() {
        if cache.len() >= CACHED {
            cache.remove(0);
        }
        cache.push((k, Arc::clone(&t)));
    }
    Ok(t)
}

/// Runs `run-case`.
pub fn run(args: RunCaseArgs) -> Result<()> {
    let text = match args.case.strip_prefix('@') {
        Some(file) => {
            std::fs::read_to_string(file).with_context(|| format!("cannot read {file}"))?
        }
        None => args.case,
    };
    let case: SweepCase = serde_json::from_str(&text)
        .map_err(|e| crate::invoke::BadArgument(format!("the case is not a sweep case: {e}")))?;
    let trace = trace_of(&case)?;
    let row = run_case(&case, &trace)?;
    crate::output::write_stdout(&format!("{}\n", serde_json::to_string(&row)?));
    Ok(())
}
