// GraphiQL and introspection: on by default in development, off in production
// (LINKGATE_GRAPHIQL=0|1 decides otherwise).
//
// GraphiQL runs on the origin where the dashboard keeps the API key, so every byte of it comes
// from the installed @graphql-yoga/render-graphiql package and is served from this origin under
// a strict Content-Security-Policy: no CDN, no inline script. yoga's own page pulls GraphiQL from
// unpkg with no integrity check and builds Monaco's workers from blob: URLs, so yoga's GraphiQL
// stays off and the plugin below answers the page itself.
import { useDisableIntrospection } from "@graphql-yoga/plugin-disable-introspection";
import { shouldRenderGraphiQL, type GraphiQLOptions, type Plugin, type YogaServerOptions } from "graphql-yoga";
import { defaultIssuer, publicPath, type Config } from "../config.ts";
import { underPrefix } from "../http/static-files.ts";
import { GRAPHIQL_HEADERS, GRAPHQL_PATH, renderPage } from "../http/graphiql-assets.ts";

/**
 * What a visitor first reads in the editor: GraphiQL's own welcome describes GraphiQL, and says
 * nothing of the headers without which linkgate refuses almost every field (docs/graphql.md).
 */
export const WELCOME_QUERY = `# linkgate's GraphQL API: sign-in, identifier linking, webhooks and events.
#
# Every request names the project with its API key, in the Headers tab below:
#   X-API-Key: lg_sk_…  a secret key: webhooks, deliveries, events, lookupAccount
#   X-API-Key: lg_pk_…  a publishable key: sign-in and what a signed-in user does
# A signed-in user's requests (viewer, linking, passkeys) also carry their token:
#   Authorization: Bearer <access_token from completeSignIn or /auth/otp/verify>
# The first start printed the keys of the project "default".
#
# This first query needs no key: run it with Ctrl-Enter or the ▶ button.
{
  eventTypes
}

# With a secret key:          { webhooks(first: 5) { edges { node { id url } } } }
# With a key and a token:     { viewer { id email identifiers { value } } }
`;

const PAGE_OPTIONS: GraphiQLOptions & { shouldPersistHeaders: boolean } = {
  title: "linkgate API",
  defaultQuery: WELCOME_QUERY,
  // Header values must be ISO-8859-1 (fetch refuses anything else): no "…" here.
  headers: JSON.stringify({ "X-API-Key": "<your project's lg_sk_... or lg_pk_... key>" }, null, 2),
  // The headers hold a secret key or a token: never in localStorage, where yoga's GraphiQL kept
  // them for good, readable by any script of this origin's pages (30th review). The dashboard
  // keeps its key in sessionStorage; /docs keeps none.
  shouldPersistHeaders: false,
};

/** The yoga `graphiql` option (always false: see above) and the plugins for `config.graphiql`. */
export function graphiqlOptions(config: Config): { graphiql: YogaServerOptions<object, object>["graphiql"]; plugins: Plugin[] } {
  return { graphiql: false, plugins: config.graphiql ? [localGraphiQL(PAGE_OPTIONS, publicPath(defaultIssuer(config)))] : [useDisableIntrospection()] };
}

/** Answers GET /graphql from a browser (Accept: text/html) with the local GraphiQL page. */
function localGraphiQL(options: GraphiQLOptions, prefix: string): Plugin {
  // its files under the issuer's path behind a proxy that strips it (docs/operations.md)
  const page = underPrefix(renderPage(options), prefix);
  return {
    onRequest({ request, url, endResponse, fetchAPI }) {
      if (!shouldRenderGraphiQL(request) || url.pathname.replace(/\/$/, "") !== GRAPHQL_PATH) return;
      endResponse(
        new fetchAPI.Response(page, {
          status: 200,
          headers: { "content-type": "text/html; charset=utf-8", "cache-control": "no-cache", ...GRAPHIQL_HEADERS },
        }),
      );
    },
  };
}

