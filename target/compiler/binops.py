"""Binary operators on compiled scalar values, with constant folding and wrap-around."""

from __future__ import annotations

from icefabric.target.compiler.exprcore import norm_const, wrap
from icefabric.target.compiler.types import BOOL, INT, Bits, BoolT, EnumT, IntInfT, T
from icefabric.target.compiler.unit import err
from icefabric.target.compiler.values import V
from icefabric.target.p4.errors import SourceLoc

_ARITH = {"+", "-", "*", "/", "%", "&", "|", "^"}
_CMP_PY = {"==": "==", "!=": "!=", "<": "<", ">": ">", "<=": "<=", ">=": ">="}


def _fold(op: str, a: int, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a // b
    if op == "%":
        return a % b
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    if op == "<<":
        return a << b
    if op == ">>":
        return a >> b
    raise ValueError(op)


def _sat(op: str, a: str, b: str, t: Bits) -> str:
    s = "+" if op == "|+|" else "-"
    if t.signed:
        lo = -(1 << (t.width - 1))
        hi = (1 << (t.width - 1)) - 1
        return f"min(max(({a}) {s} ({b}), {lo}), {hi})"
    if op == "|+|":
        return f"min(({a}) + ({b}), {t.mask})"
    return f"max(({a}) - ({b}), 0)"


def binary(op: str, a: V, b: V, loc: SourceLoc) -> V:
    """Compile ``a op b`` (operands already unified where the operator needs it)."""
    ta: T = a.type
    tb: T = b.type
    t: T
    if op in _CMP_PY:
        if op not in ("==", "!=") and not isinstance(ta, (Bits, IntInfT)):
            raise err(f"'{op}' needs integer operands, got {ta}", loc)
        if a.const is not None and b.const is not None:
            c = eval(f"{a.const!r} {_CMP_PY[op]} {b.const!r}")  # constants only
            return V(str(bool(c)), BOOL, bool(c))
        return V(f"({a.code} {_CMP_PY[op]} {b.code})", BOOL)
    if isinstance(ta, BoolT) or isinstance(tb, BoolT) or isinstance(ta, EnumT):
        raise err(f"'{op}' cannot be applied to {ta}", loc)
    if not isinstance(ta, (Bits, IntInfT)) or not isinstance(tb, (Bits, IntInfT)):
        raise err(f"'{op}' needs integer operands, got {ta} and {tb}", loc)
    if op == "++":
        if not isinstance(ta, Bits) or not isinstance(tb, Bits):
            raise err("'++' needs operands of known width", loc)
        t = Bits(ta.width + tb.width, ta.signed)
        ua = f"(({a.code}) & {ta.mask})" if ta.signed else a.code
        ub = f"(({b.code}) & {tb.mask})" if tb.signed else b.code
        if a.const is not None and b.const is not None:
            c = norm_const(((int(a.const) & ta.mask) << tb.width) | (int(b.const) & tb.mask), t)
            return V(str(c), t, c)
        code = f"(({ua} << {tb.width}) | {ub})"
        if t.signed:
            h = 1 << (t.width - 1)
            code = f"(({code} ^ {h}) - {h})"
        return V(code, t)
    if op in ("<<", ">>"):
        if isinstance(tb, Bits) and tb.signed:
            raise err("shift amount must be unsigned", loc)
        if b.const is not None and int(b.const) < 0:
            raise err("shift amount must not be negative", loc)
        t = ta
        if a.const is not None and b.const is not None:
            c = norm_const(_fold(op, int(a.const), int(b.const)), t)
            return V(str(c), t, c)
        if isinstance(t, IntInfT):
            raise err("shifting an integer of unknown width by a run-time amount", loc)
        assert isinstance(t, Bits)
        if op == ">>":
            return V(f"(({a.code}) >> {b.code})", t)
        if b.const is not None:
            if int(b.const) >= t.width:
                return V("0", t, 0)
            return V(wrap(f"({a.code}) << {b.const}", t), t)
        sh = f"({b.code})"
        return V(f"({wrap(f'({a.code}) << {sh}', t)} if {sh} < {t.width} else 0)", t)
    t = ta if isinstance(ta, Bits) else tb
    if op in ("|+|", "|-|"):
        if not isinstance(t, Bits):
            raise err("saturating operators need operands of known width", loc)
        if a.const is not None and b.const is not None:
            c = eval(_sat(op, str(a.const), str(b.const), t))  # constants only
            return V(str(c), t, c)
        return V(_sat(op, a.code, b.code, t), t)
    if op in ("/", "%"):
        if isinstance(t, Bits) and t.signed:
            raise err(f"'{op}' is not defined on signed integers", loc)
        if b.const is not None and int(b.const) == 0:
            raise err("division by zero", loc)
    if a.const is not None and b.const is not None:
        c = _fold(op, int(a.const), int(b.const))
        if isinstance(t, Bits):
            c = norm_const(c, t)
        return V(str(c), t if isinstance(t, Bits) else INT, c)
    if op not in _ARITH:
        raise err(f"unsupported operator '{op}'", loc)
    code = f"({a.code}) {op} ({b.code})"
    if op in ("/", "%"):
        code = f"(({a.code}) {'//' if op == '/' else '%'} ({b.code}) if {b.code} else 0)"
        return V(code, t)
    if op in ("&", "|", "^"):
        return V(f"({code})", t)
    return V(wrap(code, t), t)
