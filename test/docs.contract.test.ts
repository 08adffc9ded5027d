// The reference in docs/ (and the README) is the user-facing contract: its tables of settings,
// errors, routes, GraphQL results, events, metrics and CLI commands are read here and compared
// with what the code declares, so a table cannot drift from the behaviour unnoticed. No database:
// everything compared is declared in code (the config schema, src/errors.ts, the OpenAPI
// document, the GraphQL schema, the metrics registry, the CLI program).
import { readFileSync } from "node:fs";
import { isUnionType, type GraphQLField, type GraphQLNamedType } from "graphql";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { buildProgram } from "../src/cli/program.ts";
import { loadConfig, SETTING_NAMES, type Config } from "../src/config.ts";
import { ERRORS } from "../src/errors.ts";
import { schema } from "../src/graphql/schema/index.ts";
import { NEEDS } from "../src/graphql/schema/root.ts";
import { openApiDocument } from "../src/http/openapi.ts";
import { limitsFrom } from "../src/limits.ts";
import { metrics, renderMetrics } from "../src/metrics.ts";
import { SWEPT_TABLES } from "../src/retention/sweep.ts";
import { EVENT_TYPES } from "../src/webhooks/event-types.ts";
import { userObject } from "../src/webhooks/user-object.ts";

const read = (file: string) => readFileSync(new URL(`../${file}`, import.meta.url), "utf8");

/** The rows of every Markdown table in `text`, as trimmed cells (a `\|` inside a cell stays in it). */
function tableRows(text: string): string[][] {
  return text
    .split("\n")
    .filter((line) => line.startsWith("|") && !/^\|\s*-/.test(line))
    .map((line) =>
      line
        .slice(1, line.trimEnd().endsWith("|") ? line.trimEnd().length - 1 : undefined)
        .split(/(?<!\\)\|/)
        .map((cell) => cell.trim()),
    );
}

/** The backticked words of a cell, leaving out what its parentheses say. */
function ticked(cell: string, { outsideParentheses = false } = {}): string[] {
  let text = cell;
  if (outsideParentheses) while (/\([^()]*\)/.test(text)) text = text.replace(/\([^()]*\)/g, "");
  return [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
}

/** The part of `text` under the heading `heading`, up to the next heading of its level or above. */
function section(text: string, heading: string): string {
  const lines = text.split("\n");
  const start = lines.findIndex((l) => l === heading);
  expect(start, heading).toBeGreaterThanOrEqual(0);
  const level = /^#+/.exec(heading)![0].length;
  const end = lines.findIndex((l, i) => i > start && new RegExp(`^#{1,${level}} `).test(l));
  return lines.slice(start + 1, end < 0 ? undefined : end).join("\n");
}

const declared = (name: string): name is keyof typeof ERRORS => Object.hasOwn(ERRORS, name);
const settled = (env: NodeJS.ProcessEnv): Omit<Config, "warnings"> => {
  const { warnings: _, ...config } = loadConfig(env);
  return config;
};

describe("docs/configuration.md and the README against src/config.ts", () => {
  const VARIABLE = /^`([A-Z][A-Z0-9_]+)`$/;
  const WINDOWS: Record<string, number> = { "10 minutes": 600, "10 min": 600, hour: 3600 };

  /** Each table row naming a variable in a cell of its own, with the row's default cell. */
  function documented(text: string): Array<{ name: string; fallback: string }> {
    return tableRows(text).flatMap((cells) => {
      const at = cells.findIndex((c) => VARIABLE.test(c));
      if (at < 0) return [];
      // the settings tables: | variable | default | …; the abuse limits: | limit | default | variable |
      return [{ name: VARIABLE.exec(cells[at])![1], fallback: cells[1] }];
    });
  }

  it("lists every variable linkgate reads, and no other", () => {
    const listed = new Set(documented(read("docs/configuration.md")).map((r) => r.name));
    expect([...listed].sort()).toEqual([...SETTING_NAMES].sort());
  });

  for (const file of ["docs/configuration.md", "README.md", "docs/graphql.md"]) {
    it(`${file}: a variable set to its documented default changes nothing, and a limit's window is the one written`, () => {
      const unset = settled({});
      let checked = 0;
      for (const { name, fallback } of documented(read(file))) {
        const literal = /^`([^`]+)`$/.exec(fallback)?.[1];
        const limit = /^([\d,]+)(?: per (10 minutes|10 min|hour))?$/.exec(fallback);
        const value = literal ?? limit?.[1].replaceAll(",", "");
        // a default that is another variable's value (LINKGATE_PAGES_PUBLISHABLE_KEY) is no value
        if (value === undefined || SETTING_NAMES.includes(value)) continue;
        expect(settled({ [name]: value }), `${name}=${value}`).toEqual(unset);
        checked++;
        if (!limit?.[2]) continue;
        const limits = Object.values(limitsFrom(loadConfig({ [name]: "777" }).abuse)).filter((l) => l.max === 777);
        expect(limits.length, name).toBeGreaterThan(0);
        for (const l of limits) expect([name, l.windowSeconds]).toEqual([name, WINDOWS[limit[2]]]);
      }
      expect(checked).toBeGreaterThan({ "README.md": 8, "docs/graphql.md": 4 }[file] ?? 30);
    });
  }
});

describe("docs/rest.md against the error model and the OpenAPI document", () => {
  const rest = read("docs/rest.md");
  type Responses = Record<string, { content?: { "application/json"?: { schema?: { properties?: { error?: { enum?: string[] } } } } } }>;
  const paths = openApiDocument().paths as Record<string, Record<string, { responses: Responses }>>;
  const routes = Object.entries(paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => {
      const errors = new Map<number, string[]>();
      for (const [status, r] of Object.entries(op.responses)) errors.set(Number(status), r.content?.["application/json"]?.schema?.properties?.error?.enum ?? []);
      return { route: `${method.toUpperCase()} ${path}`, method: method.toUpperCase(), path, errors };
    }),
  );
  /** Answered by any route as "Conventions" describes: credentials, bodies, outages, faults. */
  const CONVENTIONAL = new Set([401, 413, 415, 500, 503]);
  /** A 400 that is only InvalidRequest is a body's (Conventions, "Bodies"). */
  const conventional = (status: number, names: string[] = []) => CONVENTIONAL.has(status) || (status === 400 && names.join() === "InvalidRequest");

  it("the table of statuses names every error a route answers, under its declared status", () => {
    const byStatus = new Map<number, string[]>();
    for (const cells of tableRows(section(rest, "## Conventions"))) {
      if (/^\d{3}$/.test(cells[0])) byStatus.set(Number(cells[0]), ticked(cells[1], { outsideParentheses: true }).filter(declared));
    }
    for (const [status, names] of byStatus) for (const name of names) expect([name, ERRORS[name as keyof typeof ERRORS].status]).toEqual([name, status]);
    const missing = routes.flatMap(({ route, errors }) => [...errors].flatMap(([status, names]) => names.filter((n) => !byStatus.get(status)?.includes(n)).map((n) => `${status} ${n} (${route})`)));
    expect([...new Set(missing.map((m) => m.replace(/ \(.*/, "")))]).toEqual([]);
  });

  it("every route has its section, whose statuses and errors are the route's", () => {
    const sections = new Map<string, string>();
    const parts = rest.split(/^(#{2,3} .*)$/m);
    for (let i = 1; i < parts.length; i += 2) {
      const m = /^#{2,3} (GET|POST)(?: or (GET|POST))? (\/\S+)$/.exec(parts[i]);
      if (m) for (const method of [m[1], m[2]].filter(Boolean)) sections.set(`${method} ${m[3]}`, parts[i + 1]);
    }
    const faults: string[] = [];
    for (const { route, errors } of routes) {
      const body = sections.get(route);
      if (!body) {
        // the health routes are rows of "Health, pages and GraphQL"
        if (!rest.includes(`| \`${route}\` |`)) faults.push(`${route}: no section`);
        continue;
      }
      const documentedStatuses = new Set<number>();
      for (const cells of tableRows(body)) {
        if (!/^\d{3}(, \d{3})*$/.test(cells[0])) continue;
        const statuses = cells[0].split(", ").map(Number);
        for (const s of statuses) documentedStatuses.add(s);
        if (statuses.length !== 1) continue;
        for (const name of ticked(cells[1]).filter(declared)) {
          if (!errors.get(statuses[0])?.includes(name)) faults.push(`${route}: ${statuses[0]} ${name} is documented, not answered`);
        }
      }
      const answered = [...errors.keys()].filter((s) => s !== 200 && !conventional(s, errors.get(s)));
      for (const s of answered) if (!documentedStatuses.has(s)) faults.push(`${route}: ${s} (${errors.get(s)!.join(", ")}) is answered, not documented`);
      for (const s of documentedStatuses) if (s !== 200 && !conventional(s) && !errors.has(s)) faults.push(`${route}: ${s} is documented, not answered`);
    }
    expect(faults).toEqual([]);
  });
});

describe("docs/graphql.md against the GraphQL schema", () => {
  it("each operation's error types are its result union's", () => {
    const text = read("docs/graphql.md");
    const fields = { ...schema.getQueryType()!.getFields(), ...schema.getMutationType()!.getFields() } as Record<string, GraphQLField<unknown, unknown>>;
    const named = (f: GraphQLField<unknown, unknown>): GraphQLNamedType => {
      let t: unknown = f.type;
      while ((t as { ofType?: unknown }).ofType) t = (t as { ofType: unknown }).ofType;
      return t as GraphQLNamedType;
    };
    const errorsOf = (name: string) => {
      const t = named(fields[name]);
      return isUnionType(t) ? t.getTypes().map((m) => m.name).filter(declared).sort() : [];
    };
    const documented = new Map<string, string[]>();
    const faults: string[] = [];
    let checked = 0;
    // the tables whose last column is "error types"
    const tables = text.split(/\n(?=\| [^\n]* \|\n\| ---)/).filter((t) => /^\| .* \| error types \|\n/.test(t));
    for (const cells of tables.flatMap((t) => tableRows(t.split("\n\n")[0]))) {
      const field = /^(?:(?:query|mutation) )?`(\w+)[(`]/.exec(cells[0])?.[1];
      if (!field || !Object.hasOwn(fields, field)) continue;
      const last = cells[cells.length - 1];
      const as = /^as `(\w+)`/.exec(last)?.[1];
      const names = [...new Set([...(as ? (documented.get(as) ?? []) : []), ...ticked(last).filter(declared)])].sort();
      documented.set(field, names);
      if (JSON.stringify(names) !== JSON.stringify(errorsOf(field))) faults.push(`${field}: documented ${names.join(", ") || "—"}; the schema's ${errorsOf(field).join(", ") || "—"}`);
      checked++;
    }
    expect(faults).toEqual([]);
    expect(checked).toBeGreaterThan(40);
  });

  it("each operation's scope is the one its schema description gives", () => {
    const fields = { ...schema.getQueryType()!.getFields(), ...schema.getMutationType()!.getFields() } as Record<string, GraphQLField<unknown, unknown>>;
    const SCOPES: Record<string, keyof typeof NEEDS> = { none: "nothing", project: "project", user: "user", "user (recent)": "recentUser", secret: "secret", admin: "admin" };
    const faults: string[] = [];
    let checked = 0;
    for (const cells of tableRows(read("docs/graphql.md"))) {
      const field = /^(?:(?:query|mutation) )?`(\w+)[(`]/.exec(cells[0])?.[1];
      // "user (recent, unless `id` is the current session)": the description says user, and why
      const scope = cells[1]?.replace(/^user \(recent, .*\)$/, "user");
      if (!field || !Object.hasOwn(fields, field) || !Object.hasOwn(SCOPES, scope)) continue;
      if (!fields[field].description?.includes(NEEDS[SCOPES[scope]])) faults.push(`${field}: documented ${cells[1]}; described "${fields[field].description?.match(/Needs [^.]*\./)?.[0]}"`);
      checked++;
    }
    expect(faults).toEqual([]);
    expect(checked).toBeGreaterThan(40);
  });
});

describe("docs/events.md against the event types", () => {
  it("the table of event types lists exactly the types there are", () => {
    const rows = tableRows(section(read("docs/events.md"), "## Event types"));
    const listed = rows.map((cells) => /^`([a-z_.]+)`$/.exec(cells[0])?.[1]).filter((t): t is string => !!t);
    expect(listed.sort()).toEqual([...EVENT_TYPES].sort());
  });

  it("the table of the user object lists exactly its fields", () => {
    const at = new Date("2026-11-23T01:44:18.427Z");
    const user = userObject({ id: "acc_x", projectId: "prj_x", name: null, status: "active", createdAt: at, updatedAt: at, lastLoginAt: null, identifiers: [] });
    const rows = tableRows(section(read("docs/events.md"), "## The user object"));
    const listed = rows.slice(1).flatMap((cells) => ticked(cells[0]));
    expect(listed.sort()).toEqual(Object.keys(user).sort());
  });
});

describe("docs/operations.md against the metrics", () => {
  it("has a row for every metric, with its type, its labels and each value a closed label takes", async () => {
    const backlog = { pending: 0, exactUpTo: 10_000, pendingEstimated: false, oldestDueSeconds: 0, leasesHeld: 0, disabledWebhooks: { project: 0, failures: 0 } };
    const { body } = await renderMetrics(async () => backlog, (err) => {
      throw err;
    });
    const families = new Map<string, { type: string; labels: Set<string>; values: Map<string, Set<string>> }>();
    for (const [, name, type] of body.matchAll(/^# TYPE (linkgate_\w+) (\w+)$/gm)) {
      const registered = metrics.registry.getSingleMetric(name) as unknown as { labelNames?: string[] } | undefined;
      families.set(name, { type, labels: new Set(registered?.labelNames ?? []), values: new Map() });
    }
    // label values of closed sets: every series exists from the start; open ones (routes, operation names) are left out
    const OPEN = new Set(["method", "route", "status", "operation", "le"]);
    for (const [, name, labels] of body.matchAll(/^(linkgate_\w+?)(?:_bucket|_sum|_count)?\{([^}]*)\} /gm)) {
      const family = families.get(name) ?? families.get(name.replace(/_(bucket|sum|count)$/, ""));
      if (!family) continue;
      for (const [, label, value] of labels.matchAll(/(\w+)="([^"]*)"/g)) {
        if (label === "le") continue;
        family.labels.add(label);
        if (!OPEN.has(label)) family.values.set(label, (family.values.get(label) ?? new Set()).add(value));
      }
    }
    expect(families.size).toBeGreaterThan(15);
    const rows = new Map(tableRows(read("docs/operations.md")).filter((c) => /^`linkgate_\w+`$/.test(c[0])).map((c) => [c[0].slice(1, -1), c]));
    const faults: string[] = [];
    for (const [name, family] of families) {
      const row = rows.get(name);
      if (!row) {
        faults.push(`${name}: no row`);
        continue;
      }
      if (row[1] !== family.type) faults.push(`${name}: documented a ${row[1]}, is a ${family.type}`);
      const labels = ticked(row[2], { outsideParentheses: true }).sort();
      if (JSON.stringify(labels) !== JSON.stringify([...family.labels].sort())) faults.push(`${name}: documented labels ${labels.join(", ")}; has ${[...family.labels].join(", ")}`);
      for (const [label, values] of family.values) {
        for (const value of values) if (!row.join(" | ").includes(`\`${value}\``)) faults.push(`${name}: ${label} "${value}" is not documented`);
      }
    }
    for (const name of rows.keys()) if (!families.has(name)) faults.push(`${name}: documented, not served`);
    expect(faults).toEqual([]);
    expect(families.get("linkgate_retention_rows_deleted_total")?.values.get("table")).toEqual(new Set(SWEPT_TABLES));
  });
});

describe("docs/cli.md against the CLI", () => {
  const sink = () => new Writable({ write: (_chunk, _encoding, done) => done() });
  const program = buildProgram({ env: {}, stdout: sink(), stderr: sink() });
  const commands = new Map(program.commands.flatMap((group) => group.commands.map((c) => [`${group.name()} ${c.name()}`, c])));

  it("has a section for every command, and only for commands there are, naming each of its options", () => {
    const text = read("docs/cli.md");
    const headings = [...text.matchAll(/^## `([a-z]+ [a-z]+)`$/gm)].map((m) => m[1]);
    expect(headings.sort()).toEqual([...commands.keys()].sort());
    const faults: string[] = [];
    for (const [name, command] of commands) {
      const body = section(text, `## \`${name}\``);
      for (const option of command.options) if (option.long && !body.includes(option.long)) faults.push(`${name}: ${option.long}`);
    }
    expect(faults).toEqual([]);
  });
});
