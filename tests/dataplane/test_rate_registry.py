"""A new rate algorithm is two files: the toy of traffic/README.md through both engines.

The class is taken from the README's "Adding a rate algorithm" section (so the docs run) and
registered as the README's registry line does; then ``ecmp+aimd`` runs in the virtual-time
engine (ice.p4 on embedded switches, real P4Runtime, host agents) and in the fluid simulator.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from icefabric.control.topology import Topology
from icefabric.experiment.config import parse_experiment
from icefabric.experiment.runner import run_experiment
from icefabric.experiment.virtual import VirtualEngine
from icefabric.files import read_text
from icefabric.sim.config import config_for
from icefabric.sim.engine import Simulator
from icefabric.sim.scenarios import build
from icefabric.traffic.modes import get_mode
from icefabric.traffic.rate import RATE_CLASSES, make_rate_control, rate_needs_int

pytestmark = [pytest.mark.dataplane, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SECTION = "### Adding a rate algorithm"


def _readme_blocks() -> list[str]:
    text = read_text(ROOT / "traffic" / "README.md", what="traffic/README.md")
    section = text.split(SECTION, 1)[1].split("\n### ", 1)[0]
    return [b.split("```", 1)[0] for b in section.split("```python\n")[1:]]


def _readme_class() -> Any:
    ns: dict[str, Any] = {"__name__": "aimd_from_readme"}
    exec(compile(_readme_blocks()[0], "traffic/README.md (aimd.py)", "exec"), ns)
    return ns["Aimd"]


@pytest.fixture
def aimd(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The README's class, counting the CNPs that reach it, registered as ``aimd``."""
    base = _readme_class()

    class Counted(base):  # type: ignore[misc, valid-type]
        cnps: ClassVar[int] = 0

        def on_cnp(self, now_us: float) -> None:
            Counted.cnps += 1
            super().on_cnp(now_us)

    monkeypatch.setitem(RATE_CLASSES, "aimd", Counted)
    yield Counted


def test_the_readme_registry_line_is_the_registry_plus_one_entry() -> None:
    src = read_text(ROOT / "traffic" / "rate" / "__init__.py", what="traffic/rate/__init__.py")
    (line,) = [ln for ln in src.splitlines() if ln.startswith("RATE_CLASSES:")]
    assert _readme_blocks()[1].strip() == line.replace("}", ', "aimd": Aimd}')


def test_a_registered_class_is_a_mode_of_every_engine(aimd: Any) -> None:
    mode = get_mode("ecmp+aimd")
    assert mode.rate == "aimd" and not mode.int_on and not rate_needs_int("aimd")
    assert {"sim", "virtual", "mininet"} <= set(mode.engines)
    rc = make_rate_control("aimd", 1e9)
    assert isinstance(rc, aimd) and rc.rate_bps() == 1e9
    rc.on_cnp(0.0)
    assert rc.rate_bps() == 0.5e9
    rc.on_timer(50.0)
    assert rc.rate_bps() == 0.5e9 + 1e9 / 16


def test_the_simulator_runs_it(aimd: Any) -> None:
    case = build("background", 32, 3, 8 << 20)  # unplanned storage flows: ECN marks, CNPs
    res = Simulator(Topology(case.spec), case.workload, config_for(get_mode("ecmp+aimd"))).run()
    assert res.unfinished == 0
    assert res.cnps > 0 and 0 < aimd.cnps <= res.cnps  # the CNPs reached the class
    dcqcn = Simulator(Topology(case.spec), case.workload, config_for(get_mode("ecmp+dcqcn")))
    assert res.flow_finish_us != dcqcn.run().flow_finish_us  # not DCQCN under another name


def test_the_virtual_time_engine_runs_it(aimd: Any, engine: VirtualEngine) -> None:
    exp = parse_experiment(
        {
            "name": "aimd",
            # the incast preset at 1 MiB: 11 senders per receiver, ice.p4 marks ECN
            "topology": {"leaf_spine": {"leaves": 4, "spines": 2, "hosts_per_leaf": 3}},
            "workload": {
                "collective": "all-to-all",
                "message_bytes": "1MiB",
                "hosts": "interleaved",
            },
            "modes": ["ecmp+aimd"],
            "seed": 1,
            "rates": {"scale": 0.001, "mtu_bytes": 4096},
        }
    )
    (m,) = run_experiment(exp, out_base=None, engine=engine).doc["modes"]
    assert m["ok"], m["error"]
    assert m["messages"]["arrived"] == m["messages"]["total"]
    assert m["cnps"] > 0 and aimd.cnps > 0  # ice.p4's marks became CNPs the class acted on
