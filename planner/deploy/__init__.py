"""From a plan to a running server and a measurement of it: the engine's launch command, the benchmark client
command that sends the plan's traffic, and a Kubernetes manifest, for vLLM, SGLang and TensorRT-LLM.

`deploy(plan, engine=None)` reads the plan once into an engine-neutral `DeploymentSpec` (spec.py) and spells it
in the engine's and the planned release's flags (vllm.py, sglang.py, tensorrt_llm.py); a planned feature the
engine has no flag for becomes a note. `Deployment.as_json()` is the CLI's JSON; `text()` and `manifest()` its
other formats.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from planner.deploy import sglang, tensorrt_llm, vllm
from planner.deploy.command import EngineLaunch, shell_command, shell_lines
from planner.deploy.manifest import manifest_notes, manifest_objects
from planner.deploy.spec import ENGINES, DeployError, DeploymentSpec, deployment_spec, engine_of
from planner.deploy.yaml_text import documents
from planner.inference.results import InferencePlan

LAUNCHERS: dict[str, Callable[[DeploymentSpec], EngineLaunch]] = {
    "vllm": vllm.launch,
    "sglang": sglang.launch,
    "tensorrt-llm": tensorrt_llm.launch,
}

__all__ = ["ENGINES", "DeployError", "Deployment", "deploy", "engine_of"]


@dataclass(frozen=True, slots=True)
class Deployment:
    spec: DeploymentSpec
    launch: EngineLaunch

    @property
    def notes(self) -> list[str]:
        return [*self.spec.notes, *self.launch.notes]

    @property
    def serve_command(self) -> str:
        return shell_command(self.launch.serve_argv)

    @property
    def benchmark_command(self) -> str:
        return shell_command(self.launch.benchmark_argv)

    def as_json(self) -> dict:
        """The CLI's JSON: `engine`, `serve_command`, `benchmark_command`, `notes`, and the pieces behind them."""
        return {
            "engine": self.spec.engine,
            "release": self.spec.release,
            "serve_command": self.serve_command,
            "serve_argv": list(self.launch.serve_argv),
            "benchmark_command": self.benchmark_command,
            "benchmark_argv": list(self.launch.benchmark_argv),
            "result_file": self.launch.result_file,
            "files": dict(self.launch.files),
            "servers": self.launch.servers,
            "gpus_per_server": self.launch.gpus_per_server,
            "nodes_per_server": self.spec.nodes_per_server,
            "image": self.launch.image,
            "notes": self.notes,
        }

    def text(self) -> str:
        """The commands for reading and pasting: the server, its files, the benchmark, then the notes."""
        s, launch = self.spec, self.launch
        servers = f"{launch.servers} server{'s' if launch.servers != 1 else ''}"
        lines = [
            f"# {s.release_title}: {servers} of {launch.gpus_per_server} GPU(s) ({s.gpu_name})",
            "# serve (on each server):",
            shell_lines(launch.serve_argv),
        ]
        for name, body in launch.files:
            lines += ["", f"# {name}:", body.rstrip("\n")]
        lines += ["", f"# benchmark (writes {launch.result_file}):", shell_lines(launch.benchmark_argv)]
        if self.notes:
            lines += ["", "notes:", *(f"- {n}" for n in self.notes)]
        return "\n".join(lines)

    def manifest(self) -> str:
        """Kubernetes YAML that runs the servers; the notes as comments on top."""
        notes = [n.replace("\n", " ") for n in [*manifest_notes(self.spec, self.launch), *self.notes]]
        return documents(manifest_objects(self.spec, self.launch), header=notes)


def deploy(plan: InferencePlan, engine: str | None = None) -> Deployment:
    """The commands that run and measure `plan` under `engine` (None: the scenario's runtime engine).
    Raises DeployError with a sentence when no command can be written."""
    spec = deployment_spec(plan, engine)
    return Deployment(spec, LAUNCHERS[spec.engine](spec))
