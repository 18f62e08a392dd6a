"""Base-forwarding options of one mode, shared by both engines (virtual time and Mininet)."""

from __future__ import annotations

from icefabric.control.fabric import ALL_PATH_KINDS, FabricOptions
from icefabric.experiment.config import Experiment, Mode

FLOWLET_TIMEOUT_US = 100  # FabricOptions' default, for links at the spec's rates
# ICE: INT feedback for every 8th data packet of a flow.  Each feedback packet is a separate
# ~190-byte frame on the reverse path (4-5 % of a 4 KiB data flow's rate at N=1, queued with the
# data at the last hop's uplink), and the tx-rate term of HPCC's per-hop utilisation is measured
# between two feedbacks, so over few packets it is dominated by whole-packet quantisation.
# Measured on the default preset (virtual time; 4 MiB, 4 slices, 1 us links): ICE's busbw /
# bound 0.81 with N=1, 0.87 with 2, 0.89 with 4, 0.91 with 8.
FEEDBACK_EVERY_N = 8


def mode_options(exp: Experiment, mode: Mode, *, report_every_n: int) -> FabricOptions:
    """The controller's base forwarding for ``mode``: its load-balancing mode; INT and feedback
    only for ICE's rate control; INT reports sampled 1 in ``report_every_n`` packets (to learn
    each flow's path); the flowlet gap stretched by 1/scale like every time constant."""
    ice = mode.rate == "ice"
    return FabricOptions(
        mode=mode.lb_mode,
        # INT only where the rate control reads it: a baseline (DCQCN) fabric carries no INT,
        # and 44-80 bytes of records per packet would overload its links by 1-2 % and mark
        # ECN on a single flow (planned paths + DCQCN: 59.5 % of the bound with INT, 97.5 %
        # without, on the default preset in virtual time)
        int_kinds=ALL_PATH_KINDS if ice else (),
        feedback_every_n=FEEDBACK_EVERY_N if ice else 0,
        report_every_n=report_every_n,
        flowlet_timeout_us=min(round(FLOWLET_TIMEOUT_US / exp.rates.scale), 2**32 - 1),
    )
