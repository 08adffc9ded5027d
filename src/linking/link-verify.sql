-- Repeatable migration (src/db/repeatable.ts): re-created whenever this file changes.
-- The tables it writes change only in prisma/migrations.
--
-- A link verify decided in one statement (src/linking/service.ts verifyLink, through the
-- prepared statement of src/linking/sql.ts): the account's wrong-code counter, the code's check,
-- the account locks in id order, the holder read under them, attach or merge, the events with
-- their deliveries, the notices and the stored result, all in one call of link_verify. It used
-- to be about 15 statements and two commits (migration 20261123100100_link_verify_function).
-- It never raises for a decision: a refusal is an outcome, so the try it counted commits. A
-- state that moved under the locks raises serialization_failure, and the caller runs it again.

-- The user object of events, as JSON text: the same object as userObject in
-- src/auth/accounts.ts (test/linking.user-object.test.ts compares them on both backends). The
-- e-mail is the account's own one, else its oldest attached one. Built as text, keys in
-- userObject's order, so an event written here reads byte for byte like one written in
-- TypeScript.
CREATE OR REPLACE FUNCTION link_user_object(p_account text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v text;
BEGIN
  SELECT '{"user_id":' || to_json(a.id)::text
    || ',"project_id":' || to_json(a.project_id)::text
    || ',"email":' || coalesce((SELECT to_json(i.value)::text FROM identifiers i WHERE i.account_id = a.id AND i.kind = 'email'
                                ORDER BY i.origin <> 'own', i.created_at LIMIT 1), 'null')
    || ',"name":' || coalesce(to_json(a.name)::text, 'null')
    || ',"status":' || to_json(a.status::text)::text
    || ',"created_at":' || to_json(to_char(a.created_at, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text
    || ',"updated_at":' || to_json(to_char(a.updated_at, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text
    || ',"last_login":' || coalesce(to_json(to_char(a.last_login_at, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text, 'null')
    || '}'
    INTO v FROM accounts a WHERE a.id = p_account;
  RETURN v;
END
$$;

-- The two helpers below are PL/pgSQL, not SQL, though each is one expression: Postgres 15 runs a
-- LANGUAGE sql function that it cannot inline (this one calls a function returning void, that one
-- holds a sub-select) by parsing and planning its body again on every call, and link_verify calls
-- them eight times. PL/pgSQL plans a body once per connection. perf on the Postgres backends in
-- the link benchmark (bench/RESULTS.md, link): SQL functions' calls took 12 % of their CPU, a
-- third of it parsing and planning.

-- A link's events, fanned out like every other event (src/webhooks/outbox.sql).
CREATE OR REPLACE FUNCTION link_enqueue(p_project text, p_channel text, p_ids text[], p_types text[], p_bodies text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM outbox_enqueue(p_channel, p_ids, array_fill(p_project, ARRAY[cardinality(p_ids)]), p_types, p_bodies,
                         array_fill(false, ARRAY[cardinality(p_ids)]), array_fill(NULL::text, ARRAY[cardinality(p_ids)]));
END
$$;

-- A jsonb array of strings as text[], in order; anything else (a field absent or null) is NULL.
CREATE OR REPLACE FUNCTION link_text_array(a jsonb) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF jsonb_typeof(a) IS DISTINCT FROM 'array' THEN
    RETURN NULL;
  END IF;
  RETURN ARRAY(SELECT e FROM jsonb_array_elements_text(a) WITH ORDINALITY AS t(e, n) ORDER BY n);
END
$$;

-- The decision, in this order: the identifier is already the account's (or its merged
-- secondary's) -> CannotLinkSelf; nobody has it -> attached; it is attached to another account
-- -> TargetSecondaryIdentity; it is another account's own and that account is merged ->
-- TargetAlreadyLinked; the account is already merged -> AlreadyLinked; otherwise -> merged.
--
-- `p` holds named fields (src/linking/sql.ts LinkVerifyInput says what each is): the checks
-- (project, account, state, hash, max_tries, fail_key, fail_max, fail_window), and what both possible changes
-- write, made in TypeScript before the call: identifier_id, event_ids, channel, the events'
-- types and bodies for an attach (attach_types, attach_bodies) and a merge (merge_types,
-- merge_bodies), the notices' subjects and texts ([1] attached, [2] merged, [3] merged away),
-- and the stored results. The bodies hold user_mark and secondary_mark, random placeholders
-- replaced here with the user object (link_user_object) and the secondary's id read after the
-- change: no value anywhere in an event can imitate them.
--
-- Notices go to e-mail addresses and phones only: an external identifier (a sign-in at another
-- service, docs/external-identities.md) cannot be written to.
--
-- The identifier-wide wrong-code cap is judged as sign_in_verify judges it (sign_in_capped,
-- src/auth/sign-in.sql): a link state opened before the identifier took its hourly wrong codes
-- is not judged after, except from one of the identifier's known places. Nor is a code judged
-- from a client address group whose wrong codes for that identifier reached their limit
-- (sign_in_address_capped): states opened first, by as many accounts as a stranger signs up,
-- would each take their tries (thirteenth review).
--
-- Outcomes: rate_limited (retry_after: the account's wrong codes), capped (retry_after: the
-- identifier's), invalid (no live state, no replay), replay (stored),
-- wrong (tries, id_kind, id_value), gone, ended, a refusal's error name, attached or merged
-- (stored).
CREATE OR REPLACE FUNCTION link_verify(p jsonb)
RETURNS TABLE (outcome text, tries integer, id_kind text, id_value text, retry_after integer, stored text)
LANGUAGE plpgsql AS $$
DECLARE
  -- the fields of p, one variable each, named as the body reads them
  p_project text := p->>'project';
  p_account text := p->>'account';
  p_state text := p->>'state';
  p_hash text := p->>'hash';
  p_max_tries integer := (p->>'max_tries')::integer;
  p_fail_key text := p->>'fail_key';
  p_fail_max integer := (p->>'fail_max')::integer;
  p_cap_prefix text := p->>'cap_prefix';
  p_cap_max integer := (p->>'cap_max')::integer;
  p_judge_places text[] := link_text_array(p->'judge_places');
  p_known_days integer := (p->>'known_days')::integer;
  p_address_group text := p->>'address_group';
  p_address_max integer := (p->>'address_max')::integer;
  p_identifier_id text := p->>'identifier_id';
  p_event_ids text[] := link_text_array(p->'event_ids');
  p_channel text := p->>'channel';
  p_user_mark text := p->>'user_mark';
  p_secondary_mark text := p->>'secondary_mark';
  p_attach_types text[] := link_text_array(p->'attach_types');
  p_attach_bodies text[] := link_text_array(p->'attach_bodies');
  p_merge_types text[] := link_text_array(p->'merge_types');
  p_merge_bodies text[] := link_text_array(p->'merge_bodies');
  p_notice_subjects text[] := link_text_array(p->'notice_subjects');
  p_notice_texts text[] := link_text_array(p->'notice_texts');
  p_attached_result text := p->>'attached_result';
  p_merged_result text := p->>'merged_result';

  v_now timestamp := now() AT TIME ZONE 'UTC';
  v_ok boolean;
  v_kind identifier_kind;
  v_value text;
  v_seen text;
  v_holder text;
  v_origin identifier_origin;
  v_me accounts%ROWTYPE;
  v_other accounts%ROWTYPE;
  v_user text;
  v_n integer;
  v_account_wait integer;
  v_proof text;
  v_session text;
BEGIN
  -- The state is good in the session that asked for it only (docs/authentication.md, "Recent
  -- authentication"): another session of the account, a stale stolen token among them, finished
  -- a link begun by a session the owner had ended. During a rolling upgrade a state the previous
  -- build wrote has no session, and that build's calls name none: either is judged as before.
  SELECT CASE WHEN s.session_id IS NULL OR p->>'session' IS NULL THEN s.session_id ELSE p->>'session' END INTO v_session
    FROM otp_states s WHERE s.id = p_state AND s.project_id = p_project;
  -- judged as every code is (otp_judge, src/auth/sign-in.sql), in the account's turn and under
  -- its wrong codes (fail_key, counted there); null fields (no cap_window nor fail_window from a
  -- gateway of the previous release, which counts them itself) are left out, not passed as null
  SELECT j.ok, j.attempts, j.kind::identifier_kind, j.value INTO v_ok, tries, v_kind, v_value
    FROM otp_judge(jsonb_strip_nulls(jsonb_build_object(
      'project', p_project, 'state', p_state, 'hash', p_hash, 'purpose', 'link', 'account', p_account, 'session', v_session,
      'max_tries', p_max_tries, 'fail_prefix', p_cap_prefix, 'fail_max', p_cap_max, 'fail_window', p->'cap_window',
      'address_group', p_address_group, 'address_max', p_address_max, 'address_window', p->'address_window',
      'judge_places', p->'judge_places', 'known_days', p_known_days,
      'subject_key', p_fail_key, 'subject_max', p_fail_max, 'subject_window', p->'fail_window'))) j;
  IF NOT FOUND THEN
    -- a retried verify of a state that succeeded (a wrong code counts a try: otp_replay)
    stored := otp_replay(p_project, p_state, 'link', p_account, v_session, p_hash, p_max_tries)::text;
    IF stored IS NULL THEN
      -- not judged: the account's wrong codes (reached while this verify waited for its turn),
      -- the identifier-wide cap, this address's wrong codes, or no live state at all; when more
      -- than one refuses, the latest of their waits (the sooner one sent the caller back to be
      -- refused: the account's wait was told alone, whatever the caps said)
      v_account_wait := rate_limit_resets_in(p_fail_key, p_fail_max);
      SELECT greatest(sign_in_capped(s.project_id, s.kind, s.value, p_cap_prefix, p_cap_max, p_judge_places, p_known_days),
                      sign_in_address_capped(s.project_id, s.kind, s.value, p_address_group, p_address_max)) INTO retry_after
        FROM otp_states s WHERE s.id = p_state AND s.project_id = p_project AND s.purpose = 'link' AND s.account_id = p_account
          AND s.session_id IS NOT DISTINCT FROM v_session AND s.consumed_at IS NULL AND s.expires_at > now() AND s.attempts < p_max_tries;
      IF v_account_wait IS NOT NULL THEN
        retry_after := greatest(v_account_wait, retry_after);
        outcome := 'rate_limited';
        RETURN NEXT;
        RETURN;
      END IF;
    END IF;
    outcome := CASE WHEN stored IS NOT NULL THEN 'replay' WHEN retry_after IS NOT NULL THEN 'capped' ELSE 'invalid' END;
    RETURN NEXT;
    RETURN;
  END IF;
  id_kind := v_kind::text;
  id_value := v_value;
  IF NOT v_ok THEN
    outcome := 'wrong';
    RETURN NEXT;
    RETURN;
  END IF;

  SELECT i.account_id INTO v_seen FROM identifiers i WHERE i.project_id = p_project AND i.kind = v_kind AND i.value = v_value;
  -- the project in the WHERE: another project's account is not found (nor locked), so it is
  -- gone like a deleted one; the primary key finds the row, the project only filters it
  PERFORM 1 FROM accounts a WHERE a.id IN (p_account, v_seen) AND a.project_id = p_project ORDER BY a.id FOR UPDATE;
  SELECT * INTO v_me FROM accounts a WHERE a.id = p_account AND a.project_id = p_project;
  IF NOT FOUND THEN
    outcome := 'gone';
    RETURN NEXT;
    RETURN;
  END IF;
  IF v_me.merge_role = 'secondary' THEN
    outcome := 'ended';
    RETURN NEXT;
    RETURN;
  END IF;
  -- the acting session, read again under the account's lock: a removal, unmerge or sign-out
  -- that ended it may have committed while this request was on its way, and its late verify
  -- attached an address to the owner's account after the owner removed the intruder's way in
  -- (24th review). Absent for a caller of the previous build during an upgrade. What it proved
  -- last is what an attach records (identifiers.linked_with): one attached by way of a merged
  -- secondary is removed on unmerge (26th review).
  IF p->>'session' IS NOT NULL THEN
    SELECT coalesce(ss.reauthenticated_with, ss.signed_in_with) INTO v_proof FROM sessions ss
      WHERE ss.id = p->>'session' AND ss.account_id = p_account AND ss.ended_at IS NULL AND ss.expires_at > now();
    IF NOT FOUND THEN
      outcome := 'ended';
      RETURN NEXT;
      RETURN;
    END IF;
  END IF;
  SELECT i.account_id, i.origin INTO v_holder, v_origin FROM identifiers i
    WHERE i.project_id = p_project AND i.kind = v_kind AND i.value = v_value;
  IF v_holder IS DISTINCT FROM v_seen THEN
    RAISE EXCEPTION 'the identifier moved, deciding again' USING ERRCODE = 'serialization_failure';
  END IF;
  IF v_holder = v_me.id OR v_holder = v_me.merged_with_id THEN
    outcome := 'CannotLinkSelf';
    RETURN NEXT;
    RETURN;
  END IF;

  IF v_holder IS NULL THEN
    INSERT INTO identifiers (id, project_id, account_id, kind, value, origin, created_at, linked_with)
      VALUES (p_identifier_id, p_project, p_account, v_kind, v_value, 'attached', v_now, v_proof);
    UPDATE accounts SET updated_at = v_now WHERE id = p_account;
    v_user := link_user_object(p_account);
    PERFORM link_enqueue(p_project, p_channel, p_event_ids, p_attach_types,
      ARRAY(SELECT replace(b, '"' || p_user_mark || '"', v_user) FROM unnest(p_attach_bodies) WITH ORDINALITY AS t(b, n) ORDER BY n));
    INSERT INTO notices (id, project_id, kind, value, subject, text, next_attempt_at, created_at)
      SELECT 'ntc_' || replace(gen_random_uuid()::text, '-', ''), p_project, r.kind, r.value, p_notice_subjects[1], p_notice_texts[1], v_now, v_now
      FROM (SELECT DISTINCT i.kind, i.value FROM account_sign_in_identifiers(p_account) i
            WHERE i.kind <> 'external' AND NOT (i.kind = v_kind AND i.value = v_value)) AS r;
    UPDATE otp_states SET consumed_at = v_now, result = p_attached_result::jsonb WHERE id = p_state;
    outcome := 'attached';
    stored := p_attached_result;
    RETURN NEXT;
    RETURN;
  END IF;

  IF v_origin = 'attached' THEN
    outcome := 'TargetSecondaryIdentity';
    RETURN NEXT;
    RETURN;
  END IF;
  SELECT * INTO v_other FROM accounts a WHERE a.id = v_holder;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'the identifier''s account is gone, deciding again' USING ERRCODE = 'serialization_failure';
  END IF;
  IF v_other.merge_role IS NOT NULL THEN
    outcome := 'TargetAlreadyLinked';
    RETURN NEXT;
    RETURN;
  END IF;
  IF v_me.merge_role IS NOT NULL THEN
    outcome := 'AlreadyLinked';
    RETURN NEXT;
    RETURN;
  END IF;

  UPDATE accounts a SET
    merged_with_id = CASE WHEN a.id = p_account THEN v_other.id ELSE p_account END,
    merge_role = (CASE WHEN a.id = p_account THEN 'primary' ELSE 'secondary' END)::merge_role,
    merged_at = v_now,
    updated_at = CASE WHEN a.id = p_account THEN v_now ELSE a.updated_at END
    WHERE a.id IN (p_account, v_other.id) AND a.merged_with_id IS NULL;
  GET DIAGNOSTICS v_n = ROW_COUNT;
  IF v_n <> 2 THEN
    RAISE EXCEPTION 'an account of this merge is already merged' USING ERRCODE = 'serialization_failure';
  END IF;
  UPDATE sessions SET ended_at = v_now WHERE account_id = v_other.id AND ended_at IS NULL;
  v_user := link_user_object(p_account);
  PERFORM link_enqueue(p_project, p_channel, p_event_ids, p_merge_types,
    ARRAY(SELECT replace(replace(b, '"' || p_user_mark || '"', v_user), '"' || p_secondary_mark || '"', to_json(v_other.id)::text)
          FROM unnest(p_merge_bodies) WITH ORDINALITY AS t(b, n) ORDER BY n));
  INSERT INTO notices (id, project_id, kind, value, subject, text, next_attempt_at, created_at)
    SELECT 'ntc_' || replace(gen_random_uuid()::text, '-', ''), p_project, r.kind, r.value, p_notice_subjects[r.n], p_notice_texts[r.n], v_now, v_now
    FROM (SELECT DISTINCT i.kind, i.value, CASE WHEN i.account_id = p_account THEN 2 ELSE 3 END AS n
          FROM identifiers i WHERE i.account_id IN (p_account, v_other.id) AND i.kind <> 'external') AS r;
  UPDATE otp_states SET consumed_at = v_now, result = p_merged_result::jsonb WHERE id = p_state;
  outcome := 'merged';
  stored := p_merged_result;
  RETURN NEXT;
END
$$;
