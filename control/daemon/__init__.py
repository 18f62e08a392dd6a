"""The controller daemon (``icectl run``): the service around the Controller (``service.py``), its
local API (``api.py``), the state file primary and backup share (``state.py``) and the private
runtime directory and file checks (``paths.py``)."""
