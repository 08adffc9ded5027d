-- Hand-written, contract (docs/operations.md, "Expand, then contract"). Two things were kept for
-- the build before the last release, and that build can no longer be running beside this one.
-- The schema console: 20261125170500_dashboard_schema renamed it to dashboard and left views,
-- domains and function wrappers under the old name for the build that still read it.
-- The positional form of link_verify (20 arguments): a wrapper of the jsonb form for the build
-- that still called it, removed from src/linking/link-verify.sql with this migration.
-- The last release's build names neither.
DROP SCHEMA IF EXISTS console CASCADE;
DROP FUNCTION IF EXISTS link_verify(text, text, text, text, integer, text, integer, text, text[], text, text, text, text[], text[], text[], text[], text[], text[], text, text);
