"""Built-in experiments: ``experiment/presets/NAME.yaml`` (``icectl experiment list``)."""

from __future__ import annotations

from pathlib import Path

from icefabric.experiment.config import Experiment, ExperimentError, load_experiment

PRESET_DIR = Path(__file__).with_name("presets")
DEFAULT_PRESET = "ecmp-collides"


def preset_names() -> list[str]:
    """Names of the built-in presets, sorted."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def preset_path(name: str) -> Path:
    """The file of preset ``name`` (ExperimentError naming the known ones if there is none)."""
    p = PRESET_DIR / f"{name}.yaml"
    if "/" in name or not p.is_file():
        raise ExperimentError(
            [f"--preset: no preset {name!r} (known: {', '.join(preset_names())})"]
        )
    return p


def load_preset(name: str) -> Experiment:
    """Load and validate a built-in preset."""
    return load_experiment(preset_path(name))
