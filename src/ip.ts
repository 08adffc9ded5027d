// IPv6 addresses as numbers, for the two places that look inside one: the webhook target guard
// (an IPv6 address that carries an IPv4 one) and the abuse limits' address groups (per /64).

/** The eight 16-bit words of an IPv6 address, via the URL parser's canonical form (a trailing dotted quad included). */
export function ipv6Words(v6: string): number[] {
  const canonical = new URL(`http://[${v6}]/`).hostname.slice(1, -1);
  const [head, tail] = canonical.split("::");
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const all = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t];
  return all.map((w) => parseInt(w, 16));
}

/** The IPv4 address two words carry, dotted. */
export const ipv4From = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
