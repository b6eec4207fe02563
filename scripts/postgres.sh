#!/usr/bin/env bash
# A scratch PostgreSQL server for the shared-roster tests (and for trying the shared
# roster by hand). Installs Debian's `postgresql` when no server binaries are found,
# makes a data directory of its own, starts the server on a free loopback port, and
# prints its connection URL; `stop` stops it and removes the directory.
#
#   scripts/postgres.sh start   start (or find running) and print the URL
#   scripts/postgres.sh url     print the URL of the running server (fails if none)
#   scripts/postgres.sh stop    stop it and remove its directory (fine if none)
#   scripts/postgres.sh down    stop the server and keep its directory (an outage, for tests)
#   scripts/postgres.sh up      start the stopped server again: same directory, same port
#   scripts/postgres.sh restart down, then up
#
# The directory is $ROTA_PG_DIR, by default one per checkout under $TMPDIR (so several
# worktrees can each run their own). Made for tests: trust authentication on loopback
# only, fsync off. initdb refuses to run as root, so as root the server runs as the
# `postgres` user (which Debian's package creates).
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

BASE="${ROTA_PG_DIR:-${TMPDIR:-/tmp}/rota-pg-$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)}"
DATA="$BASE/data"
URL_FILE="$BASE/url"
LOG="$BASE/postgres.log"

# The directory of the newest installed server's binaries (initdb, pg_ctl), or nothing:
# Debian's /usr/lib/postgresql/<major>/bin (the highest major by number), else PATH.
pg_bindir() {
  local major
  major="$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -n | tail -n1)"
  if [ -n "$major" ] && [ -x "/usr/lib/postgresql/$major/bin/initdb" ] && [ -x "/usr/lib/postgresql/$major/bin/pg_ctl" ]; then
    echo "/usr/lib/postgresql/$major/bin"
  elif command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
  else
    return 1
  fi
}

# Runs a server program as the user who owns the cluster: `postgres` when we are root.
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    if command -v runuser >/dev/null 2>&1; then runuser -u postgres -- "$@"
    else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
    fi
  else
    "$@"
  fi
}

# True when a server answers on the port (something listens there).
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

running() { [ -f "$URL_FILE" ] && [ -f "$DATA/postmaster.pid" ] && as_pg "$BIN/pg_ctl" status -D "$DATA" >/dev/null 2>&1; }

# Starts the server in $DATA on port $1 (waits until it accepts connections).
pg_start() {
  as_pg "$BIN/pg_ctl" start -w -t 30 -D "$DATA" -l "$LOG" -o \
    "-p $1 -k $DATA -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off -c full_page_writes=off -c synchronous_commit=off" \
    >/dev/null 2>&1
}

start() {
  BIN="$(pg_bindir)" || true
  if [ -z "${BIN:-}" ]; then
    "$ROOT/scripts/setup.sh" postgres
    BIN="$(pg_bindir)" || die "no PostgreSQL server binaries after installing postgresql"
  fi
  if running; then
    cat "$URL_FILE"
    return 0
  fi
  [ "$(id -u)" != 0 ] || id postgres >/dev/null 2>&1 || die "no 'postgres' user to run the server as"

  # A fresh directory: a stale one (a server that was killed) is removed first.
  rm -rf "$BASE"
  mkdir -p "$DATA"
  chmod 755 "$BASE"
  touch "$LOG"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$DATA" "$LOG"; fi
  chmod 700 "$DATA"

  local t0=$SECONDS
  as_pg "$BIN/initdb" -D "$DATA" -U postgres -A trust -E UTF8 --no-locale --no-sync >"$BASE/initdb.log" 2>&1 ||
    { cat "$BASE/initdb.log" >&2; die "initdb failed"; }

  # A free loopback port near one derived from the directory (so two checkouts rarely
  # race); a start that loses the race tries the next.
  local port tries=0
  port=$(( 55432 + $(printf '%s' "$BASE" | cksum | cut -d' ' -f1) % 2000 ))
  while :; do
    tries=$((tries + 1))
    [ "$tries" -le 30 ] || die "could not start PostgreSQL (see $LOG)"
    if port_in_use "$port"; then port=$((port + 1)); continue; fi
    if pg_start "$port"; then break; fi
    port=$((port + 1))
  done
  printf 'postgres://postgres@127.0.0.1:%s/postgres\n' "$port" >"$URL_FILE"
  note "PostgreSQL $("$BIN/postgres" --version | awk '{print $3}') in $BASE, port $port ($((SECONDS - t0)) s)"
  cat "$URL_FILE"
}

stop() {
  BIN="$(pg_bindir)" || true
  if [ -n "${BIN:-}" ] && [ -f "$DATA/postmaster.pid" ]; then
    as_pg "$BIN/pg_ctl" stop -D "$DATA" -m fast -w -t 30 >/dev/null 2>&1 ||
      warn "pg_ctl stop failed (see $LOG)"
  fi
  rm -rf "$BASE"
}

# An outage: the server stops (fast: sessions are cut) and its data stays for `up`.
down() {
  BIN="$(pg_bindir)" || die "PostgreSQL is not installed: scripts/postgres.sh start"
  running || die "no PostgreSQL running for this checkout: scripts/postgres.sh start"
  as_pg "$BIN/pg_ctl" stop -D "$DATA" -m fast -w -t 30 >/dev/null 2>&1 || die "pg_ctl stop failed (see $LOG)"
}

up() {
  BIN="$(pg_bindir)" || die "PostgreSQL is not installed: scripts/postgres.sh start"
  if running; then cat "$URL_FILE"; return 0; fi
  [ -f "$URL_FILE" ] && [ -d "$DATA" ] || die "no stopped PostgreSQL of this checkout to start again: scripts/postgres.sh start"
  local port
  port="$(sed -E 's|.*:([0-9]+)/.*|\1|' "$URL_FILE")"
  pg_start "$port" || die "could not start PostgreSQL again on port $port (see $LOG)"
  cat "$URL_FILE"
}

url() {
  BIN="$(pg_bindir)" || die "PostgreSQL is not installed: scripts/postgres.sh start"
  running || die "no PostgreSQL running for this checkout: scripts/postgres.sh start"
  cat "$URL_FILE"
}

case "${1:-}" in
  start) start ;;
  stop)  stop ;;
  url)   url ;;
  down)  down ;;
  up)    up ;;
  restart) down; up ;;
  *) die "usage: scripts/postgres.sh start|stop|url|down|up|restart" ;;
esac
