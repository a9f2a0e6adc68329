"""Built-in workloads: full-size models from real configurations, randomly
initialised (no downloads), runnable on a GPU or under fake tensors.

Each workload is a function ``fn(ctx, **params)``; ``ctx`` tells it the
device to build on and lets it mark phases. Parameters are plain ints,
strings and bools with defaults, listed in :data:`WORKLOADS`.
"""

from __future__ import annotations

import contextlib
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

    def empty_cache(self) -> None:
        """``torch.cuda.empty_cache()`` (an ``empty_cache`` event when recording)."""
        if self.recorder is not None:
            self.recorder.empty_cache()
        elif not self.fake and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def host(self):
        """Context for tensors that live on the host (offloading): under the
        recorder they are not recorded; on a GPU, build on ``cpu``."""
        if self.recorder is not None:
            return self.recorder.host()
        if self.device.type != "cpu":
            return torch.device("cpu")
        return contextlib.nullcontext()

    def to_device(self, t: torch.Tensor) -> torch.Tensor:
        """A host tensor's copy on the device (a new allocation)."""
        if t.device.type == self.device.type:
            return t.clone()
        return t.to(self.device)


@dataclass(frozen=True)
class Workload:
    """A built-in workload: where its function lives and its parameters."""

    module: str
    function: str
    params: dict
    doc: str
    #: Parameters added later: written to a recording's header only when
    #: they differ from their default, so that the recordings made before
    #: them stay byte for byte what they were.
    optional: dict = field(default_factory=dict)
    #: Name of a function ``(params, given) -> params`` in the module that
    #: fills in parameters whose default depends on others (``given``: the
    #: names given on the command line).
    resolve: str | None = None

    def load_module(self):
        return importlib.import_module(f"vramlab_record.workloads.{self.module}")

    def load(self):
        return getattr(self.load_module(), self.function)


#: Llama model sizes (``--size``): see llama.SIZES.
_LLM_OPTIONAL = {"size": "8b"}
_LLM_TRAIN = {"batch": 1, "seq": 512, "attention": "flash", "checkpointing": False, "steps": 2, "layers": 32}
_LLM_INFER = {"batch": 1, "seq": 512, "new_tokens": 8, "attention": "flash", "kv_cache": "dynamic",
              "precision": "bf16", "layers": 32}
#: diffusers' enable_vae_tiling() / enable_vae_slicing().
_SD_OPTIONAL = {"vae_tiling": False, "vae_slicing": False, "offload": "none"}
_SD = {"batch": 1, "resolution": 512, "steps": 2, "attention": "flash", "precision": "fp16"}

#: name -> workload. Parameter values given on the command line are parsed
#: by the type of the default.
WORKLOADS: dict[str, Workload] = {
    "llama-3-8b-train": Workload("llama", "train", _LLM_TRAIN,
                                 "Llama-3-8B-shaped training step: bf16 weights, AdamW(foreach), 2 steps "
                                 "(--size 1b|3b|8b|13b|70b for the other Llama shapes)",
                                 optional=_LLM_OPTIONAL, resolve="resolve_params"),
    "llama-3-8b-infer": Workload("llama", "infer", _LLM_INFER,
                                 "Llama-3-8B-shaped greedy generation: prefill + decode with a KV cache "
                                 "(--size 1b|3b|8b|13b|70b for the other Llama shapes)",
                                 optional=_LLM_OPTIONAL, resolve="resolve_params"),
    "sd15": Workload("diffusion", "sd15", {**_SD, "resolution": 512},
                     "Stable Diffusion 1.5: CLIP text encoder, UNet steps with CFG, VAE decode",
                     optional=_SD_OPTIONAL),
    "sdxl": Workload("diffusion", "sdxl", {**_SD, "resolution": 1024},
                     "SDXL base: two text encoders, UNet steps with CFG, fp32 VAE decode (force_upcast)",
                     optional=_SD_OPTIONAL),
    "flux": Workload("flux", "flux", {"batch": 1, "resolution": 1024, "steps": 2, "layers": 19, "single_layers": 38},
                     "FLUX.1-dev-shaped text-to-image: CLIP-L + T5-XXL, bf16 DiT steps (no CFG), VAE decode"),
    "gpt-small-train": Workload("gpt", "train", {"batch": 8, "seq": 256, "layers": 6, "d_model": 384, "heads": 6,
                                                 "vocab": 8192, "steps": 3},
                                "GPT-style LM training steps (6 layers, d=384, fp32, AdamW foreach); --leak true "
                                "keeps each step's logits in a list, --empty-cache true calls empty_cache() "
                                "after each step",
                                optional={"leak": False, "empty_cache": False}),
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
