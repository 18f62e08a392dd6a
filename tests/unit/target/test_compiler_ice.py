"""The project's own p4src/ice.p4 compiles, yields P4Info and survives arbitrary packets."""

from __future__ import annotations

import random

import pytest

from icefabric.p4src import ICE_P4
from icefabric.target.compiler import load_program


@pytest.fixture(scope="module")
def ice():  # type: ignore[no-untyped-def]
    return load_program(ICE_P4)


def test_p4info_is_complete(ice) -> None:  # type: ignore[no-untyped-def]
    info = ice.p4info
    assert info.pkg_info.arch == "v1model"
    assert len(info.tables) >= 5
    action_ids = {a.preamble.id for a in info.actions}
    for t in info.tables:
        assert t.preamble.id >> 24 == 0x02
        assert {r.id for r in t.action_refs} <= action_ids
        for mf in t.match_fields:
            assert mf.bitwidth > 0
    ids = [t.preamble.id for t in info.tables] + list(action_ids)
    assert len(ids) == len(set(ids))


def test_random_packets_never_crash(ice) -> None:  # type: ignore[no-untyped-def]
    pipeline = ice.instantiate()
    rng = random.Random(5)
    for _ in range(200):
        data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 200)))
        port = rng.randrange(0, 16)
        res = pipeline.ingress(data, port)
        if not res.drop and res.mcast_grp == 0:
            pipeline.egress(res.ctx, egress_port=res.egress_spec)
