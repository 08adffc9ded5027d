// Why an attempt got no answer, in words the endpoint's owner can act on: the delivery log shows
// this text (docs/webhooks.md, "What the log says"). undici and OpenSSL name the failure with a
// code and an OpenSSL trace ("ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION: 804C…:error:0A00042E:SSL
// routines:…"), and a certificate error never says which certificate or when it expired. The
// code stays at the end, in parentheses, for whoever searches for it.
import type { Socket } from "node:net";
import type { DetailedPeerCertificate, TLSSocket } from "node:tls";

/** What a failed connection showed of itself before it ended (set by watchConnection). */
type Setup = { tls: boolean; peer: DetailedPeerCertificate | null };
const SETUP = Symbol("connection setup");

/**
 * Watches one new connection (the socket undici's connector returns) for its certificate. Node
 * checks the certificate after the handshake and destroys the socket with the verdict; by the
 * time the error is seen the certificate is gone with it, so it is read as the socket is
 * destroyed, before the connection is ready. Returns what marks an error of this connection's
 * setup (connecting or the TLS handshake), with what was seen.
 */
export function watchConnection(socket: Socket | undefined): (err: Error) => Error {
  const tls = socket && "encrypted" in socket ? (socket as TLSSocket) : null;
  const setup: Setup = { tls: !!tls, peer: null };
  if (tls) {
    const destroy = tls.destroy;
    tls.destroy = function (this: TLSSocket, err?: Error) {
      if (err && !setup.peer) setup.peer = peerOf(this);
      return destroy.call(this, err);
    };
    tls.once("secureConnect", () => {
      tls.destroy = destroy;
    });
  }
  return (err) => {
    if (err && typeof err === "object" && !(SETUP in err)) Object.defineProperty(err, SETUP, { value: setup });
    return err;
  };
}

function peerOf(socket: TLSSocket): DetailedPeerCertificate | null {
  try {
    const cert = socket.getPeerCertificate(true);
    return cert && cert.valid_to ? cert : null;
  } catch {
    return null;
  }
}

/** The delivery log's text for an error that left no HTTP answer. */
export function describeSendError(err: unknown): string {
  const e = err as { code?: string; message?: string; host?: string; cert?: DetailedPeerCertificate; cause?: { code?: string; message?: string } } & { [SETUP]?: Setup };
  const code = e?.code ?? e?.cause?.code;
  const message = e?.message || e?.cause?.message || String(err);
  const setup = e?.[SETUP];
  const tls = code ? tlsText(code, message, e.cert ?? setup?.peer ?? null, e.host) : null;
  if (tls) return `TLS: ${tls} (${code})`;
  if (code === "ECONNREFUSED") return `connection refused (ECONNREFUSED)`;
  if (setup?.tls && code === "ECONNRESET") {
    return /before secure TLS connection/.test(message)
      ? "TLS: the server closed the connection during the TLS handshake, before any request was sent (ECONNRESET)"
      : "TLS: the server reset the connection during the TLS handshake, before any request was sent (ECONNRESET)";
  }
  if (code === "ECONNRESET" || code === "UND_ERR_SOCKET") return `connection reset before a response (${code}): ${message}`;
  return code ? `${code}: ${opensslReason(message) ?? message}` : message;
}

function tlsText(code: string, message: string, cert: DetailedPeerCertificate | null, host: string | undefined): string | null {
  const leaf = cert ? ` (${namesOf(cert)})` : "";
  switch (code) {
    case "CERT_HAS_EXPIRED": {
      const expired = chainOf(cert).find((c) => Date.parse(c.valid_to) < Date.now());
      if (!expired) return "the server's certificate has expired: renew it";
      return expired === cert
        ? `the server's certificate${leaf} expired on ${iso(expired.valid_to)}: renew it`
        : `the certificate "${commonName(expired.subject)}" in the server's chain expired on ${iso(expired.valid_to)}: serve the current one`;
    }
    case "CERT_NOT_YET_VALID":
      return `the server's certificate${leaf} is not valid before ${cert ? iso(cert.valid_from) : "a later date"}`;
    case "ERR_TLS_CERT_ALTNAME_INVALID":
      return `the server's certificate is for ${cert ? namesOf(cert) : "other names"}, not ${host ?? "this host"}`;
    case "DEPTH_ZERO_SELF_SIGNED_CERT":
      return `the server's certificate${leaf} is self-signed: use one issued by a public certificate authority`;
    case "SELF_SIGNED_CERT_IN_CHAIN":
      return `the server's certificate chain ends in "${rootOf(cert)}", which is not a trusted certificate authority`;
    case "UNABLE_TO_VERIFY_LEAF_SIGNATURE":
      return `the server sent its certificate${leaf} without the intermediate certificate of its issuer${cert ? ` "${commonName(cert.issuer)}"` : ""}, or that issuer is not trusted: configure the server with the full chain`;
    case "UNABLE_TO_GET_ISSUER_CERT":
    case "UNABLE_TO_GET_ISSUER_CERT_LOCALLY":
      return `the server's certificate chain leads to "${cert ? commonName(lastOf(cert).issuer) : "an issuer"}", which is not a trusted certificate authority (or the chain is incomplete): configure the server with the full chain`;
    case "CERT_REVOKED":
      return `the server's certificate${leaf} was revoked`;
    case "ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL":
      return "the server refused HTTP/1.1 in the TLS handshake (ALPN), as a server that offers only HTTP/2 does: deliveries are sent over HTTP/1.1";
    case "ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION":
    case "ERR_SSL_UNSUPPORTED_PROTOCOL":
    case "ERR_SSL_NO_PROTOCOLS_AVAILABLE":
    case "ERR_SSL_VERSION_TOO_LOW":
      return "the server offers only TLS versions older than 1.2, which deliveries do not use: enable TLS 1.2 or 1.3 on it";
    case "ERR_SSL_WRONG_VERSION_NUMBER":
      return "the server did not answer in TLS (plain HTTP on this port?)";
    case "ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE":
      return "the server ended the TLS handshake: no cipher suite or key type in common, or it asks for a client certificate";
  }
  if (code.startsWith("ERR_SSL_")) return `the TLS handshake failed: ${opensslReason(message) ?? message}`;
  if (/^(CERT_|UNABLE_TO_|.*_CERT$|INVALID_CA|PATH_LENGTH)/.test(code)) return `the server's certificate${leaf} was not accepted: ${message}`;
  return null;
}

/** "…:SSL routines:ssl3_read_bytes:tlsv1 alert protocol version:../deps/…" -> "tlsv1 alert protocol version". */
function opensslReason(message: string): string | null {
  return /:SSL routines:[^:]*:([^:]+):/.exec(message)?.[1] ?? null;
}

function chainOf(cert: DetailedPeerCertificate | null): DetailedPeerCertificate[] {
  const chain: DetailedPeerCertificate[] = [];
  for (let c = cert; c && c.valid_to && !chain.includes(c) && chain.length < 10; c = c.issuerCertificate) chain.push(c);
  return chain;
}

const lastOf = (cert: DetailedPeerCertificate) => chainOf(cert).at(-1) ?? cert;
const rootOf = (cert: DetailedPeerCertificate | null) => (cert ? commonName(lastOf(cert).subject) : "a certificate authority");

function commonName(name: { CN?: string | string[]; O?: string | string[] } | undefined): string {
  const cn = name?.CN ?? name?.O;
  return String(Array.isArray(cn) ? cn[0] : (cn ?? "unnamed")).slice(0, 100);
}

/** The names a certificate is for: its subjectAltName entries, else its CN; at most five. */
function namesOf(cert: DetailedPeerCertificate): string {
  const names = (cert.subjectaltname ?? "")
    .split(", ")
    .map((n) => (n.startsWith("IP Address:") ? shortIp(n.slice(11)) : n.replace(/^DNS:/, "")))
    .filter(Boolean);
  if (names.length === 0) names.push(commonName(cert.subject));
  const shown = names.slice(0, 5).map((n) => n.slice(0, 100)).join(", ");
  return names.length > 5 ? `${shown} and ${names.length - 5} more` : shown;
}

/** Node spells an IPv6 address in a certificate in full (0:0:0:0:0:0:0:1); the URL has it short (::1). */
function shortIp(ip: string): string {
  if (!ip.includes(":")) return ip;
  try {
    return new URL(`http://[${ip}]/`).hostname.slice(1, -1);
  } catch {
    return ip;
  }
}

/** "Nov 28 06:37:00 2026 GMT" -> "2026-11-28T06:37:00Z". */
function iso(date: string): string {
  const t = Date.parse(date);
  return Number.isNaN(t) ? date : new Date(t).toISOString().replace(/\.\d{3}Z$/, "Z");
}
