-- Hand-written. A link verify decided in one statement (src/linking/service.ts verifyLink): the
-- account's wrong-code counter, the code's check, the account locks in id order, the holder read
-- under them, attach or merge, the events with their deliveries, the notices and the stored
-- result, all in one call of link_verify. It used to be about 15 statements and two commits.
-- It never raises for a decision: a refusal is an outcome, so the try it counted commits.
-- A state that moved under the locks raises serialization_failure, and the caller runs it again.
-- link_user_object is the user object of events (src/auth/accounts.ts userObject), as JSON text.
-- (Escape strings, semicolons written \x3B and quotes doubled: Prisma applies a migration to
-- Postgres by splitting it at every semicolon, quoted or not.)

CREATE OR REPLACE FUNCTION link_user_object(p_account text) RETURNS text
LANGUAGE plpgsql STABLE AS E'
DECLARE
  v text\x3B
BEGIN
  SELECT ''{"user_id":'' || to_json(a.id)::text
    || '',"project_id":'' || to_json(a.project_id)::text
    || '',"email":'' || coalesce((SELECT to_json(i.value)::text FROM identifiers i WHERE i.account_id = a.id AND i.kind = ''email''
                                ORDER BY i.origin <> ''own'', i.created_at LIMIT 1), ''null'')
    || '',"name":'' || coalesce(to_json(a.name)::text, ''null'')
    || '',"status":'' || to_json(a.status::text)::text
    || '',"created_at":'' || to_json(to_char(a.created_at, ''YYYY-MM-DD"T"HH24:MI:SS.MS"Z"''))::text
    || '',"updated_at":'' || to_json(to_char(a.updated_at, ''YYYY-MM-DD"T"HH24:MI:SS.MS"Z"''))::text
    || '',"last_login":'' || coalesce(to_json(to_char(a.last_login_at, ''YYYY-MM-DD"T"HH24:MI:SS.MS"Z"''))::text, ''null'')
    || ''}''
    INTO v FROM accounts a WHERE a.id = p_account\x3B
  RETURN v\x3B
END
';

CREATE OR REPLACE FUNCTION link_enqueue(p_project text, p_channel text, p_ids text[], p_types text[], p_bodies text[]) RETURNS void
LANGUAGE plpgsql AS E'
DECLARE
  v_n integer\x3B
BEGIN
  WITH ev AS (
    INSERT INTO outbox_events (id, project_id, event_type, body, test)
    SELECT e.id, p_project, e.t, e.b, false FROM unnest(p_ids, p_types, p_bodies) AS e(id, t, b)
    RETURNING id, project_id, event_type
  ), dl AS (
    INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type)
    SELECT ''dlv_'' || replace(gen_random_uuid()::text, ''-'', ''''), ev.id, w.id, w.project_id, ev.event_type
    FROM ev JOIN webhooks w ON w.project_id = ev.project_id AND w.enabled AND ev.event_type = ANY (w.events)
    RETURNING 1
  )
  SELECT count(*) INTO v_n FROM dl\x3B
  IF v_n > 0 THEN
    PERFORM pg_notify(p_channel, '''')\x3B
  END IF\x3B
END
';

CREATE OR REPLACE FUNCTION link_verify(
  p_project text, p_account text, p_state text, p_hash text, p_max_tries integer,
  p_fail_key text, p_fail_max integer,
  p_identifier_id text, p_event_ids text[], p_channel text, p_user_mark text, p_secondary_mark text,
  p_attach_types text[], p_attach_bodies text[], p_merge_types text[], p_merge_bodies text[],
  p_notice_subjects text[], p_notice_texts text[],
  p_attached_result text, p_merged_result text
) RETURNS TABLE (outcome text, tries integer, id_kind text, id_value text, retry_after integer, stored text)
LANGUAGE plpgsql AS E'
DECLARE
  v_now timestamp := now() AT TIME ZONE ''UTC''\x3B
  v_over boolean\x3B
  v_ok boolean\x3B
  v_kind identifier_kind\x3B
  v_value text\x3B
  v_seen text\x3B
  v_holder text\x3B
  v_origin identifier_origin\x3B
  v_me accounts%ROWTYPE\x3B
  v_other accounts%ROWTYPE\x3B
  v_user text\x3B
  v_n integer\x3B
BEGIN
  SELECT r.count >= p_fail_max, ceil(extract(epoch FROM r.window_start + make_interval(secs => r.window_seconds) - now()))::int
    INTO v_over, retry_after FROM rate_limits r
    WHERE r.key = p_fail_key AND r.window_start > now() - make_interval(secs => r.window_seconds)\x3B
  IF v_over THEN
    outcome := ''rate_limited''\x3B
    RETURN NEXT\x3B
    RETURN\x3B
  END IF\x3B
  UPDATE otp_states s SET attempts = s.attempts + CASE WHEN s.code_hash = p_hash THEN 0 ELSE 1 END
    WHERE s.id = p_state AND s.project_id = p_project AND s.purpose = ''link'' AND s.account_id = p_account
      AND s.session_id IS NULL AND s.consumed_at IS NULL AND s.expires_at > now() AND s.attempts < p_max_tries
    RETURNING s.code_hash = p_hash, s.attempts, s.kind, s.value INTO v_ok, tries, v_kind, v_value\x3B
  IF NOT FOUND THEN
    SELECT s.result::text INTO stored FROM otp_states s
      WHERE s.id = p_state AND s.project_id = p_project AND s.purpose = ''link'' AND s.account_id = p_account
        AND s.session_id IS NULL AND s.consumed_at IS NOT NULL AND s.expires_at > now()
        AND s.result IS NOT NULL AND s.code_hash = p_hash\x3B
    outcome := CASE WHEN stored IS NULL THEN ''invalid'' ELSE ''replay'' END\x3B
    RETURN NEXT\x3B
    RETURN\x3B
  END IF\x3B
  id_kind := v_kind::text\x3B
  id_value := v_value\x3B
  IF NOT v_ok THEN
    outcome := ''wrong''\x3B
    RETURN NEXT\x3B
    RETURN\x3B
  END IF\x3B

  SELECT i.account_id INTO v_seen FROM identifiers i WHERE i.project_id = p_project AND i.kind = v_kind AND i.value = v_value\x3B
  PERFORM 1 FROM accounts a WHERE a.id IN (p_account, v_seen) ORDER BY a.id FOR UPDATE\x3B
  SELECT * INTO v_me FROM accounts a WHERE a.id = p_account\x3B
  IF NOT FOUND OR v_me.project_id <> p_project THEN
    outcome := ''gone''\x3B
    RETURN NEXT\x3B
    RETURN\x3B
  END IF\x3B
  IF v_me.merge_role = ''secondary'' THEN
    outcome := ''ended''\x3B
    RETURN NEXT\x3B
    RETURN\x3B
  END IF\x3B
  SELECT i.account_id, i.origin INTO v_holder, v_origin FROM identifiers i
    WHERE i.project_id = p_project AND i.kind = v_kind AND i.value = v_value\x3B
  IF v_holder IS DISTINCT FROM v_seen THEN
    RAISE EXCEPTION ''the identifier moved, deciding again'' USING ERRCODE = ''serialization_failure''\x3B
  END IF\x3B
  IF v_holder = v_me.id OR v_holder = v_me.merged_with_id THEN
    outcome := ''CannotLinkSelf''\x3B
    RETURN NEXT\x3B
    RETURN\x3B
  END IF\x3B

  IF v_holder IS NULL THEN
    INSERT INTO identifiers (id, project_id, account_id, kind, value, origin, created_at)
      VALUES (p_identifier_id, p_project, p_account, v_kind, v_value, ''attached'', v_now)\x3B
    UPDATE accounts SET updated_at = v_now WHERE id = p_account\x3B
    v_user := link_user_object(p_account)\x3B
    PERFORM link_enqueue(p_project, p_channel, p_event_ids, p_attach_types,
      ARRAY(SELECT replace(b, ''"'' || p_user_mark || ''"'', v_user) FROM unnest(p_attach_bodies) WITH ORDINALITY AS t(b, n) ORDER BY n))\x3B
    INSERT INTO notices (id, project_id, kind, value, subject, text, next_attempt_at, created_at)
      SELECT ''ntc_'' || replace(gen_random_uuid()::text, ''-'', ''''), p_project, r.kind, r.value, p_notice_subjects[1], p_notice_texts[1], v_now, v_now
      FROM (SELECT DISTINCT i.kind, i.value FROM identifiers i JOIN accounts a ON a.id = i.account_id
            WHERE (i.account_id = p_account OR (a.merged_with_id = p_account AND a.merge_role = ''secondary''))
              AND NOT (i.kind = v_kind AND i.value = v_value)) AS r\x3B
    UPDATE otp_states SET consumed_at = v_now, result = p_attached_result::jsonb WHERE id = p_state\x3B
    outcome := ''attached''\x3B
    stored := p_attached_result\x3B
    RETURN NEXT\x3B
    RETURN\x3B
  END IF\x3B

  IF v_origin = ''attached'' THEN
    outcome := ''TargetSecondaryIdentity''\x3B
    RETURN NEXT\x3B
    RETURN\x3B
  END IF\x3B
  SELECT * INTO v_other FROM accounts a WHERE a.id = v_holder\x3B
  IF NOT FOUND THEN
    RAISE EXCEPTION ''the identifier''''s account is gone, deciding again'' USING ERRCODE = ''serialization_failure''\x3B
  END IF\x3B
  IF v_other.merge_role IS NOT NULL THEN
    outcome := ''TargetAlreadyLinked''\x3B
    RETURN NEXT\x3B
    RETURN\x3B
  END IF\x3B
  IF v_me.merge_role IS NOT NULL THEN
    outcome := ''AlreadyLinked''\x3B
    RETURN NEXT\x3B
    RETURN\x3B
  END IF\x3B

  UPDATE accounts a SET
    merged_with_id = CASE WHEN a.id = p_account THEN v_other.id ELSE p_account END,
    merge_role = (CASE WHEN a.id = p_account THEN ''primary'' ELSE ''secondary'' END)::merge_role,
    merged_at = v_now,
    updated_at = CASE WHEN a.id = p_account THEN v_now ELSE a.updated_at END
    WHERE a.id IN (p_account, v_other.id) AND a.merged_with_id IS NULL\x3B
  GET DIAGNOSTICS v_n = ROW_COUNT\x3B
  IF v_n <> 2 THEN
    RAISE EXCEPTION ''an account of this merge is already merged'' USING ERRCODE = ''serialization_failure''\x3B
  END IF\x3B
  UPDATE sessions SET ended_at = v_now WHERE account_id = v_other.id AND ended_at IS NULL\x3B
  v_user := link_user_object(p_account)\x3B
  PERFORM link_enqueue(p_project, p_channel, p_event_ids, p_merge_types,
    ARRAY(SELECT replace(replace(b, ''"'' || p_user_mark || ''"'', v_user), ''"'' || p_secondary_mark || ''"'', to_json(v_other.id)::text)
          FROM unnest(p_merge_bodies) WITH ORDINALITY AS t(b, n) ORDER BY n))\x3B
  INSERT INTO notices (id, project_id, kind, value, subject, text, next_attempt_at, created_at)
    SELECT ''ntc_'' || replace(gen_random_uuid()::text, ''-'', ''''), p_project, r.kind, r.value, p_notice_subjects[r.n], p_notice_texts[r.n], v_now, v_now
    FROM (SELECT DISTINCT i.kind, i.value, CASE WHEN i.account_id = p_account THEN 2 ELSE 3 END AS n
          FROM identifiers i WHERE i.account_id IN (p_account, v_other.id)) AS r\x3B
  UPDATE otp_states SET consumed_at = v_now, result = p_merged_result::jsonb WHERE id = p_state\x3B
  outcome := ''merged''\x3B
  stored := p_merged_result\x3B
  RETURN NEXT\x3B
END
';
