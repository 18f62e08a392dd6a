"""The package layout of pyproject.toml matches the folders on disk (shared/DESIGN.md)."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

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
