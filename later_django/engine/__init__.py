"""The engine: every statement that writes a job's state.

Enqueue (``enqueue``), the delivery queue's claim (``claiming``, handing
``claims.Claimed`` items to the worker), an attempt's outcome (``attempt``)
and its storage (``outcomes``), continuations, cancels and the triage desk's
actions. Topic placement and partition claims (``topics/``), schedule firing
(``schedules/``) and log appends (``log/``) are the engine's other packages.
Functions here take plain values (the database alias, the namespace, a
``BackendOptions``), never the ``django.tasks`` backend.
"""
