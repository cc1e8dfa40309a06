"""The Airflow plugin: the admin HTTP API under ``/api/colocate`` and the Colocation page.

``plugin`` is what Airflow loads (entry point ``airflow.plugins``) and builds ``app``, the FastAPI
app with its routes, on the API server's first request. ``schemas`` declares what the API accepts
and answers, ``presenters`` turns catalog views into what both the API and ``page`` show (so the
page never needs the app), ``index`` gives the seeds' ``GET /api/colocate`` shape, ``auth``
asks Airflow's auth manager who may read and who may change, and ``guard`` (the app's middleware)
refuses oversized bodies, anonymous changes and cookie changes without :data:`CSRF_HEADER` before
any route runs. Imports only go down that list:
``plugin`` → (on first request) ``app`` → ``guard``/``page`` → ``presenters``/``schemas``/``index``/``auth``.

This module stays free of Airflow and FastAPI imports: every Airflow process loads the plugin.
:data:`PREFIX` and :data:`VIEW_ROUTE` live in :mod:`airflow_colocate.core.web`, below the
operators, whose "Colocation" link points at the page.
"""

CSRF_HEADER = "X-Colocate-CSRF"
"""The header a state-changing request authenticated by Airflow's session cookie must carry (any
non-empty value, e.g. ``1``): a cross-site form cannot send it and a cross-site ``fetch`` with it
needs a CORS preflight that Airflow does not grant, so a change can only come from the UI's own
pages (or from a client with ``Authorization: Bearer``, which a browser never adds by itself).
The Colocation page only reads today; any script of it that changes something must send it.
(Checked in :mod:`.guard`.)"""
