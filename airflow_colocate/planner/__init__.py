"""Pure planners: what the catalog read becomes as a plan for a Spark job (which files, which
replicas, which moves), with no I/O, no clock and no database."""
