"""Setting the guard up: ``configure()``, the zero-code setup, the process-wide guard, run propagation
across processes, and what a forked child starts with."""
