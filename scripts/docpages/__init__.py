"""The reference pages of the documentation site that are generated, not written: the
configuration (from the settings model), the events (from ``app.events``) and the HTTP API
(from docs/openapi.json). ``scripts/gen_docs.py`` writes them into docs/reference/."""
