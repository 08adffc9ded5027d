// `npx tsx bench/cpu-profile.ts <file.cpuprofile> [more…]`: where a V8 CPU profile (node
// --cpu-prof) spent its time, by component: each sample's own function is put in the component
// of its file (a package under node_modules, a folder of src/, Node's internals, GC, idle).
// DETAIL=1 lists single packages instead of groups. Used for the per-component table of bench/RESULTS.md's link section, e.g.
//   BENCH_SECONDS=8 node --cpu-prof --cpu-prof-dir=tmp/prof --import tsx bench/index.ts link
import { readFileSync } from "node:fs";

type Node = { id: number; callFrame: { functionName: string; url: string }; children?: number[] };
type Profile = { nodes: Node[]; samples: number[]; timeDeltas: number[] };

function component(frame: Node["callFrame"]): string {
  const { url, functionName } = frame;
  if (functionName === "(garbage collector)") return "GC";
  if (functionName === "(idle)") return "(idle)";
  if (functionName === "(program)") return "(program: native, not attributed)";
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) {
    const pkg = m[1];
    if (pkg.startsWith("@prisma/") || pkg === "prisma" || pkg.includes("prisma-adapter")) return `prisma (${pkg})`;
    return pkg;
  }
  const src = /\/src\/([^/]+)\//.exec(url) ?? /\/src\/([^/]+)\.ts/.exec(url);
  if (src) return src[1] === "generated" ? "prisma (generated client)" : `src/${src[1]}`;
  if (/\/bench\//.test(url)) return "bench (client side)";
  if (functionName === "writev" || functionName === "writeBuffer" || functionName === "writeUtf8String") return "socket writes (syscalls)";
  if (url.startsWith("node:internal/crypto")) return "node crypto (JWT ES256, HMAC, ids)";
  if (/node:internal\/modules|cjs-module-lexer|source_map/.test(url)) return "module loading (start-up)";
  return "node internals (other: timers, streams, microtasks)";
}

/** Groups of components for the summary table. */
function group(c: string): string {
  if (c.startsWith("prisma") || c.startsWith("wasm://")) return "Prisma (client, query compiler WASM, adapter)";
  if (/^(pg|pg-pool|pg-protocol|pg-types)$/.test(c) || c === "socket writes (syscalls)") return "pg driver and socket writes";
  if (/^(hono|@hono\/|zod|@asteasolutions)/.test(c)) return "HTTP server (hono, node-server, zod)";
  if (/^(graphql|graphql-yoga|@envelop|@whatwg-node|@graphql|@escape|@pothos)/.test(c)) return "GraphQL (yoga, envelop, graphql-js)";
  if (c === "undici" || c === "bench (client side)") return "HTTP client (undici, the benchmark's side)";
  if (c === "jose" || c.startsWith("node crypto")) return "JWT and crypto";
  if (c.startsWith("src/")) return "linkgate's own code (src/)";
  if (c === "tsx" || c === "esbuild" || c.startsWith("module loading")) return "start-up (module loading, tsx)";
  return c;
}

const totals = new Map<string, number>();
let all = 0;
// the main thread's profile only: tsx's loader thread writes a second one
for (const file of process.argv.slice(2).filter((f) => !/\.\d+\.0*[2-9]\.cpuprofile$/.test(f))) {
  const p = JSON.parse(readFileSync(file, "utf8")) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  p.samples.forEach((id, i) => {
    const c = process.env.DETAIL ? component(byId.get(id)!.callFrame) : group(component(byId.get(id)!.callFrame));
    const dt = p.timeDeltas[i] ?? 0;
    totals.set(c, (totals.get(c) ?? 0) + dt);
    if (c !== "(idle)") all += dt;
  });
}
const rows = [...totals].filter(([c]) => c !== "(idle)").sort((a, b) => b[1] - a[1]);
console.log(`busy ${(all / 1e6).toFixed(2)} s`);
for (const [c, us] of rows.slice(0, 30)) console.log(`${((100 * us) / all).toFixed(1).padStart(5)} %  ${(us / 1e6).toFixed(2).padStart(6)} s  ${c}`);
