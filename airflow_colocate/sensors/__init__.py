"""Airflow sensors of the colocate provider."""
