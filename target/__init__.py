"""Embedded P4_16 target: runs v1model programs from source and serves P4Runtime."""
