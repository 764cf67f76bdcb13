"""The Calibrate page: run a profile (progress, cancel), choose this session's calibration, see predicted vs
measured with the error in %, import and export records (the frames and charts: ui.calibration_charts); and the
calibration every other page shows.

The page script calls one function, ``render_calibrate_page(scenario=None)``. Other pages get this session's
record from ``active_calibration()`` and pass it to the cached plans (``ui.state``), which apply it only to
plans for the GPU it measured unless this session mapped it (``planner.plan.calibration_for_gpu``).
``calibration_banner`` is the loud notice every page shows while a calibration is active.

Per user, never per server: the chosen record lives in ``st.session_state`` (the record itself, not an id, so
deleting a stored file never changes anyone's numbers) and travels in the share link (``calibration``
parameter, ``planner.share.encode_calibration``). A fresh session without that parameter plans with the
documented defaults, whatever other sessions chose. The store on disk is only a shelf to choose from.

Widget keys (all ``calibrate_``-prefixed): calibrate_device, calibrate_seconds, calibrate_model,
calibrate_label, calibrate_memory_share, calibrate_layers, calibrate_dtype, calibrate_gpu, calibrate_run,
calibrate_cancel, calibrate_active, calibrate_any_gpu, calibrate_view, calibrate_import, calibrate_export,
calibrate_remove, calibrate_delete, calibrate_delete_confirm, calibrate_delete_cancel, calibrate_save_partial.
Session keys: calibrate_job (the running profile) and the ``calibration_*`` keys below.

The profile runs in a background thread (ui.calibration_job; the script thread keeps serving reruns); an
``st.fragment`` polls its progress twice a second, and its Cancel button sets the thread's cancel event. torch is only
imported by the profile itself: without it the page says how to install it and still lists, imports
and exports records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitAPIException

from planner import plan, units
from planner.calibration import store
from planner.calibration.device import torch_available
from planner.calibration.errors import CalibrationError
from planner.calibration.report import table_rows
from planner.calibration_record import CalibrationRecord, ProfileSettings
from planner.hardware.catalog import list_accelerators
from planner.inference.results import InferencePlan
from planner.model.catalog import catalog_model_ids, resolve_model
from planner.plan import calibration_for_gpu, stack_mismatch
from planner.share import CALIBRATION_PARAM, calibration_fingerprint, decode_calibration, encode_calibration
from ui.calibration_benchmark import render_benchmark_section
from ui.calibration_charts import comparison_frame, efficiency_frame, error_chart, scatter_chart
from ui.calibration_job import JOB_KEY, ProfileJob, start_profile

# This session's calibration (never a module global or a server-wide file: one server serves many people).
RECORD_KEY = "calibration_record"  # the chosen CalibrationRecord, as measured (no mapping), or None
ANY_GPU_KEY = "calibration_any_gpu"  # True: this session mapped it to plans for every GPU
LINK_VALUE_KEY = "calibration_link_value"  # its `calibration` link parameter, encoded once
SOURCE_KEY = "calibration_source"  # "store", "profile", "import", "link" or "benchmark"
HIDDEN_KEY = "calibration_hidden"  # ids this session removed from its list (the files stay)
LINK_CHECKED_KEY = "calibration_link_checked"  # the URL's calibration parameter is read once per session
NOTICE_KEY = "calibration_link_notice"  # why the link's calibration was not used
CONFIRM_DELETE_KEY = "calibrate_confirm_delete"  # id whose file deletion awaits confirmation
# ---------------------------------------------------------------------------------------------
# this session's calibration (for every page)


def calibration_from_link(text: str, directory=None) -> tuple[CalibrationRecord | None, str | None]:
    """The record a `calibration` link value carries, or (None, why not). A value without the record (too
    large for a link) is looked up by id in this server's store and must have the same fingerprint."""
    try:
        link = decode_calibration(text)
    except ValueError as exc:
        return None, f"The link's calibration could not be read ({exc}); plans use the documented default efficiencies."
    if link.record is not None:
        return link.record, None
    try:
        record = store.load_calibration(link.record_id, directory)
    except CalibrationError:
        return None, (
            f"The link names calibration '{link.record_id}', which was too large to travel in the link and is not "
            "stored on this server; plans use the documented default efficiencies. Import its JSON on the "
            "Calibrate page to apply it."
        )
    if calibration_fingerprint(record) != link.fingerprint:
        return None, (
            f"The link names calibration '{link.record_id}' (fingerprint {link.fingerprint}), but the record "
            f"stored here under that id differs (fingerprint {calibration_fingerprint(record)}); plans use the "
            "documented default efficiencies."
        )
    return record, None


def choose_calibration(record: CalibrationRecord | None, source: str = "store") -> None:
    """Make `record` this session's calibration (None: the documented defaults). Every new choice starts
    unmapped: applying it to other GPUs is a separate, explicit switch."""
    st.session_state[RECORD_KEY] = None if record is None else record.as_measured()
    st.session_state[LINK_VALUE_KEY] = None if record is None else encode_calibration(record)
    st.session_state[SOURCE_KEY] = source
    st.session_state[ANY_GPU_KEY] = False
    st.session_state[NOTICE_KEY] = None


def session_calibration() -> CalibrationRecord | None:
    """This session's record as measured (no mapping): what the Calibrate page shows and links carry."""
    return st.session_state.get(RECORD_KEY)


def _read_link_once() -> None:
    """On the session's first run: a link's `calibration` parameter becomes this session's calibration."""
    if st.session_state.get(LINK_CHECKED_KEY):
        return
    st.session_state[LINK_CHECKED_KEY] = True
    text = st.query_params.get(CALIBRATION_PARAM)
    if not text:
        return
    record, notice = calibration_from_link(text)
    if record is not None:
        choose_calibration(record, "link")
    st.session_state[NOTICE_KEY] = notice


def _sync_url() -> None:
    """The address bar carries this session's calibration too, so a copied URL reproduces the numbers."""
    wanted = st.session_state.get(LINK_VALUE_KEY) if session_calibration() is not None else None
    try:
        if wanted:
            if st.query_params.get(CALIBRATION_PARAM) != wanted:
                st.query_params[CALIBRATION_PARAM] = wanted
        elif CALIBRATION_PARAM in st.query_params:
            del st.query_params[CALIBRATION_PARAM]
    except StreamlitAPIException:
        pass


def active_calibration() -> CalibrationRecord | None:
    """The calibration this session's plans use (None: documented defaults), mapped to every GPU when this
    session chose so. Reads a link's `calibration` parameter on the session's first run."""
    _read_link_once()
    _sync_url()
    record = session_calibration()
    if record is not None and st.session_state.get(ANY_GPU_KEY):
        return record.for_any_gpu()
    return record


def link_params() -> dict[str, str]:
    """The share link's `calibration` parameter while this session has one (never the mapping)."""
    value = st.session_state.get(LINK_VALUE_KEY)
    return {CALIBRATION_PARAM: value} if value and session_calibration() is not None else {}


def banner_lines(calibration: CalibrationRecord, plans: Iterable, escape: Callable[[str], str]) -> list[str]:
    """The banner's Markdown: what the calibration is, and for each plan (its scenario, or a bare GPU id) whether it
    is applied: to its GPU, and for a benchmark calibration to its serving stack (runtime and model family)."""
    label, device, ref = escape(calibration.label), escape(calibration.measured_on), escape(calibration.reference_gpu)
    source = " (from the link you opened)" if st.session_state.get(SOURCE_KEY) == "link" else ""
    lines = [
        f"**Plans use calibration '{label}' measured on {device}**{source}: its efficiencies are relative to "
        f"'{ref}' and replace the documented defaults in plans for '{ref}'"
        + (", and, mapped by you, in plans for every other GPU." if calibration.mapped_to_any_gpu else " only.")
    ]
    seen: set[str] = set()
    for item in plans:
        scenario = None if isinstance(item, str) else item
        gpu = item if scenario is None else scenario.gpu_id()
        stack = stack_mismatch(scenario, calibration)
        key = f"{gpu}|{stack}"
        if key in seen:
            continue
        seen.add(key)
        shown = escape(gpu)
        if stack is not None and not calibration.mapped_to_any_gpu:
            lines.append(
                f"- This plan ('{shown}'): **not applied**: the calibration was fitted to benchmarks of another "
                f"serving stack (this plan has {escape(stack)}); documented default efficiencies. Map it on the "
                "Calibrate page to apply it anyway."
            )
        elif stack is not None:
            lines.append(
                f"- This plan ('{shown}'): **mapped** across serving stacks (this plan has {escape(stack)}): applied "
                "because this session switched 'apply to other GPUs' on; its factors describe the stack it measured."
            )
        elif calibration.applies_to(gpu):
            lines.append(f"- This plan's GPU '{shown}': calibrated.")
        elif calibration_for_gpu(gpu, calibration) is not None:
            lines.append(
                f"- This plan's GPU '{shown}': **mapped** — measured on {device} ('{ref}'), applied to '{shown}' "
                "because this session switched 'apply to other GPUs' on; the numbers describe the other device."
            )
        else:
            lines.append(
                f"- This plan's GPU '{shown}': **not applied** (it measured '{ref}', not '{shown}'); documented "
                "default efficiencies. Map it on the Calibrate page to apply it anyway."
            )
    return lines


def calibration_banner(calibration: CalibrationRecord | None, gpus: Iterable, escape: Callable[[str], str]) -> None:
    """A warning (not small print) on every page while this session has a calibration; a caption without one.
    `gpus`: the GPU ids of the plans on the page; `escape`: Markdown escaping for names from records."""
    notice = st.session_state.get(NOTICE_KEY)
    if notice:
        st.warning(escape(notice), icon=":material/link_off:")
    if calibration is None:
        st.caption(
            ":material/straighten: Calibration: **none**: documented default efficiencies "
            "(choose one on the Calibrate page; the choice applies to this browser session only)."
        )
        return
    st.warning("\n".join(banner_lines(calibration, gpus, escape)), icon=":material/straighten:")


# ---------------------------------------------------------------------------------------------
# page sections


def _torch_available() -> bool:

    return torch_available()


def _model_options() -> list[str]:

    out = []
    for model_id in catalog_model_ids():
        arch = resolve_model(model_id)
        if not arch.is_moe and not arch.uses_mla:
            out.append(model_id)
    return out


def _run_section() -> None:
    st.markdown("##### Run a profile")
    if not _torch_available():
        st.warning(
            "Profiling needs PyTorch, which is not installed on this server. Install the profile extra "
            "(and, on a GPU machine, the CUDA build of torch first):",
            icon=":material/info:",
        )
        st.code('pip install "headroom[profile]"', language="bash")
        st.caption("Or run `python -m planner calibrate` on the GPU machine and import its JSON below.")
        return
    job: ProfileJob | None = st.session_state.get(JOB_KEY)
    if job is not None and not job.done:
        _job_progress()
        return
    models = _model_options()
    cols = st.columns([1, 1, 2])
    device = cols[0].segmented_control("Device", ["auto", "cpu", "cuda"], default="auto", key="calibrate_device")
    seconds = cols[1].number_input(
        "Time budget (s)", min_value=2, max_value=1800, value=60, step=10, key="calibrate_seconds"
    )
    model = cols[2].selectbox(
        "Proxy model (a few of its layers, real width)",
        models,
        index=models.index("llama-3.1-8b") if "llama-3.1-8b" in models else 0,
        key="calibrate_model",
    )
    with st.expander("More settings"):
        c = st.columns(4)
        share = c[0].slider("Most of the free memory to use", 0.1, 0.9, 0.5, 0.05, key="calibrate_memory_share")
        layers = c[1].number_input(
            "Proxy layers (0 = auto)", min_value=0, max_value=16, value=0, key="calibrate_layers"
        )
        dtype = c[2].selectbox("dtype", ["auto", "bf16", "fp16", "fp32"], key="calibrate_dtype")

        gpus = ["detect"] + [a.id for a in list_accelerators()]
        gpu = c[3].selectbox("Efficiencies relative to", gpus, key="calibrate_gpu")
        label = st.text_input("Label (shown in plans)", value="", max_chars=200, key="calibrate_label")
    if st.button("Run profile", type="primary", key="calibrate_run", icon=":material/speed:"):
        settings = ProfileSettings(
            device=device or "auto",
            seconds=float(seconds),
            model=model,
            memory_share=share,
            layers=int(layers) or None,
            dtype=dtype,
            reference_gpu=None if gpu == "detect" else gpu,
            label=label.strip() or None,
        )
        start_profile(settings)
        st.rerun()
    if job is not None and job.done:
        _job_result(job)


@st.fragment(run_every=0.5)
def _job_progress() -> None:
    job: ProfileJob | None = st.session_state.get(JOB_KEY)
    if job is None:
        return
    if job.done:
        st.rerun(scope="app")
    st.progress(
        min(max(job.fraction, 0.0), 1.0),
        text=f"{job.message} ({time.monotonic() - job.started:.0f} s of ~{job.settings.seconds:.0f} s)",
    )
    if job.cancel.is_set():
        st.caption("Cancelling after the current measurement…")
    elif st.button("Cancel", key="calibrate_cancel", icon=":material/stop_circle:"):
        job.cancel.set()


def _job_result(job: ProfileJob) -> None:
    if job.record is not None:
        marker = f"calibrate_saved_{job.record.id}"
        if not st.session_state.get(marker):
            store.save_calibration(job.record)
            choose_calibration(job.record, "profile")
            st.session_state[marker] = True
            st.rerun()  # the banner above was drawn before this choice
        st.success(
            f"Profile finished in {job.record.elapsed_seconds:.0f} s and is this browser session's calibration: "
            f"{job.record.label} (other sessions keep their own choice).",
            icon=":material/check_circle:",
        )
        return
    st.error(job.error or "the profile stopped", icon=":material/error:")
    if job.partial is not None and job.partial.predicted_vs_measured:
        if st.button("Save what was measured (partial record)", key="calibrate_save_partial"):
            store.save_calibration(job.partial)
            st.toast(f"Saved partial record {job.partial.id}")


def _choices(records: list[CalibrationRecord]) -> list[CalibrationRecord]:
    """The stored records this session has not removed from its list, plus this session's own record when
    it is not among them (it came from a link, or its file was deleted)."""
    hidden = set(st.session_state.get(HIDDEN_KEY, ()))
    out = [r for r in records if r.id not in hidden]
    mine = session_calibration()
    if mine is not None and all(r.id != mine.id for r in out):
        out.insert(0, mine)
    return out


def _active_section(records: list[CalibrationRecord]) -> CalibrationRecord | None:
    st.markdown("##### This session's calibration")
    choices = _choices(records)
    by_id = {r.id: r for r in choices}
    mine = session_calibration()
    if mine is not None:
        by_id[mine.id] = mine  # the session's copy wins over a file re-written under the same id
    ids = [""] + list(by_id)
    stored = {r.id for r in records}
    labels = {
        r.id: f"{r.label}{'' if r.complete else ' (partial)'} · {r.device.name} · {r.created_at:%Y-%m-%d %H:%M}"
        + ("" if r.id in stored else " · not stored here (from a link or deleted)")
        for r in by_id.values()
    }
    labels[""] = "None: documented default efficiencies"

    def changed() -> None:
        chosen = st.session_state["calibrate_active"] or None
        choose_calibration(by_id.get(chosen) if chosen else None, "store")

    # The session's record is the truth (a profile or an import may have changed it since the widget was
    # drawn); set before the widget exists, so no default index competes with it.
    st.session_state["calibrate_active"] = mine.id if mine is not None else ""
    st.selectbox(
        "Plans in this browser session use",
        ids,
        format_func=labels.__getitem__,
        key="calibrate_active",
        on_change=changed,
        help="Your choice only: other people using this server, and links you have sent, keep their own numbers. "
        "A share link you copy now carries this calibration.",
    )
    if mine is None:
        return None

    def mapped() -> None:
        st.session_state[ANY_GPU_KEY] = bool(st.session_state["calibrate_any_gpu"])

    st.session_state["calibrate_any_gpu"] = bool(st.session_state.get(ANY_GPU_KEY))
    st.toggle(
        f"Apply to other GPUs too (measured on {mine.measured_on}, relative to '{mine.reference_gpu}')",
        key="calibrate_any_gpu",
        on_change=mapped,
        help="Off: plans for other GPUs use the documented defaults, and every page says so. On: they use this "
        "device's efficiencies anyway, and every such plan carries a warning naming both devices. Links never "
        "carry this switch.",
    )
    return mine


def _record_section(record: CalibrationRecord, scenario=None) -> None:
    d = record.device
    if not record.complete:
        st.warning(f"Partial record: {record.stopped_reason}", icon=":material/warning:")
    cols = st.columns(4)
    cols[0].metric(
        "Device",
        d.name[:40],
        help=f"{d.kind}, torch {d.torch_version}" + (f", CUDA {d.cuda_version}" if d.cuda_version else ""),
    )
    cols[1].metric("Relative to", record.reference_gpu, help="catalog accelerator whose peaks the efficiencies scale")
    cols[2].metric(
        "Decode bandwidth",
        units.percent(record.efficiency.memory_bandwidth, 1),
        help=record.efficiency_notes.get("memory_bandwidth"),
    )
    cols[3].metric(
        "Prefill compute",
        units.percent(record.efficiency.prefill_compute, 1),
        help=record.efficiency_notes.get("prefill_compute"),
    )
    if scenario is not None:
        _scenario_effect(record, scenario)
    frame = comparison_frame(record)
    st.markdown("##### Predicted vs measured")
    st.caption(
        "Predicted (documented defaults) is what a plan assumes without calibration; predicted (this "
        "calibration) uses the fitted factors. *fitted* rows set a factor (≈0 % by construction); "
        "*held out* rows test it; *memory* rows compare exact tensor bytes with the engine's terms."
    )
    if len(frame):
        view = st.segmented_control(
            "View", ["Error %", "Times", "Memory", "Ceilings"], default="Error %", key="calibrate_view"
        )
        if view in (None, "Error %"):
            st.altair_chart(error_chart(frame), width="stretch")
        else:
            group = {"Times": "time", "Memory": "memory", "Ceilings": "ceilings"}[view]
            if (frame["group"] == group).any():
                st.altair_chart(scatter_chart(frame, group), width="stretch")
            else:
                st.caption("Nothing of this kind was measured.")
    st.dataframe(pd.DataFrame(table_rows(record)), hide_index=True, width="stretch")
    with st.expander("Fitted efficiencies, proxy model and notes"):
        st.dataframe(efficiency_frame(record), hide_index=True, width="stretch")
        st.markdown(
            f"**Memory correction:** {units.gib(record.runtime_overhead_correction_bytes)}. "
            f"{record.memory_correction_note}"
        )
        if record.proxy is not None:
            a = record.proxy.architecture
            st.markdown(
                f"**Proxy:** {a.num_layers} of {record.proxy.source_num_layers} layers of "
                f"{record.proxy.model_name}, hidden {a.hidden_size}, {a.num_attention_heads} heads, "
                f"{a.num_kv_heads} KV heads, {record.proxy.dtype}."
            )
            for cap in record.proxy.caps:
                st.markdown(f"- {cap}")
        for key, reason in record.ceilings.skipped.items():
            st.markdown(f"- skipped {key}: {reason}")
        for note in record.notes:
            st.markdown(f"- {note}")
        st.caption(f"Record {record.id}, format version {record.version}, {record.elapsed_seconds:.0f} s.")


def _scenario_effect(record: CalibrationRecord, scenario) -> None:
    gpu = scenario.gpu_id()
    usable = calibration_for_gpu(gpu, record.for_any_gpu() if st.session_state.get(ANY_GPU_KEY) else record)
    if usable is None:
        st.warning(
            f"Not applied to the current scenario: this calibration measured '{record.reference_gpu}', the "
            f"scenario plans on '{gpu}'. Switch on 'Apply to other GPUs too' above to apply it anyway.",
            icon=":material/block:",
        )
        return
    try:
        before, after = plan(scenario), plan(scenario, calibration=usable)
    except Exception:
        return
    if not (isinstance(before, InferencePlan) and isinstance(after, InferencePlan)):
        return
    cols = st.columns(3)
    b, a = before.performance, after.performance
    cols[0].metric(
        "Decode step (current scenario)",
        units.seconds(a.decode_step_seconds),
        delta=f"{(a.decode_step_seconds / b.decode_step_seconds - 1) * 100:+.0f}% vs defaults",
        delta_color="inverse",
    )
    cols[1].metric(
        "Time to first token",
        units.seconds(a.ttft_seconds),
        delta=f"{(a.ttft_seconds / b.ttft_seconds - 1) * 100:+.0f}% vs defaults",
        delta_color="inverse",
    )
    cols[2].metric(
        "Memory per GPU",
        units.gib(after.memory.total_bytes),
        delta=units.gib(after.memory.total_bytes - before.memory.total_bytes) + " vs defaults",
        delta_color="inverse",
    )


def _files_section(selected: CalibrationRecord | None) -> None:
    st.markdown("##### Import and export")
    cols = st.columns(2)
    with cols[0]:
        upload = st.file_uploader(
            "Import a calibration (JSON from `python -m planner calibrate --out`)",
            type=["json"],
            key="calibrate_import",
        )
        if upload is not None:
            marker = f"calibrate_imported_{upload.file_id}"
            if not st.session_state.get(marker):
                try:
                    record = store.import_calibration(upload.getvalue(), upload.name)
                except CalibrationError as exc:
                    st.error(str(exc), icon=":material/error:")
                else:
                    st.session_state[marker] = True
                    choose_calibration(record, "import")
                    st.rerun()  # the banner and the list above were drawn before this choice
    with cols[1]:
        if selected is not None:
            st.download_button(
                "Export this calibration (JSON)",
                store.export_calibration(selected),
                file_name=f"{selected.id}.json",
                mime="application/json",
                key="calibrate_export",
                icon=":material/download:",
            )
            _remove_or_delete(selected)
        else:
            st.caption("Choose a calibration above to export or remove it.")


def _remove_or_delete(selected: CalibrationRecord) -> None:
    """Removing is per session (the default); deleting the shared file needs a second, explicit click."""
    if st.button(
        "Remove from my list",
        key="calibrate_remove",
        icon=":material/visibility_off:",
        help="This session stops using it and no longer lists it; the stored file stays for everyone else.",
    ):
        st.session_state[HIDDEN_KEY] = [*st.session_state.get(HIDDEN_KEY, []), selected.id]
        choose_calibration(None)
        st.rerun()
    if not store.record_path(selected.id).exists():
        return
    if st.session_state.get(CONFIRM_DELETE_KEY) != selected.id:
        if st.button("Delete the stored file…", key="calibrate_delete", icon=":material/delete:"):
            st.session_state[CONFIRM_DELETE_KEY] = selected.id
            st.rerun()
        return
    st.warning(
        f"Delete '{selected.label}' ({selected.id}) from this server's store? Nobody can choose it here "
        "afterwards, and links too large to carry the record stop working. Sessions using it now keep their copy.",
        icon=":material/delete_forever:",
    )
    yes, no = st.columns(2)
    if yes.button("Delete it for everyone", key="calibrate_delete_confirm", type="primary"):
        store.delete_calibration(selected.id)
        st.session_state[CONFIRM_DELETE_KEY] = None
        st.toast(f"Deleted {selected.id} from the store; this session keeps using its copy until you choose another.")
        st.rerun()
    if no.button("Cancel", key="calibrate_delete_cancel"):
        st.session_state[CONFIRM_DELETE_KEY] = None
        st.rerun()


def render_calibrate_page(scenario=None) -> None:
    """The whole Calibrate page body. `scenario` (optional): the current scenario, to show what this
    session's calibration changes in its plan."""
    st.caption(
        "A calibration measures this machine (matmul and bandwidth ceilings, a few layers of a real "
        "model) and replaces the documented efficiency factors with fitted ones, in plans for the GPU it "
        "measured. It is optional, and your choice here applies to this browser session only: without one "
        "every plan uses the documented defaults."
    )
    active_calibration()  # a link's calibration parameter is read before the list is drawn
    _run_section()
    records, problems = store.scan_calibrations()
    for problem in problems:
        st.warning(f"Skipped an unreadable calibration: {problem}", icon=":material/warning:")
    selected = _active_section(records)
    if selected is not None:
        _record_section(selected, scenario)
    elif not _choices(records):
        st.info("No calibration stored yet: run a profile above, or import one.", icon=":material/info:")
    _files_section(selected)
    render_benchmark_section(scenario, _apply_benchmark)


def _apply_benchmark(record: CalibrationRecord) -> None:
    """A benchmark calibration becomes this session's (never stored server-wide); the page redraws with it."""
    choose_calibration(record, "benchmark")
    st.rerun()  # the banner and the chooser above were drawn before this choice


__all__ = [
    "active_calibration",
    "banner_lines",
    "calibration_banner",
    "calibration_from_link",
    "choose_calibration",
    "link_params",
    "render_calibrate_page",
    "session_calibration",
]
