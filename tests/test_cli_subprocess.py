"""Every error path of every command as `python -m planner` runs it: exit status 2, exactly one `error:` line on
stderr, no traceback, nothing on stdout. (Before the CLI moved to planner.cli, `-m` imported the module twice
and a bad search printed a traceback: only the real `-m` start shows that.) Plus a reader that closes stdout.

An interpreter start costs about half a second of CPU, so the cases are grouped: all of them run in one
interpreter through runpy.run_module("planner", run_name="__main__", alter_sys=True), which is what
`python -m planner` does; and one case per error-handling module also runs as its own `python -m planner`
process (in parallel), so the real start-up path, exit status and stderr are checked too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = json.loads((ROOT / "examples" / "inference-llama70b-h100.json").read_text())

# name -> (arguments, {file name: content}, text the single stderr line must contain)
# Arguments may name the files as {name}; "-" reads the "stdin" entry.
CASES: dict[str, tuple[list[str], dict[str, str], str]] = {
    "plan: missing file": (["plan", "{dir}/absent.json"], {}, "cannot read"),
    "plan: invalid JSON": (["plan", "{s}"], {"s": "{not json"}, "is not valid JSON"),
    "plan: JSON that is a number": (
        ["plan", "{s}"],
        {"s": "42"},
        "expected a JSON object (a scenario's settings), got a number",
    ),
    "plan: number in a list": (["plan", "{s}"], {"s": "[{}, 7]"}, "scenario 1: expected a JSON object"),
    "plan: empty list": (["plan", "-"], {"stdin": "[]"}, "the scenario list is empty"),
    "plan: unknown key": (["plan", "{s}"], {"s": '{"concurency": 8}'}, "did you mean 'concurrency' for 'concurency'?"),
    "plan: unknown nested key": (
        ["plan", "{s}"],
        {"s": '{"kind": "training", "lora": {"rnak": 8}}'},
        "did you mean 'rank' for 'rnak'?",
    ),
    "plan: impossible layout": (
        ["plan", "{s}"],
        {"s": '{"model": "llama-3.1-70b", "num_gpus": 3, "tensor_parallel": 3}'},
        "tensor_parallel=3 does not divide the model's 64 attention heads",
    ),
    "plan: unknown model id": (["plan", "{s}"], {"s": '{"model": "llama-3.1-8"}'}, "did you mean 'llama-3.1-8b'?"),
    "plan: unknown gpu id": (["plan", "{s}"], {"s": '{"gpu": "h100"}'}, "did you mean 'h100-sxm'?"),
    "plan: unknown kind": (["plan", "{s}"], {"s": '{"kind": "quantum"}'}, "'quantum'"),
    "plan: unknown format": (["plan", "{s}", "--format", "xml"], {"s": "{}"}, "invalid choice: 'xml'"),
    "plan: calibration missing": (
        ["plan", "{s}", "--calibration", "{dir}/absent.json"],
        {"s": "{}"},
        "cannot read calibration file",
    ),
    "plan: calibration corrupt": (["plan", "{s}", "--calibration", "{c}"], {"s": "{}", "c": "{"}, "not valid JSON"),
    "plan: calibration not a record": (
        ["plan", "{s}", "--calibration", "{c}"],
        {"s": "{}", "c": "{}"},
        "not a Headroom calibration record",
    ),
    "plan: any-gpu without calibration": (["plan", "{s}", "--calibration-any-gpu"], {"s": "{}"}, "add --calibration"),
    "plan: no scenario argument": (["plan"], {}, "the following arguments are required: scenario"),
    "schema: unknown kind": (["schema", "--kind", "quantum"], {}, "invalid choice: 'quantum'"),
    "share: JSON that is a number": (["share", "{s}"], {"s": "3.5"}, "got a number"),
    "share: unknown model id": (["share", "{s}"], {"s": '{"model": "mixtral-8x7"}'}, "did you mean 'mixtral-8x7b'?"),
    "search: bad constraint text": (["search", "{s}", "--constraint", "fast please"], {"s": "{}"}, "must look like"),
    "search: unknown constraint column": (
        ["search", "{s}", "--constraint", "ttft<=0.5"],
        {"s": "{}"},
        "unknown constraint column 'ttft'",
    ),
    "search: top 0": (["search", "{s}", "--top", "0"], {"s": "{}"}, "--top must be between 1 and 10000"),
    "search: top not a number": (["search", "{s}", "--top", "ten"], {"s": "{}"}, "invalid int value: 'ten'"),
    "search: unknown gpu": (
        ["search", "{s}", "--gpus", "h1OO-sxm"],
        {"s": "{}"},
        "unknown GPU 'h1OO-sxm' (did you mean 'h100-sxm'?)",
    ),
    "search: misspelt objective": (
        ["search", "{s}", "--minimize", "usd_per_milion_output_tokens"],
        {"s": "{}"},
        "did you mean 'usd_per_million_output_tokens'?",
    ),
    "search: unknown pareto objective": (["search", "{s}", "--pareto", "ttft_seconds,speed"], {"s": "{}"}, "'speed'"),
    "search: two scenarios": (["search", "{s}"], {"s": "[{}, {}]"}, "search starts from one scenario"),
    "search training: bad constraint text": (
        ["search", "{t}", "--constraint", "cheap"],
        {"t": '{"kind": "training"}'},
        "must look like",
    ),
    "search training: unknown objective": (
        ["search", "{t}", "--minimize", "usd"],
        {"t": '{"kind": "training"}'},
        "unknown objective 'usd'",
    ),
    "search training: impossible layout": (
        ["search", "{t}"],
        {"t": '{"kind": "training", "model": "llama-3.1-70b", "num_gpus": 3, "tensor_parallel": 3}'},
        "tensor_parallel=3 does not divide",
    ),
    "calibrate: bad seconds": (
        ["calibrate", "--seconds", "0", "--no-save"],
        {},
        "--seconds: Input should be greater than 0",
    ),
    "calibrate: out is a folder": (["calibrate", "--out", "{dir}", "--no-save"], {}, "is a folder; give a file name"),
    "models: extra argument": (["models", "all"], {}, "unrecognized arguments: all"),
    "gpus: unknown option": (["gpus", "--vendor", "amd"], {}, "unrecognized arguments: --vendor amd"),
    "no command": ([], {}, "the following arguments are required: command"),
    "unknown command": (["plna"], {}, "invalid choice: 'plna'"),
}


# One case per module that handles errors (main: plan, share, argparse; search: both kinds; calibrate) also runs
# as its own `python -m planner` process; schema, models and gpus fail only in argparse, like "no command".
OWN_PROCESS = [
    "plan: unknown key",
    "share: JSON that is a number",
    "search: unknown constraint column",
    "search training: unknown objective",
    "calibrate: bad seconds",
    "no command",
]

# Runs each case as `python -m planner` would (runpy, as __main__, with sys.argv set); prints JSON results.
HARNESS = """
import io, json, runpy, sys, traceback
results = {}
for name, (argv, stdin) in json.load(sys.stdin).items():
    sys.argv, sys.stdin = ["planner", *argv], io.StringIO(stdin)
    out, err = sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    try:
        runpy.run_module("planner", run_name="__main__", alter_sys=True)
        status = 0
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    results[name] = (status, out.getvalue(), err.getvalue())
print(json.dumps(results))
"""


def _prepare(name: str, tmp: Path) -> tuple[list[str], str]:
    """The case's command-line arguments (its files written under `tmp`) and its stdin."""
    args, files, _ = CASES[name]
    folder = tmp / str(list(CASES).index(name))
    folder.mkdir(exist_ok=True)
    paths = {"dir": str(folder)}
    for key, content in files.items():
        if key != "stdin":
            (folder / f"{key}.json").write_text(content)
            paths[key] = str(folder / f"{key}.json")
    return [arg.format(**paths) for arg in args], files.get("stdin", "")


def _python(arguments: list[str], stdin: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,  # not the repository root: the package on PYTHONPATH (or installed) is what runs
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, tuple[int, str, str]]:
    tmp = tmp_path_factory.mktemp("cli")
    prepared = {name: _prepare(name, tmp) for name in CASES}
    with ThreadPoolExecutor(max_workers=len(OWN_PROCESS) + 1) as pool:
        grouped = pool.submit(_python, ["-c", HARNESS], json.dumps(prepared), tmp)
        own = {
            name: pool.submit(_python, ["-m", "planner", *prepared[name][0]], prepared[name][1], tmp)
            for name in OWN_PROCESS
        }
    assert grouped.result().returncode == 0, grouped.result().stderr
    found = {name: tuple(value) for name, value in json.loads(grouped.result().stdout).items()}
    for name, future in own.items():
        process = future.result()
        found[f"{name} [own process]"] = (process.returncode, process.stdout, process.stderr)
    return found


@pytest.mark.parametrize("name", [*CASES, *(f"{name} [own process]" for name in OWN_PROCESS)])
def test_error_is_one_sentence_and_status_2(results, name):
    status, stdout, stderr = results[name]
    lines = stderr.splitlines()
    assert status == 2, stderr
    assert "Traceback" not in stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert CASES[name.removesuffix(" [own process]")][2] in lines[0]
    assert stdout == ""


def test_messages_say_how_to_give_an_inline_config_not_upload(results):
    """The CLI has no upload button: an unknown model says how to put the config.json in the scenario."""
    message = results["plan: unknown model id"][2]
    assert '"model": {' in message and "upload" not in message


def test_closed_stdout_ends_quietly(tmp_path):
    """`... | head -1`: the reader leaves after one line; the CLI stops without a word, with 128 + SIGPIPE."""
    scenarios = tmp_path / "many.json"
    # 400 JSON Lines plans are ~1.5 MB, far beyond a pipe's 64 kB buffer, so writing must hit the closed pipe.
    scenarios.write_text(json.dumps([dict(EXAMPLE, concurrency=c) for c in range(1, 401)]))
    process = subprocess.Popen(
        [sys.executable, "-m", "planner", "plan", str(scenarios), "--format", "jsonl"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()
    status = process.wait(timeout=300)
    stderr = process.stderr.read().decode()
    assert json.loads(first)["scenario"]["concurrency"] == 1
    assert stderr == ""
    assert status == 141
