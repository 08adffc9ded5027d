// The client address that abuse limits count by. By default the socket's peer; behind
// LINKGATE_TRUSTED_PROXIES, the nearest X-Forwarded-For hop that is not a trusted proxy
// (proxy-addr walks the chain right to left and stops at the first untrusted hop, so a
// client cannot choose its own address by prepending entries).
import type { Context, MiddlewareHandler } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import proxyaddr from "proxy-addr";
import type { IncomingMessage } from "node:http";
import { isIP, isIPv4 } from "node:net";
import { DEVICE_COOKIE, DEVICE_COOKIE_MAX_AGE, withDevice } from "../auth/known-places.ts";

/** Requests handed to app.fetch without a socket (tests, embedding) count as one local client. */
export const NO_SOCKET = "local";
/**
 * A forwarded hop that is no IP address, even without its port and brackets: all of them count
 * as one client. Taken as they came, `203.0.113.5:4000`, `0313.0.113.7` or `[203.0.113.7]` were
 * each a fresh budget, a new one for every source port behind a proxy that writes `ip:port`
 * (twelfth review), and never a known place.
 */
export const UNPARSED = "unparsed";

export function clientAddressResolver(trustedProxies: string[]) {
  const trust = trustedProxies.length ? proxyaddr.compile(trustedProxies) : () => false;
  return (c: Context): string => {
    const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
    const peer = incoming?.socket?.remoteAddress;
    if (!peer) return NO_SOCKET;
    const forwarded = c.req.header("x-forwarded-for");
    const req = { headers: forwarded ? { "x-forwarded-for": forwarded } : {}, connection: { remoteAddress: peer }, socket: { remoteAddress: peer } };
    return normalize(proxyaddr(req as unknown as IncomingMessage, trust));
  };
}

/**
 * A hop as an address: its port and brackets dropped, "::ffff:1.2.3.4" and "1.2.3.4" one client,
 * anything else UNPARSED. Only an IPv4 address after "::ffff:" is unwrapped: "::ffff:0:1.2.3.4"
 * (SIIT) became "0:1.2.3.4", no address at all, a budget of its own that could never be a known
 * place (31st review); it stays whole, and its group is the IPv4 address (rate-limit.ts).
 */
export function normalize(hop: string): string {
  const spelled = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(hop)?.[1] ?? /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(hop)?.[1] ?? hop;
  if (!isIP(spelled)) return UNPARSED;
  // An IPv6 zone (`fe80::1%eth0`) names an interface of the machine that saw the address, no
  // part of the client: Node's isIP takes any word of any length after the `%`, and a hop a
  // client wrote itself ("fe80::1%call-1-900-…") went, as its address, into the "From:" of the
  // security notices sent to others (docs/security.md, "Client addresses and trusted proxies").
  const bare = spelled.replace(/%.*$/s, "");
  const mapped = /^::ffff:(.+)$/i.exec(bare)?.[1];
  return mapped && isIPv4(mapped) ? mapped : bare;
}

/**
 * The hosted pages' device cookie (docs/security.md, "Known places"): read on every request so
 * a code start or a sign-in can see it, and set on the response of a sign-in that recorded the
 * device. HttpOnly and SameSite=Lax: scripts cannot read it and other sites cannot send it with
 * a POST; Secure whenever the request or the public issuer is https, and then named
 * `__Host-lg_device`, which only this host can set: an unprefixed cookie can be planted by a
 * sibling subdomain (`Domain=`), with a device id the planter then holds too. An earlier build's
 * unprefixed cookie is still read when the prefixed one is missing, so a browser keeps its
 * device: the next sign-in moves its id to the new name and clears the old one.
 */
export function deviceCookie(issuer: string | undefined): MiddlewareHandler {
  const issuerHttps = issuer?.startsWith("https:") ?? false;
  return async (c, next) => {
    // one parse of the Cookie header; a __Host- cookie exists only where https set it
    const cookies = getCookie(c);
    const earlier = cookies[DEVICE_COOKIE];
    const device = withDevice(cookies[`__Host-${DEVICE_COOKIE}`] ?? earlier);
    await device.run(next);
    const issued = device.issued();
    if (issued && c.res.status < 400) {
      const secure = issuerHttps || new URL(c.req.url).protocol === "https:";
      const options = { httpOnly: true, sameSite: "Lax", secure, path: "/", maxAge: DEVICE_COOKIE_MAX_AGE } as const;
      setCookie(c, DEVICE_COOKIE, issued, secure ? { ...options, prefix: "host" } : options);
      if (secure && earlier !== undefined) deleteCookie(c, DEVICE_COOKIE, { path: "/", secure: true });
    }
  };
}
