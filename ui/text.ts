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
