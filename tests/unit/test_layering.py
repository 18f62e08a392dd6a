"""The top-level folders import only downward (README.md, "Where things are").

Every module under each folder is read with ``ast`` (imports inside functions and
``if TYPE_CHECKING`` blocks included: a deferred import is still a dependency) and every
``icefabric.X`` it imports must be in its own layer or one below. An import against this order
is also what a cycle between two folders needs, so this test fails on both.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Bottom to top; a module may import its own layer and the ones below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    # the root package and its shared helpers: waiting with a deadline, data files in and out,
    # the bounded HTTP server, the private runtime directory
    (
        "icefabric",
        "icefabric.waiting",
        "icefabric.files",
        "icefabric.httpserve",
        "icefabric.private",
    ),
    ("icefabric.target",),  # P4 targets: the embedded one (ice-switch, its P4 frontend), BMv2 tools
    ("icefabric.p4src",),  # the P4 program and what is read from it (through target's frontend)
    ("icefabric.topo",),  # topology specs, generators, Mininet bring-up
    ("icefabric.control",),  # the controller and its icectl verbs
    ("icefabric.traffic",),  # hosts: RoCEv2 endpoints, rate agents, workloads
    ("icefabric.sim",),  # the fluid simulator, its scenarios and the peers matrix
    ("icefabric.experiment",),  # timed experiments, the demo, the in-process fabrics, versus
    ("icefabric.bench", "icefabric.icectl"),  # entry points that gather every package
)

# Imports against the order that are known and owned by an open issue (each one names it).
# The test fails when one of these is gone too, so the list only shrinks.
KNOWN: dict[tuple[str, str], str] = {}


def _folder(module: str) -> str:
    """The layer key of a dotted module name (``icefabric.control.cli.app`` -> ``icefabric.control``)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def _layer(key: str) -> int:
    for i, names in enumerate(LAYERS):
        if key in names:
            return i
    raise KeyError(key)


def _modules() -> dict[str, Path]:
    """Every module of the icefabric package, by dotted name, from pyproject's package-dir."""
    import tomllib

    with (ROOT / "pyproject.toml").open("rb") as f:
        package_dir = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    out: dict[str, Path] = {}
    for package, folder in package_dir.items():
        base = ROOT / folder
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if package == "icefabric" and len(parts) != 1:
                continue  # the root package's own modules only; the folders are mapped above
            out[".".join([package, *parts])] = path
    return out


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, imported module) of every import in ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            # `from icefabric import sim` imports the package icefabric.sim
            if name == "icefabric":
                found += [(node.lineno, f"icefabric.{a.name}") for a in node.names]
    return [(line, name) for line, name in found if name.startswith("icefabric.")]


def _violations() -> tuple[list[str], set[tuple[str, str]]]:
    modules = _modules()
    bad: list[str] = []
    known_seen: set[tuple[str, str]] = set()
    for module, path in modules.items():
        src = _folder(module)
        for line, name in _imports(path, module):
            dst = _folder(name)
            if _layer(dst) <= _layer(src):
                continue
            rel = path.relative_to(ROOT).as_posix()
            if (rel, dst) in KNOWN:
                known_seen.add((rel, dst))
                continue
            bad.append(f"{rel}:{line}: {src} imports {name} (a layer above it)")
    return bad, known_seen


def test_every_module_is_in_a_layer() -> None:
    unplaced = sorted({_folder(m) for m in _modules()} - {n for names in LAYERS for n in names})
    assert not unplaced, f"add these to LAYERS (and README's folder table): {unplaced}"


def test_folders_import_only_downward() -> None:
    bad, _ = _violations()
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def test_known_exceptions_are_still_needed() -> None:
    _, seen = _violations()
    stale = sorted(set(KNOWN) - seen)
    assert not stale, f"no longer imported upward, drop from KNOWN: {stale}"


def test_the_checker_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "from __future__ import annotations\n"
        "def f():\n"
        "    from icefabric.experiment import runner\n"
        "    from . import cousin\n"
        "    from icefabric import sim\n"
    )
    got = [name for _, name in _imports(src, "icefabric.control.x.m")]
    assert got == ["icefabric.experiment", "icefabric.control.x", "icefabric.sim"]
    assert _layer(_folder("icefabric.control.x.m")) < _layer(_folder(got[0]))
