-- Hand-written, expand only. The retention sweep (src/retention/sweep.ts) removes a session a
-- minute after it ended or expired, whichever came first: least(ended_at, expires_at). Without
-- an index on that expression every run read every live session (1,000,000 sessions: 100 ms
-- a minute for a run that removes nothing). The previous build's sweep asks with an OR of the
-- two columns, which no index answers: it keeps working, as before.
-- CONCURRENTLY, alone in its file: sessions keep being written while it builds, and Postgres
-- cannot build an index concurrently inside a transaction or next to other statements.
CREATE INDEX CONCURRENTLY IF NOT EXISTS "sessions_gone_at_idx" ON "sessions" ((least("ended_at", "expires_at")))
