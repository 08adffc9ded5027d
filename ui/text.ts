// Words both front ends show the same way, so an error reads alike on the dashboard and the pages.

/** What went wrong, in words, whatever was thrown. */
export const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The server's messages are lower-case phrases; the pages show sentences. */
export function sentence(text: string) {
  const t = text.trim();
  if (!t) return t;
  const s = t[0].toUpperCase() + t.slice(1);
  return /[.!?]$/.test(s) ? s : `${s}.`;
}

/**
 * A value someone else chose, placed inside a sentence of ours: isolated (U+2068 … U+2069), so a
 * right-to-left name or a bidirectional override in it stays inside it. Unisolated, "‮" in an
 * identity provider's user id showed the rest of the sentence reversed: "Separate … ?" read as
 * the provider's author liked (docs/security.md, "Input, tenants and pages"). Its own embedding,
 * override and isolate characters are left out, so none of them can close the isolate early.
 * Values shown in elements of their own are isolated by CSS instead (`unicode-bidi: isolate`).
 */
export function isolated(value: string): string {
  // printable ASCII (every e-mail address and phone number) has no right-to-left letter and no
  // formatting character: in our left-to-right sentences it reorders nothing, and stays as typed
  if (/^[\x20-\x7e]*$/.test(value)) return value;
  return `\u2068${value.replace(/[\u202a-\u202e\u2066-\u2069]/g, "")}\u2069`;
}
