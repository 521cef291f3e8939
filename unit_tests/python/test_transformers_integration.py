"""kvcanary.integrations.transformers on HF transformers' real continuous-batching engine (CPU, tiny random-weight
models built from a config): generation bit-identical with the canary on, clean runs report nothing, every planted
engine fault is reported in the step it becomes readable, naming the request. Needs torch >= 2.5 and transformers
>= 5.17 (scripts/check-transformers.sh makes that environment); skipped elsewhere."""

import random

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "ContinuousBatchingConfig"):
    pytest.skip("transformers without continuous batching (needs >= 5.17)", allow_module_level=True)

from transformers import ContinuousBatchingConfig, GenerationConfig  # noqa: E402

import kvcanary  # noqa: E402
import kvcanary.integrations.transformers as kvt  # noqa: E402
from kvcanary import FailReason  # noqa: E402
from kvcanary.integrations import transformers_faults as faults  # noqa: E402

TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, vocab_size=1000)


def tiny(kind="llama", **extra):
    torch.manual_seed(0)
    if kind == "llama":
        cfg, cls = transformers.LlamaConfig(**TINY, **extra), transformers.LlamaForCausalLM
    elif kind == "mistral":  # every layer sliding
        cfg, cls = transformers.MistralConfig(**TINY, sliding_window=24, **extra), transformers.MistralForCausalLM
    else:  # qwen2: sliding and full layers mixed, two layer groups
        cfg = transformers.Qwen2Config(**dict(TINY, num_hidden_layers=4), use_sliding_window=True, sliding_window=24,
                                       max_window_layers=2, layer_types=["full_attention", "sliding_attention"] * 2)
        cls = transformers.Qwen2ForCausalLM
    return cls(cfg).eval()


def prompts(n=16, seed=1, shared=40):
    r = random.Random(seed)
    common = [r.randrange(1000) for _ in range(shared)]
    return [(common if i % 2 else []) + [r.randrange(1000) for _ in range(r.randrange(5, 40))] for i in range(n)]


def generate(model, ps, new=32, blocks=128, batch_tokens=256, **gen):
    gc = GenerationConfig(**dict(dict(max_new_tokens=new, do_sample=False, eos_token_id=-1), **gen))
    out = model.generate_batch(ps, generation_config=gc, continuous_batching_config=ContinuousBatchingConfig(
        block_size=16, num_blocks=blocks, max_batch_tokens=batch_tokens))
    return {k: list(v.generated_tokens) for k, v in out.items()}


def collecting(**kw):
    lines = []
    return kvt.CanaryConfig(mode="log", sink=lines.append, **kw), lines


@pytest.fixture(scope="module")
def llama():
    return tiny("llama")


@pytest.mark.parametrize("kind,batch_tokens", [("llama", 256), ("llama", 64), ("mistral", 256), ("qwen2", 64)])
def test_output_bit_identical_and_clean(kind, batch_tokens):
    model = tiny(kind)
    ps = prompts()
    plain = generate(model, ps, batch_tokens=batch_tokens)
    config, lines = collecting()
    handle = kvt.attach(model, config)
    try:
        guarded = generate(model, ps, batch_tokens=batch_tokens)
        report = handle.report()
    finally:
        handle.detach()
    assert guarded == plain
    assert report.clean, report.violations[:3] or report.plan_errors[:3]
    assert lines == []
    assert report.steps >= 33 and report.verified_slots > 10_000 and report.written_slots > 16 * 32


def test_detach_restores_transformers():
    from transformers.generation.continuous_batching import cache, model_runner

    before = (model_runner.ModelRunner.compute_batch, cache.PagedAttentionCache.copy_cache,
              cache.PagedAttentionCache.free_blocks)
    model = tiny()
    handle = kvt.attach(model)
    assert model_runner.ModelRunner.compute_batch is not before[0]
    with pytest.raises(ValueError, match="already has a canary"):
        kvt.attach(model)
    handle.detach()
    handle.detach()  # a second detach is a no-op
    assert (model_runner.ModelRunner.compute_batch, cache.PagedAttentionCache.copy_cache,
            cache.PagedAttentionCache.free_blocks) == before


def test_bad_arguments():
    with pytest.raises(TypeError, match="expected a transformers model"):
        kvt.attach(object())
    with pytest.raises(ValueError, match="mode"):
        kvt.CanaryConfig(mode="loud")
    with pytest.raises(ValueError, match="real_kv"):
        kvt.CanaryConfig(real_kv="some")


def test_guards_a_manager_and_sampled_forks(llama):
    """Forks copy blocks outside any forward (copy_cache); their records must follow or the children would fail."""
    ps = prompts(4)
    config, lines = collecting()
    handle = kvt.attach(llama, config)
    try:
        generate(llama, ps, new=24, do_sample=True, num_return_sequences=3, top_k=50)
        report = handle.report()
    finally:
        handle.detach()
    assert report.clean, report.violations[:3]
    assert report.steps > 0


FAULTS = {
    "k_byte": lambda: faults.KvByteFlip(which="k", layer=0),
    "v_byte": lambda: faults.KvByteFlip(which="v", layer=1, seed=3),
    "block_table": lambda: faults.BlockTableOverwrite(at_step=6),
    "double_alloc": lambda: faults.DoubleAllocation(at_step=4),
    "use_after_free": lambda: faults.UseAfterFree(at_step=8, seed=2),
}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_engine_fault_caught_in_the_step_it_becomes_readable(llama, name):
    config, lines = collecting()
    handle = kvt.attach(llama, config)
    fault = FAULTS[name]().install(handle)
    try:
        generate(llama, prompts())
        report = handle.report()
    finally:
        handle.detach()
    assert fault.struck_step is not None and fault.expected_step is not None, fault.detail
    assert fault.check(report) == "", fault.detail
    first = fault.first_detection(report)
    assert first.step == fault.expected_step and fault.victim in first.request_ids
    assert str(first) in lines  # log mode printed it in that step
    if isinstance(fault, faults.KvByteFlip):
        assert first.reasons == FailReason.VERIFY_REAL_KV_HASH
        assert first.kind == ("HEAD_K_FULL" if fault.which == "k" else "HEAD_V_FULL")


def test_stale_prefix_hit(llama):
    """A finished prompt's cached prefix block is evicted and handed to a long request; the bug keeps its hash, so
    the same prefix sent while that request runs matches a block that now holds the other request's KV."""
    config, lines = collecting()
    handle = kvt.attach(llama, config)
    try:
        fault = faults.run_stale_prefix_scenario(llama, handle)
        report = handle.report()
    finally:
        handle.detach()
    assert fault.victim == "again", (fault.detail, fault.evicted, fault.reused)
    assert fault.check(report) == "", fault.detail
    assert fault.first_detection(report).reasons & FailReason.VERIFY_TOKEN


def test_clean_manager_run_with_prefix_reuse(llama):
    """The same workload without the bug: prefix hits on live cached blocks only, nothing reported."""
    r = random.Random(7)
    prefix = [r.randrange(1000) for _ in range(48)]
    gc = GenerationConfig(max_new_tokens=8, do_sample=False, eos_token_id=-1)
    cbc = ContinuousBatchingConfig(block_size=16, num_blocks=24, max_batch_tokens=128)
    config, lines = collecting()
    handle = kvt.attach(llama, config)
    manager = llama.init_continuous_batching(generation_config=gc, continuous_batching_config=cbc)
    manager.start()
    try:
        for rid, ids in (("a", prefix + [1]), ("b", prefix + [2]), ("f", [r.randrange(1000) for _ in range(110)]),
                         ("c", prefix + [3])):
            manager.add_request(ids, request_id=rid, max_new_tokens=8)
            assert manager.get_result(request_id=rid, timeout=60) is not None
    finally:
        manager.stop(block=True, timeout=60)
        report = handle.report()
        handle.detach()
    assert report.clean and report.steps > 0, report.violations[:3]


@pytest.fixture
def unpinned_offload_pool(monkeypatch):
    """transformers pins its CPU swap pool, which needs an NVIDIA driver: plain host memory here."""
    faults.unpinned_offload_pool(monkeypatch.setattr)


def offload_run(model):
    r = random.Random(1)
    ps = [[r.randrange(1000) for _ in range(r.randrange(5, 40))] for _ in range(16)]
    out = model.generate_batch(ps, generation_config=GenerationConfig(max_new_tokens=48, do_sample=False,
                                                                      eos_token_id=-1),
                               continuous_batching_config=ContinuousBatchingConfig(
                                   block_size=16, num_blocks=12, max_batch_tokens=128, cpu_offload_space=0.01))
    return {k: list(v.generated_tokens) for k, v in out.items()}


def test_cpu_offload_and_restore_move_the_records(llama, unpinned_offload_pool):
    """A full cache offloads requests to the CPU pool and restores them into new blocks with no forward: the
    records follow (without that, every restored request would be reported)."""
    from transformers.generation.continuous_batching import offloading_manager

    plain = offload_run(llama)
    config, lines = collecting()
    handle = kvt.attach(llama, config)
    restored = []
    inner = offloading_manager.OffloadingManager.restore_scheduled_requests

    def counting(manager, requests_in_batch):
        restored.extend(f.state.request_id for f in requests_in_batch if f.state.is_cpu_offloaded)
        return inner(manager, requests_in_batch)

    offloading_manager.OffloadingManager.restore_scheduled_requests = counting
    try:
        guarded = offload_run(llama)
        report = handle.report()
    finally:
        offloading_manager.OffloadingManager.restore_scheduled_requests = inner
        handle.detach()
    assert len(restored) >= 4
    assert guarded == plain
    assert report.clean, report.violations[:3]


def test_offloaded_byte_flip(llama, unpinned_offload_pool):
    config, lines = collecting()
    handle = kvt.attach(llama, config)
    fault = faults.OffloadedByteFlip(at_step=1).install(handle)
    try:
        offload_run(llama)
        report = handle.report()
    finally:
        handle.detach()
    assert fault.victim is not None, "nothing was offloaded"
    assert fault.check(report) == "", fault.detail
    assert fault.first_detection(report).kind == "HEAD_K_FULL"


def test_raise_mode_fails_the_engine_step(llama):
    handle = kvt.attach(llama, kvt.CanaryConfig(mode="raise", sink=lambda s: None))
    fault = faults.KvByteFlip(which="k").install(handle)
    try:
        out = llama.generate_batch(prompts(), generation_config=GenerationConfig(
            max_new_tokens=32, do_sample=False, eos_token_id=-1), continuous_batching_config=ContinuousBatchingConfig(
            block_size=16, num_blocks=128, max_batch_tokens=256))
        report = handle.report()
    finally:
        handle.detach()
    assert fault.check(report) == ""
    # transformers fails the requests of the batch that raised
    failed = [k for k, v in out.items() if getattr(v, "error", None)]
    assert failed, {k: getattr(v, "status", None) for k, v in out.items()}
    assert isinstance(kvt.CanaryViolationInEngine([]), kvcanary.CanaryViolation)


def canary_run_script():
    """scripts/transformers-canary-run.py as a module (it registers the kvcanary_prefill_alone scheduler)."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "transformers-canary-run.py"
    spec = importlib.util.spec_from_file_location("transformers_canary_run", path)
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    return run


@pytest.mark.parametrize("prefill", ["fifo", "alone"])
def test_overhead_run_measures_full_batch_decode_steps(llama, prefill):
    """The overhead table's rows come from decode steps with every request decoding. At batch > 1 the H200 run of
    6e6455a had none (nan rows): the FIFO scheduler's 15 % safety margin held the last prefills back, and the
    first requests finished decoding before the last finished their chunked prefill. Here both happen without
    the fix (16 x 256 tokens, 512 per step: 8 prefill steps, 8 decode steps). With prefill "alone" no step mixes a
    decode with a prefill chunk: 8 prefill steps, then decode + 1 full-batch steps, nothing else."""
    row = canary_run_script().overhead(llama, batch=16, context=256, decode=8, vocab=1000, device="cpu", real_kv="partial",
                       prefill_tokens=512, prefill=prefill)
    assert "error" not in row, row
    assert row["decode_steps_off"] >= 8 and row["decode_steps_on"] >= 8
    assert row["failed_requests_off"] == 0 == row["failed_requests_on"] and row["violations"] == 0
    assert row["canary_ms"] > 0 and row["canary_host_ms"] > 0 and row["model_ms"] > 0
    if prefill == "alone":
        assert row["steps_on"] == 8 + 9 == row["steps_off"] and row["decode_steps_on"] == 9, row
    else:  # FIFO decodes the first prompts beside the later chunks: more steps than prefill + decode
        assert row["steps_on"] > 8 + row["decode_steps_on"], row


def test_prefill_alone_decodes_when_no_prompt_fits_the_cache(llama):
    """A cache with room for half of the prompts: holding the decoding requests back while the others wait would
    leave nothing to schedule (transformers fails every request then); the scheduler runs FIFO's step instead."""
    canary_run_script()
    ps = [[(7 * i + j) % 1000 for j in range(64)] for i in range(8)]
    gc = GenerationConfig(max_new_tokens=32, do_sample=False, eos_token_id=-1)
    conf = ContinuousBatchingConfig(block_size=16, num_blocks=26, max_batch_tokens=128, safety_margin=0.0,
                                    scheduler_type="kvcanary_prefill_alone")
    out = llama.generate_batch(ps, generation_config=gc, continuous_batching_config=conf)
    assert [getattr(v, "error", None) for v in out.values()] == [None] * 8
    assert [len(v.generated_tokens) for v in out.values()] == [32] * 8
