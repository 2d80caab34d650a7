"""Run folders as this operator's harness makes them (console.engine.provenance): tests that make a run's state
without the command line (a Supervisor, a record written by hand) make it the operator's here, with the harness's
own writers and the operator's key in the test's data dir. No check is bypassed: a folder that went through
none of these is another's, as it would be for the operator."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from console.engine.job import JobPaths
from console.engine.launch import SEAL_KIND, Launch, LaunchStart, launch_path, write_launch
from console.engine.seal import KEY_NAME, KEYS, Seal


def data_dir() -> Path:
    """The test's data dir (tests/conftest.py's autouse fixture)."""
    return Path(os.environ["AGENT_CONSOLE_DATA_DIR"])


def operator_seal() -> Seal:
    return Seal.of(data_dir())


def launch(provider: str = "scripted", model: str = "scripted-agent", **fields: Any) -> LaunchStart:
    """What `run` hands a Supervisor it starts: a record (sealed when the run writes it)."""
    return LaunchStart(Launch(provider=provider, model=model, **fields), operator_seal())


def record(paths: JobPaths, provider: str = "scripted", model: str = "scripted-agent", **fields: Any) -> Launch:
    """The run's record, as a run of this operator writes it at its start (a folder an older version of the
    harness ran, say, whose state a test makes by hand)."""
    made = Launch(provider=provider, model=model, **fields)
    write_launch(paths, made, operator_seal())
    return made


def rewrite_record(paths: JobPaths, data: dict[str, Any]) -> None:
    """A record of these fields, sealed as the harness writes it (a record an older version of the harness wrote
    with fewer fields, say, once sealed)."""
    launch_path(paths).write_text(operator_seal().sealed_json(SEAL_KIND, paths.root, data))


def earlier_run(*folders: Path) -> None:
    """These folders held runs of this operator before seals existed: the data dir's jobs table knows them when the
    operator's key is made (console.engine.seal). Only before the key exists."""
    from console.engine.store import JobStore

    assert not (data_dir() / KEYS / KEY_NAME).exists(), "the operator's key exists already: no run is earlier now"
    store = JobStore(data_dir() / "jobs.db")
    for folder in folders:
        store.started(Path(folder).resolve(), Path(folder).name, "scripted", "scripted-agent", datetime.now(UTC))
    store.close()


def unsealed(paths: JobPaths, data: dict[str, Any]) -> None:
    """A record without a seal, as versions before seals wrote it."""
    paths.state.mkdir(parents=True, exist_ok=True)
    launch_path(paths).write_text(json.dumps(data))
