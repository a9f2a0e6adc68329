//! The fake CUDA device for one wheel: vramlab-fakecuda's shared library
//! copied under the soname of the wheel's CUDA runtime, with
//! `libcuda.so.1` and `libnvidia-ml.so.1` as links to the same file, and
//! the environment that loads it; and the one place that starts a Python
//! process on it (`FakeDir::python`).

use std::path::{Path, PathBuf};
use std::process::Command;

use vramlab_allocator::Placement;

use crate::OracleError;
use crate::elf::{patch_soname, soname};
use crate::install::Interpreter;

/// The library's file name as cargo builds it.
pub(crate) const LIBRARY: &str = "libvramlab_fakecuda.so";

/// Finds the fake CUDA library: `$VRAMLAB_FAKECUDA`, else next to the
/// running program (cargo puts both in `target/<profile>/`), else in the
/// `target/release` or `target/debug` of the source tree this was built from.
pub fn locate() -> Result<PathBuf, OracleError> {
    if let Some(p) = std::env::var_os("VRAMLAB_FAKECUDA").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(OracleError::Fake(format!(
                "VRAMLAB_FAKECUDA={} is not a file",
                p.display()
            )))
        };
    }
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            candidates.push(dir.join(LIBRARY));
            if let Some(up) = dir.parent() {
                candidates.push(up.join(LIBRARY));
            }
        }
    }
    let tree = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target");
    candidates.push(tree.join("release").join(LIBRARY));
    candidates.push(tree.join("debug").join(LIBRARY));
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        OracleError::Fake(format!(
            "the fake CUDA library ({LIBRARY}) was not found next to this program or in {}: \
             build it with `cargo build --release -p vramlab-fakecuda`, or set VRAMLAB_FAKECUDA to its path",
            tree.display()
        ))
    })
}

/// A folder holding the fake under one soname.
#[derive(Debug, Clone)]
pub struct FakeDir {
    /// The folder.
    pub dir: PathBuf,
    /// The runtime library in it (`libcudart.so.N`).
    pub runtime: PathBuf,
}

/// Prepares `cache/fakecuda-<soname>/`: the library at `lib` under
/// `soname`, and the driver and NVML names linked to it. Redone whenever
/// the library changed (size and modification time).
pub fn prepare(lib: &Path, soname_wanted: &str, cache: &Path) -> Result<FakeDir, OracleError> {
    let dir = cache.join(format!("fakecuda-{soname_wanted}"));
    std::fs::create_dir_all(&dir).map_err(OracleError::io(&dir))?;
    let runtime = dir.join(soname_wanted);
    let mut bytes = std::fs::read(lib).map_err(OracleError::io(lib))?;
    let have = soname(&bytes).map(|s| String::from_utf8_lossy(s).into_owned());
    if have.as_deref() != Some(soname_wanted) {
        patch_soname(&mut bytes, soname_wanted)
            .map_err(|e| OracleError::Fake(format!("{}: {e}", lib.display())))?;
    }
    let stale = std::fs::read(&runtime).map_or(true, |old| old != bytes);
    if stale {
        // Write beside, then rename: a running process keeps the old file.
        let tmp = dir.join(format!(".{soname_wanted}.{}", std::process::id()));
        std::fs::write(&tmp, &bytes).map_err(OracleError::io(&tmp))?;
        std::fs::rename(&tmp, &runtime).map_err(OracleError::io(&runtime))?;
    }
    for alias in ["libcuda.so.1", "libnvidia-ml.so.1"] {
        let link = dir.join(alias);
        let ok = std::fs::read_link(&link).is_ok_and(|t| t == Path::new(soname_wanted));
        if !ok {
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(soname_wanted, &link).map_err(OracleError::io(&link))?;
        }
    }
    Ok(FakeDir { dir, runtime })
}

/// What the fake device is for one run.
#[derive(Debug, Clone, Default)]
pub(crate) struct FakeDevice {
    /// The name `cudaGetDeviceProperties` gives (`None`: the library's).
    pub name: Option<String>,
    /// The card model whose properties it answers with
    /// (`VRAMLAB_FAKECUDA_CARD`; `None`: the library's default).
    pub model: Option<String>,
    /// How many devices the process sees (`None`: one).
    pub devices: Option<u32>,
    /// Bytes it can hold (`None`: unlimited).
    pub capacity: Option<u64>,
    /// Total memory `cudaMemGetInfo` reports (`None`: the capacity, else 1 TiB).
    pub total: Option<u64>,
    /// Where segments go.
    pub placement: Placement,
    /// `cudaRuntimeGetVersion` (picks the struct layouts too).
    pub runtime_version: i32,
    /// The device-call log.
    pub log: Option<PathBuf>,
    /// Events complete only when something synchronizes them
    /// (`VRAMLAB_FAKECUDA_EVENTS=sync`), not at once: for traces whose
    /// pinned host blocks wait for streams' events.
    pub events_on_sync: bool,
}

impl FakeDir {
    /// The environment a process needs to run on the fake device.
    pub(crate) fn env(&self, dev: &FakeDevice) -> Vec<(String, String)> {
        let mut env = vec![
            ("LD_PRELOAD".to_string(), self.runtime.display().to_string()),
            ("LD_LIBRARY_PATH".to_string(), library_path(&self.dir)),
            (
                "VRAMLAB_FAKECUDA_PLACEMENT".to_string(),
                dev.placement.name().to_string(),
            ),
            (
                "VRAMLAB_FAKECUDA_RUNTIME_VERSION".to_string(),
                dev.runtime_version.to_string(),
            ),
        ];
        if let Some(c) = dev.capacity {
            env.push(("VRAMLAB_FAKECUDA_CAPACITY".into(), c.to_string()));
        }
        if let Some(t) = dev.total {
            env.push(("VRAMLAB_FAKECUDA_TOTAL".into(), t.to_string()));
        }
        if let Some(l) = &dev.log {
            env.push(("VRAMLAB_FAKECUDA_LOG".into(), l.display().to_string()));
        }
        if dev.events_on_sync {
            env.push(("VRAMLAB_FAKECUDA_EVENTS".into(), "sync".into()));
        }
        let card = [
            ("VRAMLAB_FAKECUDA_NAME", dev.name.clone()),
            ("VRAMLAB_FAKECUDA_CARD", dev.model.clone()),
            (
                "VRAMLAB_FAKECUDA_DEVICES",
                dev.devices.map(|n| n.to_string()),
            ),
        ];
        env.extend(
            card.into_iter()
                .filter_map(|(k, v)| Some((k.to_string(), v?))),
        );
        env
    }

    /// `interp`'s Python as a process on the fake device `dev`: the one
    /// place where the oracle, the recorder (and any other judge) start
    /// PyTorch there. The caller adds the script and its arguments.
    pub(crate) fn python(&self, interp: &Interpreter, dev: &FakeDevice) -> PythonOnFake {
        let mut cmd = Command::new(&interp.python);
        cmd.envs(self.env(dev));
        PythonOnFake {
            cmd,
            program: interp.python.display().to_string(),
        }
    }
}

/// A Python process about to run on the fake device.
pub(crate) struct PythonOnFake {
    /// The command, for the script and its arguments.
    pub cmd: Command,
    program: String,
}

impl PythonOnFake {
    /// The error of a process that did not start.
    pub(crate) fn spawn_error(&self) -> impl FnOnce(std::io::Error) -> OracleError + '_ {
        move |source| OracleError::Spawn {
            program: self.program.clone(),
            source,
        }
    }
}

/// `dir` first, then the caller's `LD_LIBRARY_PATH`.
fn library_path(dir: &Path) -> String {
    match std::env::var("LD_LIBRARY_PATH") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", dir.display()),
        _ => dir.display().to_string(),
    }
}
