"""Built-in workloads: full-size models from real configurations, randomly
initialised (no downloads), runnable on a GPU or under fake tensors.

Each workload is a function ``fn(ctx, **params)``; ``ctx`` tells it the
device to build on and lets it mark phases. Parameters are plain ints,
strings and bools with defaults, listed in :data:`WORKLOADS`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

import torch


@dataclass
class Ctx:
    """What a workload needs from the recorder it runs under."""

    device: torch.device
    fake: bool
    marks: list = field(default_factory=list)
    recorder: object | None = None

    def mark(self, label: str) -> None:
        """Marks the start of a phase (a ``# phase:`` line in the CSV)."""
        self.marks.append(label)
        if self.recorder is not None:
            self.recorder.mark(label)
        elif not self.fake and torch.cuda.is_available():
            # Shows up in profiler traces (nsys).
            try:
                torch.cuda.nvtx.mark(label)
            except Exception:  # noqa: BLE001 - a missing NVTX library only loses the mark
                pass


@dataclass(frozen=True)
class Workload:
    """A built-in workload: where its function lives and its parameters."""

    module: str
    function: str
    params: dict
    doc: str

    def load(self):
        mod = importlib.import_module(f"vramlab_record.workloads.{self.module}")
        return getattr(mod, self.function)


_LLM_TRAIN = {"batch": 1, "seq": 512, "attention": "flash", "checkpointing": False, "steps": 2, "layers": 32}
_LLM_INFER = {"batch": 1, "seq": 512, "new_tokens": 8, "attention": "flash", "kv_cache": "dynamic",
              "precision": "bf16", "layers": 32}
_SD = {"batch": 1, "resolution": 512, "steps": 2, "attention": "flash", "precision": "fp16"}

#: name -> workload. Parameter values given on the command line are parsed
#: by the type of the default.
WORKLOADS: dict[str, Workload] = {
    "llama-3-8b-train": Workload("llama", "train", _LLM_TRAIN,
                                 "Llama-3-8B-shaped training step: bf16 weights, AdamW(foreach), 2 steps"),
    "llama-3-8b-infer": Workload("llama", "infer", _LLM_INFER,
                                 "Llama-3-8B-shaped greedy generation: prefill + decode with a KV cache"),
    "sd15": Workload("diffusion", "sd15", {**_SD, "resolution": 512},
                     "Stable Diffusion 1.5: CLIP text encoder, UNet steps with CFG, VAE decode"),
    "sdxl": Workload("diffusion", "sdxl", {**_SD, "resolution": 1024},
                     "SDXL base: two text encoders, UNet steps with CFG, fp32 VAE decode (force_upcast)"),
    "gpt-small-train": Workload("gpt", "train", {"batch": 8, "seq": 256, "layers": 6, "d_model": 384, "heads": 6,
                                                 "vocab": 8192, "steps": 3},
                                "GPT-style LM training steps (6 layers, d=384, fp32, AdamW foreach)"),
    "cs336-lm": Workload("cs336", "run", {"batch": 10, "seq": 200, "vocab": 10000, "d_model": 512,
                                          "d_ff": 1344, "layers": 4, "heads": 16, "mode": "fwdbwd",
                                          "steps": 3},
                         "CS336-style Transformer LM (einsum Linear, RMSNorm, RoPE, SwiGLU, own AdamW)"),
}


def parse_value(default, text: str):
    """Parses ``text`` by the type of ``default``."""
    if isinstance(default, bool):
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"'{text}' is not a boolean")
    if isinstance(default, int):
        return int(text)
    return text
