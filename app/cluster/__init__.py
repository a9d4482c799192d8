"""What replicas share through Redis (``[cluster] redis_url``): signed commands between
replicas, live events fanned out to every replica, shared token buckets. Who runs which
session is not among them: that is decided in the database (app/store/ownership.py), so a
Redis that restarts empty moves no session.

A sibling of ``app.store`` at the bottom of the layers: the runtime uses both; neither uses
the other.
"""
