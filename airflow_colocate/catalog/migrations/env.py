"""Alembic environment: migrations run on the connection that :func:`migrate` hands over."""

from alembic import context

from airflow_colocate.catalog.models import Base

config = context.config
connection = config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
