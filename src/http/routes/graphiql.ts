// GraphiQL's files, served from the installed package under /graphql/assets/<version>/ (never
// a CDN); the page itself is answered by the GraphQL endpoint (src/graphql/graphiql.ts).
// Nothing is served when GraphiQL is off.
import { Hono } from "hono";
import type { Config } from "../../config.ts";
import { GRAPHIQL_ASSET_BASE, GRAPHIQL_HEADERS, graphiqlAsset } from "../graphiql-assets.ts";
import type { AppEnv } from "../env.ts";
import { notFound } from "../errors.ts";
import { acceptsGzip } from "../static-files.ts";

export function graphiqlRoutes(config: Config) {
  const r = new Hono<AppEnv>();
  if (!config.graphiql) return r;
  r.get(`${GRAPHIQL_ASSET_BASE}:file`, async (c) => {
    const asset = await graphiqlAsset(c.req.param("file") ?? "");
    if (!asset) return notFound(c, `no route for GET ${c.req.path}`);
    const gzip = acceptsGzip(c);
    return c.body(gzip ? asset.gzipped : asset.body, 200, {
      "content-type": asset.type,
      "cache-control": "public, max-age=31536000, immutable",
      vary: "Accept-Encoding",
      ...(gzip ? { "content-encoding": "gzip" } : {}),
      ...GRAPHIQL_HEADERS,
    });
  });
  return r;
}
