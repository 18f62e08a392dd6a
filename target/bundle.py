"""Device bundle: a P4 program with its include files, as p4_device_config bytes.

Format (JSON, UTF-8): {"format": "icefabric-p4/1", "main": "ice.p4",
"files": {"ice.p4": "...", "include/headers.p4": "..."}} with paths relative to the main
file's folder; every file reachable through #include "..." from the main file is included.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from pathlib import Path
from typing import Any

from icefabric.files import DataFileError, JsonError, parse_json, read_text

FORMAT = "icefabric-p4/1"
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)

log = logging.getLogger(__name__)


class BundleError(ValueError):
    """A device config that is neither a valid bundle nor P4 source."""


def make_bundle(main_path: Path | str) -> bytes:
    """Bundle `main_path` and every file it reaches by #include "..." into JSON bytes."""
    main = Path(main_path)
    if not main.is_file():
        raise BundleError(f"{main}: no such P4 file")
    root = main.resolve().parent
    files: dict[str, str] = {}
    pending = [main.resolve()]
    while pending:
        path = pending.pop()
        rel = posixpath.normpath(Path(_relpath(path, root)).as_posix())
        if rel in files:
            continue
        try:
            text = read_text(path, limit=4 << 20, what="a P4 source file")
        except DataFileError as exc:
            raise BundleError(str(exc).splitlines()[0]) from None
        files[rel] = text
        for m in _INCLUDE.finditer(text):
            target = (path.parent / m.group(1)).resolve()
            if target.is_file():
                pending.append(target)
            else:
                line = text.count("\n", 0, m.start()) + 1
                log.warning(
                    "%s:%d: included file %s not found; not bundled", path, line, m.group(1)
                )
    doc = {"format": FORMAT, "main": main.name, "files": files}
    return json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")


def _relpath(path: Path, root: Path) -> str:
    import os

    return os.path.relpath(path, root)


def parse_bundle(data: bytes) -> tuple[str, dict[str, str]]:
    """Validate bundle bytes; return (main file name, files)."""
    try:  # bounded nesting and integers: a pushed config is a peer's input
        doc: Any = parse_json(data, max_depth=8)
    except JsonError as exc:
        raise BundleError(f"device bundle is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BundleError("device bundle: expected a JSON object")
    if doc.get("format") != FORMAT:
        raise BundleError(
            f"device bundle: field 'format' must be {FORMAT!r}, got {doc.get('format')!r}"
        )
    main = doc.get("main")
    files = doc.get("files")
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in files.items()
    ):
        raise BundleError("device bundle: field 'files' must map file names to source text")
    if not isinstance(main, str) or main not in files:
        raise BundleError(f"device bundle: field 'main' ({main!r}) must name one of 'files'")
    return main, files


def load_bundle(data: bytes) -> Any:
    """Compile a bundle into a Program (P4CompileError for errors in the P4 source)."""
    from icefabric.target.compiler import compile_source

    main, files = parse_bundle(data)
    return compile_source(files[main], filename=main, files=files)


def is_bundle(data: bytes) -> bool:
    """True when `data` is JSON (a bundle): P4 source never starts with "{"; load_bundle checks the format."""
    return data.lstrip().startswith(b"{")


def load_device_config(data: bytes) -> Any:
    """A Program from p4_device_config bytes: a bundle, or plain P4 source (UTF-8)."""
    if not data.strip():
        raise BundleError("p4_device_config is empty: expected P4 source or an icefabric-p4 bundle")
    if is_bundle(data):
        return load_bundle(data)
    from icefabric.target.compiler import compile_source

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError(
            "p4_device_config is neither an icefabric-p4 bundle nor UTF-8 P4 source "
            f"(a BMv2 JSON or binary?): {exc}"
        ) from exc
    # files={}: plain source pushed by a client includes nothing from the switch's disk.
    return compile_source(text, filename="p4_device_config.p4", files={})
