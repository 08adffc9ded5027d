// The client address that abuse limits count by. By default the socket's peer; behind
// LINKGATE_TRUSTED_PROXIES, the nearest X-Forwarded-For hop that is not a trusted proxy
// (proxy-addr walks the chain right to left and stops at the first untrusted hop, so a
// client cannot choose its own address by prepending entries).
import type { Context } from "hono";
import proxyaddr from "proxy-addr";
import type { IncomingMessage } from "node:http";

/** Requests handed to app.fetch without a socket (tests, embedding) count as one local client. */
export const NO_SOCKET = "local";

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

// "::ffff:1.2.3.4" and "1.2.3.4" are one client.
function normalize(address: string): string {
  return address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
}
