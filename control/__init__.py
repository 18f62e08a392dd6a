"""ICE controller: topology, P4Runtime clients, CCL collection, planning, telemetry, icectl."""
