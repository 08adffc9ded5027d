// Prisma's schema engine compiled to WebAssembly, driven through the same driver adapter
// the app uses, so migrations need no native engine (which these machines cannot download).
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { bindMigrationAwareSqlAdapterFactory } from "@prisma/driver-adapter-utils";
import type { SqlDriverAdapter, SqlMigrationAwareDriverAdapterFactory } from "@prisma/driver-adapter-utils";
import type { SchemaEngine } from "@prisma/schema-engine-wasm";

const require = createRequire(import.meta.url);

let bindings: Promise<typeof import("@prisma/schema-engine-wasm")> | undefined;

// The package's entry imports the .wasm as an ES module, which Node 20 only allows behind
// --experimental-wasm-modules; instantiating it ourselves (as Prisma's CLI does for its own
// WASM) works on every Node.
function loadBindings() {
  bindings ??= (async () => {
    const bgPath = require.resolve("@prisma/schema-engine-wasm/schema_engine_bg");
    const dir = path.dirname(bgPath);
    const bg = await import("@prisma/schema-engine-wasm/schema_engine_bg");
    const module = new WebAssembly.Module(await readFile(path.join(dir, "schema_engine_bg.wasm")));
    const instance = new WebAssembly.Instance(module, { "./schema_engine_bg.js": bg });
    bg.__wbg_set_wasm(instance.exports);
    (instance.exports as { __wbindgen_start: () => void }).__wbindgen_start();
    return bg as typeof import("@prisma/schema-engine-wasm");
  })();
  return bindings;
}

/**
 * Runs `fn` with a schema engine and then frees it and disposes every connection it opened.
 * The engine never disposes its adapters itself: a leftover Postgres connection would keep
 * holding Prisma's migration advisory lock, and the next migration (another process, or the
 * same one a moment later) would wait about 10 s for it.
 */
export async function withSchemaEngine<T>(
  schemaText: string,
  adapterFactory: SqlMigrationAwareDriverAdapterFactory,
  fn: (engine: SchemaEngine) => Promise<T>,
): Promise<T> {
  const { SchemaEngine } = await loadBindings();
  const opened: SqlDriverAdapter[] = [];
  const track = <A extends SqlDriverAdapter>(a: A) => (opened.push(a), a);
  const tracked: SqlMigrationAwareDriverAdapterFactory = {
    provider: adapterFactory.provider,
    adapterName: adapterFactory.adapterName,
    connect: () => adapterFactory.connect().then(track),
    connectToShadowDb: () => adapterFactory.connectToShadowDb().then(track),
  };
  const engine = await SchemaEngine.new(
    { datamodels: [["schema.prisma", schemaText]] },
    () => {},
    bindMigrationAwareSqlAdapterFactory(tracked),
  );
  try {
    return await fn(engine);
  } finally {
    engine.free();
    await Promise.all(opened.map((a) => a.dispose().catch(() => {})));
  }
}
