//! One fake GPU shared by several processes (`VRAMLAB_FAKECUDA_SHARED=PATH`),
//! as processes co-located on a card share its memory: each process's
//! `cudaMalloc` and `cuMemCreate` see what the others hold, and
//! `cudaMemGetInfo` reports the device's free memory at that moment.
//!
//! What is shared is what a GPU shares between processes: its physical
//! memory. The file holds the device's settings and, for each live
//! process, the bytes it holds on each device (its `cudaMalloc` segments
//! plus its `cuMemCreate` handles, mapped or not). Virtual addresses
//! (placement, reservations) and VMM handles stay per process, as on a
//! GPU, where every process has its own address space and a handle is
//! the process's own: each process keeps its own
//! [`SimDevice`](vramlab_allocator::SimDevice), and only its capacity check
//! and `cudaMemGetInfo` count the others' bytes.
//!
//! The file is small text (`cat` shows who holds what), read and written
//! whole under an exclusive `flock` on it, once per device-memory call:
//! lock, read, apply the call, write this process's bytes, unlock. A
//! process that is gone (no `/proc/PID`, another process under its pid, or
//! a zombie) holds nothing: its line is dropped, as the driver frees a
//! process's memory when it exits. So the processes must see each other in
//! `/proc` (one pid namespace). The first process writes its settings;
//! the others must have the same device count, capacity, total and
//! placement, or they are refused (a line on stderr, and device memory
//! calls fail with 3, `cudaErrorInitializationError`). When no live
//! process is left, the next one starts the device afresh with its own
//! settings.

use std::ffi::c_int;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

/// The first line of the file.
const MAGIC: &str = "vramlab-fakecuda shared device 1";

/// What every process on the device must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeviceSettings {
    pub devices: u32,
    /// Bytes each device can hold (`None`: unlimited).
    pub capacity: Option<u64>,
    /// What `cudaMemGetInfo` reports as total.
    pub total: u64,
    /// `driver` or `ascending`.
    pub placement: String,
}

impl std::fmt::Display for DeviceSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let capacity = self
            .capacity
            .map_or_else(|| "unlimited".to_string(), |c| c.to_string());
        write!(
            f,
            "{} device(s), capacity {capacity}, total {}, placement {}",
            self.devices, self.total, self.placement
        )
    }
}

/// A process on the device and the bytes it holds on each device.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Holder {
    pid: u32,
    /// Its start time (`/proc/PID/stat`), so that a reused pid is not
    /// taken for it.
    start: u64,
    held: Vec<u64>,
}

/// The file's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Table {
    settings: DeviceSettings,
    holders: Vec<Holder>,
}

fn field<T: std::str::FromStr>(line: Option<&str>, key: &str) -> Result<T, String> {
    line.and_then(|l| l.strip_prefix(key))
        .and_then(|v| v.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no valid '{key}' line"))
}

impl Table {
    /// The table of a file's text; `None` for an empty file.
    fn parse(text: &str) -> Result<Option<Table>, String> {
        if text.trim().is_empty() {
            return Ok(None);
        }
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            return Err(format!("the first line is not '{MAGIC}'"));
        }
        let devices: u32 = field(lines.next(), "devices")?;
        let capacity: String = field(lines.next(), "capacity")?;
        let capacity = match capacity.as_str() {
            "unlimited" => None,
            c => Some(c.parse().map_err(|_| "no valid 'capacity' line")?),
        };
        let total = field(lines.next(), "total")?;
        let placement = field(lines.next(), "placement")?;
        let mut holders = Vec::new();
        for line in lines {
            let mut words = line.split_whitespace();
            let bad = || format!("not a process line: '{line}'");
            if words.next() != Some("process") {
                return Err(bad());
            }
            let mut numbers = words.map(str::parse::<u64>);
            let mut next = || numbers.next().and_then(Result::ok).ok_or_else(bad);
            let pid = u32::try_from(next()?).map_err(|_| bad())?;
            let start = next()?;
            let held = (0..devices).map(|_| next()).collect::<Result<_, _>>()?;
            holders.push(Holder { pid, start, held });
        }
        Ok(Some(Table {
            settings: DeviceSettings {
                devices,
                capacity,
                total,
                placement,
            },
            holders,
        }))
    }

    /// The file's text.
    fn render(&self) -> String {
        let s = &self.settings;
        let capacity = s
            .capacity
            .map_or_else(|| "unlimited".to_string(), |c| c.to_string());
        let mut text = format!(
            "{MAGIC}\ndevices {}\ncapacity {capacity}\ntotal {}\nplacement {}\n",
            s.devices, s.total, s.placement
        );
        for h in &self.holders {
            text.push_str(&format!("process {} {}", h.pid, h.start));
            for b in &h.held {
                text.push_str(&format!(" {b}"));
            }
            text.push('\n');
        }
        text
    }
}

/// The start time of process `pid` (field 22 of `/proc/PID/stat`, clock
/// ticks after boot), or `None` if it is not running (gone, or a zombie:
/// it has exited, and the driver has freed its memory).
fn started(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold anything.
    let (_, after) = stat.rsplit_once(')')?;
    let mut fields = after.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

unsafe extern "C" {
    /// POSIX `flock`.
    fn flock(fd: c_int, operation: c_int) -> c_int;
}

/// `LOCK_EX`.
const LOCK_EX: c_int = 2;
/// `LOCK_UN`.
const LOCK_UN: c_int = 8;

/// `flock(file, op)`, retried when a signal interrupts it.
fn lock_file(file: &File, op: c_int) -> io::Result<()> {
    loop {
        // SAFETY: flock takes any descriptor; `file` keeps this one open
        // for the call.
        if unsafe { flock(file.as_raw_fd(), op) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// This process's hold on the shared device.
#[derive(Debug)]
pub(crate) struct SharedDevice {
    path: String,
    file: File,
    settings: DeviceSettings,
    pid: u32,
    /// This process's start time; `None` when `/proc` cannot tell (then no
    /// process is taken for gone).
    start: Option<u64>,
    /// The table as last read, while the file is locked.
    table: Option<Table>,
    /// The table differs from the file's text.
    dirty: bool,
}

/// Whether this process uses a device of its own, shares one, or was
/// refused the shared one.
#[derive(Debug)]
pub(crate) enum Sharing {
    Private,
    Shared(Box<SharedDevice>),
    Refused,
}

impl Sharing {
    /// The sharing `path` (if any) gives a process whose devices are
    /// `settings`: refusals are said on stderr.
    pub(crate) fn new(path: Option<&str>, settings: DeviceSettings) -> Sharing {
        let Some(path) = path else {
            return Sharing::Private;
        };
        match SharedDevice::join(path, settings) {
            Ok(d) => Sharing::Shared(Box::new(d)),
            Err(e) => {
                eprintln!(
                    "[vramlab-fakecuda] VRAMLAB_FAKECUDA_SHARED={path}: {e}; device memory calls fail with 3 (initialization error)"
                );
                Sharing::Refused
            }
        }
    }
}

impl SharedDevice {
    /// Opens (or creates) the device file and enters this process.
    fn join(path: &str, settings: DeviceSettings) -> Result<SharedDevice, String> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| format!("cannot open it: {e}"))?;
        let mut dev = SharedDevice {
            path: path.to_string(),
            file,
            settings,
            pid: std::process::id(),
            start: started(std::process::id()),
            table: None,
            dirty: false,
        };
        lock_file(&dev.file, LOCK_EX).map_err(|e| format!("cannot lock it: {e}"))?;
        let joined = dev.load().and_then(|()| match dev.table.as_ref() {
            Some(t) if t.settings != dev.settings => Err(format!(
                "this process's device ({}) is not the shared one ({}, held by pid {})",
                dev.settings,
                t.settings,
                t.holders.first().map_or(0, |h| h.pid)
            )),
            _ => Ok(()),
        });
        if joined.is_err() {
            dev.table = None;
        }
        let stored = dev.store();
        let _ = lock_file(&dev.file, LOCK_UN);
        joined?;
        stored.map_err(|e| format!("cannot write it: {e}"))?;
        Ok(dev)
    }

    /// Reads the table (the file is locked), drops the processes that are
    /// gone and enters this one. A device with no live process left starts
    /// afresh from this process's settings.
    fn load(&mut self) -> Result<(), String> {
        let mut text = String::new();
        (&self.file)
            .seek(SeekFrom::Start(0))
            .and_then(|_| (&self.file).read_to_string(&mut text))
            .map_err(|e| format!("cannot read it: {e}"))?;
        let parsed = Table::parse(&text)
            .map_err(|e| format!("not a vramlab-fakecuda shared device file: {e}"))?;
        let mut table = parsed.clone().unwrap_or_else(|| self.fresh());
        if let Some(start) = self.start {
            let pid = self.pid;
            table
                .holders
                .retain(|h| (h.pid == pid && h.start == start) || started(h.pid) == Some(h.start));
        }
        if !table.holders.iter().any(|h| h.pid != self.pid) {
            table = self.fresh();
        }
        if !table.holders.iter().any(|h| h.pid == self.pid) {
            table.holders.push(Holder {
                pid: self.pid,
                start: self.start.unwrap_or(0),
                held: vec![0; table.settings.devices as usize],
            });
        }
        self.dirty = parsed.as_ref() != Some(&table);
        self.table = Some(table);
        Ok(())
    }

    /// A device with this process's settings, this process alone on it.
    fn fresh(&self) -> Table {
        Table {
            settings: self.settings.clone(),
            holders: vec![Holder {
                pid: self.pid,
                start: self.start.unwrap_or(0),
                held: vec![0; self.settings.devices as usize],
            }],
        }
    }

    /// Writes the table if it changed, and forgets it.
    fn store(&mut self) -> io::Result<()> {
        let table = self.table.take();
        if !std::mem::take(&mut self.dirty) {
            return Ok(());
        }
        let Some(table) = table else {
            return Ok(());
        };
        let text = table.render();
        self.file.write_all_at(text.as_bytes(), 0)?;
        self.file.set_len(text.len() as u64)
    }

    /// Locks the file and reads the table: the bytes the other processes
    /// hold, per device.
    pub(crate) fn begin(&mut self) -> Result<Vec<u64>, String> {
        lock_file(&self.file, LOCK_EX).map_err(|e| format!("cannot lock it: {e}"))?;
        let loaded = self.load().and_then(|()| match self.table.as_ref() {
            Some(t) if t.settings != self.settings => Err(format!(
                "another process made it a different device ({})",
                t.settings
            )),
            _ => Ok(()),
        });
        if let Err(e) = loaded {
            self.table = None;
            self.dirty = false;
            let _ = lock_file(&self.file, LOCK_UN);
            return Err(e);
        }
        let mut others = vec![0u64; self.settings.devices as usize];
        let holders = self.table.as_ref().map_or(&[][..], |t| &t.holders);
        for h in holders.iter().filter(|h| h.pid != self.pid) {
            for (o, b) in others.iter_mut().zip(&h.held) {
                *o = o.saturating_add(*b);
            }
        }
        Ok(others)
    }

    /// Records the bytes this process holds on each device and unlocks
    /// the file.
    pub(crate) fn end(&mut self, held: &[u64]) {
        let pid = self.pid;
        if let Some(me) = self
            .table
            .as_mut()
            .and_then(|t| t.holders.iter_mut().find(|h| h.pid == pid))
        {
            if me.held != held {
                me.held = held.to_vec();
                self.dirty = true;
            }
        }
        if let Err(e) = self.store() {
            eprintln!(
                "[vramlab-fakecuda] VRAMLAB_FAKECUDA_SHARED={}: cannot write it: {e}",
                self.path
            );
        }
        let _ = lock_file(&self.file, LOCK_UN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> DeviceSettings {
        DeviceSettings {
            devices: 2,
            capacity: Some(1 << 30),
            total: 1 << 30,
            placement: "driver".into(),
        }
    }

    #[test]
    fn a_table_reads_back_as_written() {
        let t = Table {
            settings: settings(),
            holders: vec![Holder {
                pid: 12,
                start: 345,
                held: vec![6, 7],
            }],
        };
        let text = t.render();
        assert_eq!(
            text,
            "vramlab-fakecuda shared device 1\ndevices 2\ncapacity 1073741824\ntotal 1073741824\nplacement driver\nprocess 12 345 6 7\n"
        );
        assert_eq!(Table::parse(&text), Ok(Some(t)));
        assert_eq!(Table::parse(""), Ok(None));
        assert!(Table::parse("hello\n").is_err());
        assert!(Table::parse(&text.replace(" 6 7", " 6")).is_err());
        let unlimited = text.replace("capacity 1073741824", "capacity unlimited");
        let parsed = Table::parse(&unlimited).unwrap().unwrap();
        assert_eq!(parsed.settings.capacity, None);
    }

    #[test]
    fn this_process_is_running_and_a_made_up_one_is_not() {
        let me = started(std::process::id());
        assert!(me.is_some());
        assert_eq!(started(u32::MAX), None);
    }
}
