"""A GPT-style language model training step, recorded on the CPU.

The default trace bundled with vramlab: a 6-layer, d=384 decoder-only LM
(about 19M parameters at vocab 8192), batch 8 x 256 tokens, fp32, AdamW
(foreach, like the CUDA default), three optimizer steps with
zero_grad(set_to_none). The model lives in vramlab_record/workloads/gpt.py
(workload ``gpt-small-train``); this script records it for real on the CPU,
as workloads/data/gpt-small-train.csv was made:

    python workloads/record/gpt_small.py -o workloads/data/gpt-small-train.csv
"""

from __future__ import annotations

import sys

from vramlab_record import cpu

if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(cpu.main(["--real", *args[:2], "gpt-small-train", *args[2:]] if args[:1] in (["-o"], ["--output"])
                      else ["--real", "gpt-small-train", *args]))
