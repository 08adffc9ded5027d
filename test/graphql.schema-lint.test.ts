// The schema is the front-end developer's manual: GraphiQL shows its descriptions and nothing
// else, so every type, field, argument, enum value and input field must have one.
//
// It is also a promise to every client already built on it. The schema built from the code is
// compared with the checked-in schema.graphql, and a BREAKING change (a field removed, a type
// narrowed, an argument made required, a String field turned into an enum, …) fails here, listed
// one per line. A breaking change made on purpose is made by regenerating the file
// (`npm run schema:print`) in the same commit, whose message says what breaks and why; the diff of
// schema.graphql then shows reviewers exactly what clients lose. (test/graphql.schema.test.ts fails
// on any stale schema.graphql; this check says which of the differences break clients.)
import { readFileSync } from "node:fs";
import { CriticalityLevel, diff, type Change } from "@graphql-inspector/core";
import {
  buildSchema,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  type GraphQLArgument,
  type GraphQLSchema,
} from "graphql";
import { describe, expect, it } from "vitest";
import { schemaFile } from "../src/graphql/print.ts";
import { schema } from "../src/graphql/schema/index.ts";

const described = (d: string | null | undefined) => !!d?.trim();

function undescribedArgs(owner: string, args: readonly GraphQLArgument[]): string[] {
  return args.filter((a) => !described(a.description)).map((a) => `argument ${owner}(${a.name})`);
}

/** Every element of the schema that has no description, as `kind Type.name`. */
export function undescribed(s: GraphQLSchema): string[] {
  const missing: string[] = [];
  for (const type of Object.values(s.getTypeMap())) {
    if (type.name.startsWith("__")) continue;
    if (!described(type.description)) missing.push(`type ${type.name}`);
    if (isObjectType(type) || isInterfaceType(type)) {
      for (const field of Object.values(type.getFields())) {
        if (!described(field.description)) missing.push(`field ${type.name}.${field.name}`);
        missing.push(...undescribedArgs(`${type.name}.${field.name}`, field.args));
      }
    } else if (isInputObjectType(type)) {
      for (const field of Object.values(type.getFields())) {
        if (!described(field.description)) missing.push(`input field ${type.name}.${field.name}`);
      }
    } else if (isEnumType(type)) {
      for (const value of type.getValues()) {
        if (!described(value.description)) missing.push(`enum value ${type.name}.${value.name}`);
      }
    }
  }
  for (const directive of s.getDirectives()) {
    if (!described(directive.description)) missing.push(`directive @${directive.name}`);
    missing.push(...undescribedArgs(`@${directive.name}`, directive.args));
  }
  return missing;
}

async function breakingChanges(before: GraphQLSchema, after: GraphQLSchema): Promise<string[]> {
  const changes: Change[] = await diff(before, after);
  return changes.filter((c) => c.criticality.level === CriticalityLevel.Breaking).map((c) => `${c.path ?? ""}: ${c.message}`);
}

const checkedIn = () => buildSchema(readFileSync(schemaFile, "utf8"));

describe("GraphQL schema lint", () => {
  it("describes every type, field, argument, enum value and input field", () => {
    expect(undescribed(schema)).toEqual([]);
  });

  it("has no breaking change against the checked-in schema.graphql (to break on purpose: npm run schema:print)", async () => {
    expect(await breakingChanges(checkedIn(), schema)).toEqual([]);
  });

  it("the lint finds an undescribed element of each kind", () => {
    const sdl = `
      "d" type Query { "d" a(x: Int): E! b("d" y: I): Int }
      enum E { ONE "d" TWO }
      input I { z: Int "d" w: Int }
      type Bare { "d" c: Int }
    `;
    expect(undescribed(buildSchema(sdl)).sort()).toEqual(
      ["argument Query.a(x)", "enum value E.ONE", "field Query.b", "input field I.z", "type Bare", "type E", "type I"].sort(),
    );
  });

  it("a field removed or a String turned into an enum counts as breaking", async () => {
    const before = buildSchema(`type Query { a: String b: String } enum E { x y }`);
    const after = buildSchema(`type Query { a: E } enum E { x y }`);
    const found = await breakingChanges(before, after);
    expect(found.some((m) => m.startsWith("Query.b:"))).toBe(true);
    expect(found.some((m) => m.startsWith("Query.a:"))).toBe(true);
    expect(await breakingChanges(before, buildSchema(`type Query { a: String b: String c: Int } enum E { x y }`))).toEqual([]);
  });
});
