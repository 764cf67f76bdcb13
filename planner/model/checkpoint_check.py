"""The checkpoint's own parameter count against Headroom's: a check, not an input.

A model imported from the Hugging Face Hub carries the element counts of its safetensors headers per dtype
(`HfApi.get_safetensors_metadata(...).parameter_count`, stored in the config's `_headroom` block as
`safetensors_parameters`). Headroom counts parameters from config.json layer by layer
(`planner.model.architecture.parameter_counts`); the two are compared here and the result becomes one
sentence in the architecture's assumptions, so every plan of the model lists it.

Weight memory still uses Headroom's count: the engine has no input for a checkpoint's count (weights are
counted per module group, each in its own dtype), so a difference is reported, never silently applied.

What a stored element is worth in parameters:
- a floating-point element (F64 ... F8_E4M3, BF16) is one parameter; block-quantized checkpoints store
  their scales as float tensors too (DeepSeek's F32 `weight_scale_inv`, one per 128 x 128 block), which the
  Hub counts like parameters (an excess of about 1 in 16,384, inside the tolerance);
- MXFP4 experts (gpt-oss) are U8 tensors: 16 bytes of packed 4-bit values plus one e8m0 scale byte for
  every 32 weights, so 17 U8 elements hold 32 parameters (OCP Microscaling Formats v1.0, section 5);
- integer elements of other quantized checkpoints (AWQ/GPTQ int32 packing, with zero points and group
  sizes of their own) cannot be turned back into parameters: the check says so instead of guessing;
- integer elements of an unquantized checkpoint are buffers (position ids, masks), not parameters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.errors import PlanningError
from planner.model.architecture import ModelArchitecture, parameter_counts

COUNTS_KEY = "safetensors_parameters"  # in a config's `_headroom` block
AGREE_FRACTION = 0.001  # |difference| / checkpoint count at or below this: the counts agree
MXFP4_PARAMETERS_PER_U8 = 32 / 17  # 32 weights = 16 packed bytes + 1 scale byte
_DTYPE = re.compile(r"^[A-Z][A-Z0-9_]{0,15}$")
_MAX_DTYPES = 32
_MAX_ELEMENTS = 10**15


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("F", "BF"))


def stored_counts(meta: Any) -> dict[str, int]:
    """The `safetensors_parameters` of a `_headroom` block, validated ({} when absent)."""
    if not isinstance(meta, dict) or meta.get(COUNTS_KEY) is None:
        return {}
    value = meta[COUNTS_KEY]
    if (
        not isinstance(value, dict)
        or len(value) > _MAX_DTYPES
        or not all(isinstance(k, str) and _DTYPE.match(k) for k in value)
        or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= _MAX_ELEMENTS for v in value.values())
    ):
        raise PlanningError(
            f"config.json _headroom.{COUNTS_KEY} must map safetensors dtypes (e.g. 'BF16') to element counts"
        )
    return dict(value)


@dataclass(frozen=True)
class ParameterCheck:
    """The checkpoint's parameters (from its stored elements) beside Headroom's count from config.json."""

    stored: dict[str, int]  # elements per safetensors dtype, as the Hub reports them
    headroom_parameters: int  # parameter_counts(arch).total_with_vision
    checkpoint_parameters: int | None  # None when the stored elements cannot be turned into parameters
    how: str  # how the elements were read ("", or e.g. "MXFP4 U8 elements x 32/17")
    unreadable: str = ""  # why checkpoint_parameters is None

    @property
    def difference(self) -> int | None:
        """Checkpoint minus Headroom (positive: the checkpoint holds more than Headroom counts)."""
        return None if self.checkpoint_parameters is None else self.checkpoint_parameters - self.headroom_parameters

    @property
    def relative_difference(self) -> float | None:
        if self.difference is None or not self.checkpoint_parameters:
            return None
        return self.difference / self.checkpoint_parameters

    @property
    def agrees(self) -> bool | None:
        rel = self.relative_difference
        return None if rel is None else abs(rel) <= AGREE_FRACTION

    def sentence(self) -> str:
        """One sentence without the leading capital or final stop (it follows "Config of <model>: ")."""
        stored = ", ".join(f"{dtype} {n:,}" for dtype, n in sorted(self.stored.items()))
        head = f"checkpoint check: the Hub's safetensors headers store {stored} elements"
        if self.checkpoint_parameters is None:
            return f"{head}, which {self.unreadable}; weight memory uses Headroom's count from config.json"
        holds = f"{head}, i.e. {self.checkpoint_parameters:,} parameters" + (f" ({self.how})" if self.how else "")
        diff = self.difference or 0
        if diff == 0:
            return f"{holds}, exactly Headroom's count from config.json"
        share = abs(diff) / self.checkpoint_parameters
        side = "fewer" if diff > 0 else "more"
        if self.agrees:
            verdict = "within rounding"
        elif diff > 0:
            verdict = "the checkpoint holds tensors Headroom does not model, such as MTP layers or extra heads"
        else:
            verdict = "Headroom counts tensors the checkpoint does not store, such as tied or dropped weights"
        return (
            f"{holds}; Headroom counts {self.headroom_parameters:,} from config.json ({abs(diff):,} {side}, "
            f"{share:.2%}: {verdict}); weight memory uses Headroom's count"
        )


def parameter_check(arch: ModelArchitecture, stored: Mapping[str, int]) -> ParameterCheck:
    """Compare the stored element counts with Headroom's count of `arch` (language model + vision tower)."""
    stored = dict(stored)
    headroom = parameter_counts(arch).total_with_vision
    floats = sum(n for dtype, n in stored.items() if _is_float(dtype))
    integers = {dtype: n for dtype, n in stored.items() if not _is_float(dtype) and n}
    method = arch.quantization.method if arch.quantization is not None else None
    if not integers:
        how = "scales included" if method else ""
        return ParameterCheck(stored, headroom, floats, how)
    if method is None:
        return ParameterCheck(stored, headroom, floats, f"{', '.join(sorted(integers))} buffers not counted")
    if method == "mxfp4" and set(integers) == {"U8"}:
        packed = round(integers["U8"] * MXFP4_PARAMETERS_PER_U8)
        return ParameterCheck(stored, headroom, floats + packed, "MXFP4 U8 elements x 32/17: 4-bit pairs + scales")
    return ParameterCheck(
        stored,
        headroom,
        None,
        "",
        unreadable=f"pack {method} weights into {', '.join(sorted(integers))} elements that are not one parameter "
        "each, so the counts cannot be compared",
    )


def with_parameter_check(arch: ModelArchitecture, stored: Mapping[str, int]) -> ModelArchitecture:
    """`arch` with the check's sentence added to its assumptions (unchanged when there are no counts)."""
    if not stored:
        return arch
    note = parameter_check(arch, stored).sentence()
    fields = {name: getattr(arch, name) for name in type(arch).model_fields}
    fields["assumptions"] = (*arch.assumptions, note)
    return type(arch)(**fields)


__all__ = [
    "AGREE_FRACTION",
    "COUNTS_KEY",
    "ParameterCheck",
    "parameter_check",
    "stored_counts",
    "with_parameter_check",
]
