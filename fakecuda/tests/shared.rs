//! Several processes on one fake GPU (`VRAMLAB_FAKECUDA_SHARED`): each
//! sees the memory the others hold, in `cudaMemGetInfo`, in `cudaMalloc`
//! (error 2 past the capacity) and in the virtual-memory calls; a process
//! that exits gives its memory back; a process whose settings differ is
//! refused; each device counts apart; each process keeps its own address
//! space and device-call log.
//!
//! The binary is its own child (`harness = false`): with
//! `VRAMLAB_TEST_SHARED_CHILD` set it reads commands on stdin and answers
//! each on a line of stdout, as one process on the device; without, it
//! runs the scenarios, driving two or three such processes.

use std::ffi::{c_int, c_void};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::ptr::null_mut;

use vramlab_fakecuda::vramlab_fakecuda_flush;

unsafe extern "C" {
    fn cudaMalloc(p: *mut *mut c_void, size: usize) -> c_int;
    safe fn cudaFree(p: *mut c_void) -> c_int;
    safe fn cudaSetDevice(d: c_int) -> c_int;
    fn cudaMemGetInfo(free: *mut usize, total: *mut usize) -> c_int;
    fn cuMemAddressReserve(p: *mut u64, size: usize, align: usize, addr: u64, flags: u64) -> c_int;
    fn cuMemCreate(h: *mut u64, size: usize, prop: *const c_void, flags: u64) -> c_int;
    safe fn cuMemMap(p: u64, size: usize, offset: usize, h: u64, flags: u64) -> c_int;
    safe fn cuMemUnmap(p: u64, size: usize) -> c_int;
    safe fn cuMemRelease(h: u64) -> c_int;
}

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Answers one command: `CODE [VALUE...]`.
fn answer(words: &[u64], cmd: &str) -> String {
    let arg = |i: usize| words.get(i).copied().unwrap_or(0);
    match cmd {
        "malloc" => {
            let mut p = null_mut();
            // SAFETY: a writable pointer.
            let e = unsafe { cudaMalloc(&mut p, arg(0) as usize) };
            format!("{e} {}", p as u64)
        }
        "free" => format!("{}", cudaFree(arg(0) as *mut c_void)),
        "device" => format!("{}", cudaSetDevice(arg(0) as c_int)),
        "info" => {
            let (mut f, mut t) = (0, 0);
            // SAFETY: two writable usizes.
            let e = unsafe { cudaMemGetInfo(&mut f, &mut t) };
            format!("{e} {f} {t}")
        }
        "reserve" => {
            let mut p = 0;
            // SAFETY: a writable output.
            let e = unsafe { cuMemAddressReserve(&mut p, arg(0) as usize, 0, 0, 0) };
            format!("{e} {p}")
        }
        "create" => {
            let mut h = 0;
            // SAFETY: a writable output; null properties: the current device.
            let e = unsafe { cuMemCreate(&mut h, arg(0) as usize, std::ptr::null(), 0) };
            format!("{e} {h}")
        }
        "map" => format!("{}", cuMemMap(arg(0), arg(1) as usize, 0, arg(2), 0)),
        "unmap" => format!("{}", cuMemUnmap(arg(0), arg(1) as usize)),
        "release" => format!("{}", cuMemRelease(arg(0))),
        "fill" => {
            // cudaMalloc of `arg(0)` bytes until one fails: how many
            // succeeded, and the failure's code.
            let mut n = 0;
            loop {
                let mut p = null_mut();
                // SAFETY: a writable pointer.
                match unsafe { cudaMalloc(&mut p, arg(0) as usize) } {
                    0 => n += 1,
                    e => return format!("{e} {n}"),
                }
            }
        }
        other => format!("unknown command {other}"),
    }
}

/// The child: commands on stdin until `exit` or the end.
fn child() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let line = line.unwrap();
        let mut words = line.split_whitespace();
        let cmd = words.next().unwrap_or_default();
        if cmd == "exit" {
            break;
        }
        let args: Vec<u64> = words.map(|w| w.parse().unwrap()).collect();
        let reply = answer(&args, cmd);
        vramlab_fakecuda_flush();
        writeln!(out, "{reply}").unwrap();
        out.flush().unwrap();
    }
}

/// A process on the device, driven through its stdin and stdout.
struct Process {
    child: std::process::Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Process {
    /// A process on the device in `shared` with `capacity` bytes, its log
    /// at `log`.
    fn start(shared: &Path, capacity: u64, log: &Path) -> Process {
        Process::start_with(shared, capacity, log, 1)
    }

    /// [`Process::start`] with `devices` devices.
    fn start_with(shared: &Path, capacity: u64, log: &Path, devices: u32) -> Process {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env("VRAMLAB_FAKECUDA_DEVICES", devices.to_string())
            .env("VRAMLAB_TEST_SHARED_CHILD", "1")
            .env("VRAMLAB_FAKECUDA_SHARED", shared)
            .env("VRAMLAB_FAKECUDA_CAPACITY", capacity.to_string())
            .env("VRAMLAB_FAKECUDA_LOG", log)
            .env("VRAMLAB_FAKECUDA_QUIET", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Process {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, cmd: &str) {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The reply to the last command sent: its numbers.
    fn reply(&mut self) -> Vec<u64> {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the child process stopped");
        line.split_whitespace()
            .map(|w| w.parse().unwrap())
            .collect()
    }

    fn ask(&mut self, cmd: &str) -> Vec<u64> {
        self.send(cmd);
        self.reply()
    }

    /// `cudaMalloc`: the address, or the error code.
    fn malloc(&mut self, bytes: u64) -> Result<u64, u64> {
        match self.ask(&format!("malloc {bytes}"))[..] {
            [0, p] => Ok(p),
            [e, _] => Err(e),
            _ => panic!("bad reply"),
        }
    }

    fn free(&mut self, ptr: u64) {
        assert_eq!(self.ask(&format!("free {ptr}")), [0]);
    }

    /// `cudaMemGetInfo`'s free bytes (panics on an error).
    fn free_bytes(&mut self) -> u64 {
        let r = self.ask("info");
        assert_eq!(r.first(), Some(&0), "cudaMemGetInfo failed: {r:?}");
        r[1]
    }

    /// `cuMemCreate`: the handle, or the error code.
    fn create(&mut self, bytes: u64) -> Result<u64, u64> {
        match self.ask(&format!("create {bytes}"))[..] {
            [0, h] => Ok(h),
            [e, _] => Err(e),
            _ => panic!("bad reply"),
        }
    }

    /// Ends the process (as a crash would: no goodbye) and returns its stderr.
    fn kill(mut self) -> String {
        let _ = self.child.kill();
        self.child.wait().unwrap();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut err).unwrap();
        }
        err
    }
}

/// A scratch folder for one scenario.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fakecuda-shared-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A's cudaMalloc leaves B less, B's past it fails with 2 until A frees;
/// each has its own address space and its own log.
fn malloc_sees_the_other_process(dir: &Path) {
    let dev = dir.join("device");
    let mut a = Process::start(&dev, GIB, &dir.join("a.log"));
    let mut b = Process::start(&dev, GIB, &dir.join("b.log"));
    assert_eq!((a.free_bytes(), b.free_bytes()), (GIB, GIB));

    // Own address spaces: the same first address in both.
    let (pa, pb) = (a.malloc(2 * MIB).unwrap(), b.malloc(2 * MIB).unwrap());
    assert_eq!(pa, pb);
    assert_eq!(a.free_bytes(), GIB - 4 * MIB);
    a.free(pa);
    b.free(pb);

    let p = a.malloc(700 * MIB).unwrap();
    assert_eq!(b.free_bytes(), 324 * MIB);
    assert_eq!(b.malloc(500 * MIB), Err(2));
    assert_eq!(a.free_bytes(), 324 * MIB);
    a.free(p);
    assert_eq!(b.free_bytes(), GIB);
    let q = b.malloc(500 * MIB).unwrap();
    assert_eq!(a.free_bytes(), 524 * MIB);
    assert_eq!(a.malloc(700 * MIB), Err(2));

    let text = std::fs::read_to_string(&dev).unwrap();
    assert!(text.starts_with(
        "vramlab-fakecuda shared device 1\ndevices 1\ncapacity 1073741824\ntotal 1073741824\nplacement driver\n"
    ));
    assert!(text.contains(&format!(" {}\n", 500 * MIB)), "{text}");

    let log_a = std::fs::read_to_string(dir.join("a.log")).unwrap();
    let log_b = std::fs::read_to_string(dir.join("b.log")).unwrap();
    assert_eq!(log_a.lines().count(), 4, "{log_a}");
    assert!(log_a.contains(&format!("- malloc 0 {:#x} {}", p, 700 * MIB)));
    assert!(log_b.contains(&format!("- malloc 0 {:#x} {}", q, 500 * MIB)));
    assert!(!log_b.contains(&format!("{}", 700 * MIB)));
    a.kill();
    b.kill();
}

/// B's cuMemCreate counts against A from create to release, mapped or not.
fn vmm_handles_count_for_the_other_process(dir: &Path) {
    let dev = dir.join("device");
    let mut a = Process::start(&dev, GIB, &dir.join("a.log"));
    let mut b = Process::start(&dev, GIB, &dir.join("b.log"));
    let base = b.ask(&format!("reserve {GIB}"));
    assert_eq!(base.first(), Some(&0));
    assert_eq!(a.free_bytes(), GIB, "a reservation holds no memory");
    let h = b.create(300 * MIB).unwrap();
    assert_eq!(a.free_bytes(), 724 * MIB);
    assert_eq!(a.malloc(800 * MIB), Err(2));
    assert_eq!(a.create(800 * MIB), Err(2));
    assert_eq!(b.ask(&format!("map {} {} {h}", base[1], 300 * MIB)), [0]);
    assert_eq!(a.free_bytes(), 724 * MIB);
    assert_eq!(b.ask(&format!("unmap {} {}", base[1], 300 * MIB)), [0]);
    assert_eq!(a.free_bytes(), 724 * MIB);
    assert_eq!(b.ask(&format!("release {h}")), [0]);
    assert_eq!(a.free_bytes(), GIB);
    let h = a.create(GIB).unwrap();
    assert_eq!(b.create(2 * MIB), Err(2));
    assert_eq!(b.malloc(2 * MIB), Err(2));
    assert_eq!(a.ask(&format!("release {h}")), [0]);
    assert_eq!(b.free_bytes(), GIB);
    a.kill();
    b.kill();
}

/// A process's memory comes back when it ends (killed, as a crash); a
/// process with other settings is refused while the device is in use, and
/// starts it afresh once nobody is left.
fn exits_and_other_settings(dir: &Path) {
    let dev = dir.join("device");
    let mut a = Process::start(&dev, GIB, &dir.join("a.log"));
    let mut b = Process::start(&dev, GIB, &dir.join("b.log"));
    a.malloc(900 * MIB).unwrap();
    assert_eq!(b.malloc(200 * MIB), Err(2));

    let mut c = Process::start(&dev, 2 * GIB, &dir.join("c.log"));
    assert_eq!(c.ask("info"), [3, 0, 0]);
    assert_eq!(c.malloc(MIB), Err(3));
    let said = c.kill();
    assert!(said.contains("is not the shared one"), "{said}");
    assert!(said.contains("capacity 2147483648"), "{said}");

    a.kill();
    assert_eq!(b.free_bytes(), GIB);
    b.malloc(200 * MIB).unwrap();
    b.kill();

    let mut d = Process::start(&dev, 2 * GIB, &dir.join("d.log"));
    assert_eq!(d.free_bytes(), 2 * GIB);
    d.kill();
}

/// Each device of a shared set counts its own memory.
fn devices_are_counted_apart(dir: &Path) {
    let dev = dir.join("device");
    let mut a = Process::start_with(&dev, GIB, &dir.join("a.log"), 2);
    let mut b = Process::start_with(&dev, GIB, &dir.join("b.log"), 2);
    assert_eq!(a.ask("device 1"), [0]);
    a.malloc(700 * MIB).unwrap();
    assert_eq!(b.free_bytes(), GIB);
    b.malloc(500 * MIB).unwrap();
    assert_eq!(b.ask("device 1"), [0]);
    assert_eq!(b.free_bytes(), 324 * MIB);
    assert_eq!(b.malloc(500 * MIB), Err(2));
    assert_eq!(a.free_bytes(), 324 * MIB);
    assert_eq!(a.ask("device 0"), [0]);
    assert_eq!(a.free_bytes(), 524 * MIB);
    let mut c = Process::start_with(&dev, GIB, &dir.join("c.log"), 1);
    assert_eq!(c.ask("info"), [3, 0, 0], "one device is not two");
    c.kill();
    a.kill();
    b.kill();
}

/// Two processes filling the device at once get exactly its capacity
/// between them: every check and change is one locked step.
fn concurrent_calls_never_overcommit(dir: &Path) {
    let dev = dir.join("device");
    let mut a = Process::start(&dev, GIB, &dir.join("a.log"));
    let mut b = Process::start(&dev, GIB, &dir.join("b.log"));
    assert_eq!((a.free_bytes(), b.free_bytes()), (GIB, GIB));
    a.send(&format!("fill {MIB}"));
    b.send(&format!("fill {MIB}"));
    let (ra, rb) = (a.reply(), b.reply());
    assert_eq!((ra[0], rb[0]), (2, 2));
    assert_eq!(ra[1] + rb[1], 1024, "{ra:?} {rb:?}");
    assert_eq!(a.free_bytes(), 0);
    a.kill();
    b.kill();
}

fn main() {
    if std::env::var_os("VRAMLAB_TEST_SHARED_CHILD").is_some() {
        child();
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    type Scenario = fn(&Path);
    let scenarios: [(&str, Scenario); 5] = [
        (
            "malloc_sees_the_other_process",
            malloc_sees_the_other_process,
        ),
        (
            "vmm_handles_count_for_the_other_process",
            vmm_handles_count_for_the_other_process,
        ),
        ("exits_and_other_settings", exits_and_other_settings),
        ("devices_are_counted_apart", devices_are_counted_apart),
        (
            "concurrent_calls_never_overcommit",
            concurrent_calls_never_overcommit,
        ),
    ];
    for (name, run) in scenarios {
        let dir = scratch(name);
        run(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        println!("test {name} ... ok");
    }
}
