"""A job's [sandbox] request over the operator's cap names the key, the cap and where the cap comes from (a config
file that may not exist: the default, the machine's memory for memory_mb)."""

from __future__ import annotations

import pytest

from console.engine.tools.limits import SandboxCaps, SandboxSection, WorldError, resolve_world


def test_a_request_over_the_cap_says_where_the_cap_is_set() -> None:
    caps = SandboxCaps()
    with pytest.raises(WorldError) as info:
        resolve_world(SandboxSection(memory_mb=caps.memory_mb + 1), caps, max_job_mb=100)
    said = str(info.value)
    assert said.startswith(f"key 'sandbox.memory_mb': {caps.memory_mb + 1} is over the operator's limit of "
                           f"{caps.memory_mb} MB (memory_mb under [sandbox_limits] in the config file sets it; "
                           "without it, the default)")
