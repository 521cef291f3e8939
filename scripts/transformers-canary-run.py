#!/usr/bin/env python3
"""transformers-canary-run.py — kvcanary on HF transformers' continuous batching, at length: the fault table (every
planted engine fault, ground truth vs report), clean traffic (no false positive allowed) and the overhead table
(canary time per engine step and as a share of the model's step; tokens/s with the canary on and off).

  CPU (tiny model; the numbers in docs/transformers.md):
    build-py/venv-hf/bin/python scripts/transformers-canary-run.py --clean-steps 10000 --fault-trials 3
  H200 (random-weight Llama shapes, bf16; scripts/gpu-transformers.sh runs these, docs/transformers.md "Device
  run"): faults on the 1B shape, clean traffic on the small shape, within a deadline; then the overhead tables
    python3 scripts/transformers-canary-run.py --device cuda --shape 1b --clean-shape small --clean-steps 10000 \
        --fault-trials 2 --deadline EPOCH
    python3 scripts/transformers-canary-run.py --device cuda --shape 8b --clean-steps 0 --fault-trials 0 \
        --overhead 1,16,64 --contexts 1024,8192

Prints markdown as it goes (each table row when it is measured, so a run cut by a time limit keeps what it
did); progress on stderr; --json PATH also writes every number. Exit status 1 when a clean step reported
anything, a fault was missed or found at another step than its ground truth, an overhead row has no full-batch
decode step, or the deadline cut the clean traffic short of --clean-steps.
"""

import argparse
import gc
import json
import random
import statistics
import sys
import threading
import time

import torch
import transformers
from transformers import ContinuousBatchingConfig, GenerationConfig
from transformers.generation.continuous_batching import scheduler as cb_scheduler
from transformers.generation.continuous_batching.requests import RequestStatus

import kvcanary.integrations.transformers as kvt
from kvcanary.integrations import transformers_faults as faults

SHAPES = {  # Llama-style; 1b ~ Llama-3.2-1B, 8b ~ Llama-3.1-8B (random weights: only the cache matters)
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, vocab_size=1000),
    # the device's clean-traffic shape: 1B's head geometry (8 KV heads of 64) and vocabulary, 4 layers
    "small": dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8,
                  intermediate_size=1024, vocab_size=128256, head_dim=64, max_position_embeddings=131072),
    "1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=8192, vocab_size=128256, head_dim=64, max_position_embeddings=131072),
    "8b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072),
}

FAULTS = {
    "k_byte": lambda s: faults.KvByteFlip(which="k", seed=s, at_step=5 + s),
    "v_byte": lambda s: faults.KvByteFlip(which="v", layer=-1, seed=s, at_step=5 + s),
    "block_table": lambda s: faults.BlockTableOverwrite(at_step=6 + s, seed=s),
    "double_alloc": lambda s: faults.DoubleAllocation(at_step=4 + s, seed=s),
    "use_after_free": lambda s: faults.UseAfterFree(at_step=8 + s, seed=s),
}


def build(shape, device, dtype, kind="llama"):
    torch.manual_seed(0)
    cfg = dict(SHAPES[shape])
    with torch.device(device):
        if kind == "qwen2":
            c = transformers.Qwen2Config(**dict(cfg, num_hidden_layers=max(4, cfg["num_hidden_layers"])),
                                         use_sliding_window=True, sliding_window=48, max_window_layers=0,
                                         layer_types=["full_attention", "sliding_attention"]
                                         * (max(4, cfg["num_hidden_layers"]) // 2))
            model = transformers.Qwen2ForCausalLM(c)
        else:
            model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg))
    return model.to(dtype).eval()


def settle():
    """Freeze what lives through the run (models, modules) out of the garbage collector's view: transformers runs
    gc.collect() twice per generate_batch, and each pass otherwise walks every object of the process (on the CPU
    the clean traffic went from ~118 to ~193 steps/s). Behaviour is unchanged; frozen cycles are never freed."""
    gc.collect()
    gc.freeze()


def cb(blocks, batch_tokens, block_size=16):
    return ContinuousBatchingConfig(block_size=block_size, num_blocks=blocks, max_batch_tokens=batch_tokens)


def clean_traffic(model, handle, steps, seed, vocab, deadline=None):
    """Mixed prompt lengths, shared prefixes (a few system prompts), exact duplicates, queueing, and in a quarter of
    the calls a cache too small for the batch (CPU offload + restore, or soft resets); until `steps`, or until the
    next call would end past `deadline` (time.time(); judged by the slowest call so far). Returns the calls made."""
    r = random.Random(seed)
    prefixes = [[r.randrange(vocab) for _ in range(r.choice([16, 32, 40, 64, 96]))] for _ in range(4)]
    calls, start, slowest, said = 0, time.perf_counter(), 0.0, time.perf_counter()
    while handle.steps < steps:
        if deadline is not None and time.time() + 1.5 * slowest > deadline:
            print(f"clean: deadline, stopping at {handle.steps} of {steps} steps", file=sys.stderr, flush=True)
            break
        n = r.randrange(4, 33)
        ps = []
        for _ in range(n):
            p = (r.choice(prefixes) if r.random() < 0.6 else []) + [r.randrange(vocab) for _ in range(r.randrange(1, 120))]
            ps.append(p)
        ps += [list(x) for x in r.sample(ps, k=min(2, len(ps)))]  # duplicates
        gc = GenerationConfig(max_new_tokens=r.randrange(8, 65), do_sample=False, eos_token_id=-1)
        conf = cb(r.choice([64, 96, 160]), r.choice([64, 128, 256]))
        if r.random() < 0.25:  # a cache too small for the batch: offload to the CPU pool and restore, or soft reset
            conf = ContinuousBatchingConfig(block_size=16, num_blocks=r.choice([24, 32]), max_batch_tokens=128,
                                            cpu_offload_space=r.choice([0.0, 0.01]))
        t = time.perf_counter()
        model.generate_batch(ps, generation_config=gc, continuous_batching_config=conf)
        slowest = max(slowest, time.perf_counter() - t)
        calls += 1
        if calls % 5 == 0 or time.perf_counter() - said > 15:  # progress: a run cut by a time limit tells its rate
            said = time.perf_counter()
            elapsed = said - start
            print(f"clean: {handle.steps} of {steps} steps after {calls} calls, {elapsed:.0f} s, "
                  f"{handle.steps / elapsed:.1f} steps/s", file=sys.stderr, flush=True)
    return calls


def fault_prompts(vocab, seed=1, n=16):
    r = random.Random(seed)
    common = [r.randrange(vocab) for _ in range(40)]
    return [(common if i % 2 else []) + [r.randrange(vocab) for _ in range(r.randrange(5, 40))] for i in range(n)]


def run_fault(model, name, trial, vocab):
    handle = kvt.attach(model, kvt.CanaryConfig(mode="log", sink=lambda line: None))
    try:
        if name == "stale_prefix":
            fault = faults.run_stale_prefix_scenario(model, handle, seed=7 + trial)
        elif name == "offload_byte":  # a cache of 12 blocks for 16 requests: offloads and restores
            fault = faults.OffloadedByteFlip(at_step=1, seed=trial).install(handle)
            r = random.Random(1 + trial)
            model.generate_batch([[r.randrange(vocab) for _ in range(r.randrange(5, 40))] for _ in range(16)],
                                 generation_config=GenerationConfig(max_new_tokens=48, do_sample=False, eos_token_id=-1),
                                 continuous_batching_config=ContinuousBatchingConfig(
                                     block_size=16, num_blocks=12, max_batch_tokens=128, cpu_offload_space=0.01))
        else:
            fault = FAULTS[name](trial).install(handle)
            gc = GenerationConfig(max_new_tokens=32, do_sample=False, eos_token_id=-1)
            model.generate_batch(fault_prompts(vocab, seed=1 + trial), generation_config=gc,
                                 continuous_batching_config=cb(128, 256))
        report = handle.report()
    finally:
        handle.detach()
    first = fault.first_detection(report)
    return dict(fault=name, trial=trial, name=fault.name, detail=fault.detail, victim=fault.victim, steps=report.steps,
                expected_step=fault.expected_step, detected_step=first.step if first else None,
                reasons=first.reason_names if first else [], violations=len(report.violations),
                verdict=fault.check(report) or "caught in the step it became readable")


class PrefillAloneScheduler(cb_scheduler.FIFOScheduler):
    """The overhead rows' scheduler (--prefill alone): FIFO, except that while a prompt is waiting or prefilling, a
    step holds the decoding requests back. The rows measure only the steps in which every request decodes; FIFO
    decodes the prefilled requests alongside each later prefill chunk, and transformers' paged|sdpa computes such a
    step's mask densely over every request's keys, so a 64 x 8192 row's prefill costs ~32x more attention under FIFO
    (docs/transformers.md, "Why a 64 x 8192 row takes minutes"). A harness choice: no transformers source changes."""

    def schedule_batch(self, token_budget, cache_budget):
        active = self.active_requests
        if not self.waiting_requests and all(s.status == RequestStatus.DECODING for s in active.values()):
            return super().schedule_batch(token_budget, cache_budget)
        self.active_requests = {k: s for k, s in active.items() if s.status != RequestStatus.DECODING}
        try:
            scheduled = super().schedule_batch(token_budget, cache_budget)
        finally:  # the held-back requests keep their place; what the step admitted joins them
            active.update(self.active_requests)
            self.active_requests = active
        # No prompt fits the cache now: the decoding requests run (FIFO's step), since only they can free blocks.
        return scheduled if scheduled[0] else super().schedule_batch(token_budget, cache_budget)


cb_scheduler.SCHEDULER_MAPPING.setdefault("kvcanary_prefill_alone", PrefillAloneScheduler)


def progress(what, handle, t0, done, every=20.0):
    while not done.wait(every):  # len() of the handle's list of timed steps: no device call from this thread
        print(f"  {what}: {time.perf_counter() - t0:.0f} s, {len(handle.timings)} engine steps", file=sys.stderr,
              flush=True)


def overhead(model, batch, context, decode, vocab, device, real_kv, prefill_tokens=8192, labels=("off", "on"),
             prefill="alone"):
    """`batch` prompts of `context` random tokens, then decode. The model's step and the canary's are averaged over
    the full-batch decode steps (every request decoding one token): the cache has room for every request and no
    safety margin (the default FIFO margin of 15 % holds back the last prefills while the others decode). With
    prefill "alone" (PrefillAloneScheduler) every request decodes from the step after the last prefill, so decode + 2
    new tokens give `decode` full-batch steps; with "fifo" the first prompts decode alongside the later prefill
    chunks (of prefill_tokens), so each request generates decode + (prefill steps) tokens.
    `labels` runs one of the two only (a row too long for one device call: its halves in two calls)."""
    r = random.Random(batch * 7919 + context)
    ps = [[r.randrange(vocab) for _ in range(context)] for _ in range(batch)]
    tokens = min(prefill_tokens, batch * context)
    new = decode + 2 + (0 if prefill == "alone" else -(-batch * context // tokens))
    blocks = batch * ((context + new + 15) // 16 + 1) + 8
    gc = GenerationConfig(max_new_tokens=new, do_sample=False, eos_token_id=-1)
    conf = ContinuousBatchingConfig(block_size=16, num_blocks=blocks, max_batch_tokens=tokens, safety_margin=0.0,
                                    scheduler_type="kvcanary_prefill_alone" if prefill == "alone" else "fifo")
    out = {"prefill": prefill}
    for label in labels:  # off: the same hook with no stage run (guard=False), for the model's step time
        handle = kvt.attach(model, kvt.CanaryConfig(mode="none", per_step=False, timing=True, real_kv=real_kv,
                                                    guard=label == "on", max_context=context + new + 16,
                                                    max_requests=batch + 1))
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        done = threading.Event()  # progress on stderr, so that a run cut by a call's limit still tells its pace
        threading.Thread(target=progress, args=(f"{batch} x {context} {label}", handle, t, done), daemon=True).start()
        try:
            outputs = model.generate_batch(ps, generation_config=gc, continuous_batching_config=conf)
            out[f"failed_requests_{label}"] = sum(1 for v in outputs.values() if getattr(v, "error", None))
            if device == "cuda":
                torch.cuda.synchronize()
            out[f"wall_{label}_s"] = time.perf_counter() - t
            times = handle.step_times_ms()
            report = handle.report()
        finally:
            done.set()
            handle.detach()
        out[f"steps_{label}"] = len(times)
        dec = [x for x in times if x[1] == x[2] == batch]  # full decode steps: one token per request
        out[f"decode_steps_{label}"] = len(dec)
        if not dec:
            out["error"] = f"no step with all {batch} requests decoding ({label})"
            continue
        # medians (robust to a one-off stall: a collection, the first call's lazy initialization); means in the JSON
        step_ms = statistics.median(x[3] + x[4] for x in dec)
        out[f"step_ms_{label}"] = step_ms
        out[f"step_ms_mean_{label}"] = statistics.mean(x[3] + x[4] for x in dec)
        out[f"tokens_per_s_{label}"] = 1e3 * batch / step_ms
        if label == "on":
            for key, i in (("canary_ms", 3), ("model_ms", 4), ("canary_host_ms", 5)):
                out[key] = statistics.median(x[i] for x in dec)
                out[key.replace("_ms", "_mean_ms")] = statistics.mean(x[i] for x in dec)
            out["share_pct"] = 100.0 * out["canary_ms"] / out["model_ms"]
            out["violations"] = len(report.violations)
        print(f"  {batch} x {context} {label}: {out}", file=sys.stderr, flush=True)  # a cut row keeps its half
    return out


OVERHEAD_HEADER = ("| batch | context | decode steps | canary ms/step | canary host ms/step | model ms/step | share | "
                   "tokens/s off | tokens/s on | on/off |\n|---|---|---|---|---|---|---|---|---|---|")


def overhead_line(x):
    if "error" not in x and ("tokens_per_s_off" in x) != ("canary_ms" in x):  # one half (--labels)
        half = "off" if "tokens_per_s_off" in x else "on"
        return (f"| {x['batch']} | {x['context']} | {x.get('decode_steps_' + half, 0)} | {half} only: "
                f"{x.get('canary_ms', float('nan')):.3f} | {x.get('canary_host_ms', float('nan')):.3f} | "
                f"{x.get('model_ms', float('nan')):.2f} | | {x.get('tokens_per_s_off', float('nan')):.1f} | "
                f"{x.get('tokens_per_s_on', float('nan')):.1f} | |")
    if "canary_ms" not in x or "tokens_per_s_off" not in x:
        return f"| {x['batch']} | {x['context']} | {x.get('decode_steps_on', 0)} | {x.get('error', 'failed')} |"
    return (f"| {x['batch']} | {x['context']} | {x['decode_steps_on']} | {x['canary_ms']:.3f} | "
            f"{x['canary_host_ms']:.3f} | {x['model_ms']:.2f} | {x['share_pct']:.2f}% | {x['tokens_per_s_off']:.1f} | "
            f"{x['tokens_per_s_on']:.1f} | {x['tokens_per_s_on'] / x['tokens_per_s_off']:.3f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tiny", help="the faults' and the overhead's model")
    ap.add_argument("--clean-shape", choices=sorted(SHAPES), default=None,
                    help="the clean traffic's Llama (default: --shape); its sliding-window part is always a tiny Qwen2")
    ap.add_argument("--dtype", default=None, help="default: float32 on CPU, bfloat16 on CUDA")
    ap.add_argument("--clean-steps", type=int, default=10000)
    ap.add_argument("--fault-trials", type=int, default=3)
    ap.add_argument("--overhead", default="", help="decode batch sizes, e.g. 1,16,64 (empty: skip)")
    ap.add_argument("--contexts", default="1024,8192")
    ap.add_argument("--rows", default="", help="overhead rows BATCHxCONTEXT, e.g. 64x8192,16x1024, in this order "
                    "(instead of --overhead x --contexts)")
    ap.add_argument("--labels", default="off,on", help="the overhead runs of each row: off,on (default), off or on")
    ap.add_argument("--decode", type=int, default=32, help="full-batch decode steps per overhead row (at least)")
    ap.add_argument("--prefill-tokens", type=int, default=8192, help="max_batch_tokens of the overhead runs")
    ap.add_argument("--prefill", choices=("alone", "fifo"), default="alone",
                    help="overhead runs: prefill steps hold the decoding requests back (alone, default) or FIFO's "
                         "mixed steps (the rows up to 8d0fbcb)")
    ap.add_argument("--real-kv", default="partial")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--deadline", type=float, default=None,
                    help="wall clock (epoch seconds) by which to be done: the clean traffic stops short of it, and "
                         "overhead rows not started by then are skipped (both then fail the run)")
    ap.add_argument("--sdpa-cudnn", action="store_true",
                    help="CUDA: leave torch's cuDNN attention on (default: off; docs/transformers.md, 'Device run')")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    # The overhead rows and halves, checked before anything runs (a device call's faults and clean traffic first).
    try:
        if args.rows:
            pairs = [tuple(int(v) for v in r.split("x", 1)) for r in args.rows.split(",")]
            if any(len(p) != 2 for p in pairs):
                raise ValueError
        else:  # largest batch first: the rows issue 22's targets are read on (batch 64) come before a deadline
            pairs = [(b, int(c)) for b in sorted((int(b) for b in args.overhead.split(",") if b), reverse=True)
                     for c in args.contexts.split(",")]
    except ValueError:
        ap.error(f"--rows {args.rows!r} / --overhead {args.overhead!r} / --contexts {args.contexts!r}: integers, "
                 "rows as BATCHxCONTEXT")
    labels = tuple(args.labels.split(","))
    if not set(labels) <= {"off", "on"}:
        ap.error(f"--labels is {args.labels!r}: off, on or off,on")
    if args.device == "cuda" and not args.sdpa_cudnn:
        # torch 2.11 tries cuDNN attention first on sm90; with the bias mask of transformers' paged|sdpa it builds a
        # cuDNN graph for every new key length, per thread (each generate_batch has a new one): ~70 ms a step
        torch.backends.cuda.enable_cudnn_sdp(False)
    dtype = getattr(torch, args.dtype) if args.dtype else (torch.bfloat16 if args.device == "cuda" else torch.float32)
    vocab = SHAPES[args.shape]["vocab_size"]
    result = dict(args=vars(args), torch=torch.__version__, transformers=transformers.__version__, ok=True)

    def save():  # after each part, so that a run cut by a time limit leaves what it measured
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)

    def out(line=""):
        print(line, flush=True)

    sdpa = ""
    if args.device == "cuda":
        result["cudnn_sdpa"] = torch.backends.cuda.cudnn_sdp_enabled()
        sdpa = f", SDPA cuDNN {'on' if result['cudnn_sdpa'] else 'off'}"
    out(f"# kvcanary on transformers {transformers.__version__} continuous batching, torch {torch.__version__}, "
        f"{args.device}, shape {args.shape}, {dtype}{sdpa}")
    t = time.perf_counter()
    model = build(args.shape, args.device, dtype)
    settle()
    print(f"model {args.shape} built in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    if args.device == "cpu":
        faults.unpinned_offload_pool()

    if args.fault_trials:
        rows = result["faults"] = []
        out("\n## Faults planted in the engine\n\n| fault | trial | victim | ground-truth step | reported step | "
            "reasons (first row) | rows | steps | verdict |\n|---|---|---|---|---|---|---|---|---|")
        for name in list(FAULTS) + ["stale_prefix", "offload_byte"]:
            for trial in range(args.fault_trials):
                t = time.perf_counter()
                x = run_fault(model, name, trial, vocab)
                x["seconds"] = time.perf_counter() - t
                print(x, file=sys.stderr, flush=True)
                rows.append(x)
                result["ok"] &= x["verdict"] == "caught in the step it became readable"
                out(f"| {x['name']} | {x['trial']} | {x['victim']} | {x['expected_step']} | {x['detected_step']} | "
                    f"{'+'.join(x['reasons'])} | {x['violations']} | {x['steps']} | {x['verdict']} |")
        save()

    if args.clean_steps:
        clean_shape = args.clean_shape or args.shape
        totals = result["clean"] = dict(shape=clean_shape, target=args.clean_steps, steps=0, verified=0, written=0,
                                        violations=0, calls=0, seconds=0.0)
        out("\n## Clean traffic")
        start = time.time()
        for kind, share in (("llama", 0.8), ("qwen2", 0.2)):  # full attention, then full + sliding groups
            if kind == "llama":
                m = model if clean_shape == args.shape else build(clean_shape, args.device, dtype)
            else:
                m = build("tiny", args.device, dtype, kind)
            settle()
            deadline = args.deadline
            if deadline is not None and kind == "llama":  # leave the sliding-window part its share
                deadline = start + share * (deadline - start)
            handle = kvt.attach(m, kvt.CanaryConfig(mode="log", sink=lambda line: out("  " + line)))
            t = time.perf_counter()
            try:
                totals["calls"] += clean_traffic(m, handle, int(args.clean_steps * share), args.seed,
                                                 m.config.vocab_size, deadline)
                rep = handle.report()
            finally:
                handle.detach()
            totals["seconds"] += time.perf_counter() - t
            totals["steps"] += rep.steps
            totals["verified"] += rep.verified_slots
            totals["written"] += rep.written_slots
            totals["violations"] += len(rep.violations) + len(rep.plan_errors)
            save()
        short = totals["steps"] < args.clean_steps
        result["ok"] &= totals["violations"] == 0 and not short
        rate = totals["steps"] / max(totals["seconds"], 1e-9)
        out(f"{totals['steps']} engine steps in {totals['calls']} generate_batch calls ({totals['seconds']:.0f} s, "
            f"{rate:.1f} steps/s; Llama shape {clean_shape} + tiny Qwen2 with sliding layers), "
            f"{totals['verified']} slot reads verified, {totals['written']} slot writes stamped: "
            f"**{totals['violations']} false positives**"
            + (f" — cut by the deadline short of {args.clean_steps} steps" if short else ""))
        save()

    if pairs:
        rows = result["overhead"] = []
        out(f"\n## Overhead (medians over the full-batch decode steps, real-KV {args.real_kv}; canary = plan + "
            "verify K/V before the forward + write K/V after it, with the mapping, on the engine's stream (CUDA "
            "events; the host clock on CPU); canary host = the host clock around the canary's calls; tokens/s = "
            "batch / step time on the engine's stream)\n")
        out(OVERHEAD_HEADER)
        warm_up = GenerationConfig(max_new_tokens=4, do_sample=False, eos_token_id=-1)
        model.generate_batch([[1, 2, 3]], generation_config=warm_up, continuous_batching_config=cb(8, 64))  # lazy inits
        for batch, context in pairs:
            if args.deadline is not None and time.time() > args.deadline:
                x = dict(batch=batch, context=context, error="skipped: deadline")
            else:
                t = time.perf_counter()
                x = dict(batch=batch, context=context, **overhead(model, batch, context, args.decode, vocab,
                                                                  args.device, args.real_kv, args.prefill_tokens,
                                                                  labels, args.prefill))
                x["seconds"] = time.perf_counter() - t
            rows.append(x)
            print(x, file=sys.stderr, flush=True)
            out(overhead_line(x))
            result["ok"] &= ("error" not in x and all(x.get(f"failed_requests_{k}") == 0 for k in labels)
                             and ("on" not in labels or x.get("violations") == 0))
            save()

    save()
    out(f"\nresult: {'OK' if result['ok'] else 'FAILED'}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
