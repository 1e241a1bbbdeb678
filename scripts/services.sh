#!/usr/bin/env bash
# Make sure the local PostgreSQL and MariaDB the tests use are running; start them if not.
# A server that cannot be started is reported, and its tests are skipped with that reason.
# HAProxy (the TLS-terminating proxy of tests/test_tls_connection.py) is installed if missing.
set -uo pipefail

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
maria_up() { mariadb-admin --protocol=tcp -h 127.0.0.1 -P 3306 -uroot ping >/dev/null 2>&1; }

if command -v pg_isready >/dev/null 2>&1; then
  if ! pg_up && command -v pg_ctlcluster >/dev/null 2>&1; then
    echo "services: starting PostgreSQL"
    for v in $(ls /etc/postgresql 2>/dev/null); do
      pg_ctlcluster --skip-systemctl-redirect "$v" main start 2>&1 | tail -n 2
    done
  fi
  for _ in $(seq 1 30); do pg_up && break; sleep 1; done
  pg_up && echo "services: PostgreSQL is up" || echo "services: PostgreSQL is DOWN (its tests will be skipped)"
else
  echo "services: no PostgreSQL client here (its tests will be skipped)"
fi

if command -v mariadb-admin >/dev/null 2>&1; then
  if ! maria_up && [ -x /usr/sbin/mariadbd ]; then
    echo "services: starting MariaDB"
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  fi
  for _ in $(seq 1 30); do maria_up && break; sleep 1; done
  maria_up && echo "services: MariaDB is up" || echo "services: MariaDB is DOWN (its tests will be skipped)"
else
  echo "services: no MariaDB client here (its tests will be skipped)"
fi
if command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ]; then
  echo "services: HAProxy is installed (TLS tests)"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "services: installing HAProxy for the TLS tests"
  # Only the binary is wanted: the package's own service is stopped again right away.
  if apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq haproxy >/dev/null 2>&1; then
    (service haproxy stop >/dev/null 2>&1 || true)
    echo "services: HAProxy installed"
  else
    echo "services: could not install HAProxy (the TLS tests will be skipped)"
  fi
else
  echo "services: no HAProxy and no root apt to install it (the TLS tests will be skipped)"
fi
exit 0
