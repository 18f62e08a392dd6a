"""Who hands what to whom: the Controller's collaborators of one concern each, built once.

``Controller.__init__`` ends with :func:`own_collaborators`, which builds the job registry, the
state file, the change installer, failure handling, link probing, the switch events, the etcd
election and the read-only views, each handed what it needs explicitly: the objects the
controller shares (its lock, jobs, flows, failed switches ...) and callables for what a
takeover replaces (the planner, the election id, whether it is active). It reads the controller
only while it builds them; none of the collaborators keeps it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icefabric.control.controller.changes import ChangeInstaller
from icefabric.control.controller.election import Election
from icefabric.control.controller.events import SwitchEvents
from icefabric.control.controller.failures import FailureHandling
from icefabric.control.controller.jobs import JobRegistry
from icefabric.control.controller.linkfail import LinkProbing
from icefabric.control.controller.statefile import StateFile
from icefabric.control.controller.views import ControllerViews

if TYPE_CHECKING:
    from icefabric.control.controller.core import Controller


def own_collaborators(ctl: Controller, probe_interval_s: float, probe_misses: int) -> None:
    """Build ``ctl``'s collaborators (its ``registry``, ``statefile``, ``changes``,
    ``failures``, ``probing``, ``switch_events``, ``election`` and ``views``) and give them
    to it, in the order they need each other."""
    ctl.registry = JobRegistry(  # jobs: planned, saved, installed, removed
        spec=ctl.spec,
        topo=ctl.topo,
        lock=ctl.lock,
        jobs=ctl.jobs,
        flows=ctl.flows,
        keys=ctl._keys,
        agents=ctl.agents,
        events=ctl.events,
        planner=lambda: ctl.planner,  # replaced on a new term
        save_state=lambda **kw: ctl.statefile.save(**kw),
        install_change=lambda what, plan_s: ctl.changes.install(what, plan_s),
    )
    ctl.statefile = StateFile(  # the shared state, saved before every change (the store)
        spec=ctl.spec,
        topo=ctl.topo,
        switches={s.name for s in ctl.spec.switches},
        store=ctl.store,
        jobs=ctl.jobs,
        flows=ctl.flows,
        failed_switches=ctl.failed_switches,
        probe_down=ctl._probe_down,
        agents=ctl.agents,
        rates=ctl.rates,
        planner=lambda: ctl.planner,  # replaced on a new term
        register=ctl.registry.register,
    )
    ctl.changes = ChangeInstaller(  # every change: state saved, flows, base, recorded
        statefile=ctl.statefile,
        installer=ctl.installer,
        agents=ctl.agents,
        events=ctl.events,
        history=ctl.history,
        planner=lambda: ctl.planner,
        flow_entries=ctl.flow_entries,
        desired=ctl.desired,
    )
    ctl.failures = FailureHandling(  # link and switch failures: replan, save, install
        spec=ctl.spec,
        topo=ctl.topo,
        lock=ctl.lock,
        failed_switches=ctl.failed_switches,
        probe_down=ctl._probe_down,
        events=ctl.events,
        planner=lambda: ctl.planner,
        statefile=ctl.statefile,
        install_change=ctl.changes.install,
    )
    ctl.probing = LinkProbing(  # LLDP link probes while primary; verdicts -> failures
        spec=ctl.spec,
        topo=ctl.topo,
        pool=ctl.pool,
        lock=ctl.lock,
        failed_switches=ctl.failed_switches,
        probe_down=ctl._probe_down,
        resyncing=ctl._resyncing,
        installer=ctl.installer,
        failures=ctl.failures,
        post=ctl.post,
        is_active=lambda: ctl.active,
        interval_s=probe_interval_s,
        misses=probe_misses,
    )
    ctl.switch_events = SwitchEvents(  # connections, arbitration, packet-in; resyncs
        pool=ctl.pool,
        installer=ctl.installer,
        reports=ctl.reports,
        telemetry=ctl.telemetry,
        probing=ctl.probing,
        lock=ctl.lock,
        events=ctl.events,
        post=ctl.post,
        failed_switches=ctl.failed_switches,
        down_since=ctl._down_since,
        resyncing=ctl._resyncing,
        backup=ctl.backup,
        connect_timeout=ctl.connect_timeout,
        switch_dead_s=ctl.switch_dead_s,
        election_id=lambda: ctl.election_id,
        is_active=lambda: ctl.active,
        is_stopping=lambda: ctl._stopping,
        take_over=lambda: ctl.take_over(),
        check_fence=ctl.check_fence,
        ensure_pipeline=ctl._ensure_pipeline,
        desired=lambda: ctl.desired(),
        fail_switch=ctl.fail_switch,
        restore_switch=ctl.failures.restore_switch,
    )
    ctl.election = Election(  # etcd: a won term -> takeover, a lost lease -> no writes
        store=ctl.store,
        pool=ctl.pool,
        installer=ctl.installer,
        lock=ctl.lock,
        probing=ctl.probing,
        agents=ctl.agents,
        jobs=ctl.jobs,
        startup_jobs=lambda: ctl.startup_jobs,  # icectl run sets them after __init__
        takeovers=ctl.takeovers,
        fenced=ctl.fenced,
        connect_timeout=ctl.connect_timeout,
        post=ctl.post,
        is_stopping=lambda: ctl._stopping,
        reset_shared_state=ctl._reset_shared_state,
        set_election_id=ctl._set_election_id,
        take_over=lambda: ctl.take_over(),
        deactivate=ctl._deactivate,
        ensure_job=ctl.ensure_job,
        last_resync=lambda: ctl.last_resync,
    )
    ctl.views = ControllerViews(  # the answers to read commands (icectl, the daemon API)
        spec=ctl.spec,
        topo=ctl.topo,
        tags=ctl.tags,
        pool=ctl.pool,
        lock=ctl.lock,
        jobs=ctl.jobs,
        flows=ctl.flows,
        installer=ctl.installer,
        agents=ctl.agents,
        history=ctl.history,
        failed_switches=ctl.failed_switches,
        down_since=ctl._down_since,
        store=ctl.store,
        takeovers=ctl.takeovers,
        fenced=ctl.fenced,
        planner=lambda: ctl.planner,  # replaced on a new term
        election_id=lambda: ctl.election_id,
        is_active=lambda: ctl.active,
        state_errors=lambda: ctl.statefile.errors,
        links=ctl.probing.status,
    )
