"""Airflow triggers (deferrable waits) of the colocate provider."""
