#!/bin/sh
# One-shot job (temporalio/admin-tools): set up or upgrade Temporal's schemas on PostgreSQL.
# Both steps are safe to repeat: setup-schema skips a database already past version 0.0 and
# update-schema applies only the versions a database lacks. The databases themselves are
# created by postgres-init.sql when the PostgreSQL volume is first initialised.
set -eu
: "${POSTGRES_SEEDS:?POSTGRES_SEEDS (the PostgreSQL host) is required}"
: "${POSTGRES_USER:?POSTGRES_USER is required}"
: "${SQL_PASSWORD:?SQL_PASSWORD (the PostgreSQL password) is required}"
DB_PORT="${DB_PORT:-5432}"
SCHEMA_ROOT=/etc/temporal/schema/postgresql/v12

sql_tool() {
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" "$@"
}

for db in temporal:temporal temporal_visibility:visibility; do
  name="${db%%:*}"
  schema="${db#*:}"
  echo "schema of database $name"
  sql_tool --db "$name" setup-schema -v 0.0
  sql_tool --db "$name" update-schema -d "$SCHEMA_ROOT/$schema/versioned"
done
echo "Temporal schemas are up to date"
