"""The built-in tools as plain data (console.engine.tools.tool_names) say what the registry's tools are: job.toml's
check uses the data (a start does not load the tools), a run uses the registry; the two never drift apart."""

from __future__ import annotations

from console.engine.tools import BUILTIN_TOOL_NAMES, default_registry, tool_names
from console.engine.tools.find_files import INDEX_TOOLS


def test_the_builtin_tools_are_the_registrys_in_its_order() -> None:
    # The order matters: an error naming an unknown tool lists the job's tools in this order.
    assert tuple((t.name, t.params, t.modifies) for t in default_registry().tools()) == tool_names.BUILTIN_TOOLS


def test_the_index_tools_are_find_files_own() -> None:
    assert tuple((t.name, t.params, t.modifies) for t in INDEX_TOOLS) == tool_names.INDEX_TOOLS
    builtin = {name for name, _, _ in tool_names.BUILTIN_TOOLS}
    added = tuple((t.name, t.params, t.modifies) for t in default_registry(file_index=True).tools()
                  if t.name not in builtin)
    assert added == tool_names.INDEX_TOOLS


def test_a_command_may_take_no_name_of_any_builtin_tool() -> None:
    every = {t.name for t in default_registry(file_index=True).tools()}
    assert tool_names.BUILTIN_TOOL_NAMES == every == BUILTIN_TOOL_NAMES


def test_every_name_of_the_guardrails_package_is_found_where_it_lives() -> None:
    # The package imports its names when first asked for (checking job.toml needs its config alone): each name
    # it offers resolves to the object its module defines.
    import importlib

    import console.engine.guardrails as package

    assert set(package._HOMES) == set(package.__all__)
    for name, home in package._HOMES.items():
        assert getattr(package, name) is getattr(importlib.import_module(f"console.engine.guardrails.{home}"), name)
