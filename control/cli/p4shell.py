"""p4runtime-shell with values people read: ``icectl shell`` runs ``python -m
icefabric.control.cli.p4shell`` (the same options as ``python -m p4runtime_sh``).

p4runtime-shell prints every bytes field as escapes, so a table entry shows 10.0.2.2 as
``"\\x0a\\x00\\x02\\x02"``. Here its printer is kept and each match value and action parameter
gets its decoded value after it, the way ``icectl tables`` shows them (dotted IPv4, MACs,
integers; masks in hex), from the P4Info the shell loaded:
``value: "\\x0a\\x00\\x02\\x02" (10.0.2.2)``. Everything else of the shell is unchanged.
"""

from __future__ import annotations

import io
from typing import Any

from google.protobuf import descriptor

from icefabric.control.controller.tables_view import value_text

_MATCH_KINDS = ("Exact", "LPM", "Ternary", "Range", "Optional")


def decoded(field: Any, value: bytes, stack: list[Any], ctx: Any) -> str | None:
    """The readable form of one bytes field of a P4Runtime message being printed (``stack``:
    the messages around it, innermost last; ``ctx``: p4runtime-shell's context), or None when
    the P4Info does not say what it is."""
    owner = field.containing_type.name if field.containing_type is not None else ""
    if owner == "Param":
        action = _find(stack, "Action")
        if action is None or not stack:
            return None
        try:
            name = ctx.get_name_from_id(action.action_id)
        except KeyError:
            return None
        pname = ctx.get_param_name(name, stack[-1].param_id)
        p = ctx.get_param(name, pname) if pname else None
        return None if p is None else value_text(p.name, p.bitwidth, value)
    if owner in _MATCH_KINDS:
        fm, te = _find(stack, "FieldMatch"), _find(stack, "TableEntry")
        if fm is None or te is None:
            return None
        try:
            table = ctx.get_name_from_id(te.table_id)
        except KeyError:
            return None
        mname = ctx.get_mf_name(table, fm.field_id)
        mf = ctx.get_mf(table, mname) if mname else None
        if mf is None:
            return None
        if field.name == "mask":
            return hex(int.from_bytes(value, "big"))
        return value_text(mf.name, mf.bitwidth, value)
    return None


def _find(stack: list[Any], kind: str) -> Any:
    for msg in reversed(stack):
        if msg.DESCRIPTOR.name == kind:
            return msg
    return None


def install() -> None:
    """Make p4runtime-shell's message printer append the decoded value to bytes fields."""
    from p4runtime_sh import shell

    if getattr(shell, "_icefabric_decoding", False):
        return
    original = shell._gen_pretty_print_proto_field

    def gen(substitutions: Any, pcontext: Any) -> Any:
        print_field = original(substitutions, pcontext)

        def decoding_print_field(self: Any, field: Any, value: Any) -> None:
            if field.type != descriptor.FieldDescriptor.TYPE_BYTES:
                print_field(self, field, value)
                return
            out, self.out = self.out, io.StringIO()
            try:
                print_field(self, field, value)
                text = self.out.getvalue()
            finally:
                self.out = out
            try:
                extra = decoded(field, value, pcontext.stack, shell.context)
            except Exception:  # a display aid: never break the shell's printing
                extra = None
            body = text.rstrip(" \n")
            out.write(body + (f" ({extra})" if extra else "") + text[len(body) :])

        return decoding_print_field

    shell._gen_pretty_print_proto_field = gen
    shell._icefabric_decoding = True


def main() -> None:
    """Run p4runtime-shell (its own options and prompt) with decoded values."""
    from p4runtime_sh import shell

    install()
    shell.main()


if __name__ == "__main__":
    main()
