"""Speculative decoding as a scenario option, and the draft network it names.

A cheap draft proposes k tokens per sequence, the target checks all of them in one step (k + 1 query
tokens per sequence) and keeps the accepted prefix plus one token of its own. With a per-token acceptance
rate a (independent positions), a verify step yields E = (1 - a^(k+1)) / (1 - a) tokens per sequence
(Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding", Eq. 1).

Three drafts: a separate small model sharing the tokenizer (`draft_model`), an EAGLE-style head (one
decoder layer of the target's width fed its hidden states and the next token, sharing its embedding and
output head; Li et al. 2024) and the model's own multi-token-prediction modules (`mtp`: DeepSeek-V3's
num_nextn_predict_layers, also GLM-4.5 and MiniMax-M2; one decoder layer of the model's kind each).
The draft's memory and the round's time are `planner.inference.speculative`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.arrays import Number
from planner.errors import PlanningError
from planner.model.architecture import ModelArchitecture
from planner.model.catalog import resolve_model
from planner.scenario_base import revised

SpeculativeMethod = Literal["draft_model", "eagle", "mtp"]

# Per-token acceptance when the scenario does not give one. Acceptance depends on the workload (chat, code,
# temperature) more than on anything Headroom models, so the plan marks these as assumptions.
DEFAULT_ACCEPTANCE: dict[str, float] = {"mtp": 0.85, "eagle": 0.7, "draft_model": 0.6}
ACCEPTANCE_SOURCES: dict[str, str] = {
    "mtp": "DeepSeek-V3 technical report (arXiv 2412.19437) Sec. 5.4.3: second-token acceptance 85-90%, "
    "1.8x tokens per second",
    "eagle": "a guess within the range EAGLE (Li et al. 2024) reports for chain drafts on MT-bench",
    "draft_model": "a guess (Leviathan et al. 2023 measure 0.5-0.9 depending on the model pair and task)",
}
# The same sources in a few words, where a number is labelled (the dashboard's "0.85 (assumed: ...)").
ACCEPTANCE_SOURCE_LABELS: dict[str, str] = {"mtp": "DeepSeek-V3 report", "eagle": "a guess", "draft_model": "a guess"}
METHOD_TITLES: dict[str, str] = {
    "draft_model": "draft model",
    "eagle": "EAGLE-style head",
    "mtp": "multi-token prediction (MTP)",
}


class SpeculativeDecoding(BaseModel):
    """Speculative decoding as a scenario option (absent: plain decoding)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: SpeculativeMethod = Field(
        default="eagle",
        description="draft_model: a small model sharing the tokenizer; eagle: an EAGLE-style one-layer head on the "
        "target's hidden states; mtp: the checkpoint's own multi-token-prediction modules (DeepSeek-V3, GLM-4.5)",
    )
    num_speculative_tokens: int = Field(
        default=3, ge=1, le=16, description="tokens the draft proposes per sequence and verify step (k)"
    )
    acceptance_rate: float | None = Field(
        default=None,
        gt=0.0,
        lt=1.0,
        description="chance that each drafted token is accepted; depends on the workload (measure it: vLLM logs "
        "the draft acceptance rate); empty: mtp 0.85 (DeepSeek-V3 report), eagle 0.7, draft_model 0.6 (guesses)",
    )
    draft_model: str | None = Field(
        default=None, max_length=200, description="catalog id of the draft model (method draft_model only)"
    )

    @model_validator(mode="after")
    def _draft_model_iff_needed(self) -> SpeculativeDecoding:
        if self.method == "draft_model" and not self.draft_model:
            raise PlanningError("speculative method 'draft_model' needs draft_model (a catalog id, e.g. llama-3.2-1b)")
        if self.method != "draft_model" and self.draft_model:
            raise PlanningError(f"draft_model is only read by method 'draft_model', not '{self.method}'")
        return self

    @property
    def acceptance(self) -> float:
        return self.acceptance_rate if self.acceptance_rate is not None else DEFAULT_ACCEPTANCE[self.method]

    @property
    def acceptance_is_assumed(self) -> bool:
        return self.acceptance_rate is None


def expected_tokens_per_step(acceptance: Number, drafted: Number) -> Number:
    """Tokens a sequence gains per verify step: the accepted prefix of `drafted` tokens plus the target's
    own token, (1 - a^(k+1)) / (1 - a) (Leviathan et al. 2023, Eq. 1)."""
    return (1 - acceptance ** (drafted + 1)) / (1 - acceptance)


# ---------------------------------------------------------------------------------------------
# the draft as an architecture


# A head drafts text: it shares the target's embedding and head, never its vision tower.
_NO_VISION = {
    "vision_encoder_parameters": 0,
    "vision_model_type": None,
    "vision_patches_per_image": 0,
    "vision_tokens_per_image": 0,
    "vision_hidden_size": 0,
    "vision_num_layers": 0,
}


def draft_architecture(target: ModelArchitecture, spec: SpeculativeDecoding) -> ModelArchitecture:
    """The network each draft step runs. A head (eagle, mtp) is a one-layer model over the target's
    embedding and output head; a draft model is itself. Raises PlanningError with a sentence when the
    draft cannot serve this target."""
    if spec.method == "draft_model":
        draft = resolve_model(spec.draft_model or "")
        if draft.vocab_size != target.vocab_size:
            raise PlanningError(
                f"draft model {draft.name} has a vocabulary of {draft.vocab_size:,} tokens, {target.name} one of "
                f"{target.vocab_size:,}: a draft must share the target's tokenizer"
            )
        return draft
    if spec.method == "mtp":
        if target.mtp_layers < 1:
            raise PlanningError(
                f"{target.name} ships no multi-token-prediction modules (its config has no num_nextn_predict_layers); "
                "use method 'eagle' or 'draft_model'"
            )
        last = target.layers[-1]
        return revised(
            target,
            name=f"{target.name} MTP module",
            **_NO_VISION,
            num_layers=1,
            first_k_dense_layers=0,
            sliding_window_layers=0,
            layer_pattern=(last,) if target.layer_pattern else (),
        )
    # EAGLE: a dense decoder layer of the target's width and attention, whatever the target's layer kinds.
    return revised(
        target,
        name=f"{target.name} EAGLE head",
        **_NO_VISION,
        num_layers=1,
        layer_pattern=(),
        first_k_dense_layers=0,
        sliding_window_layers=0,
        num_experts=0,
        experts_per_token=0,
        intermediate_size=target.intermediate_size or target.expert_intermediate_size or 4 * target.hidden_size,
    )


def head_fusion_parameters(target: ModelArchitecture, method: str) -> int:
    """A head's own parameters beyond its decoder layer: the 2h -> h projection that fuses the target's
    hidden state with the next token's embedding (EAGLE's fc, MTP's eh_proj), and MTP's two RMSNorms."""
    h = target.hidden_size
    if method == "eagle":
        return 2 * h * h
    if method == "mtp":
        return 2 * h * h + 2 * h
    return 0
