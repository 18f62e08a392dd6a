"""The agent channel: host rate agents <-> the controller (protocol, client, server)."""
