#!/bin/sh
# Run once by the postgres image when it initialises its data directory
# (/docker-entrypoint-initdb.d): the connector's least-privilege role, as
# docs/SECURITY.md describes it, so docker-compose.yml never runs the
# connector as the superuser.
#
# - REPLICATION to create and read its slot; CONNECT on the database;
# - SELECT on the captured schema's tables, today's and future ones (the
#   initial snapshot reads them);
# - the publication, created here by the superuser: FOR ALL TABLES needs a
#   superuser, and the connector only uses an existing publication (it
#   creates one only when it is missing).
set -eu
psql -v ON_ERROR_STOP=1 \
  -v cdc_password="${PGCDC_DB_PASSWORD:?set PGCDC_DB_PASSWORD}" \
  -v db="$POSTGRES_DB" \
  --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL'
CREATE ROLE cdc LOGIN REPLICATION PASSWORD :'cdc_password';
GRANT CONNECT ON DATABASE :"db" TO cdc;
GRANT USAGE ON SCHEMA public TO cdc;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO cdc;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO cdc;
CREATE PUBLICATION pgcdc FOR ALL TABLES;
SQL
