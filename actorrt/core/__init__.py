"""The per-process runtime: submitting, routing and running tasks, actors, objects and refs."""
