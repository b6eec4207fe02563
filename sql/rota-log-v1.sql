-- rota's shared-roster log on PostgreSQL, schema version 1.
--
-- One file for every host: the Node package (npm/src/shared/) and rota-host
-- (host-wasmtime/src/shared/, `include_str!`) both apply it and then only call the
-- functions below, so both send the same statements and the rules live here once.
--
-- Idempotent: every object is created IF NOT EXISTS or replaced. The hosts apply it in
-- one transaction under an advisory lock, and only when `rota_schema` has no version yet
-- (a database at a newer version is refused, never downgraded); see README.md, "Shared
-- roster log". By hand: psql -1 -v ON_ERROR_STOP=1 -f sql/rota-log-v1.sql
--
-- Time is the database's: epoch milliseconds from clock_timestamp(), never an
-- instance's clock. Entries are opaque text (the hosts write the core's input JSON);
-- text, not jsonb, because jsonb would reorder keys and every replica must fold the
-- very same bytes.
--
-- Errors the hosts map to their own (SQLSTATE, class RT is this schema's):
--   RT001  stale epoch: a leader-only append, renewal or step-down by a leader whose
--          lease was taken over or has lapsed
--   RT002  compacted: a read from below the compaction point (start from a snapshot)
--   RT003  a snapshot beyond the log's head, or a compaction past the newest snapshot

CREATE TABLE IF NOT EXISTS rota_schema (
  version    integer PRIMARY KEY,
  applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The database clock in epoch milliseconds.
CREATE OR REPLACE FUNCTION rota_db_now() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
  SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
$$;

-- One row per roster: the head of its log. Every append locks this row until it
-- commits, so sequence numbers are given out in commit order and without gaps (an
-- aborted append's numbers are given again), and `last_now` only grows.
CREATE TABLE IF NOT EXISTS rota_log_head (
  roster            text PRIMARY KEY,
  last_seq          bigint NOT NULL DEFAULT 0,   -- the newest entry's seq (0: empty)
  last_now          bigint NOT NULL DEFAULT 0,   -- its `now`, epoch ms
  compacted_through bigint NOT NULL DEFAULT 0    -- entries <= this were deleted
);

-- The log: seq 1, 2, 3 ... per roster, `now` from the database clock, the appending
-- instance, and the leader's epoch on leader-only entries (ticks, probe results,
-- owner expiries), null on the others.
CREATE TABLE IF NOT EXISTS rota_log (
  roster   text   NOT NULL,
  seq      bigint NOT NULL,
  now_ms   bigint NOT NULL,
  instance text   NOT NULL,
  epoch    bigint,
  entry    text   NOT NULL,
  PRIMARY KEY (roster, seq)
);

-- The leader lease, one row per roster, on database time. `epoch` grows by one at
-- every change of holder and never goes back; a step-down keeps it and ends the lease.
CREATE TABLE IF NOT EXISTS rota_leader (
  roster     text   PRIMARY KEY,
  instance   text,                 -- null after a step-down
  epoch      bigint NOT NULL,
  expires_at bigint NOT NULL       -- epoch ms, database time
);

-- A heartbeat per instance, on database time.
CREATE TABLE IF NOT EXISTS rota_instance (
  roster    text   NOT NULL,
  instance  text   NOT NULL,
  last_seen bigint NOT NULL,       -- epoch ms, database time
  PRIMARY KEY (roster, instance)
);

-- Snapshots (the core's export after folding entries 1..seq) for compaction and for
-- instances that join late.
CREATE TABLE IF NOT EXISTS rota_snapshot (
  roster     text   NOT NULL,
  seq        bigint NOT NULL,
  state      text   NOT NULL,
  created_at bigint NOT NULL,      -- epoch ms, database time
  PRIMARY KEY (roster, seq)
);

-- Appends a batch in one transaction (the caller's statement). With `p_epoch` the
-- batch is leader-only: refused (RT001) unless `p_epoch` is the roster's current
-- leader epoch, held by `p_instance`, and its lease has not lapsed. Returns the
-- batch's first and last seq and its `now` (one stamp for the whole batch).
-- Readers are woken by NOTIFY rota_log, payload '<last_seq> <roster>', sent at commit.
CREATE OR REPLACE FUNCTION rota_append(p_roster text, p_instance text, p_epoch bigint, p_entries text[])
RETURNS TABLE (first_seq bigint, last_seq bigint, now_ms bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  n      bigint := coalesce(cardinality(p_entries), 0);
  v_seq  bigint;
  v_now  bigint;
  leader rota_leader%ROWTYPE;
BEGIN
  IF n = 0 THEN
    RAISE EXCEPTION 'rota_append: an empty batch' USING ERRCODE = '22023';
  END IF;
  IF p_epoch IS NOT NULL THEN
    -- FOR SHARE: a takeover (which updates this row) waits for this append to commit,
    -- and an append behind a takeover sees the new epoch. Taken before the head row,
    -- as everywhere, so the two locks never deadlock.
    SELECT * INTO leader FROM rota_leader l WHERE l.roster = p_roster FOR SHARE;
  END IF;
  INSERT INTO rota_log_head AS h (roster) VALUES (p_roster) ON CONFLICT (roster) DO NOTHING;
  -- The row lock, held to commit: the clock is read after it, so `now` follows seq.
  SELECT h.last_seq, h.last_now INTO v_seq, v_now FROM rota_log_head h WHERE h.roster = p_roster FOR UPDATE;
  v_now := greatest(v_now, rota_db_now());
  -- Checked at the entries' own `now`: a leader-only entry is stamped before its
  -- lease's end, so a replica reading the log can tell it was appended in time.
  IF p_epoch IS NOT NULL AND (leader.roster IS NULL OR leader.epoch <> p_epoch
       OR leader.instance IS DISTINCT FROM p_instance OR leader.expires_at <= v_now) THEN
    RAISE EXCEPTION 'stale epoch % for roster %: the leader is % at epoch %', p_epoch, p_roster,
      coalesce(leader.instance, 'nobody'), coalesce(leader.epoch, 0)
      USING ERRCODE = 'RT001';
  END IF;
  UPDATE rota_log_head h SET last_seq = v_seq + n, last_now = v_now WHERE h.roster = p_roster;
  INSERT INTO rota_log (roster, seq, now_ms, instance, epoch, entry)
    SELECT p_roster, v_seq + e.ord, v_now, p_instance, p_epoch, e.entry
    FROM unnest(p_entries) WITH ORDINALITY AS e(entry, ord);
  PERFORM pg_notify('rota_log', (v_seq + n)::text || ' ' || p_roster);
  RETURN QUERY SELECT v_seq + 1, v_seq + n, v_now;
END
$$;

-- Entries with seq >= p_from, in order, at most p_limit. Refused (RT002) when p_from is
-- at or below the compaction point: those entries are gone, start from a snapshot.
-- The check runs after the read, so a compaction that commits in between is seen.
CREATE OR REPLACE FUNCTION rota_read(p_roster text, p_from bigint, p_limit integer)
RETURNS TABLE (seq bigint, now_ms bigint, instance text, epoch bigint, entry text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_compacted bigint;
BEGIN
  RETURN QUERY
    SELECT l.seq, l.now_ms, l.instance, l.epoch, l.entry FROM rota_log l
    WHERE l.roster = p_roster AND l.seq >= p_from ORDER BY l.seq LIMIT p_limit;
  SELECT h.compacted_through INTO v_compacted FROM rota_log_head h WHERE h.roster = p_roster;
  IF p_from <= coalesce(v_compacted, 0) THEN
    RAISE EXCEPTION 'roster %: entries up to % were compacted; read from % or start from the snapshot',
      p_roster, v_compacted, v_compacted + 1 USING ERRCODE = 'RT002';
  END IF;
END
$$;

-- The log's head: (last_seq, last_now, compacted_through); zeros for a new roster.
CREATE OR REPLACE FUNCTION rota_head(p_roster text)
RETURNS TABLE (last_seq bigint, last_now bigint, compacted_through bigint)
LANGUAGE sql STABLE AS $$
  SELECT coalesce(max(h.last_seq), 0), coalesce(max(h.last_now), 0), coalesce(max(h.compacted_through), 0)
  FROM rota_log_head h WHERE h.roster = p_roster
$$;

-- Records the instance's heartbeat at database time; returns that time.
CREATE OR REPLACE FUNCTION rota_heartbeat(p_roster text, p_instance text)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
  INSERT INTO rota_instance AS i (roster, instance, last_seen) VALUES (p_roster, p_instance, rota_db_now())
  ON CONFLICT (roster, instance) DO UPDATE SET last_seen = greatest(i.last_seen, EXCLUDED.last_seen)
  RETURNING last_seen
$$;

-- Instances whose last heartbeat is p_ttl_ms or more ago. A heartbeat older than the
-- database server's start counts as made at its start: after the database itself was
-- down, every instance gets a full TTL to come back before it is listed.
CREATE OR REPLACE FUNCTION rota_expired_instances(p_roster text, p_ttl_ms bigint)
RETURNS TABLE (instance text, last_seen bigint)
LANGUAGE sql STABLE AS $$
  SELECT i.instance, i.last_seen FROM rota_instance i
  WHERE i.roster = p_roster
    AND greatest(i.last_seen, (extract(epoch FROM pg_postmaster_start_time()) * 1000)::bigint)
        <= rota_db_now() - p_ttl_ms
  ORDER BY i.instance
$$;

-- The leader's expiry of an instance, in one transaction: only while its heartbeat is
-- still lapsed (as rota_expired_instances counts it, grace included), appends
-- `p_entry` (its expireOwner input) as a leader-only entry (RT001 on a stale epoch) and
-- forgets the instance. The instance's row is locked first, so a heartbeat either
-- lands before (and the expiry is refused: `expired` false) or waits for the expiry to
-- commit (and the instance, reading the log after its heartbeat, finds the expiry).
-- Returns whether it expired it, and the entry's seq (null when not).
CREATE OR REPLACE FUNCTION rota_expire_instance(p_roster text, p_instance text, p_ttl_ms bigint,
    p_leader text, p_epoch bigint, p_entry text)
RETURNS TABLE (expired boolean, seq bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_seen bigint;
  v_seq  bigint;
BEGIN
  IF p_ttl_ms IS NULL OR p_ttl_ms <= 0 THEN
    RAISE EXCEPTION 'rota_expire_instance: the TTL must be positive' USING ERRCODE = '22023';
  END IF;
  IF p_epoch IS NULL THEN
    RAISE EXCEPTION 'rota_expire_instance: an expiry is leader-only (an epoch is needed)' USING ERRCODE = '22023';
  END IF;
  SELECT i.last_seen INTO v_seen FROM rota_instance i
    WHERE i.roster = p_roster AND i.instance = p_instance FOR UPDATE;
  IF v_seen IS NULL
     OR greatest(v_seen, (extract(epoch FROM pg_postmaster_start_time()) * 1000)::bigint) > rota_db_now() - p_ttl_ms THEN
    RETURN QUERY SELECT false, NULL::bigint;
    RETURN;
  END IF;
  SELECT a.last_seq INTO v_seq FROM rota_append(p_roster, p_leader, p_epoch, ARRAY[p_entry]) a;
  DELETE FROM rota_instance i WHERE i.roster = p_roster AND i.instance = p_instance;
  RETURN QUERY SELECT true, v_seq;
END
$$;

-- Forgets an instance (after the leader appended its expiry). True when it was there.
CREATE OR REPLACE FUNCTION rota_forget_instance(p_roster text, p_instance text)
RETURNS boolean
LANGUAGE sql VOLATILE AS $$
  WITH gone AS (DELETE FROM rota_instance i WHERE i.roster = p_roster AND i.instance = p_instance RETURNING 1)
  SELECT count(*) > 0 FROM gone
$$;

-- Takes the leader lease for p_ttl_ms when it is free (none yet, stepped down, or
-- lapsed), with the next epoch; a holder asking again keeps its epoch and extends.
-- Returns the lease as it stands: `acquired` tells whether p_instance holds it.
CREATE OR REPLACE FUNCTION rota_acquire_leader(p_roster text, p_instance text, p_ttl_ms bigint)
RETURNS TABLE (acquired boolean, instance text, epoch bigint, expires_at bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_now  bigint;
  leader rota_leader%ROWTYPE;
BEGIN
  IF p_ttl_ms IS NULL OR p_ttl_ms <= 0 THEN
    RAISE EXCEPTION 'rota_acquire_leader: the TTL must be positive' USING ERRCODE = '22023';
  END IF;
  INSERT INTO rota_leader AS l (roster, instance, epoch, expires_at) VALUES (p_roster, NULL, 0, 0)
    ON CONFLICT (roster) DO NOTHING;
  SELECT * INTO leader FROM rota_leader l WHERE l.roster = p_roster FOR UPDATE;
  v_now := rota_db_now();
  IF leader.instance = p_instance AND leader.expires_at > v_now THEN
    UPDATE rota_leader l SET expires_at = greatest(l.expires_at, v_now + p_ttl_ms)
      WHERE l.roster = p_roster RETURNING * INTO leader;
  ELSIF leader.instance IS NULL OR leader.expires_at <= v_now THEN
    UPDATE rota_leader l SET instance = p_instance, epoch = l.epoch + 1, expires_at = v_now + p_ttl_ms
      WHERE l.roster = p_roster RETURNING * INTO leader;
  END IF;
  RETURN QUERY SELECT leader.instance = p_instance AND leader.expires_at > v_now,
    leader.instance, leader.epoch, leader.expires_at;
END
$$;

-- Extends the lease p_instance holds at p_epoch; refused (RT001) once it was taken
-- over or has lapsed (the instance must acquire again, at a new epoch). Returns the
-- new expiry.
CREATE OR REPLACE FUNCTION rota_renew_leader(p_roster text, p_instance text, p_epoch bigint, p_ttl_ms bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_now     bigint;
  v_expires bigint;
BEGIN
  IF p_ttl_ms IS NULL OR p_ttl_ms <= 0 THEN
    RAISE EXCEPTION 'rota_renew_leader: the TTL must be positive' USING ERRCODE = '22023';
  END IF;
  PERFORM 1 FROM rota_leader l WHERE l.roster = p_roster FOR UPDATE;
  v_now := rota_db_now();
  UPDATE rota_leader l SET expires_at = greatest(l.expires_at, v_now + p_ttl_ms)
    WHERE l.roster = p_roster AND l.instance = p_instance AND l.epoch = p_epoch AND l.expires_at > v_now
    RETURNING l.expires_at INTO v_expires;
  IF v_expires IS NULL THEN
    RAISE EXCEPTION 'stale epoch % for roster %: % no longer holds the leader lease', p_epoch, p_roster, p_instance
      USING ERRCODE = 'RT001';
  END IF;
  RETURN v_expires;
END
$$;

-- Ends the lease p_instance holds at p_epoch at once (the epoch stays; the next leader
-- takes epoch + 1). True when it held it; a lease already lost is no error.
CREATE OR REPLACE FUNCTION rota_step_down(p_roster text, p_instance text, p_epoch bigint)
RETURNS boolean
LANGUAGE sql VOLATILE AS $$
  WITH done AS (
    UPDATE rota_leader l SET instance = NULL, expires_at = rota_db_now()
    WHERE l.roster = p_roster AND l.instance = p_instance AND l.epoch = p_epoch
    RETURNING 1)
  SELECT count(*) > 0 FROM done
$$;

-- Stores the state after entries 1..p_seq (p_seq <= the head; RT003 otherwise).
-- Writing the same seq again replaces it (the core's export is deterministic).
CREATE OR REPLACE FUNCTION rota_write_snapshot(p_roster text, p_seq bigint, p_state text)
RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_head bigint;
BEGIN
  SELECT h.last_seq INTO v_head FROM rota_log_head h WHERE h.roster = p_roster FOR SHARE;
  IF p_seq IS NULL OR p_seq < 1 OR p_seq > coalesce(v_head, 0) THEN
    RAISE EXCEPTION 'roster %: no snapshot at seq % (the log ends at %)', p_roster, p_seq, coalesce(v_head, 0)
      USING ERRCODE = 'RT003';
  END IF;
  INSERT INTO rota_snapshot AS s (roster, seq, state, created_at) VALUES (p_roster, p_seq, p_state, rota_db_now())
    ON CONFLICT (roster, seq) DO UPDATE SET state = EXCLUDED.state, created_at = EXCLUDED.created_at;
END
$$;

-- The newest snapshot, or no row.
CREATE OR REPLACE FUNCTION rota_latest_snapshot(p_roster text)
RETURNS TABLE (seq bigint, state text, created_at bigint)
LANGUAGE sql STABLE AS $$
  SELECT s.seq, s.state, s.created_at FROM rota_snapshot s WHERE s.roster = p_roster ORDER BY s.seq DESC LIMIT 1
$$;

-- Deletes the entries at or below p_through and the snapshots older than the one at
-- p_through, which must exist (RT003 otherwise: nothing may be lost that no snapshot
-- holds). Returns how many entries were deleted.
CREATE OR REPLACE FUNCTION rota_compact(p_roster text, p_through bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_deleted bigint;
BEGIN
  PERFORM 1 FROM rota_log_head h WHERE h.roster = p_roster FOR UPDATE;
  IF NOT EXISTS (SELECT 1 FROM rota_snapshot s WHERE s.roster = p_roster AND s.seq = p_through) THEN
    RAISE EXCEPTION 'roster %: no snapshot at seq % to compact to', p_roster, p_through USING ERRCODE = 'RT003';
  END IF;
  UPDATE rota_log_head h SET compacted_through = greatest(h.compacted_through, p_through) WHERE h.roster = p_roster;
  DELETE FROM rota_log l WHERE l.roster = p_roster AND l.seq <= p_through;
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  DELETE FROM rota_snapshot s WHERE s.roster = p_roster AND s.seq < p_through;
  RETURN v_deleted;
END
$$;

INSERT INTO rota_schema (version) VALUES (1) ON CONFLICT (version) DO NOTHING;
