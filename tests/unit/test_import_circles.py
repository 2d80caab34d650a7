"""No module of the package imports, by any chain, a module that imports it back (issue 34: entry <-> cli/,
openai_provider <-> registry). An import inside a function counts: it is one the moment the function runs, and it
ties the two modules together as much as one at the top does (the two circles were both made of such imports).

The acyclic contract in pyproject.toml ([tool.importlinter], run by lint-imports) sees circles between sibling
packages only (console.cli <-> console.entry, console.cli.run <-> console.cli.common); this looks at every module.
"""

from __future__ import annotations

import grimp


def circles(package: str) -> list[str]:
    """Each import ``a -> b`` whose ``b`` leads back to ``a``, with the chain back: empty when there is no circle."""
    graph = grimp.build_graph(package)
    found = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                found.append(f"{importer} -> {' -> '.join(back)}")
    return found


def test_the_package_has_no_import_circle() -> None:
    found = circles("console")
    assert not found, "import circles:\n" + "\n".join(found)
