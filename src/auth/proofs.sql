-- Repeatable migration (src/db/repeatable.ts): re-created whenever this file changes.

-- What an unmerge separates (docs/security.md, "Sessions"): the secondary's own identifiers and
-- passkeys ('own'), which stay with it, and everything on the primary proven with them, followed
-- to the end: an identifier attached by a session that had proved one of them last
-- (identifiers.linked_with), an external identity confirmed with one (external_identities.
-- proven_by), a passkey registered by such a session (passkeys.registered_with), and what was
-- proven with those in turn. src/auth/proofs.ts provenThroughSecondary reads it, under the two
-- accounts' locks on unmerge and on removal, and once per `viewer` request.
--
-- Why one recursive statement: followed from Node, each level of the chain was two queries,
-- and the chain is as long as whoever holds the secondary's address makes it (a passkey
-- registered from a session signed in with the previous one needs no mailbox). Here the walk
-- runs in Postgres however deep it goes, one round trip: each level joins the rows it reached
-- to the primary's own identifiers and passkeys (found through their account_id indexes), and
-- UNION (not UNION ALL) drops a row already reached, so a cycle ends. The edges are few: the
-- passkeys an account registers are capped (src/auth/passkeys.ts PASSKEYS_PER_ACCOUNT), and
-- each identifier took a code or a sign-in at a provider. LANGUAGE sql and STABLE, one SELECT
-- called in a FROM: the planner inlines it (test/db.migrations.test.ts).
CREATE OR REPLACE FUNCTION proven_through_secondary(p_primary text, p_secondary text)
RETURNS TABLE (id text, what text, kind text, value text)
LANGUAGE sql STABLE AS $$
  WITH RECURSIVE
  proven_on_primary (proof, id, what, kind, value) AS (
    SELECT i.linked_with, i.id, 'identifier'::text, i.kind::text, i.value
    FROM identifiers i
    WHERE i.account_id = p_primary AND i.linked_with IS NOT NULL
    UNION ALL
    SELECT e.proven_by, i.id, 'identifier'::text, i.kind::text, i.value
    FROM identifiers i
    JOIN external_identities e ON e.identifier_id = i.id
    WHERE i.account_id = p_primary AND e.proven_by IS NOT NULL
    UNION ALL
    SELECT p.registered_with, p.id, 'passkey'::text, NULL::text, NULL::text
    FROM passkeys p
    WHERE p.account_id = p_primary AND p.registered_with IS NOT NULL
  ),
  reached (id, what, kind, value) AS (
    SELECT i.id, 'own'::text, i.kind::text, i.value FROM identifiers i WHERE i.account_id = p_secondary
    UNION ALL
    SELECT p.id, 'own'::text, NULL::text, NULL::text FROM passkeys p WHERE p.account_id = p_secondary
    UNION
    SELECT e.id, e.what, e.kind, e.value
    FROM proven_on_primary e
    JOIN reached r ON e.proof = r.id
  )
  SELECT reached.id, reached.what, reached.kind, reached.value FROM reached
$$;
