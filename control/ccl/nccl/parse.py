"""Group a log's messages by communicator and recover each one's ranks, rings and trees.

Binding lines to communicators: init lines name their communicator (``comm 0x..`` pointer,
``commId``, or ``parent``/``color`` for ``ncclCommSplit``). Ring, tree and connection lines do
not (RCCL's do: ``comm 0x.. nRanks NN``), so they belong to the communicator their process
(host, pid, device) is initialising: from NCCL 2.18 an ``Init START`` line opens it; before,
the ``Init COMPLETE`` line that follows the lines closes it. Communicators without a commId
(NCCL < 2.18) are told apart by rank count and by each rank appearing once.

Rings: rank 0's order line when it lists every rank; else rebuilt from the connection lines
(``Channel NN : a[..] -> b[..]``) and GRAPH triples. Connection lines before ``Connected all
rings`` are ring connections; those before ``Connected all trees`` are tree connections. Logs
without these markers (NCCL < 2.8) connect ring, tree up and tree down channel by channel, so
the first connection each process prints for a channel is its ring connection.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from icefabric.control.ccl.nccl.commwork import (
    CommWork,
    Stream,
    add_edge,
    finish_comm,
    merge_anon,
    same_cycle,
)
from icefabric.control.ccl.nccl.formats import (
    MAXWIDTH,
    BadLine,
    Edge,
    Event,
    Init,
    Marker,
    Order,
    Pattern,
    Trees,
    Triple,
    Version,
    parse_message,
)
from icefabric.control.ccl.nccl.model import CommLog, NcclLog, RankInfo, ranges
from icefabric.control.ccl.nccl.records import Record, split_line, strip_wrapper_head


@dataclass(slots=True)
class _Conn:
    """Connection lines of one process for one communicator since the last marker."""

    buffered: list[tuple[int, Edge]] = field(default_factory=list)
    marked: bool = False  # a Connected all ... marker was seen: buffered lines are runtime ones


@dataclass(slots=True)
class _StreamState:
    current: str | None = None
    new_style: bool = False  # Init START lines open communicators
    pending: list[tuple[Record, Event]] = field(default_factory=list)
    last: str | None = None


class _Builder:
    def __init__(self, source: str) -> None:
        self.out = NcclLog(source=source)
        self.comms: dict[str, CommWork] = {}
        self.ptr: dict[tuple[str, int, str], str] = {}
        self.streams: dict[Stream, _StreamState] = {}
        self.conns: dict[tuple[Stream, str], _Conn] = {}
        self.versions: dict[tuple[str, int], str] = {}
        self.anon = 0

    # -- input -------------------------------------------------------------------------------

    def feed(self, rec: Record) -> None:
        try:
            ev = parse_message(rec.msg, cut=rec.cut)
        except BadLine as e:
            self.out.warn(rec.line, str(e), rec.msg)
            return
        if ev is None:
            if rec.cut and rec.msg.startswith(("Channel ", "Ring ", "Trees", "comm ")):
                self.out.warn(rec.line, "message cut by another process's output", rec.msg)
            return
        self.out.lines_used += 1
        if isinstance(ev, Version):
            self.versions.setdefault((rec.host, rec.pid), f"{rec.lib} {ev.text}")
            return
        st = self.streams.setdefault(rec.stream, _StreamState())
        if isinstance(ev, Init):
            self._init(rec, ev, st)
            return
        key = None
        ptr = getattr(ev, "comm", "")
        if ptr:
            key = self.ptr.get((rec.host, rec.pid, ptr))
        if key is None:
            key = st.current
        if key is None:
            st.pending.append((rec, ev))
        else:
            self._apply(key, rec, ev)

    def _init(self, rec: Record, ini: Init, st: _StreamState) -> None:
        known = ini.comm and (rec.host, rec.pid, ini.comm) in self.ptr
        if rec.cut and not ini.comm_id and not known:
            self.out.warn(rec.line, "init line cut by another process's output", rec.msg)
            return
        key = self._comm_key(rec, ini, st)
        if key is None:
            return
        work = self.comms[key]
        if ini.comm:
            self.ptr[(rec.host, rec.pid, ini.comm)] = key
        self._add_rank(work, rec, ini)
        if ini.kind == "start":
            self._flush_pending(st, st.last)
            st.new_style = True
            st.current = st.last = key
        elif ini.kind == "complete":
            if not st.new_style:
                self._flush_pending(st, key)
                st.current = None
            st.last = key
        elif ini.kind == "info":
            if st.current is None and not st.new_style:
                st.current = key
                self._flush_pending(st, key)
        else:  # Destroy/Abort COMPLETE
            if st.current == key:
                st.current = None
            self.ptr.pop((rec.host, rec.pid, ini.comm), None)

    def _comm_key(self, rec: Record, ini: Init, st: _StreamState) -> str | None:
        known = self.ptr.get((rec.host, rec.pid, ini.comm)) if ini.comm else None
        if ini.kind == "end":
            return known
        if known is not None and ini.kind != "start":
            return known
        if ini.comm_id:
            key, kind = ini.comm_id, "id"
        elif ini.parent and (rec.host, rec.pid, ini.parent) in self.ptr:
            parent = self.ptr[(rec.host, rec.pid, ini.parent)]
            key = f"split:{parent}:{ini.color}:{ini.child if ini.child is not None else ''}"
            kind = "split"
        else:
            return self._anon_key(rec, ini, st)
        if key not in self.comms:
            self._new_comm(key, kind, rec, ini)
        elif self.comms[key].log.nranks != ini.nranks:
            self.out.warn(
                rec.line,
                f"communicator {key}: nranks {ini.nranks} differs from "
                f"{self.comms[key].log.nranks} (line {self.comms[key].log.first_line})",
                rec.msg,
            )
            return None
        if kind == "split":
            self.comms[key].log.parent = key.split(":")[1]
        return key

    def _anon_key(self, rec: Record, ini: Init, st: _StreamState) -> str:
        """A communicator instance of one process; instances are merged in ``_merge_anon``."""
        cur = st.current
        if cur is not None:
            w = self.comms[cur]
            info = w.log.ranks.get(ini.rank)
            same = info is not None and (info.host, info.pid) == (rec.host, rec.pid)
            if w.id_kind == "anon" and w.log.nranks == ini.nranks and same:
                return cur  # NCCL 2.3: "rank R nranks N", then "comm P rank R ..."
        self.anon += 1
        key = f"anon-{self.anon}"
        self._new_comm(key, "anon", rec, ini)
        return key

    def _new_comm(self, key: str, kind: str, rec: Record, ini: Init) -> None:
        log = CommLog(key=key, source=self.out.source, nranks=ini.nranks, first_line=rec.line)
        log.library = rec.lib
        self.comms[key] = CommWork(log=log, id_kind=kind)

    def _add_rank(self, work: CommWork, rec: Record, ini: Init) -> None:
        if ini.kind == "end":
            return
        info = RankInfo(
            rank=ini.rank,
            host=rec.host,
            pid=rec.pid,
            cuda_dev=ini.cuda_dev if ini.cuda_dev is not None else rec.dev,
            bus_id=ini.bus_id,
            nvml_dev=ini.nvml_dev,
            comm=ini.comm,
            comm_id=ini.comm_id,
            library=rec.lib,
            line=rec.line,
        )
        old = work.log.ranks.get(ini.rank)
        if old is not None and (old.host, old.pid) != (info.host, info.pid):
            self.out.warn(
                rec.line,
                f"communicator {work.log.key}: rank {ini.rank} already on {old.host} pid "
                f"{old.pid} (line {old.line})",
                rec.msg,
            )
            return
        if old is None or (not old.bus_id and info.bus_id) or (not old.comm_id and info.comm_id):
            work.log.ranks[ini.rank] = info
        work.streams.add(rec.stream)
        work.idents.update(
            str(x).lower() for x in (ini.cuda_dev, ini.nvml_dev, ini.bus_id, rec.dev) if x != ""
        )

    def _flush_pending(self, st: _StreamState, key: str | None) -> None:
        pend, st.pending = st.pending, []
        if key is None:
            if pend:
                lines = ranges(sorted({r.line for r, _ in pend}))
                self.out.notes.append(
                    f"{self.out.source}: lines {lines} of {pend[0][0].host} pid {pend[0][0].pid} "
                    "come before any init line of that process and name no communicator: not used"
                )
            return
        for rec, ev in pend:
            self._apply(key, rec, ev)

    # -- per-communicator events --------------------------------------------------------------

    def _apply(self, key: str, rec: Record, ev: Event) -> None:
        work = self.comms[key]
        log = work.log
        if isinstance(ev, Order):
            self._order(work, rec, ev)
        elif isinstance(ev, Triple):
            if max(ev.prev, ev.rank, ev.next) >= log.nranks:
                self.out.warn(rec.line, f"rank outside 0..{log.nranks - 1}", rec.msg)
                return
            self._edge(work, ev.channel, ev.prev, ev.rank, rec.line, "GRAPH ring lines")
            self._edge(work, ev.channel, ev.rank, ev.next, rec.line, "GRAPH ring lines")
            if work.id_kind == "anon":
                work.peers += [(ev.prev, "", True), (ev.next, "", True)]
        elif isinstance(ev, Trees):
            self._trees(work, rec, ev)
        elif isinstance(ev, Edge):
            if work.id_kind == "anon" and max(ev.src, ev.dst) < log.nranks:
                net = not ev.via.startswith(("P2P", "SHM"))
                if ev.receive:
                    work.peers.append((ev.src, ev.src_dev, net))
                else:
                    work.peers.append((ev.dst, ev.dst_dev, net))
            if ev.conn_index is not None and ev.conn_index > 0:
                return  # send/recv (and CollNet) connections, never a ring's
            if max(ev.src, ev.dst) >= log.nranks:
                self.out.warn(rec.line, f"rank outside 0..{log.nranks - 1}", rec.msg)
                return
            self.conns.setdefault((rec.stream, key), _Conn()).buffered.append((rec.line, ev))
        elif isinstance(ev, Marker):
            conn = self.conns.setdefault((rec.stream, key), _Conn())
            if ev.what == "rings":
                for line, e in conn.buffered:
                    self._edge(work, e.channel, e.src, e.dst, line)
            conn.buffered = []
            conn.marked = True
        elif isinstance(ev, Pattern):
            pass  # GRAPH search results: counted as used, nothing to keep

    def _order(self, work: CommWork, rec: Record, ev: Order) -> None:
        log = work.log
        if not ev.ranks:
            return  # a cut order line that kept no complete rank number
        bad = [r for r in ev.ranks if r >= log.nranks]
        if bad or (len(ev.ranks) > log.nranks):
            self.out.warn(
                rec.line,
                f"channel {ev.channel}: ring order names ranks outside 0..{log.nranks - 1}",
                rec.msg,
            )
            return
        if ev.n_channels is not None:
            log.n_channels = ev.n_channels
        full = not ev.partial and len(ev.ranks) == log.nranks
        if not full and not ev.partial and not (len(ev.ranks) == MAXWIDTH < log.nranks):
            self.out.warn(
                rec.line,
                f"channel {ev.channel}: ring of {len(ev.ranks)} ranks, expected a permutation "
                f"of 0..{log.nranks - 1} (or NCCL's first {MAXWIDTH} when there are more)",
                rec.msg,
            )
            return
        old = work.orders.get(ev.channel)
        if old is not None:
            o, oline = old
            o_full = not o.partial and len(o.ranks) == log.nranks
            if o_full and full and not same_cycle(o.ranks, ev.ranks):
                self.out.warn(
                    rec.line,
                    f"channel {ev.channel}: ring order differs from line {oline}",
                    rec.msg,
                )
                return
            if o_full or len(o.ranks) >= len(ev.ranks):
                return
        work.orders[ev.channel] = (ev, rec.line)

    def _edge(self, work: CommWork, ch: int, src: int, dst: int, line: int, kind: str = "") -> None:
        add_edge(self.out, work, ch, src, dst, line, kind)

    def _trees(self, work: CommWork, rec: Record, ev: Trees) -> None:
        log = work.log
        if ev.partial and len(rec.msg) >= 1023:
            self.out.warn(
                rec.line,
                "Trees line cut at NCCL's 1023-character buffer: later channels are not listed",
            )
        for note in ev.notes:
            self.out.notes.append(f"{self.out.source}:{rec.line}: {note}")
        if ev.entries and ev.era != "graph":
            log.tree_format = log.tree_format or ev.era
        elif ev.entries and not log.tree_format:
            log.tree_format = "graph"
        for e in ev.entries:
            if e.rank >= log.nranks or e.parent >= log.nranks:
                self.out.warn(
                    rec.line, f"tree {e.channel}: rank outside 0..{log.nranks - 1}", rec.msg
                )
                continue
            tree = log.trees.setdefault(e.channel, {})
            old = tree.get(e.rank)
            if old is not None and old != e.parent:
                self.out.warn(
                    rec.line,
                    f"tree {e.channel}: rank {e.rank} parent {e.parent} differs from {old} "
                    f"(line {work.tree_lines[(e.channel, e.rank)]})",
                    rec.msg,
                )
                continue
            tree[e.rank] = e.parent
            work.tree_lines.setdefault((e.channel, e.rank), rec.line)

    # -- the end ------------------------------------------------------------------------------

    def finish(self) -> NcclLog:
        for st in self.streams.values():
            if not st.pending:
                continue
            if st.new_style and st.last is not None:
                self._flush_pending(st, st.last)
                continue
            rec0 = st.pending[0][0]
            if st.last is None:
                lines = ranges(sorted({r.line for r, _ in st.pending}))
                self.out.notes.append(
                    f"{self.out.source}: lines {lines} of {rec0.host} pid {rec0.pid} name no "
                    "communicator (no init line of that process): not used"
                )
                st.pending = []
                continue
            # after the last Init COMPLETE of an old-style process: order and tree lines are
            # init lines of that communicator; connection lines are runtime (send/recv) ones
            conns = [r.line for r, ev in st.pending if isinstance(ev, Edge)]
            for rec, ev in st.pending:
                if not isinstance(ev, Edge):
                    self._apply(st.last, rec, ev)
            st.pending = []
            if conns:
                self.out.notes.append(
                    f"{self.out.source}: lines {ranges(sorted(conns))} of {rec0.host} pid "
                    f"{rec0.pid} follow its last Init COMPLETE (runtime connections): not used"
                )
        for (_stream, key), conn in self.conns.items():
            if conn.marked or not conn.buffered:
                continue
            self._unmarked_ring_edges(self.comms[key], conn.buffered)
        merge_anon(self.comms, self.out)
        for work in sorted(self.comms.values(), key=lambda w: w.log.first_line):
            finish_comm(self.out, work, self.versions)
            self.out.comms.append(work.log)
        return self.out

    def _unmarked_ring_edges(self, work: CommWork, lines: list[tuple[int, Edge]]) -> None:
        """NCCL < 2.8: per channel the first receive line (if before any send) and first send."""
        seen_send: set[int] = set()
        seen_any: set[int] = set()
        for line, e in lines:
            if e.receive:
                if e.channel not in seen_any:
                    self._edge(work, e.channel, e.src, e.dst, line)
            elif e.channel not in seen_send:
                seen_send.add(e.channel)
                self._edge(work, e.channel, e.src, e.dst, line)
            seen_any.add(e.channel)


def parse_records(
    lines: Iterable[tuple[int, str, bool]], source: str, hosts: set[str] | None = None
) -> NcclLog:
    """Parse (line number, text, too long) tuples; see :func:`parse_nccl_log`.

    A message cut by another process's message on the same line is joined with the next line
    when that line has no CCL prefix at all (the rest of the cut message); otherwise it is used
    as a cut message (fields that may be incomplete are not read).
    """
    b = _Builder(source)
    known = set(hosts) if hosts is not None else set()
    held: Record | None = None
    for lineno, text, too_long in lines:
        b.out.lines_read += 1
        if too_long:
            b.out.warn(lineno, f"line longer than {len(text)} characters: only its start is read")
        recs, bad = split_line(lineno, text, known)
        if held is not None:
            if not recs and not bad and text.strip():
                rest = strip_wrapper_head(text, held.host).rstrip()
                b.feed(replace(held, msg=f"{held.msg}{rest}", cut=False))
                held = None
                continue
            b.feed(held)
            held = None
        for bp in bad:
            b.out.warn(bp.line, "malformed CCL line prefix (expected host:pid:tid [dev])", bp.text)
        cut = [r for r in recs if r.cut]
        if cut:
            held = cut[-1]
        for rec in recs:
            if rec is not held:
                b.feed(rec)
    if held is not None:
        b.feed(held)
    return b.finish()
