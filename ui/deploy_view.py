"""Deploy and measure a plan: the engine's serve command, the benchmark command that sends the plan's traffic
and a Kubernetes manifest (planner.deploy), shown on the Inference and Review pages with copy buttons."""

from __future__ import annotations

import streamlit as st

from planner.deploy import ENGINES, Deployment, deploy, engine_of
from planner.deploy.command import shell_lines
from planner.errors import PlanningError
from planner.inference.results import InferencePlan
from ui.text import md_escape

ENGINE_LABELS = {"vllm": "vLLM", "sglang": "SGLang", "tensorrt-llm": "TensorRT-LLM"}


def _commands(deployment: Deployment, key: str) -> None:
    launch = deployment.launch
    servers = f"{launch.servers} server{'s' if launch.servers != 1 else ''}"
    st.caption(
        f"{md_escape(deployment.spec.release_title)}: {servers} of {launch.gpus_per_server} GPU(s). Every flag "
        "the plan rests on, in this release's spelling; what no flag says is in the notes."
    )
    st.markdown("**Serve** (on each server)")
    st.code(shell_lines(launch.serve_argv), language="bash", wrap_lines=True)
    for name, body in launch.files:
        st.markdown(f"**{md_escape(name)}** (the server reads it)")
        st.code(body, language="yaml")
    st.markdown(f"**Benchmark** (sends the plan's traffic; writes `{launch.result_file}`)")
    st.code(shell_lines(launch.benchmark_argv), language="bash", wrap_lines=True)
    if deployment.notes:
        st.markdown("**Notes**\n" + "\n".join(f"- {md_escape(n)}" for n in deployment.notes))
    if st.toggle("Kubernetes manifest", key=f"{key}_deploy_k8s"):
        st.code(deployment.manifest(), language="yaml")


def deploy_section(plan, key: str) -> None:
    """The commands that run and measure an inference plan (nothing for a training plan); `key` prefixes the
    section's widget keys (page-prefixed: `inference`, `review_<plan>`)."""
    if not isinstance(plan, InferencePlan):
        return
    default = engine_of(plan.scenario.runtime) or "vllm"
    with st.expander("Deploy and measure: serve and benchmark commands"):
        engine = st.radio(
            "Engine",
            ENGINES,
            index=ENGINES.index(default),
            format_func=ENGINE_LABELS.__getitem__,
            horizontal=True,
            key=f"{key}_deploy_engine",
            help="The scenario's runtime decides the default and the release's flag spelling "
            "(python -m planner deploy writes the same commands).",
        )
        try:
            deployment = deploy(plan, engine)
        except PlanningError as exc:
            st.info(f"No commands for this plan: {md_escape(str(exc))}", icon=":material/info:")
            return
        _commands(deployment, key)
