"""`python -m planner traffic`: the JSON contract, the text report and one-sentence errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli.main import main
from planner.cli.traffic import parse_slo

CONTRACT = {
    "ttft_seconds",
    "tpot_seconds",
    "itl_seconds",
    "e2e_latency_seconds",
    "queue_seconds",
    "request_throughput_per_second",
    "output_tokens_per_second",
    "duration_seconds",
    "slo_attainment",
    "goodput_requests_per_second",
}


@pytest.fixture
def scenario(tmp_path):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"kind": "inference", "concurrency": 64}))
    return path


def _run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_holds_the_contract_keys_with_percentiles(scenario, capsys):
    code, out, _ = _run(
        ["traffic", str(scenario), "--rate", "2", "--requests", "300", "--slo", "p90_ttft_seconds<=1"], capsys
    )
    assert code == 0
    result = json.loads(out)
    traffic = result["traffic"]
    assert CONTRACT <= set(traffic)
    for key in ("ttft_seconds", "tpot_seconds", "itl_seconds", "e2e_latency_seconds", "queue_seconds"):
        assert set(traffic[key]) == {"mean", "p50", "p90", "p95", "p99", "likely"}
        assert traffic[key]["p50"] <= traffic[key]["p90"] <= traffic[key]["p99"]
        # each statistic's likely measured value, an interval holding it (issue 23, item 3)
        assert set(traffic[key]["likely"]) == {"mean", "p50", "p90", "p95", "p99"}
        for stat, (low, high) in traffic[key]["likely"].items():
            assert low <= traffic[key][stat] <= high
    for key in ("request_throughput_likely", "output_tokens_likely", "goodput_likely", "slo_attainment_likely"):
        low, high = traffic[key]
        assert 0 <= low <= high
    assert traffic["slo"][0]["verdict"] in ("meets", "at risk", "misses")
    assert traffic["num_requests"] == 300
    assert traffic["slo"][0]["metric"] == "ttft_seconds" and traffic["slo"][0]["percentile"] == 90
    assert any("round robin" in a for a in result["assumptions"])


def test_the_scenario_s_own_traffic_is_used_and_options_override_it(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"traffic": {"requests_per_second": 1.5, "num_requests": 120, "seed": 4}}))
    _, out, _ = _run(["traffic", str(path)], capsys)
    assert json.loads(out)["traffic"]["num_requests"] == 120
    _, out, _ = _run(["traffic", str(path), "--requests", "80", "--rate", "inf"], capsys)
    assert json.loads(out)["traffic"]["num_requests"] == 80


def test_text_report_with_curve_and_capacity(scenario, capsys):
    code, out, _ = _run(
        [
            "traffic",
            str(scenario),
            "--requests",
            "300",
            "--slo",
            "p99_ttft_seconds<=2",
            "--curve",
            "--capacity",
            "20",
            "--format",
            "text",
        ],
        capsys,
    )
    assert code == 0
    assert "knee" in out and "capacity:" in out and "replicas" in out and "$" in out


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--rate", "fast"], "is not a number"),
        (["--rate", "-3"], "requests_per_second"),
        (["--slo", "ttft<2"], "is not a target"),
        (["--slo", "p99_ttft_seconds<=1", "--slo", "p50_ttft_seconds<=2"], "two targets for ttft"),
        (["--capacity", "5"], "SLO target"),
        (["--capacity", "-1"], "--capacity"),
        (["--requests", "0"], "num_requests"),
        (["--trace", "/nonexistent/trace.csv"], "cannot read"),
        (["--calibration-any-gpu"], "needs a calibration"),
    ],
)
def test_bad_input_is_one_sentence_and_status_2(scenario, capsys, options, words):
    code, out, err = _run(["traffic", str(scenario), "--requests", "50", *options], capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and words in err and "Traceback" not in err


def test_disaggregated_splits_in_json(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"model": "llama-3.1-8b", "num_gpus": 2, "tensor_parallel": 1, "concurrency": 64}))
    code, out, _ = _run(["traffic", str(path), "--requests", "100", "--rate", "5", "--disaggregate", "best"], capsys)
    assert code == 0
    split = json.loads(out)["disaggregated"]
    assert {"splits", "best", "colocated", "disaggregation_wins", "reason"} <= set(split)
    assert split["splits"][0]["layout"] == {"prefill_gpus": 1, "prefill_tensor_parallel": 1}
    code, _, err = _run(["traffic", str(path), "--requests", "10", "--disaggregate", "2"], capsys)
    assert code == 2 and "must be less than" in err


def test_a_training_scenario_is_refused(tmp_path, capsys):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"kind": "training"}))
    code, _, err = _run(["traffic", str(path)], capsys)
    assert code == 2 and "inference scenario" in err


def test_a_hostile_trace_file_is_one_sentence(scenario, tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_bytes(b"arrival_seconds,prompt_tokens,output_tokens\n0,12,\xff\xfe\n")
    code, _, err = _run(["traffic", str(scenario), "--trace", str(trace)], capsys)
    assert code == 2 and "UTF-8" in err


def test_slo_parsing():
    slo = parse_slo(["p95_tpot_seconds<=0.05", "p95_e2e_latency_seconds<=30"])
    assert slo.percentile == 95 and slo.targets == {"tpot_seconds": 0.05, "e2e_latency_seconds": 30.0}
    assert parse_slo([]) is None


def test_as_a_subprocess(scenario):
    done = subprocess.run(
        [sys.executable, "-m", "planner", "traffic", str(scenario), "--requests", "100", "--format", "text"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "TTFT" in done.stdout and "assumptions:" in done.stdout


def test_the_readme_examples_run(capsys):
    root = Path(__file__).resolve().parents[1] / "examples"
    scenario, trace = str(root / "inference-traffic-slo.json"), str(root / "requests-trace.csv")
    code, out, _ = _run(["traffic", scenario, "--trace", trace, "--format", "text"], capsys)
    assert code == 0 and out.startswith("200 requests on 1 replica, routed round robin")
    code, out, _ = _run(["traffic", scenario, "--requests", "300"], capsys)
    assert code == 0 and json.loads(out)["traffic"]["slo"][0]["percentile"] == 99


def test_json_holds_the_latency_cdf_and_the_prefix_pool_breakdown(scenario, capsys):
    argv = ["traffic", str(scenario), "--rate", "3", "--requests", "300", "--shared-prefix", "0.5"]
    argv += ["--prefixes", "30", "--gpu-prefix-share", "0.01", "--prefix-pool", "ssd", "--pool-capacity-gb", "50"]
    code, out, _ = _run(argv, capsys)
    assert code == 0
    traffic = json.loads(out)["traffic"]
    table = traffic["latency_quantiles"]
    assert table["percentiles"][0] == 0 and table["percentiles"][-1] == 100 and 99.9 in table["percentiles"]
    assert table["ttft_seconds"][table["percentiles"].index(99)] == traffic["ttft_seconds"]["p99"]
    pool = traffic["prefix_cache"]
    assert pool["pool_tier"] == "ssd" and pool["pool_hits"] > 0 and pool["pool_bytes_transferred"] > 0
    assert pool["gpu_hits"] + pool["pool_hits"] + pool["misses"] == pool["requests_with_prefix"] == 300
    assert pool["pool_capacity_tokens_per_replica"] == pytest.approx(50e9 / 327_680)
    _, text, _ = _run([*argv, "--format", "text"], capsys)
    assert "pool hits" in text and "SSD pool read" in text and "p99.9" in text


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--pool-bandwidth-gbs", "-3"], "--pool-bandwidth-gbs must be a positive number"),
        (["--pool-capacity-gb", "nan"], "--pool-capacity-gb must be a positive number"),
        (["--gpu-prefix-share", "3"], "gpu_prefix_cache_share"),
        (["--prefixes", "0"], "num_prefixes"),
    ],
)
def test_bad_prefix_pool_options_get_a_sentence(scenario, capsys, options, words):
    code, _, err = _run(["traffic", str(scenario), "--requests", "50", *options], capsys)
    assert code != 0 and words in err and "Traceback" not in err
