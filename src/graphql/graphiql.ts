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
import type { Config } from "../config.ts";
import { GRAPHIQL_HEADERS, GRAPHQL_PATH, renderPage } from "../http/graphiql-assets.ts";

const PAGE_OPTIONS: GraphiQLOptions = {
  title: "linkgate",
  headers: JSON.stringify({ "X-API-Key": "<your project API key>" }),
};

/** The yoga `graphiql` option (always false: see above) and the plugins for `config.graphiql`. */
export function graphiqlOptions(config: Config): { graphiql: YogaServerOptions<object, object>["graphiql"]; plugins: Plugin[] } {
  return { graphiql: false, plugins: config.graphiql ? [localGraphiQL(PAGE_OPTIONS)] : [useDisableIntrospection()] };
}

/** Answers GET /graphql from a browser (Accept: text/html) with the local GraphiQL page. */
function localGraphiQL(options: GraphiQLOptions): Plugin {
  const page = renderPage(options);
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

