"""The package's shape: no import circle, arrows only downward, folders reached by their faces.

DESIGN.md draws the layers; this test reads every import statement (those inside functions
too) and holds the code to that drawing.
"""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "undertale_duck"
NAME = "undertale_duck"

#: Layers, lowest first: a module may import its own folder and the layers below it.
LAYERS: list[set[str]] = [
    {"errors", "common"},
    {"core.runtime", "core.parquet"},
    {"core.source"},
    {"core.bounds"},
    {"core.read", "core.views", "core.query"},
    {"core.rows"},
    {"core.dataset"},
    {"core.describe", "core.pack"},
    {"validation"},
    {"dataset", "schema"},
    {"training"},
    {"cli", "__main__", ""},
]
CORE_FOLDERS = sorted(f.name for f in (PACKAGE / "core").iterdir() if (f / "__init__.py").exists())


def _modules() -> Iterator[tuple[str, bool, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        yield ".".join(parts), is_package, path


def _target(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _exists(module: str) -> bool:
    path = PACKAGE.parent / module.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a name of a package: the package)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for module, is_package, path in _modules():
        graph[module]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                target = _target(module, is_package, node)
                if target.split(".")[0] != NAME:
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    graph[module].add(sub if _exists(sub) else target)
            elif isinstance(node, ast.Import):
                graph[module].update(a.name for a in node.names if a.name.startswith(NAME))
    return graph


def _folder(module: str) -> str:
    parts = module.split(".")[1:]
    if parts[:1] == ["core"] and len(parts) > 1:
        return "core." + parts[1]
    return parts[0] if parts else ""


def _layer(folder: str) -> int:
    for k, layer in enumerate(LAYERS):
        if folder in layer:
            return k
    raise AssertionError(f"folder {folder!r} is in no layer of this test (and of DESIGN.md)")


def test_no_import_circle() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in list(graph):
        if module not in index:
            visit(module)
    assert circles == []


def test_arrows_only_downward() -> None:
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in _graph().items()
        for target in targets
        if target != NAME and _layer(_folder(target)) > _layer(_folder(module))
    )
    assert upward == []


def test_query_never_imports_views() -> None:
    graph = _graph()
    assert not [
        (m, t) for m, ts in graph.items() for t in ts
        if _folder(m) == "core.query" and _folder(t) == "core.views"
    ]


def test_other_folders_import_only_public_names_of_a_core_folder() -> None:
    """Across folders, an import names a core folder (its face), never a module inside it.

    A face may list a module of its folder as a public namespace (``sqlfiles``,
    ``windows``): importing that name from the face is allowed.
    """
    faces = {f: set(importlib.import_module(f"{NAME}.core.{f}").__all__) for f in CORE_FOLDERS}
    wrong = []
    for module, is_package, path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = _target(module, is_package, node)
            folder = _folder(target)
            if not folder.startswith("core.") or folder == _folder(module):
                continue
            face = f"{NAME}.{folder}"
            if target != face:
                wrong.append(f"{module} imports {target}")
                continue
            hidden = [a.name for a in node.names if a.name not in faces[folder.split(".")[1]]]
            if hidden:
                wrong.append(f"{module} imports {hidden} from {face}, not in its __all__")
    assert wrong == []


@pytest.mark.parametrize("folder", CORE_FOLDERS)
def test_each_face_names_what_it_exports(folder: str) -> None:
    face = importlib.import_module(f"{NAME}.core.{folder}")
    assert face.__doc__, f"core/{folder}/__init__.py needs a docstring saying what it holds"
    assert len(set(face.__all__)) == len(face.__all__)  # ruff (RUF022) keeps it sorted
    for name in face.__all__:
        assert hasattr(face, name), f"core/{folder} lists {name!r} but has no such name"


def test_every_module_says_its_job() -> None:
    silent = [
        str(path.relative_to(PACKAGE))
        for _, _, path in _modules()
        if path.stat().st_size and not ast.get_docstring(ast.parse(path.read_text()))
    ]
    assert silent == []


def test_import_works_without_fcntl() -> None:
    """``import undertale_duck`` and its core work where ``fcntl`` is missing (Windows)."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['fcntl'] = None\n"
        "import undertale_duck\n"
        "from undertale_duck import ParquetDataset\n"
        + "".join(f"import undertale_duck.core.{f}\n" for f in CORE_FOLDERS)
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
