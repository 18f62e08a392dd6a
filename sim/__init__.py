"""Fluid simulator for fabrics too large for Mininet."""
