"""Loading a script of benchmarks/ as a module, for the tests of what it measures."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1] / "benchmarks"


def load(script: str) -> ModuleType:
    """``benchmarks/SCRIPT.py`` as the module ``bench_SCRIPT`` (registered: dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(f"bench_{script}", ROOT / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
