"""What replicas share through Redis: session ownership leases with fencing tokens, and live
events fanned out to every replica (``[cluster] redis_url``).

A sibling of ``app.store`` at the bottom of the layers: the runtime uses both; neither uses
the other (the store checks a fencing token as a plain number).
"""
