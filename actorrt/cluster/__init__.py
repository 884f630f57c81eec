"""Processes of a cluster: the head, node processes, drivers, launching them, and the CLI."""
