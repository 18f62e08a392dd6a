/* core.p4 for the icefabric embedded target.
 * The P4_16 core library declarations (P4_16 spec, appendix "core.p4"), written for this
 * target's front end.  Semantics of these externs are implemented by the compiler. */
#ifndef _CORE_P4_
#define _CORE_P4_

/// Standard error codes.  New error codes can be declared by users.
error {
    NoError,           /// No error.
    PacketTooShort,    /// Not enough bits in packet for 'extract'.
    NoMatch,           /// 'select' expression has no matches.
    StackOutOfBounds,  /// Reference to invalid element of a header stack.
    HeaderTooShort,    /// Extracting too many bits into a varbit field.
    ParserTimeout,     /// Parser execution time limit exceeded.
    ParserInvalidArgument  /// Parser operation was called with a value
                           /// not supported by the implementation.
}

extern packet_in {
    /// Read a header from the packet into a fixed-sized header @hdr and advance the cursor.
    void extract<T>(out T hdr);
    /// Read bits into a header with one varbit field; the size is given in bits.
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    /// Read bits from the packet without advancing the cursor.
    T lookahead<T>();
    /// Advance the packet cursor by the specified number of bits.
    void advance(in bit<32> sizeInBits);
    /// Packet length in bytes.
    bit<32> length();
}

extern packet_out {
    /// Write @hdr into the output packet, advancing the cursor; invalid headers are skipped.
    void emit<T>(in T hdr);
}

/// Check a predicate @check in the parser; if it is false, transition to reject with @toSignal.
extern void verify(in bool check, in error toSignal);

/// Built-in action that does nothing.
@noWarn("unused")
action NoAction() {}

/// Standard match kinds for table key fields.
match_kind {
    exact,
    ternary,
    lpm
}

/// Static assertion evaluated at compile time.
extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);

#endif  /* _CORE_P4_ */
