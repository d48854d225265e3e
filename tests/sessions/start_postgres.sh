#!/usr/bin/env bash
# Start Debian's PostgreSQL 15 and create the role and database of the PostgreSQL session
# tests. Idempotent: a running server, an existing role or database are fine. Run as root
# (it uses runuser to act as the postgres user). Afterwards:
#
#   export TRIO_AGENT_TEST_POSTGRES_URL=postgresql://trio_agent:trio_agent@127.0.0.1:5432/trio_agent_test
set -euo pipefail

if ! pg_lsclusters --no-header 15 main 2>/dev/null | grep -q online; then
    pg_ctlcluster --skip-systemctl-redirect 15 main start
fi

# The server accepts connections a moment after it starts.
for _ in $(seq 1 50); do
    if runuser -u postgres -- pg_isready -q -h 127.0.0.1 -p 5432; then
        break
    fi
    sleep 0.2
done
runuser -u postgres -- pg_isready -h 127.0.0.1 -p 5432

if ! runuser -u postgres -- psql -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'trio_agent'" | grep -q 1; then
    runuser -u postgres -- psql -c "CREATE ROLE trio_agent LOGIN PASSWORD 'trio_agent'"
fi
if ! runuser -u postgres -- psql -tAc "SELECT 1 FROM pg_database WHERE datname = 'trio_agent_test'" | grep -q 1; then
    runuser -u postgres -- createdb -O trio_agent trio_agent_test
fi

echo "TRIO_AGENT_TEST_POSTGRES_URL=postgresql://trio_agent:trio_agent@127.0.0.1:5432/trio_agent_test"
