"""The ICE P4_16 programs, shipped as package data so an installed icectl finds them."""

from pathlib import Path

P4SRC_DIR = Path(__file__).resolve().parent
ICE_P4 = P4SRC_DIR / "ice.p4"
# The Tofino (TNA) port of the same program; compiled by bf-p4c, never by the embedded target.
ICE_TNA_P4 = P4SRC_DIR / "tna" / "ice.p4"
