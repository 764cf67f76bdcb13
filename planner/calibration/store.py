"""Calibration records on disk: one JSON file per record in the user's data directory.

Directory: $HEADROOM_DATA_DIR if set, else $XDG_DATA_HOME/headroom, else ~/.local/share/headroom; records live
in its `calibrations/` folder. The store is a shelf of records, nothing more: which calibration a plan uses is
the caller's choice (`plan(scenario, calibration)`, the dashboard's per-session state, a share link), never a
server-wide "active" file (one server serves many people; a choice there changed everyone's numbers).
Writes are atomic (a temporary file in the same folder, fsync, os.replace), so a crash never leaves half a
record. Every loading error names the file. No torch here.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from pydantic import ValidationError

from planner.calibration.errors import CalibrationFileError
from planner.calibration_record import (
    CALIBRATION_FORMAT,
    CALIBRATION_VERSION,
    CalibrationRecord,
)
from planner.errors import explain

DATA_DIR_ENV = "HEADROOM_DATA_DIR"
MAX_FILE_BYTES = 4 << 20
# Older versions kept a server-wide active choice here; it is ignored (and left alone) when scanning.
LEGACY_ACTIVE_FILE = "active.json"
# The caller's mapping (CalibrationRecord.for_any_gpu) is a choice of the plan's caller, never stored.
NOT_STORED = frozenset({"mapped_to_any_gpu"})
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$")


def data_dir() -> Path:
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser()
    # The XDG base-directory rule (what platformdirs answers on Linux), without the dependency.
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "headroom"


def calibrations_dir(directory: Path | None = None) -> Path:
    return Path(directory) if directory is not None else data_dir() / "calibrations"


def atomic_write_text(path: Path, text: str) -> Path:
    """Write `text` to `path` through a temporary file in the same folder and os.replace."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, _file_mode())  # mkstemp makes 0600; give the file the mode open() would
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def _file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


# ---------------------------------------------------------------------------------------------
# JSON <-> record


def export_calibration(record: CalibrationRecord) -> str:
    """The record as pretty JSON (what is stored, downloaded and imported)."""
    return record.model_dump_json(indent=2, exclude=set(NOT_STORED)) + "\n"


def parse_calibration(text: str | bytes, source: str) -> CalibrationRecord:
    """A record from JSON text; `source` names the file in every error."""
    if isinstance(text, bytes):
        if len(text) > MAX_FILE_BYTES:
            raise CalibrationFileError(f"{source} is larger than {MAX_FILE_BYTES >> 20} MiB; not a calibration record")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise CalibrationFileError(f"{source} is not UTF-8 text; not a calibration record") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CalibrationFileError(
            f"{source} is corrupt: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise CalibrationFileError(f"{source} is corrupt: nested too deeply") from None
    return record_from_data(data, source)


def record_from_data(data: object, source: str) -> CalibrationRecord:
    """A record from parsed JSON (a file, an upload, a share link); `source` names it in every error."""
    if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
        raise CalibrationFileError(
            f'{source} is not a Headroom calibration record (no "format": "{CALIBRATION_FORMAT}")'
        )
    version = data.get("version")
    if version != CALIBRATION_VERSION:
        raise CalibrationFileError(
            f"{source} is a calibration record of format version {version!r}; this Headroom reads version "
            f"{CALIBRATION_VERSION}. Run `python -m planner calibrate` again to make a current one."
        )
    chosen = sorted(NOT_STORED & data.keys())
    if chosen:
        raise CalibrationFileError(
            f"{source} sets {', '.join(chosen)}: applying a calibration to other GPUs is the caller's explicit "
            "choice (plan(..., calibration_any_gpu=True), --calibration-any-gpu), never part of a record"
        )
    try:
        return CalibrationRecord.from_json_data(data)
    except ValidationError as exc:
        raise CalibrationFileError(f"{source} is not a valid calibration record: {explain(exc)}") from None


def load_calibration_file(path: Path | str) -> CalibrationRecord:
    """Read and validate one record file (CLI `plan --calibration FILE`, imports)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise CalibrationFileError(f"{path} is larger than {MAX_FILE_BYTES >> 20} MiB; not a calibration record")
        data = path.read_bytes()
    except OSError as exc:
        raise CalibrationFileError(f"cannot read calibration file {path}: {exc.strerror or exc}") from None
    return parse_calibration(data, str(path))


def write_calibration_file(record: CalibrationRecord, path: Path | str) -> Path:
    """Write a record to a chosen path (CLI --out), atomically."""
    return atomic_write_text(Path(path), export_calibration(record))


def import_calibration(
    data: str | bytes, source: str = "uploaded file", directory: Path | None = None
) -> CalibrationRecord:
    """Validate an exported record and store it (the dashboard's import)."""
    record = parse_calibration(data, source)
    save_calibration(record, directory)
    return record


# ---------------------------------------------------------------------------------------------
# the store


def _check_id(record_id: str) -> str:
    if not isinstance(record_id, str) or not _ID.match(record_id):
        raise CalibrationFileError(f"'{record_id}' is not a calibration id (letters, digits, '.', '_', '-')")
    return record_id


def record_path(record_id: str, directory: Path | None = None) -> Path:
    return calibrations_dir(directory) / f"{_check_id(record_id)}.json"


def save_calibration(record: CalibrationRecord, directory: Path | None = None) -> Path:
    """Store a record as <data dir>/calibrations/<id>.json (replacing one with the same id)."""
    return atomic_write_text(record_path(record.id, directory), export_calibration(record))


def load_calibration(record_id: str, directory: Path | None = None) -> CalibrationRecord:
    path = record_path(record_id, directory)
    if not path.exists():
        raise CalibrationFileError(f"no stored calibration '{record_id}' in {path.parent}")
    return load_calibration_file(path)


def scan_calibrations(directory: Path | None = None) -> tuple[list[CalibrationRecord], list[str]]:
    """Every stored record (newest first) and a message for each file that could not be read."""
    folder = calibrations_dir(directory)
    records, problems = [], []
    if not folder.is_dir():
        return records, problems
    for path in sorted(folder.glob("*.json")):
        if path.name == LEGACY_ACTIVE_FILE:
            continue
        try:
            records.append(load_calibration_file(path))
        except CalibrationFileError as exc:
            problems.append(str(exc))
    records.sort(key=lambda r: r.created_at, reverse=True)
    return records, problems


def list_calibrations(directory: Path | None = None) -> list[CalibrationRecord]:
    return scan_calibrations(directory)[0]


def delete_calibration(record_id: str, directory: Path | None = None) -> bool:
    """Remove a stored record file (False if it was not there). Sessions that chose it keep their copy: a
    dashboard session holds the record itself, not its id, so nobody's numbers change under them."""
    path = record_path(record_id, directory)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


__all__ = [
    "DATA_DIR_ENV",
    "atomic_write_text",
    "calibrations_dir",
    "data_dir",
    "delete_calibration",
    "export_calibration",
    "import_calibration",
    "list_calibrations",
    "load_calibration",
    "load_calibration_file",
    "parse_calibration",
    "record_from_data",
    "record_path",
    "save_calibration",
    "scan_calibrations",
    "write_calibration_file",
]
