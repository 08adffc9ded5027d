// Prisma's schema engine compiled to WebAssembly, driven through the same driver adapter
// the app uses, so migrations need no native engine (which these machines cannot download).
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { bindMigrationAwareSqlAdapterFactory } from "@prisma/driver-adapter-utils";
import type { SqlMigrationAwareDriverAdapterFactory } from "@prisma/driver-adapter-utils";
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

export async function openSchemaEngine(
  schemaText: string,
  adapterFactory: SqlMigrationAwareDriverAdapterFactory,
): Promise<SchemaEngine> {
  const { SchemaEngine } = await loadBindings();
  return SchemaEngine.new(
    { datamodels: [["schema.prisma", schemaText]] },
    () => {},
    bindMigrationAwareSqlAdapterFactory(adapterFactory),
  );
}
