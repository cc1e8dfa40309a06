"""The Airflow plugin: the admin HTTP API under ``/api/colocate`` and the Colocation page.

``plugin`` is what Airflow loads (entry point ``airflow.plugins``); ``api`` builds the FastAPI app,
``auth`` asks Airflow's auth manager who may read and who may change, ``index`` gives the seeds'
``GET /api/colocate`` shape and ``page`` renders the page.
"""

PREFIX = "/api/colocate"
"""Where the plugin mounts the admin API in Airflow's API server (the seeds' URL)."""
