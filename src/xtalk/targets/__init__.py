"""Where runs execute. `local` drives the agent on this machine."""
