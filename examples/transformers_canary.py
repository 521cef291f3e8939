#!/usr/bin/env python3
"""kvcanary guarding HF transformers' continuous batching: a real engine generates with the canary on (same tokens
as without it, nothing reported), then again with a bug planted in its block manager, which the canary reports in
the step it becomes readable, naming the request.

    scripts/check-transformers.sh -k identical          # once: makes build-py/venv-hf (torch + transformers)
    build-py/venv-hf/bin/python examples/transformers_canary.py [--fault double_alloc|use_after_free|block_table|k_byte|v_byte]

A tiny Llama with random weights (no download): a KV canary needs the engine's cache, not a good model.
"""

import argparse
import random
import sys
import time

import torch
from transformers import ContinuousBatchingConfig, GenerationConfig, LlamaConfig, LlamaForCausalLM

import kvcanary.integrations.transformers as kvt
from kvcanary.integrations import transformers_faults as faults

FAULTS = {
    "double_alloc": lambda: faults.DoubleAllocation(at_step=4),
    "use_after_free": lambda: faults.UseAfterFree(at_step=8, seed=2),
    "block_table": lambda: faults.BlockTableOverwrite(at_step=6),
    "k_byte": lambda: faults.KvByteFlip(which="k"),
    "v_byte": lambda: faults.KvByteFlip(which="v", layer=1),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fault", choices=sorted(FAULTS), default="double_alloc")
    ap.add_argument("--requests", type=int, default=16)
    args = ap.parse_args()

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                         num_key_value_heads=2, intermediate_size=128, vocab_size=1000)).eval()
    r = random.Random(1)
    common = [r.randrange(1000) for _ in range(40)]  # half the prompts share a 40-token prefix
    prompts = [(common if i % 2 else []) + [r.randrange(1000) for _ in range(r.randrange(5, 40))]
               for i in range(args.requests)]

    def generate():
        out = model.generate_batch(prompts, generation_config=GenerationConfig(
            max_new_tokens=32, do_sample=False, eos_token_id=-1), continuous_batching_config=ContinuousBatchingConfig(
            block_size=16, num_blocks=128, max_batch_tokens=256))
        return {k: list(v.generated_tokens) for k, v in out.items()}

    t = time.perf_counter()
    plain = generate()
    t_plain = time.perf_counter() - t

    print("== 1. the engine with the canary on")
    handle = kvt.attach(model, kvt.CanaryConfig(mode="log", sink=lambda line: print("  " + line)))
    t = time.perf_counter()
    guarded = generate()
    t_guarded = time.perf_counter() - t
    report = handle.report()
    handle.detach()
    print(f"  {report.summary()}")
    print(f"  generated tokens identical to the run without the canary: {guarded == plain} "
          f"({len(plain)} requests; {t_plain:.2f} s without, {t_guarded:.2f} s with)")

    print(f"== 2. the same engine with a bug planted: {args.fault}")
    handle = kvt.attach(model, kvt.CanaryConfig(mode="log", sink=lambda line: None))
    fault = FAULTS[args.fault]().install(handle)
    generate()
    report = handle.report()
    handle.detach()
    print(f"  planted: {fault.name}: {fault.detail}")
    print(f"  ground truth: request {fault.victim} reads it first in engine step {fault.expected_step}")
    first = fault.first_detection(report)
    print(f"  {report.summary()}; the first ones:")
    for v in report.violations[:3]:
        print(f"    step {v.step} request {','.join(v.request_ids)} position {list(v.expected_positions)}")
        print(f"      {v.line}")
    verdict = fault.check(report)
    print(f"  caught: request {fault.victim} in step {first.step if first else None} -> "
          + ("in the step it became readable" if not verdict else verdict))
    return 0 if guarded == plain and report.clean is False and not verdict else 1


if __name__ == "__main__":
    sys.exit(main())
