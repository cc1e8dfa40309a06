"""Every colocated table readable as an Iceberg table: what its Iceberg metadata holds (``schema``,
``files``: pure) and how it is written through pyiceberg (``publisher``). The colocation catalog
is never read or written here: ``jobs/iceberg.py`` reads it, hands the facts down, records the outcome."""
