-- First start of the postgres service: one database for Airflow's metadata, one for the
-- colocation catalog, each with its own owner.
CREATE USER airflow WITH PASSWORD 'airflow';
CREATE DATABASE airflow OWNER airflow;
CREATE USER colocate WITH PASSWORD 'colocate';
CREATE DATABASE colocate OWNER colocate;
