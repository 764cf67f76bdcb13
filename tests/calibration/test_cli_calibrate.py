"""`python -m planner calibrate`: registered on the CLI, clear failures, a full CPU run that stores the
record, writes --out, and feeds `plan --calibration`; --activate chooses nothing server-wide."""

from __future__ import annotations

import json

from planner.calibration import store
from planner.cli.main import build_parser, main


def test_calibrate_is_registered_with_its_options():
    parser = build_parser()
    args = parser.parse_args(["calibrate", "--device", "cpu", "--seconds", "5", "--model", "gpt2", "--out", "x.json"])
    assert (args.device, args.seconds, args.model, args.out) == ("cpu", 5.0, "gpt2", "x.json")
    help_text = parser._subparsers._group_actions[0].choices["calibrate"].format_help()
    for flag in ("--device", "--seconds", "--model", "--out", "--gpu", "--memory-share", "--format"):
        assert flag in help_text


def test_cuda_on_a_machine_without_it_exits_2_with_the_reason(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["calibrate", "--device", "cuda", "--seconds", "2"]) == 2
    err = capsys.readouterr().err
    assert "CUDA is not available" in err and "Traceback" not in err


def test_invalid_settings_exit_2(capsys):
    assert main(["calibrate", "--device", "cpu", "--seconds", "-1"]) == 2
    assert "seconds" in capsys.readouterr().err
    assert main(["calibrate", "--device", "cpu", "--seconds", "2", "--model", "deepseek-v2-lite"]) == 2
    assert "latent attention" in capsys.readouterr().err


def test_a_cpu_run_stores_and_writes_the_record_and_activates_nothing(tmp_path, capsys, data_dir):
    out = tmp_path / "cal.json"
    report = tmp_path / "report.md"
    code = main(
        [
            "calibrate",
            "--device",
            "cpu",
            "--seconds",
            "2",
            "--model",
            "qwen2.5-0.5b",
            "--out",
            str(out),
            "--report",
            str(report),
            "--activate",
            "--format",
            "json",
            "--label",
            "ci cpu",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "[100%] done" in captured.err and "saved" in captured.err
    record = store.parse_calibration(captured.out, "stdout")
    assert record.label == "ci cpu" and store.load_calibration_file(out) == record
    assert (data_dir / "calibrations" / f"{record.id}.json").exists()
    # --activate no longer chooses for the whole server: it says where the choice is made instead.
    assert "--activate no longer exists" in captured.err and not (data_dir / "calibrations" / "active.json").exists()
    text = report.read_text()
    assert text.startswith("# Calibration: ci cpu") and "| saved activations, train" in text
    command = f"python -m planner calibrate --device cpu --seconds 2 --model qwen2.5-0.5b --label 'ci cpu' --out {out}"
    assert command in text

    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"model": "qwen2.5-0.5b", "gpu": "cpu", "num_gpus": 1, "tensor_parallel": 1}))
    assert main(["plan", str(scenario), "--calibration", str(out)]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["calibration"] == "ci cpu"
    assert any("ci cpu" in line for line in planned["assumptions"])
