"""Side effects around the Spark jobs: plan in the catalog, run (spark-submit, in a session, or in
process), check the report, commit. One module per kind of work; import from the module
(``airflow_colocate.jobs.write``, ``.join``, ...): the package itself exports nothing."""
