-- Repeatable migration (src/db/repeatable.ts): re-created whenever this file changes.

-- Every identifier that signs into an account: its own and attached ones, and its merged
-- secondary's (README, "Link identifiers with curl"). Security notices go to these
-- (docs/security.md, "Stolen sessions"): src/auth/change-notices.ts signInIdentifiers, and
-- link_verify's notice of an attach. A link request asks it too, before counting anything: an
-- identifier that already signs into the account is CannotLinkSelf (src/rate-limit.ts).
--
-- Why this form: the condition sits on accounts alone (the account by its primary key, its
-- secondary by the unique merged_with_id), so Postgres reads one or two accounts and then
-- their identifiers through identifiers_account_id_idx. Written as "the identifier's account is
-- this one OR that account's secondary is" across the join, as both callers had it, no index
-- can answer the OR and every identifier of every project was read per call: 6,477 buffers and
-- 145 ms with 200,000 accounts, against 16 buffers and 0.1 ms this way
-- (test/auth.sign-in-identifiers.test.ts keeps it from coming back). LANGUAGE sql and STABLE so
-- the planner inlines it into the calling statement.
CREATE OR REPLACE FUNCTION account_sign_in_identifiers(p_account text) RETURNS TABLE (kind identifier_kind, value text)
LANGUAGE sql STABLE AS $$
  SELECT i.kind, i.value
  FROM accounts a
  JOIN identifiers i ON i.account_id = a.id
  WHERE a.id = p_account OR (a.merged_with_id = p_account AND a.merge_role = 'secondary')
$$;
