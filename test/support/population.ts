// Many users at once, straight in SQL (an e-mail and a phone each, both their own), for tests
// and benchmarks that must show a statement reads one account and not all of them.
import type { TestDatabase } from "./db.ts";

/** `count` accounts `acc_<tag><n>` in `projectId`, each with an e-mail and a phone, then ANALYZE (as autovacuum would). */
export async function seedPopulation(db: TestDatabase, projectId: string, count: number, tag = "pop"): Promise<void> {
  await db.prisma.$executeRaw`
    INSERT INTO accounts (id, project_id, created_at, updated_at)
    SELECT 'acc_' || ${tag} || n, ${projectId}, now(), now() FROM generate_series(1, ${count}::int) n`;
  await db.prisma.$executeRaw`
    INSERT INTO identifiers (id, project_id, account_id, kind, value, origin, created_at)
    SELECT 'idt_' || ${tag} || n || k, ${projectId}, 'acc_' || ${tag} || n, k::identifier_kind,
           CASE k WHEN 'email' THEN ${tag} || n || '@example.com' ELSE '+1202' || lpad(n::text, 7, '0') END, 'own', now()
    FROM generate_series(1, ${count}::int) n, unnest(ARRAY['email', 'phone']) k`;
  await db.prisma.$executeRaw`ANALYZE accounts`;
  await db.prisma.$executeRaw`ANALYZE identifiers`;
}
