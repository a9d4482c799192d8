"""Child processes: spawning, pipes, process trees, limits, orphans, workspace confinement.

The layer under the providers: it knows how to run and stop a CLI safely, nothing about what
the CLI says. Above it are ``app.providers`` and ``app.runtime``; below, observability and the
shared vocabulary.
"""
