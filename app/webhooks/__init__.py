"""Signed webhooks (Standard Webhooks) from a durable outbox written with the events.

    event log commit ──► outbox messages (same transaction)          app/webhooks/outbox.py
    dispatcher ──route──► one delivery per endpoint that wants it     app/webhooks/dispatcher.py
               ──claim (lease)──► send one attempt                     app/webhooks/sender.py
               ──► succeeded | retried on the schedule | failed for good
    admin API ──► endpoints, test messages, the delivery log           app/webhooks/service.py

What an endpoint is (configured or added through the API) and which messages it covers is
app/webhooks/endpoints.py; the signature is app/webhooks/signing.py.
"""
