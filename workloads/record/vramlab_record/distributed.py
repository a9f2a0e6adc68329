"""Sharded training scripts recorded as one rank of a fake world.

``python -m vramlab_record.cpu --world-size N --rank R -o OUT -- train.py``
runs a script written for ``torchrun`` unchanged, as rank ``R`` of ``N``:

* the environment ``torchrun`` gives (``RANK``, ``WORLD_SIZE``,
  ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``MASTER_ADDR``,
  ``MASTER_PORT``); ``torch.cuda.set_device``, ``current_device`` (the local
  rank) and ``device_count`` (GPUs per node) answered;
* ``init_process_group("nccl", ...)`` (any backend, ``init_method`` or
  store) becomes PyTorch's fake process group (backend ``fake``, a
  ``FakeStore``): every collective returns at once without data, and
  allocates nothing itself, as NCCL allocates nothing through the caching
  allocator. What the collectives' callers allocate (FSDP's all-gather
  outputs and reduce-scatter inputs, DDP's gradient buckets, DTensor
  redistributions) is recorded as any other allocation. ``new_group`` and
  device meshes (``init_device_mesh("cuda", ...)``) use it too, on the fake
  device;
* streams: ``torch.cpu.Stream`` (what FSDP's streams are on the fake CPU
  device) gets a number, and an allocation made inside ``with
  torch.cpu.stream(s)`` is recorded on that stream, as FSDP2 allocates its
  all-gather buffers on its all-gather streams and its reduce-scatter
  buffers on its reduce-scatter stream. The caching allocator keeps a
  block freed on one stream for that stream, which the replay does too;
* ``record_stream`` (FSDP1's ``_no_dispatch_record_stream``, which skips
  non-CUDA tensors) is recorded: the free of such a block is a
  ``free_requested`` whose ``free_completed`` comes at the next point where
  the script's streams synchronise (``wait_stream``, ``wait_event``,
  ``synchronize``) — an estimate of when the GPU would have passed the
  recorded use (earlier on an idle GPU, later on a busy one);
* DDP's ``device_ids``/``output_device`` and FSDP1's ``device_id`` are
  dropped for the fake device (their module is already there).

NCCL's own memory (its communicators' channel buffers, outside the caching
allocator) is never part of the trace: :func:`nccl_estimate` gives a
documented estimate per rank, written to the trace's header and to a job's
``job.json`` as ``outside_allocator``.
"""

from __future__ import annotations

import contextlib
import os

import torch

#: NCCL_BUFFSIZE's default: the Simple protocol's buffer per channel and peer.
NCCL_BUFFSIZE = 4 * 1024 * 1024
#: Channels NCCL opens per communicator on an 8-GPU NVLink/NVSwitch node
#: (NCCL picks 16-32 on H100 HGX; 16 is the low end, the estimate's default).
NCCL_CHANNELS = 16


class FakeWorld:
    """The world of one rank (see the module docstring).

    ``recorder`` is the :class:`~vramlab_record.recorder.AllocationRecorder`
    (streams and ``record_stream`` are recorded through it)."""

    def __init__(self, world_size: int, rank: int, gpus_per_node: int = 8, recorder=None):
        if world_size < 1:
            raise ValueError("--world-size must be at least 1")
        if not 0 <= rank < world_size:
            raise ValueError(f"--rank {rank} is outside the world of {world_size} ranks (0..{world_size - 1})")
        self.world_size = world_size
        self.rank = rank
        self.gpus_per_node = max(1, min(gpus_per_node, world_size))
        self.local_rank = rank % self.gpus_per_node
        self.recorder = recorder
        #: Sizes of the process groups created (the default one included).
        self.groups: list[int] = []
        self._stack = contextlib.ExitStack()

    # ---- the environment -------------------------------------------------
    def environment(self) -> dict:
        return {
            "RANK": str(self.rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_RANK": str(self.local_rank),
            "LOCAL_WORLD_SIZE": str(self.gpus_per_node),
            "GROUP_RANK": str(self.rank // self.gpus_per_node),
            "NODE_RANK": str(self.rank // self.gpus_per_node),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500",
        }

    def __enter__(self):
        st = self._stack
        saved = {k: os.environ.get(k) for k in self.environment()}
        os.environ.update(self.environment())
        st.callback(_restore_env, saved)
        try:
            self._patch_distributed()
            self._patch_cuda()
            self._patch_streams()
            self._patch_wrappers()
        except BaseException:
            self._stack.close()  # undo what was patched
            raise
        return self

    def __exit__(self, *exc):
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.destroy_process_group()
        self._stack.close()
        return False

    def _set(self, obj, name, value):
        old = getattr(obj, name)
        setattr(obj, name, value)
        self._stack.callback(setattr, obj, name, old)

    # ---- process groups --------------------------------------------------
    def _patch_distributed(self):
        import torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d
        # Registers "fake"; its store lives in that module up to 2.11, in _C later.
        import torch.testing._internal.distributed.fake_pg as fake_pg

        FakeStore = getattr(fake_pg, "FakeStore", None)
        if FakeStore is None:
            from torch._C._distributed_c10d import FakeStore

        world = self
        orig_init = c10d.init_process_group
        orig_new_group = c10d.new_group

        def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                               store=None, group_name="", pg_options=None, device_id=None, **kw):
            if dist.is_initialized():
                raise RuntimeError("trying to initialize the default process group twice")
            kwargs = {"timeout": timeout} if timeout is not None else {}
            with _outside_modes():
                orig_init("fake", store=FakeStore(), world_size=world.world_size, rank=world.rank,
                          group_name=group_name, **kwargs)
            world.groups.append(world.world_size)

        def new_group(ranks=None, timeout=None, backend=None, pg_options=None, *args, **kw):
            kw.pop("device_id", None)
            with _outside_modes():
                group = orig_new_group(ranks=ranks, timeout=timeout, *args, **kw)
            # Every rank calls new_group for every group; NCCL sets up a
            # communicator only in the groups this rank belongs to.
            if ranks is None or world.rank in ranks:
                world.groups.append(len(ranks) if ranks is not None else world.world_size)
            return group

        orig_all_reduce = c10d.all_reduce

        def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
            work = orig_all_reduce(tensor, op=op, group=group, async_op=async_op)
            return _DoneWork([tensor]) if async_op else work

        for mod in (dist, c10d):
            self._set(mod, "init_process_group", init_process_group)
            self._set(mod, "new_group", new_group)
            self._set(mod, "all_reduce", all_reduce)

        import torch.distributed.device_mesh as dm

        orig_mesh_init = dm.DeviceMesh.__init__

        def mesh_init(mesh_self, device_type, *args, **kw):
            # A mesh is host bookkeeping (a CPU tensor of ranks, read back):
            # built outside the fake mode and the recorder.
            with _outside_modes():
                orig_mesh_init(mesh_self, _fake_device_type(device_type), *args, **kw)

        self._set(dm.DeviceMesh, "__init__", mesh_init)
        orig_init_mesh = dm.init_device_mesh

        def init_device_mesh(device_type, mesh_shape, *args, **kw):
            with _outside_modes():
                mesh = orig_init_mesh(_fake_device_type(device_type), mesh_shape, *args, **kw)
            if mesh.ndim > 1:
                # Each dimension of a mesh of several gets its own groups (a
                # 1-D mesh over the world reuses the default group).
                world.groups.extend(int(n) for n in mesh.shape)
            return mesh

        # Every module that imported it by name (FSDP2's default mesh too).
        import sys

        import torch.distributed.fsdp._fully_shard._fsdp_init  # noqa: F401

        for mod in list(sys.modules.values()):
            if getattr(mod, "init_device_mesh", None) is orig_init_mesh:
                self._set(mod, "init_device_mesh", init_device_mesh)

    # ---- torch.cuda answers ---------------------------------------------
    def _patch_cuda(self):
        self._set(torch.cuda, "device_count", lambda: self.gpus_per_node)
        self._set(torch.cuda, "current_device", lambda: self.local_rank)
        self._set(torch.cuda, "set_device", lambda *a, **k: None)

    # ---- streams ----------------------------------------------------------
    def _patch_streams(self):
        import torch.cpu as tcpu

        rec = self.recorder
        counter = [0]
        base = tcpu.Stream

        class Stream(base):
            """A numbered stream of the fake device."""

            def __init__(self, priority: int = -1, **kw):
                super().__init__(priority)
                counter[0] += 1
                self.vramlab_stream = counter[0]

            def wait_stream(self, stream) -> None:
                _synchronised(rec)

            def wait_event(self, event) -> None:
                _synchronised(rec)

            def record_event(self, event=None):
                return event if event is not None else tcpu.Event()

            def synchronize(self) -> None:
                _synchronised(rec)

            def query(self) -> bool:
                return True

        self._set(tcpu, "Stream", Stream)
        ctx = tcpu.StreamContext
        orig_enter, orig_exit = ctx.__enter__, ctx.__exit__

        def enter(s):
            orig_enter(s)
            _follow_stream(rec)

        def exit_(s, *exc):
            orig_exit(s, *exc)
            _follow_stream(rec)

        self._set(ctx, "__enter__", enter)
        self._set(ctx, "__exit__", exit_)
        self._set(tcpu, "synchronize", lambda *a, **k: _synchronised(rec))
        event = tcpu.Event
        self._set(event, "wait", lambda e, stream=None: _synchronised(rec))
        self._set(event, "synchronize", lambda e: _synchronised(rec))

        def no_dispatch_record_stream(tensor, stream):
            if rec is not None:
                rec.record_stream(tensor, getattr(stream, "vramlab_stream", 0))

        for modname in ("torch.distributed.fsdp._common_utils", "torch.distributed.fsdp._flat_param",
                        "torch.distributed.fsdp._runtime_utils"):
            mod = __import__(modname, fromlist=["_"])
            if hasattr(mod, "_no_dispatch_record_stream"):
                self._set(mod, "_no_dispatch_record_stream", no_dispatch_record_stream)

    # ---- wrappers that name a CUDA device ----------------------------------
    def _patch_wrappers(self):
        from torch.nn.parallel import DistributedDataParallel as DDP

        orig_ddp = DDP.__init__
        orig_hook = DDP.register_comm_hook
        orig_forward = DDP.forward

        def ddp_init(ddp_self, module, device_ids=None, output_device=None, *args, **kw):
            orig_ddp(ddp_self, module, None, None, *args, **kw)

        def register_comm_hook(ddp_self, state, hook):
            ddp_self._vramlab_hooked = True
            return orig_hook(ddp_self, state, hook)

        def forward(ddp_self, *args, **kw):
            # The fake process group's futures carry no tensors, which DDP's
            # built-in all-reduce hook needs: a hook that does what it does
            # to memory (divide the bucket in place, reduce it in place).
            if not getattr(ddp_self, "_vramlab_hooked", False):
                register_comm_hook(ddp_self, None, _allreduce_hook)
            if not isinstance(ddp_self.reducer, _Reducer):
                ddp_self.reducer = _Reducer(ddp_self.reducer, ddp_self)
            return orig_forward(ddp_self, *args, **kw)

        self._set(DDP, "__init__", ddp_init)
        self._set(DDP, "register_comm_hook", register_comm_hook)
        self._set(DDP, "forward", forward)
        import torch.distributed as dist
        import torch.distributed.utils as du
        import torch.nn.parallel.distributed as ddp_mod

        # DDP checks that every rank has the same parameter shapes (a C++
        # collective that reads the tensors' data): every rank runs this
        # script, so they do.
        for mod in (du, ddp_mod):
            if hasattr(mod, "_verify_param_shape_across_processes"):
                self._set(mod, "_verify_param_shape_across_processes", lambda *a, **k: None)
        # The initial broadcast of module states (and of buffers each step)
        # flattens the tensors into buckets on the GPU: recorded as those
        # bucket allocations, since the C++ collective reads the data.
        self._set(dist, "_broadcast_coalesced", _broadcast_coalesced)
        try:
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP1
        except ImportError:  # pragma: no cover
            return
        orig_fsdp = FSDP1.__init__

        def fsdp_init(fsdp_self, module, *args, **kw):
            if kw.get("device_id") is not None:
                kw["device_id"] = torch.device("cpu")
            orig_fsdp(fsdp_self, module, *args, **kw)

        self._set(FSDP1, "__init__", fsdp_init)
        self._patch_offload()

    def _patch_offload(self):
        """FSDP2's ``CPUOffloadPolicy``: sharded parameters, gradients and
        optimizer states live on the host (not recorded), copied to the
        device for each all-gather. On the fake CPU device two calls need
        telling apart: the gradient's ``.to(torch.device("cpu"))`` inside
        the reduce-scatter is the copy to the host, and pinning host memory
        is a no-op for the GPU's memory."""
        self._set(torch.Tensor, "pin_memory", lambda t, *a, **k: t)
        self._set(torch.Tensor, "is_pinned", lambda t, *a, **k: True)
        rec = self.recorder
        if rec is None:
            return
        import torch.distributed.fsdp._fully_shard._fsdp_collectives as fc
        import torch.distributed.fsdp._fully_shard._fsdp_param_group as fpg

        orig = fc.foreach_reduce

        def foreach_reduce(*args, **kw):
            rec.cpu_means_host = getattr(rec, "cpu_means_host", 0) + 1
            try:
                return orig(*args, **kw)
            finally:
                rec.cpu_means_host -= 1

        for mod in (fc, fpg):
            if hasattr(mod, "foreach_reduce"):
                self._set(mod, "foreach_reduce", foreach_reduce)


def nccl_estimate(groups: list[int], channels: int = NCCL_CHANNELS, buffsize: int = NCCL_BUFFSIZE) -> int:
    """Bytes NCCL's communicators take on one rank, outside the caching
    allocator: for every process group of more than one rank, a ring's two
    neighbours × ``channels`` × ``buffsize`` (the Simple protocol's buffers;
    LL and LL128 add less). An estimate: NCCL's channel count depends on the
    topology, and NCCL ≥ 2.22 connects lazily (only algorithms used)."""
    return sum(2 * channels * buffsize for n in groups if n > 1)


class _DoneWork:
    """An asynchronous collective's handle whose future holds its tensors
    (the fake process group's futures hold nothing, which communication
    hooks read)."""

    def __init__(self, tensors):
        self._future = torch.futures.Future()
        self._future.set_result(tensors)

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def get_future(self):
        return self._future


class _Reducer:
    """DDP's C++ reducer, but for its one-time bucket rebuild before the
    second forward, which agrees the new bucket order across ranks by reading
    tensor data (fake tensors have none). DDP first puts every gradient in
    one bucket; the rebuild (without ``find_unused_parameters``) makes
    buckets of ``bucket_cap_mb`` (the first one of 1 MiB) and frees the old
    one. Recorded: the new buckets allocated and released at the rebuild;
    the reducer keeps using its first bucket (same bytes, one block where a
    GPU holds several: a documented difference)."""

    def __init__(self, reducer, ddp):
        self._reducer = reducer
        self._ddp = ddp
        self._rebuilt = False
        self._calls = 0

    def _rebuild_buckets(self) -> bool:
        ddp = self._ddp
        self._calls += 1
        # The first training forward has no gradient order to rebuild from.
        if self._calls < 2 or self._rebuilt or (ddp.find_unused_parameters and not ddp.static_graph):
            return False
        self._rebuilt = True
        import torch.distributed as dist

        params = [p for p in ddp.module.parameters() if p.requires_grad][::-1]
        if not params:
            return False
        first = getattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES", 1024 * 1024)
        buckets, _ = dist._compute_bucket_assignment_by_size(params, [first, ddp.bucket_bytes_cap],
                                                            [False] * len(params))
        fresh = [torch.empty(sum(params[i].numel() for i in b), dtype=params[b[0]].dtype,
                             device=params[b[0]].device) for b in buckets]
        del fresh
        return True

    def __getattr__(self, name):
        return getattr(self._reducer, name)


def _allreduce_hook(state, bucket):
    """DDP's default communication, as memory sees it: the bucket divided by
    the world size and all-reduced in place (no allocation)."""
    import torch.distributed as dist

    buffer = bucket.buffer()
    buffer.div_(dist.get_world_size())
    fut = torch.futures.Future()
    fut.set_result(buffer)
    return fut


def _broadcast_coalesced(process_group, tensors, buffer_size, src=0):
    """``dist._broadcast_coalesced`` without data: each bucket of tensors of
    one dtype, up to ``buffer_size`` bytes, is flattened into one buffer (the
    allocation the GPU makes) and released after the broadcast."""
    from torch._utils import _flatten_dense_tensors

    bucket: list = []
    size = 0
    for t in list(tensors) + [None]:
        if t is None or (bucket and (t.dtype != bucket[0].dtype or size + t.nbytes > buffer_size)):
            if bucket:
                flat = _flatten_dense_tensors(bucket)
                del flat
            bucket, size = [], 0
        if t is not None:
            bucket.append(t)
            size += t.nbytes


@contextlib.contextmanager
def _outside_modes():
    """Host-side setup (groups, meshes) runs outside the fake tensor and
    recording modes."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        yield


def _fake_device_type(device_type: str) -> str:
    return "cpu" if str(device_type).startswith("cuda") else device_type


def _restore_env(saved: dict) -> None:
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _follow_stream(rec) -> None:
    """Allocations are recorded on the current stream (outside captures)."""
    import torch.cpu as tcpu

    if rec is None or getattr(rec, "capturing", False):
        return
    rec.rec.stream = getattr(tcpu.current_stream(), "vramlab_stream", 0)


def _synchronised(rec) -> None:
    if rec is not None:
        rec.complete_deferred()
