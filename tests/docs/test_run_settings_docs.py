"""The docs' tables of the run settings say what the run settings' table (console.engine.run_setting_specs) says:
every config key in the operator's guide's table of the config file's keys, with the table's default; every
job.toml key in docs/job.md's example, with the default where the setting has one. (docs/cli.md's tables are the
parser's: tests/docs/test_cli_reference.py; the parser's settings flags are the table's.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from console.engine.run_setting_specs import SPECS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def config_rows() -> dict[str, str]:
    """The operator's guide's table of the config file's keys: each key ("[notify] urls" as notify.urls) and the
    default the table gives it (the cell's item at the key's place)."""
    text = (DOCS / "operators-guide.md").read_text()
    section = text.split("### The config file's keys", 1)[1].split("\n#", 1)[0]
    out: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| `") else []
        if len(cells) < 3:
            continue
        keys = [re.sub(r"^\[(\w+)\] ", r"\1.", k) for k in re.findall(r"`([^`]+)`", cells[0])]
        defaults = [d.strip() for d in re.findall(r"`[^`]*`|[^,`]+", cells[1]) if d.strip()]
        for n, key in enumerate(keys):
            out[key] = defaults[n] if len(defaults) == len(keys) else defaults[0]
    return out


def value_of(shown: str) -> Any:
    """A default as the docs write it: a TOML value in backticks (`500`, `0.70`, `[]`, `scripted`), else words
    (none, the provider's) for no default."""
    if not shown.startswith("`"):
        return None
    inner = shown.strip("`")
    try:
        return tomllib.loads(f"v = {inner}")["v"]
    except tomllib.TOMLDecodeError:
        return inner


def test_every_config_setting_is_in_the_guides_table_with_its_default() -> None:
    rows = config_rows()
    for spec in SPECS:
        if spec.config_key is None:
            continue
        assert spec.config_key in rows, f"{spec.config_key}: a row in docs/operators-guide.md's config keys"
        documented, default = value_of(rows[spec.config_key]), spec.default
        assert documented == (None if default == () else default) or (default == () and documented == []), (
            f"{spec.config_key}: docs/operators-guide.md says {rows[spec.config_key]}, the table {default!r}")


def test_every_job_toml_setting_is_in_the_example_with_its_default() -> None:
    text = (DOCS / "job.md").read_text()
    example = tomllib.loads(text.split("## job.toml", 1)[1].split("```toml", 1)[1].split("```", 1)[0])
    for spec in SPECS:
        if spec.job is None:
            continue
        section, key = spec.job
        assert key in example.get(section, {}), f"[{section}] {key}: a line in docs/job.md's example"
        if spec.default is not None:
            assert example[section][key] == spec.default, f"[{section}] {key}: docs/job.md's example is not the default"
