-- Repeatable migration (src/db/repeatable.ts): re-created whenever this file changes.
-- The tables it writes change only in prisma/migrations.
--
-- An OTP sign-in's verify decided in one statement (src/auth/sign-in.ts completeSignIn, through
-- a prepared statement): the code judged and its try counted under the state's row lock, the
-- identifier-wide wrong-code cap, the account found (locked like a merge locks it, so a merged
-- secondary lands on its primary) or created, the known places, the last login, the session,
-- the events with their deliveries (outbox_enqueue), the stored result for a retried verify,
-- and what the tokens need (claims, auth_time). It used to be 19 statements and two commits
-- (a code check committing on its own, then one transaction that read the account three times,
-- then the account and the session read again for the tokens); Better Auth's e-mail OTP
-- sign-in is 9 (bench/RESULTS.md, sign-in).
--
-- It never raises for a decision: a wrong code is an outcome, so the try it counted commits. A
-- new identifier taken by a parallel sign-in (unique_violation) or an identifier that moved
-- under the lock (serialization_failure) raises, and the caller runs it again.

-- Seconds until the counter `p_key` of rate_limits takes more again (src/rate-limit.sql
-- rate_limit_wait), or NULL when it holds fewer than `p_max`. The two caps below are this with their
-- keys. PL/pgSQL so that its query is planned once per connection: as a LANGUAGE sql function
-- with a FROM, which Postgres 15 cannot inline, it was parsed and planned again on every sign-in
-- (as link_text_array was, src/linking/link-verify.sql).
CREATE OR REPLACE FUNCTION rate_limit_resets_in(p_key text, p_max integer)
RETURNS integer
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (SELECT rate_limit_wait(r.slices, r.window_start, r.window_seconds, p_max) FROM rate_limits r WHERE r.key = p_key);
END
$$;

-- The identifier-wide wrong-code cap of src/rate-limit.ts identifierCappedCondition, for
-- one identifier: seconds until it takes wrong codes again from these places (src/auth/known-
-- places.ts placesHere, hashed here as placeIds hashes them), or NULL when it takes them now.
-- The known places are looked at only when the cap is reached, which is rare.
CREATE OR REPLACE FUNCTION sign_in_capped(p_project text, p_kind identifier_kind, p_value text, p_prefix text, p_max integer, p_places text[], p_known_days integer)
RETURNS integer
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_resets integer := rate_limit_resets_in(p_prefix || p_project || ':' || p_kind::text || ':' || p_value, p_max);
BEGIN
  IF v_resets IS NULL OR EXISTS (
      SELECT 1 FROM known_sign_ins k JOIN unnest(p_places) AS p(place)
        ON k.id = encode(sha256(convert_to(p_project || E'\n' || p_kind::text || E'\n' || p_value || E'\n' || p.place, 'UTF8')), 'hex')
      WHERE k.last_at > (now() - make_interval(days => p_known_days)) AT TIME ZONE 'UTC') THEN
    RETURN NULL;
  END IF;
  RETURN v_resets;
END
$$;

-- The wrong codes of one identifier from one client address group (src/auth/otp-flow.ts
-- keys.failIdentifier builds the same key: fail:ida:<project>:<kind>:<value>@<group>): seconds
-- until a code of that identifier is judged again from there, or NULL when it is now. Checked
-- when a code is judged, not only before a code is sent: five states opened first took five
-- wrong codes each, so one address reached the identifier-wide cap's 100 with 4 groups and no
-- wait, and locked the identifier's owner out everywhere but their known places (twelfth review).
CREATE OR REPLACE FUNCTION sign_in_address_capped(p_project text, p_kind identifier_kind, p_value text, p_group text, p_max integer)
RETURNS integer
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN rate_limit_resets_in('fail:ida:' || p_project || ':' || p_kind::text || ':' || p_value || '@' || p_group, p_max);
END
$$;

-- One count against the counter `p_key` of rate_limits in its window of `p_window` seconds, as
-- src/rate-limit.ts counts any counter (src/rate-limit.sql).
CREATE OR REPLACE FUNCTION rate_limit_counted(p_key text, p_window integer)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO rate_limits AS r (key, window_start, window_seconds, count, slices)
    VALUES (p_key, now(), p_window, 1, ARRAY[1])
    ON CONFLICT (key) DO UPDATE SET
      slices = rate_limit_bumped(r.slices, r.window_start, r.window_seconds, 1),
      count = 1 + rate_limit_count(r.slices, r.window_start, r.window_seconds),
      window_start = rate_limit_moved(r.window_start, r.window_seconds),
      window_seconds = EXCLUDED.window_seconds;
END
$$;

-- One wrong code of an identifier, counted in its turn (otp_judge): against the
-- identifier from everywhere (p_prefix || project:kind:value, the cap of sign_in_capped) and
-- from this address group (the key of sign_in_address_capped), each in its own window.
CREATE OR REPLACE FUNCTION wrong_code_counted(p_project text, p_kind identifier_kind, p_value text, p_prefix text, p_window integer, p_group text, p_address_window integer)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM rate_limit_counted(p_prefix || p_project || ':' || p_kind::text || ':' || p_value, p_window);
  PERFORM rate_limit_counted('fail:ida:' || p_project || ':' || p_kind::text || ':' || p_value || '@' || p_group, p_address_window);
END
$$;

-- Every code is judged here: a sign-in's (sign_in_verify), a link's (link_verify), a
-- re-authentication's and an external sign-in's confirmation (src/auth/otp.ts checkOtp).
--
-- Judging the codes of one identifier takes turns, and a wrong code is counted against the
-- identifier (from this address group, and from everywhere) before the turn ends, in the
-- transaction that judged it (31st review). The caps above read the counters when a code is
-- judged; counted afterwards, in a statement of its own, parallel verifies were all judged
-- before any of them was counted: 40 address groups with 5 states each had 1,000 wrong codes of
-- one identifier judged in a burst, against a cap of 100 an hour. The turn is a transaction-level
-- advisory lock on the identifier (class "lgwc", a hash of project, kind and value; two
-- identifiers sharing a hash only take turns with each other), taken once the state is found:
-- every statement after it in the transaction reads the counters as the turns before it left
-- them. Verifies of different identifiers never wait for each other.
--
-- A code judged for a signed-in subject (a link's account, a re-authentication's session) also
-- takes the subject's turn, before the identifier's (every caller takes them in that order, so
-- they cannot wait for each other in a circle): a transaction-level advisory lock of class "lgws"
-- on the subject's counter key. Under it the subject's wrong codes are read, and a wrong code is
-- counted against the subject too, before the turn ends (33rd review: read before judging and
-- counted afterwards in a statement of its own, the identifier's turn kept only the codes of one
-- identifier apart, and one account with link states for four addresses had 20 wrong codes
-- judged in one burst against 15 an hour).
--
-- In its subject's and its identifier's turn, under the caps (the subject's, sign_in_capped,
-- sign_in_address_capped), the try counted under the state's row lock, a wrong code counted
-- against the identifier and the subject. `p`: project, state, hash, purpose, account, session
-- (the state's binding; absent or null where the state has none), max_tries, fail_prefix,
-- fail_max, fail_window, address_group, address_max, address_window, judge_places, known_days;
-- subject_key, subject_max, subject_window (absent: no subject); `consume`: a right code uses the
-- state up. Without fail_window (a gateway of the previous release, which counts it itself) a
-- wrong code is not counted against the identifier here, nor without subject_window against the
-- subject. No row: not judged (no live state of that binding, the subject's limit, or a cap).
CREATE OR REPLACE FUNCTION otp_judge(p jsonb)
RETURNS TABLE (ok boolean, attempts integer, kind text, value text)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
  p_project text := p->>'project';
  p_state text := p->>'state';
  p_hash text := p->>'hash';
  p_subject text := p->>'subject_key';
  v_kind identifier_kind;
  v_value text;
BEGIN
  SELECT s.kind, s.value INTO v_kind, v_value FROM otp_states s WHERE s.id = p_state AND s.project_id = p_project;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  IF p_subject IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(1818720115, hashtext(p_subject));
    IF rate_limit_resets_in(p_subject, (p->>'subject_max')::integer) IS NOT NULL THEN
      RETURN;
    END IF;
  END IF;
  PERFORM pg_advisory_xact_lock(1818720099, hashtext(p_project || ':' || v_kind::text || ':' || v_value));
  UPDATE otp_states s SET attempts = s.attempts + CASE WHEN s.code_hash = p_hash THEN 0 ELSE 1 END,
      consumed_at = CASE WHEN s.code_hash = p_hash AND (p->>'consume')::boolean THEN now() AT TIME ZONE 'UTC' ELSE s.consumed_at END
    WHERE s.id = p_state AND s.project_id = p_project AND s.purpose = (p->>'purpose')::otp_purpose
      AND s.account_id IS NOT DISTINCT FROM (p->>'account') AND s.session_id IS NOT DISTINCT FROM (p->>'session')
      AND s.consumed_at IS NULL AND s.expires_at > now() AND s.attempts < (p->>'max_tries')::integer
      AND sign_in_capped(s.project_id, s.kind, s.value, p->>'fail_prefix', (p->>'fail_max')::integer, link_text_array(p->'judge_places'), (p->>'known_days')::integer) IS NULL
      AND sign_in_address_capped(s.project_id, s.kind, s.value, p->>'address_group', (p->>'address_max')::integer) IS NULL
    RETURNING s.code_hash = p_hash, s.attempts, s.kind::text, s.value INTO ok, attempts, kind, value;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  IF NOT ok AND p ? 'fail_window' THEN
    PERFORM wrong_code_counted(p_project, v_kind, v_value, p->>'fail_prefix', (p->>'fail_window')::integer, p->>'address_group', (p->>'address_window')::integer);
  END IF;
  IF NOT ok AND p_subject IS NOT NULL AND p ? 'subject_window' THEN
    PERFORM rate_limit_counted(p_subject, (p->>'subject_window')::integer);
  END IF;
  RETURN NEXT;
END
$$;

-- A verify of a state a right code already used (no row from otp_judge): the stored result for a
-- client retrying with that code, while the state lives. Any other code counts a try of the
-- state, and none is answered once its tries are spent, so a used state takes no more guesses
-- in all than a live one (max_tries). Uncounted, they were free for the rest of its 10 minutes
-- to whoever held its id: a sign-in's or an external confirmation's state is bound to no
-- account, and its stored result signs into the account that used it (docs/security.md,
-- "Abuse limits"). NULL: no result for this code.
CREATE OR REPLACE FUNCTION otp_replay(p_project text, p_state text, p_purpose otp_purpose, p_account text,
                                      p_session text, p_hash text, p_max_tries integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_right boolean;
  v_result jsonb;
BEGIN
  UPDATE otp_states s SET attempts = s.attempts + CASE WHEN s.code_hash = p_hash THEN 0 ELSE 1 END
    WHERE s.id = p_state AND s.project_id = p_project AND s.purpose = p_purpose
      AND s.account_id IS NOT DISTINCT FROM p_account AND s.session_id IS NOT DISTINCT FROM p_session
      AND s.consumed_at IS NOT NULL AND s.expires_at > now() AND s.result IS NOT NULL
      AND s.attempts < p_max_tries
    RETURNING s.code_hash = p_hash, s.result INTO v_right, v_result;
  RETURN CASE WHEN v_right THEN v_result END;
END
$$;

-- `p` holds named fields (src/auth/sign-in.ts SignInVerifyInput says what each is).
--
-- Outcomes: signed_in and replay (account_id, session_id and the facts tokens carry), wrong
-- (tries, id_kind, id_value), rate_limited (retry_after), invalid (no live state, no replay),
-- ended (a replay whose session ended since).
CREATE OR REPLACE FUNCTION sign_in_verify(p jsonb)
RETURNS TABLE (outcome text, tries integer, id_kind text, id_value text, retry_after integer,
               account_id text, session_id text, auth_time_ms float8, auth_method text,
               email text, phone text, name text, updated_at_ms float8)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
  p_project text := p->>'project';
  p_state text := p->>'state';
  p_hash text := p->>'hash';
  p_fail_prefix text := p->>'fail_prefix';
  p_fail_max integer := (p->>'fail_max')::integer;
  p_address_group text := p->>'address_group';
  p_address_max integer := (p->>'address_max')::integer;
  p_judge_places text[] := link_text_array(p->'judge_places');
  p_record_places text[] := link_text_array(p->'record_places');
  p_event_ids text[] := link_text_array(p->'event_ids');
  p_known_days integer := (p->>'known_days')::integer;
  p_session text := p->>'session_id';

  v_now timestamp := now() AT TIME ZONE 'UTC';
  v_ok boolean;
  v_kind identifier_kind;
  v_value text;
  v_result jsonb;
  v_seen text;
  v_identifier text;
  v_holder text;
  v_acc accounts%ROWTYPE;
  v_partner text;
  v_account text;
  v_created boolean := false;
  v_user text;
  v_ids text[];
  v_types text[];
  v_bodies text[];
BEGIN
  -- judged as every code is (otp_judge), and the state used up by a right one; only the fields
  -- the judge reads are passed (p carries the events' bodies), and none as null (no fail_window
  -- from a gateway of the previous release)
  SELECT j.ok, j.attempts, j.kind::identifier_kind, j.value INTO v_ok, tries, v_kind, v_value
    FROM otp_judge(jsonb_strip_nulls(jsonb_build_object(
      'project', p_project, 'state', p_state, 'hash', p_hash, 'purpose', 'sign_in', 'consume', true,
      'max_tries', p->'max_tries', 'fail_prefix', p_fail_prefix, 'fail_max', p_fail_max, 'fail_window', p->'fail_window',
      'address_group', p_address_group, 'address_max', p_address_max, 'address_window', p->'address_window',
      'judge_places', p->'judge_places', 'known_days', p_known_days))) j;

  IF NOT FOUND THEN
    -- a retried verify of a state that succeeded: the same sign-in while its session lives
    v_result := otp_replay(p_project, p_state, 'sign_in', NULL, NULL, p_hash, (p->>'max_tries')::integer);
    IF v_result IS NOT NULL THEN
      v_account := v_result->>'account_id';
      p_session := v_result->>'session_id';
      SELECT extract(epoch FROM ss.auth_time AT TIME ZONE 'UTC')::float8 * 1000, ss.auth_method INTO auth_time_ms, auth_method
        FROM sessions ss JOIN accounts a ON a.id = ss.account_id
        WHERE ss.id = p_session AND ss.account_id = v_account AND ss.project_id = p_project
          AND ss.ended_at IS NULL AND ss.expires_at > now() AND a.merge_role IS DISTINCT FROM 'secondary';
      IF NOT FOUND THEN
        outcome := 'ended';
        RETURN NEXT;
        RETURN;
      END IF;
      outcome := 'replay';
    ELSE
      -- not judged: the identifier-wide cap, this address's wrong codes, or no live state at all;
      -- when both refuse, the later of their waits (the sooner one sent the caller back to be refused)
      SELECT greatest(sign_in_capped(s.project_id, s.kind, s.value, p_fail_prefix, p_fail_max, p_judge_places, p_known_days),
                      sign_in_address_capped(s.project_id, s.kind, s.value, p_address_group, p_address_max)) INTO retry_after
        FROM otp_states s WHERE s.id = p_state AND s.project_id = p_project;
      outcome := CASE WHEN retry_after IS NULL THEN 'invalid' ELSE 'rate_limited' END;
      RETURN NEXT;
      RETURN;
    END IF;
  ELSE
    id_kind := v_kind::text;
    id_value := v_value;
    IF NOT v_ok THEN
      outcome := 'wrong';
      RETURN NEXT;
      RETURN;
    END IF;

    SELECT i.account_id, i.id INTO v_seen, v_identifier FROM identifiers i WHERE i.project_id = p_project AND i.kind = v_kind AND i.value = v_value;
    IF v_seen IS NULL THEN
      -- a new identifier: its account (a parallel sign-up of the same identifier raises unique_violation)
      v_account := p->>'account_id';
      INSERT INTO accounts (id, project_id, created_at, updated_at) VALUES (v_account, p_project, v_now, v_now);
      v_identifier := p->>'identifier_id';
      INSERT INTO identifiers (id, project_id, account_id, kind, value, origin, created_at)
        VALUES (v_identifier, p_project, v_account, v_kind, v_value, 'own', v_now);
      v_created := true;
      v_user := link_user_object(v_account);
    ELSE
      -- locked like a merge locks it (src/db/locks.ts): the account and its merge partner, in id
      -- order. A sign-in racing a merge or an unmerge of this account waits, then lands on the
      -- primary. Locking the secondary first and then writing to its primary deadlocked with an
      -- unmerge whenever the primary's id sorted first: Postgres broke it after deadlock_timeout
      -- (1 s), and one of the two was tried again.
      SELECT a.merged_with_id INTO v_partner FROM accounts a WHERE a.id = v_seen;
      PERFORM 1 FROM accounts a WHERE a.id IN (v_seen, v_partner) ORDER BY a.id FOR UPDATE;
      SELECT * INTO v_acc FROM accounts a WHERE a.id = v_seen;
      SELECT i.account_id INTO v_holder FROM identifiers i WHERE i.project_id = p_project AND i.kind = v_kind AND i.value = v_value;
      IF NOT FOUND OR v_holder IS DISTINCT FROM v_seen OR v_acc.id IS NULL
         OR (v_acc.merged_with_id IS NOT NULL AND v_acc.merged_with_id IS DISTINCT FROM v_partner) THEN
        RAISE EXCEPTION 'the identifier moved, deciding again' USING ERRCODE = 'serialization_failure';
      END IF;
      v_account := CASE WHEN v_acc.merge_role = 'secondary' AND v_acc.merged_with_id IS NOT NULL THEN v_acc.merged_with_id ELSE v_acc.id END;
    END IF;

    -- the identifier's own budget here from now on (src/auth/known-places.ts)
    INSERT INTO known_sign_ins (id, project_id, last_at)
      SELECT encode(sha256(convert_to(p_project || E'\n' || v_kind::text || E'\n' || v_value || E'\n' || pl.place, 'UTF8')), 'hex'), p_project, v_now
      FROM unnest(p_record_places) AS pl(place)
      ON CONFLICT (id) DO UPDATE SET last_at = EXCLUDED.last_at;
    UPDATE accounts SET last_login_at = v_now, updated_at = v_now WHERE id = v_account;
    -- the identifier it proved: removing it or unmerging its account ends the session
    INSERT INTO sessions (id, project_id, account_id, created_at, expires_at, auth_method, auth_time, client_address, user_agent, signed_in_with)
      VALUES (p_session, p_project, v_account, v_now, v_now + make_interval(secs => (p->>'session_seconds')::integer),
              p->>'method', v_now, p->>'client_address', p->>'user_agent', v_identifier)
      RETURNING extract(epoch FROM sessions.auth_time AT TIME ZONE 'UTC')::float8 * 1000, sessions.auth_method INTO auth_time_ms, auth_method;

    -- the events: user.created with the account as created, then the sign-in's with it as now
    v_ids := ARRAY[]::text[];
    v_types := ARRAY[]::text[];
    v_bodies := ARRAY[]::text[];
    IF v_created THEN
      v_ids := v_ids || p_event_ids[1];
      v_types := v_types || 'user.created'::text;
      v_bodies := v_bodies || replace(p->>'created_body', '"' || (p->>'user_mark') || '"', v_user);
    END IF;
    v_user := link_user_object(v_account);
    v_ids := v_ids || p_event_ids[2];
    v_types := v_types || 'user.authentication.success'::text;
    v_bodies := v_bodies || replace(replace(p->>'success_body', '"' || (p->>'user_mark') || '"', v_user),
                                    '"' || (p->>'kind_mark') || '"', to_json(v_kind::text)::text);
    PERFORM outbox_enqueue(p->>'channel', v_ids, array_fill(p_project, ARRAY[cardinality(v_types)]), v_types, v_bodies,
                           array_fill(false, ARRAY[cardinality(v_types)]), array_fill(NULL::text, ARRAY[cardinality(v_types)]));

    UPDATE otp_states SET result = jsonb_build_object('account_id', v_account, 'session_id', p_session) WHERE id = p_state;
    outcome := 'signed_in';
  END IF;

  account_id := v_account;
  session_id := p_session;
  -- what the tokens carry (src/auth/accounts.ts oidcClaims): the preferred e-mail and phone
  -- as src/webhooks/user-object.ts preferred() picks them
  SELECT a.name, extract(epoch FROM a.updated_at AT TIME ZONE 'UTC')::float8 * 1000,
         (SELECT i.value FROM identifiers i WHERE i.account_id = a.id AND i.kind = 'email' ORDER BY i.origin <> 'own', i.created_at LIMIT 1),
         (SELECT i.value FROM identifiers i WHERE i.account_id = a.id AND i.kind = 'phone' ORDER BY i.origin <> 'own', i.created_at LIMIT 1)
    INTO name, updated_at_ms, email, phone
    FROM accounts a WHERE a.id = v_account;
  RETURN NEXT;
END
$$;
