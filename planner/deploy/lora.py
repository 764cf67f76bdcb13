"""The scenario's LoRA adapters in each engine's spelling: names and placeholder paths, module names, the rank an
engine accepts, and the sentences for what a flag cannot say. The engine modules call these.

Names checked against the engines' own sources and documentation (names only; no code taken):
- vLLM: `vllm serve` --enable-lora, --max-loras, --max-lora-rank, --max-cpu-loras ("Must be >= than max_loras.
  Defaults to max_loras", vllm/engine/arg_utils.py), --lora-modules name=path ... (nargs "+",
  vllm/entrypoints/openai/cli_args.py `lora_modules`); the accepted ranks are vllm/config/lora.py
  `MaxLoRARanks = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512]` (rank 1 since vllm-project/vllm PR #26461,
  Oct 2025; v0.9-era trees check `possible_max_ranks = (8, 16, 32, 64, 128, 256, 320, 512)`). vLLM wraps every
  supported projection whatever the adapters target (`LoRAModelManager._create_lora_modules`).
  Client: vllm/benchmarks/serve.py@009e6d4a1cd6 --lora-modules NAME ... ("For each request, the script chooses a
  LoRA module at random").
- SGLang: python/sglang/srt/server_args.py (docs.sglang.io/advanced_features/lora.html) --enable-lora,
  --max-loras-per-batch, --max-lora-rank (any integer), --lora-target-modules {q_proj, k_proj, v_proj, o_proj,
  gate_proj, up_proj, down_proj, ..., all}, --lora-paths NAME=PATH ..., --max-loaded-loras (adapters in host
  memory, at least --max-loras-per-batch). Client: python/sglang/bench_serving.py@50a613687fe1 --lora-name NAME ...
  (each request takes `lora_names[random.randint(0, len(lora_names) - 1)]`).
- TensorRT-LLM: docs/source/features/lora.md ("TRTLLM serve with LoRA": a `lora_config` in the
  --extra_llm_api_options YAML; a request names its adapter as `lora_request` {lora_name, lora_int_id, lora_path}
  in the body) and tensorrt_llm/lora_helper.py `LoraConfig` (lora_target_modules, max_lora_rank, max_loras,
  max_cpu_loras) with `get_default_trtllm_modules_to_hf_modules` (attn_q/k/v: q/k/v_proj, attn_dense: o_proj,
  mlp_h_to_4h: gate_proj, mlp_gate: up_proj, mlp_4h_to_h: down_proj). LoRA there is the PyTorch backend's; the
  TensorRT backend builds it into the engine (trtllm-build --lora_plugin --max_lora_rank --lora_target_modules).
"""

from __future__ import annotations

from planner.deploy.spec import Adapters

LISTED_ADAPTERS = 8  # more than this many adapters: one placeholder argument instead of a pair per adapter
MODULES_PLACEHOLDER = "LORA_MODULES"
NAMES_PLACEHOLDER = "LORA_NAMES"
ALL_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
HF_MODULES = {
    "q": "q_proj",
    "k": "k_proj",
    "v": "v_proj",
    "o": "o_proj",
    "gate": "gate_proj",
    "up": "up_proj",
    "down": "down_proj",
}
TRTLLM_MODULES = {
    "q": "attn_q",
    "k": "attn_k",
    "v": "attn_v",
    "o": "attn_dense",
    "gate": "mlp_h_to_4h",
    "up": "mlp_gate",
    "down": "mlp_4h_to_h",
}
VLLM_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
VLLM_V0_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


def listed(adapters: Adapters) -> bool:
    """Whether the commands name every adapter (a few) or hold one placeholder for all of them (many)."""
    return adapters.count <= LISTED_ADAPTERS


def names(adapters: Adapters) -> list[str]:
    """The adapters' names as requests use them (lora-1 ...), or the one placeholder for many adapters."""
    if not listed(adapters):
        return [NAMES_PLACEHOLDER]
    return [f"lora-{i}" for i in range(1, adapters.count + 1)]


def name_path_pairs(adapters: Adapters) -> list[str]:
    """name=path per adapter with placeholder paths (LORA_1_PATH ...), or the one placeholder for many."""
    if not listed(adapters):
        return [MODULES_PLACEHOLDER]
    return [f"lora-{i}=LORA_{i}_PATH" for i in range(1, adapters.count + 1)]


def placeholder_note(adapters: Adapters, serve_flag: str, bench_flag: str | None) -> str:
    """The sentence that says which placeholders to replace, in the module's "Replace X with ..." form."""
    if listed(adapters):
        last = adapters.count
        paths = "LORA_1_PATH" if last == 1 else f"LORA_1_PATH ... LORA_{last}_PATH"
        return (
            f"Replace {paths} in {serve_flag} with the adapters' checkpoints (local directories or Hugging Face ids); "
            "the plan sizes adapters, not their weights, so the paths are placeholders."
        )
    bench = f", and {NAMES_PLACEHOLDER} in the benchmark's {bench_flag} with their names" if bench_flag else ""
    return (
        f"Replace {MODULES_PLACEHOLDER} in {serve_flag} with the {adapters.count:,} adapters as name=path "
        f"arguments (lora-1=/adapters/1 lora-2=/adapters/2 ...){bench}: the commands hold one placeholder instead "
        f"of {adapters.count:,} pairs."
    )


def uniform_draw_note(adapters: Adapters, client: str) -> str | None:
    """The sentence for a plan whose requests favour some adapters: the clients draw adapters evenly."""
    if adapters.popularity is None:
        return None
    return (
        f"{client} draws each request's adapter uniformly at random among the listed names, while the plan spread "
        f"the requests by {adapters.popularity}: the benchmark's adapter swaps and distinct adapters per batch "
        "differ from the plan's (even traffic needs more slots and swaps than skewed traffic)."
    )


def round_up_rank(rank: int, allowed: tuple[int, ...]) -> int:
    """The smallest rank the engine accepts that holds `rank` (the planner's ranks stop at 512, the largest)."""
    return next((r for r in allowed if r >= rank), allowed[-1])


def cpu_slots(adapters: Adapters) -> int:
    """Adapters kept in host memory as the engine is told them: the plan's, never fewer than the GPU slots (vLLM
    and SGLang refuse fewer)."""
    return max(adapters.host_slots, adapters.gpu_slots)


def subset_note(adapters: Adapters, engine_title: str) -> str | None:
    """vLLM's sentence for adapters on a subset of the projections: it wraps them all."""
    if set(adapters.targets) >= set(ALL_TARGETS):
        return None
    return (
        f"The plan holds adapter slots on {', '.join(adapters.targets)} only, but {engine_title} wraps every "
        "supported projection whatever the adapters target: its slots take more memory than the plan counts "
        "(recent vLLM releases can restrict them: LoRAConfig.target_modules)."
    )
