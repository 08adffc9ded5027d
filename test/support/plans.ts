// Reading Postgres' plans in tests: EXPLAIN (FORMAT JSON) of a query, flattened to its nodes, on
// either backend (PGlite returns the plan as text, Postgres as JSON).
import type { Database } from "../../src/db/client.ts";

export type PlanNode = {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  /** Rows an index-only scan read from the table (EXPLAIN ANALYZE only). */
  "Heap Fetches"?: number;
  Plans?: PlanNode[];
};

/** Every node of a plan, the root first. */
const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

/** The nodes of `query`'s plan; `analyze` runs it (and so counts what it read). */
export async function planNodes(db: Pick<Database, "prisma">, query: string, params: unknown[] = [], opts: { analyze?: boolean } = {}): Promise<PlanNode[]> {
  const options = opts.analyze ? "ANALYZE, FORMAT JSON" : "FORMAT JSON";
  const [row] = await db.prisma.$queryRawUnsafe<Array<{ "QUERY PLAN": Array<{ Plan: PlanNode }> | string }>>(`EXPLAIN (${options}) ${query}`, ...params);
  const json = row["QUERY PLAN"];
  return nodes((typeof json === "string" ? JSON.parse(json) : json)[0].Plan);
}
