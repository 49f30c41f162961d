"""The layering of python/rrag_kernels: one face per layer, imported by everything above it.

Read from the source with ``ast`` (nothing is imported), every import of a module of this
package must obey:

1. A private module (a ``_name`` component) is private to its package: only modules of that
   package and of the packages below it may import it. ``rrag_kernels._core`` (the compiled
   module) is imported by ``ops/`` only; the top package's ``_config`` reads it through
   ``ops/_dispatch`` (the one module that loads it), the one allowed exception.
2. ``models/`` and ``pipelines/`` import the ops layer through its face ``rrag_kernels.ops``
   only; ``pipelines/`` imports the models layer through its faces (``rrag_kernels.models``
   and its ``nli`` subpackage) only; neither imports ``reference`` or ``triton_ops``, and
   ``models`` never imports ``pipelines``.
3. ``reference/`` imports nothing of the layers it checks.
4. The shells — ``integrations/`` (the framework adapters), ``distributed/`` (Ray),
   ``serve/`` (HTTP), ``cli/`` and ``__main__`` — import the other layers through their faces
   only: ``rrag_kernels.ops``, ``rrag_kernels.models`` (and ``.nli``), ``rrag_kernels.pipelines``
   and one method face per pipeline, ``rrag_kernels.pipelines.<method>``
   (``from rrag_kernels.pipelines import mirage`` reads the face too), and the top package
   (``__version__``, ``show_config``). No shell imports another, except where one shell starts
   another (SHELL_STARTS: ``rrag serve`` starts the server face; ``__main__`` is ``cli.main``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "rrag_kernels"
ROOT = Path(__file__).resolve().parents[1] / "python" / PACKAGE

#: (importer, imported) pairs that break rule 1 on purpose, with the reason in the docstring.
ALLOWED_PRIVATE = {("rrag_kernels._config", "rrag_kernels.ops._dispatch")}
#: The shells: nothing imports them but their own package and SHELL_STARTS.
SHELLS = ("integrations", "distributed", "serve", "cli")
#: (importer, imported) pairs where one shell starts another, through that shell's face.
SHELL_STARTS = {("rrag_kernels.cli.serve", "rrag_kernels.serve"), ("rrag_kernels.__main__", "rrag_kernels.cli.main")}
#: Faces other layers import.
FACES = {
    "ops": {"rrag_kernels.ops"},
    "models": {"rrag_kernels.models", "rrag_kernels.models.nli"},
}


def _module_names() -> dict[str, Path]:
    """Every module of the package by dotted name (packages by their own name)."""
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    for path in ROOT.glob("_core*"):  # the compiled module, when built in place
        out[f"{PACKAGE}._core"] = path
    out.setdefault(f"{PACKAGE}._core", ROOT / "_core.pyi")
    return out


MODULES = _module_names()
#: The method faces of the pipelines layer (``pipelines/<method>/__init__.py``).
PIPELINE_FACES = {m for m in MODULES if m.startswith(f"{PACKAGE}.pipelines.") and m.count(".") == 2
                  and MODULES[m].name == "__init__.py"}


def _package_of(module: str) -> str:
    path = MODULES[module]
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _bound_names(package: str) -> set[str]:
    """Names a package's ``__init__`` binds itself (what ``from package import name`` reads
    before it looks for a submodule: the face's ``from .topk_cosine import topk_cosine``
    makes ``ops.topk_cosine`` the function, not the module)."""
    path = MODULES.get(package)
    if path is None or path.name != "__init__.py":
        return set()
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and not (node.level == 1 and node.module is None):
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _imports(module: str) -> list[tuple[int, str]]:
    """(line, absolute name) of each module of this package that ``module`` imports."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    package = _package_of(module)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # ``from pkg import name``: name may itself be a module.
            bound = _bound_names(target)
            found += [(node.lineno, f"{target}.{a.name}") for a in node.names
                      if f"{target}.{a.name}" in MODULES and a.name not in bound]
    return [(line, name) for line, name in found if name == PACKAGE or name.startswith(PACKAGE + ".")]


def _layer(module: str) -> str:
    """The first component below the top package ("" for the top package's own modules)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and f"{PACKAGE}.{parts[1]}" in MODULES and \
        MODULES[f"{PACKAGE}.{parts[1]}"].name == "__init__.py" else ""


def _private_owner(name: str) -> str | None:
    """The package a private module belongs to, or None when ``name`` is not private."""
    parts = name.split(".")
    for k, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:k])
    return None


def _violations(module: str) -> list[str]:
    out = []
    package, layer = _package_of(module), _layer(module)
    path = MODULES[module]
    shown = path.relative_to(ROOT.parent) if ROOT.parent in path.parents else path.name
    for line, name in _imports(module):
        where = f"{shown}:{line} imports {name}"
        owner = _private_owner(name)
        if name == f"{PACKAGE}._core" or name.startswith(f"{PACKAGE}._core."):
            if layer != "ops":
                out.append(f"{where}: only ops/ imports the compiled module")
        elif owner is not None and (module, name) not in ALLOWED_PRIVATE:
            if not (package == owner or package.startswith(owner + ".")):
                out.append(f"{where}: a private module of {owner}")
        target = _layer(name) if name in MODULES else ""
        if layer in ("models", "pipelines") and target != layer:
            if target in FACES and name not in FACES[target]:
                out.append(f"{where}: {layer}/ imports {target} through its face {sorted(FACES[target])} only")
            if target in ("reference", "triton_ops", "torch_ops") or (layer == "models" and target == "pipelines"):
                out.append(f"{where}: {layer}/ may not import {target}")
        shell = layer in SHELLS or module == f"{PACKAGE}.__main__"
        if shell and target not in (layer, "") and (module, name) not in SHELL_STARTS:
            if target in SHELLS:
                out.append(f"{where}: a shell imports no other shell")
            elif name not in FACES.get(target, set()) | PIPELINE_FACES | {f"{PACKAGE}.pipelines"}:
                out.append(f"{where}: {layer or module}/ imports the other layers through their faces only")
        if layer == "reference" and name != PACKAGE and target not in ("reference",):
            out.append(f"{where}: reference/ imports nothing of the layers it checks")
    return out


def test_the_walk_sees_the_layers():
    """Guard against a vacuous pass: the tree and its imports are where the rules expect."""
    assert {_layer(m) for m in MODULES} >= {"", "ops", "models", "pipelines", "reference", "triton_ops", "torch_ops",
                                             *SHELLS}
    assert "rrag_kernels.serve" in {n for _, n in _imports("rrag_kernels.cli.serve")}
    assert "rrag_kernels.pipelines.mirage" in PIPELINE_FACES and "rrag_kernels.pipelines.mirage.defense" not in PIPELINE_FACES
    assert "rrag_kernels.pipelines.mirage" in {n for _, n in _imports("rrag_kernels.integrations._common")}
    assert ("rrag_kernels.ops._validation" in {n for _, n in _imports("rrag_kernels.ops.nli_graph")})
    assert ("rrag_kernels.ops" in {n for _, n in _imports("rrag_kernels.pipelines.mirage.defense")})
    assert _violations("rrag_kernels.ops.nli_graph") == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if MODULES[m].suffix == ".py"))
def test_imports_follow_the_layers(module):
    bad = _violations(module)
    assert not bad, "\n".join(bad)


def test_a_private_import_across_layers_is_caught(tmp_path, monkeypatch):
    """The rules catch what they are for (on a made-up module, not on the tree)."""
    fake = tmp_path / "fake.py"
    fake.write_text("from ...ops import _validation\nfrom ...ops.nli_graph import nli_graph\n"
                    "from ... import _core\nfrom ...reference import select_pairs_ref\n")
    monkeypatch.setitem(MODULES, "rrag_kernels.pipelines.mirage.fake", fake)
    bad = _violations("rrag_kernels.pipelines.mirage.fake")
    assert any("a private module of rrag_kernels.ops" in b for b in bad), bad
    assert any("through its face" in b for b in bad), bad
    assert any("only ops/ imports the compiled module" in b for b in bad), bad
    assert any("may not import reference" in b for b in bad), bad
    fake.write_text("from ...ops import claim_relevance, check_int\nfrom ...models import nli\n"
                    "from ...models.nli import LexicalNLI\nfrom .._progress import progress_iter\n")
    assert _violations("rrag_kernels.pipelines.mirage.fake") == []
    monkeypatch.setitem(MODULES, "rrag_kernels.integrations.fake", fake)
    fake.write_text("from ..pipelines.mirage.defense import MirageDefense\nfrom ..pipelines import _progress\n")
    bad = _violations("rrag_kernels.integrations.fake")
    assert len([b for b in bad if "through their faces only" in b]) == 2, bad
    fake.write_text("from ..pipelines.mirage import MirageDefense\nfrom ..models import split_sentences\n"
                    "from ..ops import cosine_matrix\nfrom ._common import require\n")
    assert _violations("rrag_kernels.integrations.fake") == []


def test_a_shell_importing_another_shell_is_caught(tmp_path, monkeypatch):
    fake = tmp_path / "fake.py"
    fake.write_text("from ..cli.common import stderr\nfrom ..pipelines.mirage.defense import MirageDefense\n")
    monkeypatch.setitem(MODULES, "rrag_kernels.serve.fake", fake)
    bad = _violations("rrag_kernels.serve.fake")
    assert any("a shell imports no other shell" in b for b in bad), bad
    assert any("through their faces only" in b for b in bad), bad
    fake.write_text("from ..pipelines import json_text\nfrom ..pipelines.mirage import MirageDefense\n"
                    "from .. import __version__\nfrom .limits import ServerLimits\n")
    assert _violations("rrag_kernels.serve.fake") == []


def test_main_defines_no_command():
    """``__main__`` is the console scripts' entry point: it imports ``cli.main`` and defines nothing."""
    tree = ast.parse(MODULES["rrag_kernels.__main__"].read_text(encoding="utf-8"))
    defined = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    assert defined == []
    assert "rrag_kernels.cli.main" in {n for _, n in _imports("rrag_kernels.__main__")}


def test_every_method_follows_the_contract():
    """Each method of pipelines/ has ``run_batch`` and its results ``to_record`` (pipelines/__init__.py)."""
    import inspect
    import typing

    from rrag_kernels.pipelines.conformal import ConformalRAG
    from rrag_kernels.pipelines.d2f import D2FReAG
    from rrag_kernels.pipelines.mirage import MirageDefense
    from rrag_kernels.pipelines.reliablerag import ReliableRAG

    for method in (MirageDefense, ConformalRAG, D2FReAG, ReliableRAG):
        run_batch = getattr(method, "run_batch", None)
        assert callable(run_batch), method
        assert "progress" in inspect.signature(run_batch).parameters, method
        (result,) = typing.get_args(typing.get_type_hints(run_batch)["return"])  # list[Result]
        for kind in typing.get_args(result) or (result,):  # a union: each kind of result
            assert callable(getattr(kind, "to_record", None)), (method, kind)


def test_no_import_cycle_between_modules_of_a_package():
    """Modules import each other in one direction, imports inside functions included (a
    function-local import that closes a cycle works only until the import order changes; the
    memory budget once made one between ops/_validation and ops/_dispatch). A package's
    ``__init__`` importing its own modules is its face, so edges into a face are left out."""
    graph = {m: {n for _, n in _imports(m) if n in MODULES and n != m and MODULES[n].name != "__init__.py"}
             for m in MODULES if MODULES[m].suffix == ".py"}
    seen: dict[str, int] = {}
    cycles = []

    def visit(m: str, path: list[str]) -> None:
        seen[m] = 1
        for t in sorted(graph.get(m, ())):
            if seen.get(t) == 1:
                cycles.append(path[path.index(t):] + [t] if t in path else [m, t])
            elif t not in seen:
                visit(t, path + [t])
        seen[m] = 2

    for m in sorted(graph):
        if m not in seen:
            visit(m, [m])
    assert not cycles, cycles
    assert "rrag_kernels.ops._dispatch" in graph["rrag_kernels.ops._memory"]  # the walk sees the edges
