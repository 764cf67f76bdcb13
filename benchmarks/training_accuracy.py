"""Training accuracy: published training runs replayed through planner.plan, error per source and regime.

Reads benchmarks/accuracy/training_reference.csv (one published run a row: its source at a commit or its paper and
table, every input of the run as a TrainingScenario field, the published metric and its definition) and writes
benchmarks/accuracy/training_report.md and training_report.csv.

Errors. For each planned row the *metric error* is predicted / published - 1 of the published metric itself
(step seconds, tokens/s per GPU, or Megatron hardware TFLOP/s per GPU). The *throughput error* puts every row on one
axis for the summaries: predicted / published throughput - 1, so a positive error means Headroom says the run is
faster than it was (for a step time that is published / predicted - 1). Medians are reported per source, per regime
(dense/MoE x GPU generation x scale, <= 64 GPUs or more), pooled, over sources (the median of the source medians)
and with each source left out.

Rows are not replayed when the publisher leaves out an input a plan needs (`missing`); the reason is reported. Rows
the planner refuses (a layout or precision it rejects) are reported with the planner's sentence: they are evidence,
not dropped. Features a published run used that no scenario field expresses (`not_in_scenario`: CPU activation
offloading, torch.compile, async TP, MXFP8 block scaling, an MTP layer) are planned without them and listed.

Standalone (no import of benchmarks/accuracy.py, which holds the serving corpus). Run:

    .venv/bin/python benchmarks/training_accuracy.py            # rewrite the report
    .venv/bin/python benchmarks/training_accuracy.py --check    # exit 1 when the committed report is stale
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner import plan  # noqa: E402
from planner.errors import PlanningError  # noqa: E402
from planner.training.scenario import TrainingScenario  # noqa: E402
from planner.uncertainty import TRAINING_SUMMARY_FILE, band_summary  # noqa: E402

ACCURACY_DIR = ROOT / "benchmarks" / "accuracy"
REFERENCE_FILE = ACCURACY_DIR / "training_reference.csv"
REPORT_MD = ACCURACY_DIR / "training_report.md"
REPORT_CSV = ACCURACY_DIR / "training_report.csv"


def _reference_dir() -> Path:
    """shared/reference beside the checkout (the tests' contract: HEADROOM_REFERENCE, else ../shared, else ./shared)."""
    for candidate in (
        os.environ.get("HEADROOM_REFERENCE"),
        ROOT.parent / "shared" / "reference",
        ROOT / "shared" / "reference",
    ):
        if candidate and (Path(candidate) / "hf_configs").exists():
            return Path(candidate)
    return ROOT.parent / "shared" / "reference"


HF_CONFIGS = _reference_dir() / "hf_configs"

# The GPU generation of each catalog id the corpus uses (the regime's middle term).
GENERATION = {
    "a100-80gb": "Ampere",
    "h100-sxm": "Hopper",
    "h200": "Hopper",
    "b200": "Blackwell",
    "gb200-nvl72": "Blackwell",
    "mi300x": "CDNA3",
}
MI300X_NOTE = (
    "MI300X: no AMD training run with a complete configuration was found in the stored sources (the ROCm docs describe "
    "how to run the Megatron-LM and torchtitan training dockers but publish no results beside them; AMD's "
    "performance-results page is stored only up to its inference tables; ROCm/cvs training configs hold pass/fail "
    "thresholds, not measured runs). The regime is empty, not estimated."
)
SMALL_SCALE_GPUS = 64  # the regime's scale split: <= 64 GPUs, or more

# Inputs a row must give to be planned; `missing` in the row names what its publisher left out.
REQUIRED = (
    "model_ref",
    "gpu",
    "num_gpus",
    "tensor_parallel",
    "pipeline_parallel",
    "data_parallel",
    "global_batch",
    "micro_batch",
    "sequence_length",
    "precision",
    "recompute",
    "metric",
    "value",
)
METRICS = ("tokens_per_second_per_gpu", "step_seconds", "hardware_tflops_per_gpu", "model_tflops_per_gpu")
THROUGHPUT_METRICS = ("tokens_per_second_per_gpu", "hardware_tflops_per_gpu", "model_tflops_per_gpu")

SOURCE_GROUP_NOTE = re.compile(r"\bsource_group=([^\s;,]+)")


def training_source(row: dict) -> str:
    """The independent source of a row, by the SOURCE_RULE of benchmarks/accuracy.py (restated for the cases this
    corpus has, not imported: that module is the serving corpus'): a note's `source_group=NAME` wins (papers on
    arxiv.org, one publisher's file in another's repository); else a GitHub URL's `owner/repo`; else the host."""
    override = SOURCE_GROUP_NOTE.search(row.get("notes") or "")
    if override:
        return override.group(1)
    parsed = urlsplit(row["source_url"].strip())
    host = parsed.netloc.lower().removeprefix("www.")
    parts = [p for p in parsed.path.split("/") if p]
    if host in ("github.com", "raw.githubusercontent.com") and len(parts) >= 2:
        return f"{parts[0]}/{parts[1]}".lower()
    return host


def read_rows(path: Path = REFERENCE_FILE) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


# ---------------------------------------------------------------------------------------------
# one row -> one scenario


def _gpt_config(spec: str) -> dict:
    """`gpt:heads=96,hidden=12288,layers=96,vocab=51200,positions=2048`: a GPT-2-shaped decoder (MHA, 4h GeLU MLP,
    learned positions, tied embeddings) with the published shape, as the Megatron-LM papers and MPT configs give it."""
    fields = dict(item.split("=") for item in spec.removeprefix("gpt:").split(","))
    return {
        "model_type": "gpt2",
        "n_embd": int(fields["hidden"]),
        "n_head": int(fields["heads"]),
        "n_layer": int(fields["layers"]),
        "n_positions": int(fields["positions"]),
        "vocab_size": int(fields["vocab"]),
        "tie_word_embeddings": True,
    }


def model_reference(ref: str) -> str | dict:
    """A catalog id, a `gpt:` shape, or `hf_config:FILE` read from shared/reference/hf_configs (never copied)."""
    if ref.startswith("gpt:"):
        return _gpt_config(ref)
    if ref.startswith("hf_config:"):
        path = HF_CONFIGS / ref.removeprefix("hf_config:")
        if not path.exists():
            raise FileNotFoundError(f"{path} not found (shared/reference/hf_configs beside the repository)")
        return json.loads(path.read_text())
    return ref


def _int(text: str) -> int | None:
    return int(text) if text.strip() else None


def _bool(text: str) -> bool | None:
    if not text.strip():
        return None
    if text.strip() not in ("True", "False"):
        raise ValueError(f"'{text}' is not True/False")
    return text.strip() == "True"


def scenario_fields(row: dict) -> dict:
    """The row's inputs as TrainingScenario fields; empty optional cells are left to the scenario's defaults."""
    fields: dict = {
        "kind": "training",
        "label": row["id"],
        "model": model_reference(row["model_ref"]),
        "gpu": row["gpu"],
        "num_gpus": int(row["num_gpus"]),
        "tensor_parallel": int(row["tensor_parallel"]),
        "pipeline_parallel": int(row["pipeline_parallel"]),
        "data_parallel": int(row["data_parallel"]),
        "global_batch_size": int(row["global_batch"]),
        "micro_batch_size": int(row["micro_batch"]),
        "sequence_length": int(row["sequence_length"]),
        "precision": row["precision"],
        "activation_checkpointing": row["recompute"],
    }
    optional_ints = {
        "virtual_stages": "virtual_pipeline_stages",
        "first_stage_layers": "first_pipeline_stage_layers",
        "last_stage_layers": "last_pipeline_stage_layers",
        "context_parallel": "context_parallel",
        "expert_parallel": "expert_parallel",
        "zero_stage": "zero_stage",
        "recompute_num_layers": "recompute_num_layers",
    }
    for column, name in optional_ints.items():
        value = _int(row[column])
        if value is not None:
            fields[name] = value
    optional_bools = {
        "distributed_optimizer": "distributed_optimizer",
        "sequence_parallel": "sequence_parallel",
        "flash_attention": "flash_attention",
        "dropout": "dropout",
        "grad_accumulation_fp32": "grad_accumulation_fp32",
        "overlap_grad_reduce": "overlap_grad_reduce",
        # Megatron-core runs (Megatron-Bridge, DGX Cloud and Together's DGXC recipes, Korthikanti et al. 2022):
        # the backward's TP collectives run under the weight-gradient GEMMs, Megatron-core's default
        "overlap_tp_backward": "overlap_tp_backward",
        # Transformer Engine userbuffers (Megatron-Bridge / NeMo recipes' tp_comm_overlap) and torchtitan's async TP
        "tp_comm_overlap": "tp_comm_overlap",
        "overlap_expert_all_to_all": "overlap_expert_all_to_all",
    }
    for column, name in optional_bools.items():
        value = _bool(row[column])
        if value is not None:
            fields[name] = value
    for column, name in (
        ("fp8_recipe", "fp8_recipe"),
        ("recompute_modules", "recompute_modules"),
        ("attention_kernel", "attention_kernel"),
        ("loss_kernel", "loss_kernel"),
        ("expert_dispatch", "expert_dispatch"),
    ):
        if row[column].strip():
            fields[name] = row[column].strip()
    if row["recompute_method"].strip():
        fields["recompute_method"] = row["recompute_method"].strip()
    if row["inter_node_bytes_per_second"].strip():
        fields["inter_node_bandwidth_bytes_per_second"] = float(row["inter_node_bytes_per_second"])
    return fields


def megatron_hardware_flops_per_token(row: dict) -> float:
    """Narayanan et al. 2021 Eq. 3 per token: 96 l h^2 (1 + s/6h + V/16lh) FLOPs (F / (B s); with the recompute
    forward). Only for `gpt:` shapes, the models the paper's formula is written for."""
    fields = dict(item.split("=") for item in row["model_ref"].removeprefix("gpt:").split(","))
    h, layers, vocab = int(fields["hidden"]), int(fields["layers"]), int(fields["vocab"])
    s = int(row["sequence_length"])
    return 96 * layers * h * h * (1 + s / (6 * h) + vocab / (16 * layers * h))


def published_tokens_per_second_per_gpu(row: dict) -> float | None:
    """The published figure as tokens/s per GPU where the publisher's definition allows it (None otherwise)."""
    value, metric = float(row["value"]), row["metric"]
    if metric == "tokens_per_second_per_gpu":
        return value
    if metric == "step_seconds":
        return int(row["global_batch"]) * int(row["sequence_length"]) / value / int(row["num_gpus"])
    if metric == "hardware_tflops_per_gpu" and row["model_ref"].startswith("gpt:"):
        return value * 1e12 / megatron_hardware_flops_per_token(row)
    return None  # model TFLOP/s with an unstated FLOP count


def predicted_metric(row: dict, performance) -> float:
    """The plan's value of the row's published metric."""
    metric = row["metric"]
    if metric == "tokens_per_second_per_gpu":
        return performance.tokens_per_second_per_gpu
    if metric == "step_seconds":
        return performance.step_seconds
    if metric == "hardware_tflops_per_gpu":
        return performance.tokens_per_second_per_gpu * megatron_hardware_flops_per_token(row) / 1e12
    raise ValueError(f"metric {metric} has no planned counterpart (its FLOP count is not stated)")


# ---------------------------------------------------------------------------------------------
# the replay


@dataclass(frozen=True)
class Replay:
    row: dict
    source: str
    status: str  # planned | rejected | incomplete
    reason: str = ""
    regime: str = ""
    predicted: float | None = None
    metric_error: float | None = None  # predicted / published - 1 of the published metric
    throughput_error: float | None = None  # > 0: predicted faster than published
    published_tokens: float | None = None  # the published figure as tokens/s per GPU, where convertible
    predicted_tokens: float | None = None
    fits: bool | None = None
    breakdown: tuple[tuple[str, float], ...] = ()  # the plan's step breakdown, seconds per step, largest first

    @property
    def compute_share(self) -> float | None:
        """The forward/backward share of the predicted step (the rest: bubble, exposed communication, optimizer)."""
        total = sum(v for _, v in self.breakdown)
        return dict(self.breakdown).get("forward_backward_seconds", 0.0) / total if total else None

    @property
    def largest_other_term(self) -> str:
        """The largest step term besides forward/backward, with its seconds ('' when none is above 1% of the step)."""
        total = sum(v for _, v in self.breakdown)
        others = [(k, v) for k, v in self.breakdown if k != "forward_backward_seconds" and v > 0.01 * total]
        return f"{others[0][0].removesuffix('_seconds')} {others[0][1]:.3g} s" if others else ""

    @property
    def id(self) -> str:
        return self.row["id"]


def regime_of(row: dict, is_moe: bool | None) -> str:
    family = "?" if is_moe is None else ("MoE" if is_moe else "dense")
    scale = f"<={SMALL_SCALE_GPUS}" if int(row["num_gpus"]) <= SMALL_SCALE_GPUS else f">{SMALL_SCALE_GPUS}"
    return f"{family} / {GENERATION.get(row['gpu'], row['gpu'])} / {scale} GPUs"


def _is_moe(row: dict) -> bool | None:
    try:
        from planner.model.catalog import resolve_model

        return resolve_model(model_reference(row["model_ref"])).is_moe
    except Exception:  # an unknown model is reported by the replay itself
        return None


def _sentence(exc: Exception) -> str:
    text = str(exc)
    if hasattr(exc, "errors"):  # pydantic: the first error's message, without the URL boilerplate
        errors = exc.errors()  # type: ignore[attr-defined]
        if errors:
            text = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}" for e in errors[:2])
    return " ".join(text.split())[:400]


def replay(row: dict) -> Replay:
    source = training_source(row)
    published_tokens = published_tokens_per_second_per_gpu(row)
    regime = regime_of(row, _is_moe(row))
    empty = [c for c in REQUIRED if not row[c].strip()]
    if row["missing"].strip() or empty:
        reason = row["missing"].strip() or f"columns {', '.join(empty)} are empty"
        return Replay(row, source, "incomplete", reason, regime, published_tokens=published_tokens)
    if row["metric"] not in METRICS:
        return Replay(row, source, "incomplete", f"metric {row['metric']} is not one this replay reads", regime)
    try:
        scenario = TrainingScenario.model_validate(scenario_fields(row))
        result = plan(scenario)
    except (PlanningError, ValueError) as exc:
        return Replay(row, source, "rejected", _sentence(exc), regime, published_tokens=published_tokens)
    performance = result.performance
    published = float(row["value"])
    try:
        predicted = predicted_metric(row, performance)
    except ValueError as exc:
        return Replay(row, source, "incomplete", str(exc), regime, published_tokens=published_tokens)
    metric_error = predicted / published - 1
    throughput_error = metric_error if row["metric"] in THROUGHPUT_METRICS else published / predicted - 1
    return Replay(
        row,
        source,
        "planned",
        regime=regime,
        predicted=predicted,
        metric_error=metric_error,
        throughput_error=throughput_error,
        published_tokens=published_tokens,
        predicted_tokens=performance.tokens_per_second_per_gpu,
        fits=result.memory.fits,
        breakdown=tuple(sorted(performance.step_breakdown_seconds.items(), key=lambda kv: (-kv[1], kv[0]))),
    )


def replay_all(rows: Iterable[dict]) -> list[Replay]:
    return [replay(row) for row in rows]


# ---------------------------------------------------------------------------------------------
# summaries


@dataclass(frozen=True)
class Stats:
    rows: int
    median_signed: float
    median_abs: float
    p90_abs: float


def stats(errors: list[float]) -> Stats | None:
    if not errors:
        return None
    absolute = sorted(abs(e) for e in errors)
    p90 = absolute[min(len(absolute) - 1, int(round(0.9 * (len(absolute) - 1))))]
    return Stats(len(errors), statistics.median(errors), statistics.median(absolute), p90)


def grouped(replays: list[Replay], key: Callable[[Replay], str]) -> dict[str, list[Replay]]:
    groups: dict[str, list[Replay]] = {}
    for r in replays:
        groups.setdefault(key(r), []).append(r)
    return dict(sorted(groups.items()))


def planned(replays: list[Replay]) -> list[Replay]:
    return [r for r in replays if r.status == "planned"]


def errors_of(replays: list[Replay]) -> list[float]:
    return [r.throughput_error for r in replays if r.throughput_error is not None]


def over_sources(replays: list[Replay]) -> Stats | None:
    """Median over sources: the median of each source's median signed / absolute error (each source one vote)."""
    per_source = [stats(errors_of(rs)) for rs in grouped(planned(replays), lambda r: r.source).values()]
    present = [s for s in per_source if s is not None]
    if not present:
        return None
    return Stats(
        len(present),
        statistics.median(s.median_signed for s in present),
        statistics.median(s.median_abs for s in present),
        max(s.median_abs for s in present),
    )


def summary(replays: list[Replay]) -> dict:
    """Everything the report tabulates, as plain data (the test reads it)."""
    done = planned(replays)
    sources = sorted({r.source for r in replays})
    return {
        "rows": len(replays),
        "sources": sources,
        "planned": len(done),
        "rejected": sum(r.status == "rejected" for r in replays),
        "incomplete": sum(r.status == "incomplete" for r in replays),
        "pooled": stats(errors_of(done)),
        "over_sources": over_sources(replays),
        "per_source": {s: stats(errors_of(rs)) for s, rs in grouped(done, lambda r: r.source).items()},
        "per_regime": {g: stats(errors_of(rs)) for g, rs in grouped(done, lambda r: r.regime).items()},
        "per_family": {g: stats(errors_of(rs)) for g, rs in grouped(done, lambda r: r.regime.split(" / ")[0]).items()},
        "leave_one_out": {
            s: (stats(errors_of([r for r in done if r.source != s])), over_sources([r for r in done if r.source != s]))
            for s in sorted({r.source for r in done})
        },
    }


# ---------------------------------------------------------------------------------------------
# report


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value * 100:+.1f}%"


def _abs_pct(value: float | None) -> str:
    return "" if value is None else f"{value * 100:.1f}%"


def _num(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def _stats_row(label: str, st: Stats | None, extra: str = "") -> str:
    if st is None:
        return f"| {label} | 0 |  |  |  |{extra}"
    return f"| {label} | {st.rows} | {_pct(st.median_signed)} | {_abs_pct(st.median_abs)} | {_abs_pct(st.p90_abs)} |{extra}"


def report_markdown(replays: list[Replay]) -> str:
    s = summary(replays)
    lines = [
        "# Training accuracy: published runs replayed",
        "",
        "Generated by `python benchmarks/training_accuracy.py` from `benchmarks/accuracy/training_reference.csv`; do not edit.",
        "Every row is one published training run with its configuration; each planned row is `planner.plan` of that",
        "configuration. **Throughput error** = predicted / published throughput - 1 (a step time counts inverted):",
        "**positive means Headroom predicts the run faster than it was measured**. The per-row table also gives the error of",
        "the published metric itself (predicted / published - 1).",
        "",
        f"{s['rows']} rows from {len(s['sources'])} sources: {s['planned']} planned, {s['rejected']} refused by the planner,"
        f" {s['incomplete']} not replayed (an input the publisher does not state);"
        f" {sum(1 for r in planned(replays) if r.fits is False)} planned rows are said not to fit in memory although they ran.",
        "A source is one publisher's benchmark effort (the SOURCE_RULE of `benchmarks/accuracy.py`: a GitHub repository, or a",
        "row's `source_group=` note for papers and for one publisher's file inside another's repository).",
        "",
        "## Headline",
        "",
        "| scope | rows (sources) | median signed | median abs | p90 abs (max source median) |",
        "|---|---|---|---|---|",
    ]
    pooled, over = s["pooled"], s["over_sources"]
    lines.append(_stats_row("pooled over rows", pooled).replace("| pooled over rows |", "| pooled over rows |"))
    if over is not None:
        lines.append(
            f"| median over sources | {over.rows} sources | {_pct(over.median_signed)} | {_abs_pct(over.median_abs)} | "
            f"{_abs_pct(over.p90_abs)} |"
        )
    for family, st in s["per_family"].items():
        lines.append(_stats_row(f"{family} rows", st))
    lines += [
        "",
        "## Per source",
        "",
        "| source | rows | median signed | median abs | p90 abs | planned / refused / not replayed |",
        "|---|---|---|---|---|---|",
    ]
    for source in s["sources"]:
        mine = [r for r in replays if r.source == source]
        counts = (
            f" {sum(r.status == 'planned' for r in mine)} / {sum(r.status == 'rejected' for r in mine)} / "
            f"{sum(r.status == 'incomplete' for r in mine)} |"
        )
        lines.append(_stats_row(f"`{source}`", s["per_source"].get(source), counts))
    lines += [
        "",
        "## Per regime (dense/MoE x GPU generation x scale)",
        "",
        "| regime | rows | median signed | median abs | p90 abs | sources |",
        "|---|---|---|---|---|---|",
    ]
    for regime, rs in grouped(planned(replays), lambda r: r.regime).items():
        names = ", ".join(sorted({r.source for r in rs}))
        lines.append(_stats_row(regime, s["per_regime"][regime], f" {names} |"))
    lines += [
        "",
        "## Each source left out",
        "",
        "Pooled and over-sources medians of the planned rows without that source (no constant here was chosen while",
        "looking at this corpus: the table shows how much any one publisher moves the headline).",
        "",
        "| source left out | rows left | pooled median signed | pooled median abs | over sources signed | over sources abs |",
        "|---|---|---|---|---|---|",
    ]
    for source, (pooled_out, over_out) in s["leave_one_out"].items():
        lines.append(
            f"| `{source}` | {pooled_out.rows if pooled_out else 0} | {_pct(pooled_out.median_signed if pooled_out else None)} | "
            f"{_abs_pct(pooled_out.median_abs if pooled_out else None)} | {_pct(over_out.median_signed if over_out else None)} | "
            f"{_abs_pct(over_out.median_abs if over_out else None)} |"
        )
    lines += [
        "",
        "## Planned rows",
        "",
        "`compute share`: forward/backward over the predicted step; `largest other term`: the biggest of bubble, exposed",
        "communication and optimizer in the plan's step breakdown; `fits`: whether the plan says the run fits in memory",
        "(every row here ran as published).",
        "",
        "| id | source | regime | metric | published | predicted | metric error | throughput error | compute share | largest other term | fits | not in scenario |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in planned(replays):
        lines.append(
            f"| {r.id} | `{r.source}` | {r.regime} | {r.row['metric']} | {_num(float(r.row['value']))} | {_num(r.predicted)} | "
            f"{_pct(r.metric_error)} | {_pct(r.throughput_error)} | {_abs_pct(r.compute_share)} | {r.largest_other_term} | "
            f"{'yes' if r.fits else 'no'} | {_cell(r.row['not_in_scenario'])} |"
        )
    refused = [r for r in replays if r.status == "rejected"]
    lines += ["", "## Refused by the planner", ""]
    if refused:
        lines += ["| id | source | regime | the planner's reason |", "|---|---|---|---|"]
        lines += [f"| {r.id} | `{r.source}` | {r.regime} | {_cell(r.reason)} |" for r in refused]
    else:
        lines.append("None.")
    skipped = [r for r in replays if r.status == "incomplete"]
    lines += [
        "",
        "## Not replayed (an input is not published)",
        "",
        "| id | source | published | as tokens/s per GPU | what is missing |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.id} | `{r.source}` | {_num(float(r.row['value']))} {r.row['metric']} | {_num(r.published_tokens)} | {_cell(r.reason)} |"
        for r in skipped
    ]
    lines += [
        "",
        "## Coverage (rows per GPU)",
        "",
        "| GPU | dense rows | MoE rows | planned |",
        "|---|---|---|---|",
    ]
    for gpu in sorted(set(GENERATION) | {r.row["gpu"] for r in replays}):
        mine = [r for r in replays if r.row["gpu"] == gpu]
        dense = sum(r.regime.startswith("dense") for r in mine)
        moe = sum(r.regime.startswith("MoE") for r in mine)
        lines.append(f"| {gpu} | {dense} | {moe} | {sum(r.status == 'planned' for r in mine)} |")
    lines += ["", MI300X_NOTE]
    features: dict[str, int] = {}
    for r in planned(replays):
        for feature in filter(None, (f.strip() for f in r.row["not_in_scenario"].split(";"))):
            key = re.sub(r"\s*\(.*?\)", "", feature).strip()
            features[key] = features.get(key, 0) + 1
    lines += [
        "",
        "## Published features no scenario field expresses (planned rows, planned without them)",
        "",
        "| feature | planned rows |",
        "|---|---|",
    ]
    lines += [f"| {name} | {count} |" for name, count in sorted(features.items())]
    return "\n".join(lines) + "\n"


REPORT_COLUMNS = (
    "id",
    "source",
    "status",
    "regime",
    "metric",
    "published",
    "predicted",
    "metric_error",
    "throughput_error",
    "published_tokens_per_second_per_gpu",
    "predicted_tokens_per_second_per_gpu",
    "fits",
    "compute_share",
    "largest_other_term",
    "not_in_scenario",
    "reason",
)


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def report_csv(replays: list[Replay]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(REPORT_COLUMNS)
    for r in replays:
        writer.writerow(
            [
                r.id,
                r.source,
                r.status,
                r.regime,
                r.row["metric"],
                r.row["value"],
                _fmt(r.predicted),
                _fmt(r.metric_error),
                _fmt(r.throughput_error),
                _fmt(r.published_tokens),
                _fmt(r.predicted_tokens),
                "" if r.fits is None else r.fits,
                _fmt(r.compute_share),
                r.largest_other_term,
                r.row["not_in_scenario"],
                r.reason,
            ]
        )
    return out.getvalue()


# A family's left-out check drops a whole source at a time where the family has at least this many sources (one
# publisher's rows move together); with fewer, each row is left out on its own.
MIN_SOURCES_FOR_SOURCE_CHECK = 3


def band_families(replays: list[Replay]) -> dict[str, dict]:
    """What the planner's training ranges read (`planner/training_accuracy.json`, `uncertainty.training_bands`):
    per family, dense and MoE, the planned rows' throughput errors (predicted / published - 1 of tokens/s, the
    convention of the in-house families' achieved FLOP/s), their spread and the band that holds 80 % of them when
    each source (or, with fewer than `MIN_SOURCES_FOR_SOURCE_CHECK` sources, each row) is left out."""
    families = {}
    for family, prefix in (("training_dense", "dense"), ("training_moe", "MoE")):
        rows = [r for r in planned(replays) if r.regime.startswith(prefix) and r.throughput_error is not None]
        if not rows:
            continue
        errors = [r.throughput_error for r in rows]
        sources = sorted({r.source for r in rows})
        groups = [r.source for r in rows] if len(sources) >= MIN_SOURCES_FOR_SOURCE_CHECK else None
        summary, signed = stats(errors), sorted(errors)
        assert summary is not None
        families[family] = {
            "cases": summary.rows,
            "sources": len(sources),
            "median_abs_error": summary.median_abs,
            "p90_abs_error": summary.p90_abs,
            "median_signed_error": summary.median_signed,
            "p10_signed_error": signed[int(round(0.1 * (len(signed) - 1)))],
            "p90_signed_error": signed[int(round(0.9 * (len(signed) - 1)))],
            "max_abs_error": max(abs(e) for e in errors),
            "band": band_summary(errors, groups, group_name="source"),
            "generated_by": "benchmarks/training_accuracy.py",
        }
    return families


def summary_json(replays: list[Replay]) -> str:
    body = {
        "schema_version": 2,
        "generated_by": "benchmarks/training_accuracy.py",
        "families": band_families(replays),
    }
    return json.dumps(body, indent=2) + "\n"


def build(reference: Path = REFERENCE_FILE) -> tuple[str, str, str]:
    replays = replay_all(read_rows(reference))
    return report_markdown(replays), report_csv(replays), summary_json(replays)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed report differs from a fresh one")
    args = parser.parse_args(argv)
    if not HF_CONFIGS.exists():
        print(f"shared/reference not found at {HF_CONFIGS.parent}: some rows need its hf_configs", file=sys.stderr)
        return 2
    markdown, table, summary = build()
    outputs = ((REPORT_MD, markdown), (REPORT_CSV, table), (TRAINING_SUMMARY_FILE, summary))
    if args.check:
        stale = [p.name for p, text in outputs if not p.exists() or p.read_text() != text]
        if stale:
            print(f"stale: {', '.join(stale)} (run python benchmarks/training_accuracy.py)", file=sys.stderr)
            return 1
        return 0
    for path, text in outputs:
        path.write_text(text)
    print(markdown.split("## Per source")[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
