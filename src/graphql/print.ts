import { fileURLToPath } from "node:url";
import { lexicographicSortSchema, printSchema } from "graphql";
import { schema } from "./schema/index.ts";

export const schemaFile = fileURLToPath(new URL("../../schema.graphql", import.meta.url));

export function printedSchema(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}
