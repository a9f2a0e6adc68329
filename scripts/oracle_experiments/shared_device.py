"""Two PyTorch processes on ONE fake GPU (VRAMLAB_FAKECUDA_SHARED): what each
process's caching allocator does when the other holds memory, as co-located
processes on a card (an RL trainer and a vLLM rollout engine; two services)
meet it. Each scenario starts two fresh torch processes, A and B, on a shared
fake device of --capacity bytes (1 GiB by default), drives them step by step
over pipes, and prints (or writes, with --out DIR, as DIR/NAME[.CONF].json)
one JSON document: the command, and for every step what the process did,
whether it went as expected, and both processes' torch.cuda.memory_stats()
figures and torch.cuda.mem_get_info() after it, with the device file.

    bash scripts/oracle_experiments/run.sh 2.15 shared_device.py driver \\
        --scenario other_frees [--conf expandable_segments:True] [--out DIR]

Scenarios (--scenario all runs each and prints one document per line):
  other_frees      A takes 700 MiB; B asks 500 MiB: torch.OutOfMemoryError;
                   A frees and empties its cache; B asks again: it succeeds.
  others_cache     B takes 500 MiB and frees it (cached: free to B, held on
                   the device); A asks 700 MiB: out of memory (A cannot free
                   B's cache); B empties its cache; A asks again: it succeeds.
  own_cache        B takes 300 MiB and frees it (cached); A takes 500 MiB;
                   B asks 400 MiB: its cached 300 MiB block is too small and
                   cudaMalloc fails, so PyTorch frees B's cache and retries
                   (num_alloc_retries 1): it succeeds.

The orchestrator (this script without --worker) makes no CUDA call: only the
two workers are processes on the device. Exit status 1 if a step went other
than expected.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

MIB = 1 << 20

SCENARIOS = {
    "other_frees": [
        ("A", "alloc", "x", 700, "ok"),
        ("B", "alloc", "y", 500, "oom"),
        ("A", "free", "x", None, "ok"),
        ("A", "empty_cache", None, None, "ok"),
        ("B", "alloc", "y", 500, "ok"),
    ],
    "others_cache": [
        ("B", "alloc", "y", 500, "ok"),
        ("B", "free", "y", None, "ok"),
        ("A", "alloc", "x", 700, "oom"),
        ("B", "empty_cache", None, None, "ok"),
        ("A", "alloc", "x", 700, "ok"),
    ],
    "own_cache": [
        ("B", "alloc", "y", 300, "ok"),
        ("B", "free", "y", None, "ok"),
        ("A", "alloc", "x", 500, "ok"),
        ("B", "alloc", "z", 400, "ok"),
    ],
}


def worker():
    """One process on the device: JSON commands on stdin, a JSON reply each."""
    import torch

    torch.cuda.init()
    held = {}

    def figures():
        s = torch.cuda.memory_stats()
        free, total = torch.cuda.mem_get_info()
        return {
            "allocated_bytes": s.get("allocated_bytes.all.current", 0),
            "reserved_bytes": s.get("reserved_bytes.all.current", 0),
            "reserved_peak_bytes": s.get("reserved_bytes.all.peak", 0),
            "num_alloc_retries": s.get("num_alloc_retries", 0),
            "num_ooms": s.get("num_ooms", 0),
            "num_device_alloc": s.get("num_device_alloc", 0),
            "num_device_free": s.get("num_device_free", 0),
            "mem_get_info_free": free,
            "mem_get_info_total": total,
        }

    for line in sys.stdin:
        cmd = json.loads(line)
        reply = {"pid": os.getpid(), "ok": True}
        op = cmd["op"]
        if op == "hello":
            reply["torch"] = torch.__version__
            reply["conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        elif op == "alloc":
            try:
                held[cmd["name"]] = torch.empty(cmd["mib"] * MIB, dtype=torch.uint8, device="cuda")
            except torch.OutOfMemoryError as e:
                reply["ok"] = False
                reply["error"] = "torch.OutOfMemoryError"
                reply["message"] = str(e).splitlines()[0]
        elif op == "free":
            del held[cmd["name"]]
        elif op == "empty_cache":
            torch.cuda.empty_cache()
        elif op == "exit":
            break
        reply["figures"] = figures()
        print(json.dumps(reply), flush=True)


class Worker:
    def __init__(self, name, env, errdir):
        self.name = name
        self.err = open(os.path.join(errdir, f"{name}.stderr"), "w+")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True, env=env)

    def ask(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.err.seek(0)
            sys.exit(f"worker {self.name} stopped; its stderr:\n{self.err.read()[-4000:]}")
        return json.loads(line)

    def close(self):
        try:
            self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait(timeout=60)
        self.err.close()


def command(args):
    """The command that reproduces this run (run.sh's form)."""
    release = None
    if args.torch:
        release = ".".join(args.torch.split("+")[0].split(".")[:2])
    placement = os.environ.get("VRAMLAB_FAKECUDA_PLACEMENT", "driver")
    argv = ["--scenario", args.scenario, "--capacity", str(args.capacity)]
    if args.conf:
        argv += ["--conf", args.conf]
    return " ".join(["bash", "scripts/oracle_experiments/run.sh", release or "X.Y",
                     "shared_device.py", placement] + [shlex.quote(a) for a in argv])


def run(args, scenario):
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    device = os.path.join(shm, f"vramlab-shared-{os.getpid()}-{scenario}")
    if os.path.exists(device):
        os.remove(device)
    env = dict(os.environ)
    env.update({
        "VRAMLAB_FAKECUDA_SHARED": device,
        "VRAMLAB_FAKECUDA_CAPACITY": str(args.capacity),
        "VRAMLAB_FAKECUDA_QUIET": "1",
    })
    env.pop("VRAMLAB_FAKECUDA_LOG", None)
    if args.conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = args.conf
    else:
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    with tempfile.TemporaryDirectory() as errdir:
        workers = {n: Worker(n, env, errdir) for n in "AB"}
        hello = {n: w.ask(op="hello") for n, w in workers.items()}
        args.torch = hello["A"]["torch"]
        doc = {
            "command": None,
            "scenario": scenario,
            "torch": args.torch,
            "conf": args.conf or "default",
            "capacity_bytes": args.capacity,
            "processes": {n: {"pid": h["pid"], "figures": h["figures"]} for n, h in hello.items()},
            "steps": [],
        }
        doc["command"] = command(args)
        for who, op, name, mib, expect in SCENARIOS[scenario]:
            cmd = {"op": op}
            if name is not None:
                cmd["name"] = name
            if mib is not None:
                cmd["mib"] = mib
            reply = workers[who].ask(**cmd)
            outcome = "ok" if reply["ok"] else "oom"
            step = {
                "process": who,
                "op": op + (f" {mib} MiB" if mib is not None else "") + (f" ({name})" if name else ""),
                "outcome": outcome,
                "expected": expect,
                "as_expected": outcome == expect,
            }
            if not reply["ok"]:
                step["error"] = reply["error"]
                step["message"] = reply["message"]
            step["figures"] = {who: reply["figures"]}
            for n, w in workers.items():
                if n != who:
                    step["figures"][n] = w.ask(op="report")["figures"]
            with open(device) as f:
                step["device_file"] = f.read().splitlines()
            doc["steps"].append(step)
        for w in workers.values():
            w.close()
    os.remove(device)
    doc["as_expected"] = all(s["as_expected"] for s in doc["steps"])
    return doc


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--scenario", default="all", choices=["all", *SCENARIOS])
    p.add_argument("--capacity", type=int, default=1 << 30, help="bytes of the shared device")
    p.add_argument("--conf", default="", help="PYTORCH_CUDA_ALLOC_CONF of both processes")
    p.add_argument("--out", help="write DIR/SCENARIO[.CONF].json instead of printing")
    args = p.parse_args()
    if args.worker:
        worker()
        return
    ok = True
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    for name in names:
        args.scenario, args.torch = name, None
        doc = run(args, name)
        ok &= doc["as_expected"]
        if args.out:
            suffix = "" if not args.conf else "." + args.conf.replace(":", "-").replace(",", "+")
            path = os.path.join(args.out, f"{name}{suffix}.json")
            os.makedirs(args.out, exist_ok=True)
            with open(path, "w") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")
            print(f"{path}: {'as expected' if doc['as_expected'] else 'NOT as expected'}")
        else:
            print(json.dumps(doc))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
