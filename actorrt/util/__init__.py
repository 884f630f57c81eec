"""Small helpers with no knowledge of actors: background tasks, durable files, child processes."""
