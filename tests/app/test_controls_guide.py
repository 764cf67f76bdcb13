"""ui.guide: dependent inputs adjust (with a note) instead of making the plan impossible. Pure functions."""

from __future__ import annotations

from planner.inference.scenario import InferenceScenario
from planner.training.scenario import TrainingScenario
from ui import form_specs
from ui.guide import guide

INFERENCE_LABELS = form_specs.labels_for("inference")
TRAINING_LABELS = form_specs.labels_for("training")


def inference(**values):
    base = {"num_gpus": 4, "tensor_parallel": 4, "pipeline_parallel": 1, "expert_parallel": 1}
    return {**base, **values}


def training(**values):
    base = {
        "num_gpus": 8,
        "tensor_parallel": 1,
        "pipeline_parallel": 1,
        "context_parallel": 1,
        "data_parallel": None,
        "expert_parallel": 1,
        "micro_batch_size": 1,
        "global_batch_size": 64,
    }
    return {**base, **values}


def test_lowering_gpus_below_tp_lowers_tp_and_says_so():
    # 8 GPUs -> 4 with TP 8: the largest divisor of 8 that divides 4 is 4.
    after, notes = guide("inference", inference(num_gpus=4, tensor_parallel=8), {"num_gpus"}, INFERENCE_LABELS)
    assert after["tensor_parallel"] == 4
    assert [n.name for n in notes] == ["tensor_parallel"]
    assert notes[0].note.startswith("TP (tensor) lowered from 8 to 4 to fit 4 GPUs")
    assert "tensor_parallel" not in notes[0].note
    InferenceScenario(**after)  # and the result is a valid scenario


def test_gpus_that_are_not_a_multiple_keep_the_largest_layout_that_divides_them():
    # 12 GPUs with TP 8: divisors of 8 are 1, 2, 4, 8; 4 is the largest that divides 12 (3 replicas).
    after, _ = guide("inference", inference(num_gpus=12, tensor_parallel=8), {"num_gpus"}, INFERENCE_LABELS)
    assert after["tensor_parallel"] == 4
    # 6 GPUs with TP 4 x PP 2: the products that divide 6 are at most 2, reached by TP 2 x PP 1 or TP 1 x PP 2;
    # TP is kept larger on a tie.
    after, notes = guide(
        "inference", inference(num_gpus=6, tensor_parallel=4, pipeline_parallel=2), {"num_gpus"}, INFERENCE_LABELS
    )
    assert (after["tensor_parallel"], after["pipeline_parallel"]) == (2, 1)
    assert {n.name for n in notes} == {"tensor_parallel", "pipeline_parallel"}


def test_raising_tp_beyond_the_gpus_raises_the_gpus_instead():
    # The user moved TP to 8 on 4 GPUs: the nearest multiple of 8 to 4 (at least 8) is 8 GPUs.
    after, notes = guide("inference", inference(num_gpus=4, tensor_parallel=8), {"tensor_parallel"}, INFERENCE_LABELS)
    assert (after["num_gpus"], after["tensor_parallel"]) == (8, 8)
    assert notes[0].note.startswith("GPUs set from 4 to 8")
    # 20 GPUs and TP 8: 20 / 8 = 2.5 rounds to 3 -> 24 GPUs.
    after, _ = guide("inference", inference(num_gpus=20, tensor_parallel=8), {"tensor_parallel"}, INFERENCE_LABELS)
    assert after["num_gpus"] == 24


def test_expert_parallelism_follows_a_shrunk_layout():
    # Mixtral on 8 GPUs with TP 8 and EP 8, lowered to 4 GPUs: TP -> 4; EP 8 is then neither a divisor of TP 4
    # nor a multiple of it dividing the stage's 4 GPUs; its largest divisor that is: 4.
    values = inference(num_gpus=4, tensor_parallel=8, expert_parallel=8)
    after, notes = guide("inference", values, {"num_gpus"}, INFERENCE_LABELS)
    assert (after["tensor_parallel"], after["expert_parallel"]) == (4, 4)
    assert [n.name for n in notes] == ["tensor_parallel", "expert_parallel"]
    InferenceScenario(model="mixtral-8x7b", **after)


def test_a_valid_layout_and_the_users_own_ep_are_left_alone():
    assert guide("inference", inference(), set(), INFERENCE_LABELS) == (inference(), [])
    values = inference(num_gpus=8, tensor_parallel=2, expert_parallel=8)
    after, notes = guide("inference", values, {"expert_parallel"}, INFERENCE_LABELS)
    assert after == values and notes == []  # the validation error explains it; EP is what the user just typed


def test_256_gpus_round_the_default_global_batch_up_to_one_micro_batch_per_replica():
    # DP = 256 / (1 x 1 x 1) = 256 and micro-batch 1: the smallest valid global batch is 256.
    after, notes = guide("training", training(num_gpus=256), {"num_gpus"}, TRAINING_LABELS)
    assert after["global_batch_size"] == 256
    assert notes[0].note.startswith("Global batch rounded from 64 to 256")
    assert "Micro-batch × DP (data) = 1 × 256 = 256" in notes[0].note
    TrainingScenario(**after)


def test_global_batch_rounds_to_the_nearest_multiple():
    # micro 1 x DP 8 = 8: 60 / 8 = 7.5 rounds up to 8 -> 64; 59 / 8 = 7.4 -> 56.
    assert guide("training", training(global_batch_size=60), set(), TRAINING_LABELS)[0]["global_batch_size"] == 64
    assert guide("training", training(global_batch_size=59), set(), TRAINING_LABELS)[0]["global_batch_size"] == 56
    # A suggested micro-batch of 6 on 8 replicas: 48 per step; 64 / 48 = 1.33 -> 48.
    after, _ = guide("training", training(micro_batch_size=6), {"micro_batch_size"}, TRAINING_LABELS)
    assert after["global_batch_size"] == 48 and after["micro_batch_size"] == 6


def test_an_explicit_dp_that_no_longer_fits_is_cleared_or_sets_the_gpus():
    # DP 8 x TP 1 = 8 GPUs; the user lowers the GPUs to 4: DP goes back to automatic (4 / 1 = 4).
    after, notes = guide("training", training(num_gpus=4, data_parallel=8), {"num_gpus"}, TRAINING_LABELS)
    assert after["data_parallel"] is None
    assert notes[0].name == "data_parallel"
    # The user sets TP 2 with DP 8 given: the GPUs follow, 2 x 8 = 16.
    after, _ = guide("training", training(tensor_parallel=2, data_parallel=8), {"tensor_parallel"}, TRAINING_LABELS)
    assert after["num_gpus"] == 16


def test_training_ep_must_divide_the_new_dp():
    # EP 8 on 8 GPUs (DP 8); the GPUs drop to 4: DP 4, and EP becomes gcd(8, 4) = 4.
    after, notes = guide("training", training(num_gpus=4, expert_parallel=8), {"num_gpus"}, TRAINING_LABELS)
    assert after["expert_parallel"] == 4
    assert "divide DP (data) = 4" in notes[0].note
