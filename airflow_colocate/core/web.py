"""Where the plugin is served in Airflow: known both to the plugin that serves there and to the
"Colocation" link every task of ours carries, which must not load the plugin to build a URL."""

PREFIX = "/api/colocate"
"""Where the plugin mounts the admin API in Airflow's API server (the seeds' URL)."""

VIEW_ROUTE = "colocation"
"""The page's route in Airflow's UI (``/plugin/colocation``): the external view's ``url_route``."""
