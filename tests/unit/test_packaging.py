"""The package layout of pyproject.toml matches the folders on disk (shared/DESIGN.md)."""

from __future__ import annotations

import fnmatch
import importlib
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _config() -> dict:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def _package_dir_of(name: str, package_dir: dict[str, str]) -> Path:
    """Resolve a dotted package name to its folder the way setuptools does."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in package_dir:
            return ROOT / package_dir[prefix] / Path(*parts[i:])
    return ROOT / Path(*parts)


def test_every_python_folder_is_a_listed_package() -> None:
    cfg = _config()
    listed = {_package_dir_of(p, cfg["package-dir"]).resolve() for p in cfg["packages"]}
    on_disk = set()
    for top in cfg["package-dir"].values():
        for init in (ROOT / top).rglob("__init__.py"):
            on_disk.add(init.parent.resolve())
    missing = sorted(str(p.relative_to(ROOT)) for p in on_disk - listed)
    assert not missing, (
        f"folders with __init__.py not listed in [tool.setuptools] packages: {missing}"
    )


def test_listed_packages_import_under_icefabric() -> None:
    for name in _config()["packages"]:
        module = importlib.import_module(name)
        assert module.__name__ == name


def test_p4src_is_found_from_the_package() -> None:
    from icefabric import p4src

    assert p4src.P4SRC_DIR.is_dir()
    assert (p4src.P4SRC_DIR / "__init__.py").exists()


def _files_named(data: object) -> list[str]:
    """Every string under a ``file`` key of an experiment file, at any depth."""
    if isinstance(data, dict):
        out = [v for k, v in data.items() if k == "file" and isinstance(v, str)]
        for v in data.values():
            out += _files_named(v)
        return out
    if isinstance(data, list):
        return [f for v in data for f in _files_named(v)]
    return []


def _shipped(path: Path, cfg: dict) -> bool:
    """Whether an installed package holds ``path``: it matches a package-data glob."""
    for pkg, globs in cfg["package-data"].items():
        folder = _package_dir_of(pkg, cfg["package-dir"]).resolve()
        if folder not in path.parents:
            continue
        rel = path.relative_to(folder).as_posix()
        if any(fnmatch.fnmatch(rel, g) and rel.count("/") == g.count("/") for g in globs):
            return True
    return False


def test_presets_name_only_files_the_package_ships() -> None:
    """A preset resolves its files next to itself, then under the import root: both installed."""
    from icefabric.experiment import config, presets

    cfg = _config()
    named = 0
    for name in presets.preset_names():
        path = presets.preset_path(name)
        for value in _files_named(yaml.safe_load(path.read_text())):
            named += 1
            where = [r / value for r in (path.parent, config.ROOT) if (r / value).exists()]
            assert where, f"preset {name}: {value} not found"
            assert not Path(value).is_absolute() and not value.startswith("tests/"), (name, value)
            assert _shipped(where[0].resolve(), cfg), (
                f"preset {name}: {value} is not package data in pyproject.toml"
            )
    assert named >= 3  # nccl-log's log, mixed-dp's and mixed-pp's topology
