"""Topology specs, generators and Mininet bring-up."""
