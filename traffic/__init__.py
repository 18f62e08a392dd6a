"""Collective-communication workloads, senders/receivers and the host rate agent."""
