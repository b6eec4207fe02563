#!/usr/bin/env bash
# Runs a command against a scratch PostgreSQL of its own and stops that server
# afterwards, however the command ends (an EXIT trap): `make demo-shared` and
# `make bench-shared`. The server's directory is its own (ROTA_PG_DIR), so a server the
# checkout already runs (scripts/postgres.sh start) is neither reused nor stopped.
#
#   scripts/with-postgres.sh COMMAND [ARG]...     (the command sees ROTA_PG_URL)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT" || exit
[ $# -gt 0 ] || die "usage: scripts/with-postgres.sh COMMAND [ARG]..."

export ROTA_PG_DIR="${TMPDIR:-/tmp}/rota-pg-run-$$"
trap '"$ROOT/scripts/postgres.sh" stop' EXIT
ROTA_PG_URL="$("$ROOT/scripts/postgres.sh" start)" || die "could not start PostgreSQL"
export ROTA_PG_URL
"$@"
