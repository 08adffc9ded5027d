// Text Postgres can store and UTF-8 can carry: what every input is checked against before it
// reaches a query (a NUL or an unpaired surrogate made the driver fail with a 500 before).
// In unicode mode a surrogate pair is one code point, so \p{Cs} matches only unpaired halves.
const UNSTORABLE = /[\0\p{Cs}]/u;

/** Whether a string can be stored as Postgres text and sent as UTF-8. */
export function isStorableText(s: string): boolean {
  return !UNSTORABLE.test(s);
}

/**
 * The path (e.g. `input.name`, `ids[2]`) of the first string in a JSON value, keys included,
 * that is not storable text; undefined when there is none, "" when the value itself is one.
 * Walks with its own stack: a 64 KiB body can nest 30,000 levels deep.
 */
export function unstorableTextPath(root: unknown): string | undefined {
  const stack: Array<[unknown, string]> = [[root, ""]];
  while (stack.length) {
    const [value, path] = stack.pop()!;
    if (typeof value === "string") {
      if (!isStorableText(value)) return path;
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push([value[i], `${path}[${i}]`]);
    } else if (typeof value === "object" && value !== null) {
      for (const [key, v] of Object.entries(value).reverse()) {
        const at = path ? `${path}.${printableKey(key)}` : printableKey(key);
        if (!isStorableText(key)) return at;
        stack.push([v, at]);
      }
    }
  }
  return undefined;
}

// A field name echoed in a message must itself be storable: JSON.stringify escapes NUL and
// unpaired surrogates.
function printableKey(key: string): string {
  return isStorableText(key) ? key : JSON.stringify(key);
}

/**
 * Control characters (C0, DEL, C1: a line break, an ANSI escape), the line and paragraph
 * separators (U+2028, U+2029: a line break everywhere but in JSON) and the bidirectional
 * embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069). A name someone chooses is
 * shown to others (an account's name on the dashboard and to every app, a passkey's, an app's on
 * the consent page, a provider's on the pages and in mail), where one of these garbles or
 * disguises the text around it: "‮" shows the rest of the line reversed. No name needs one;
 * right-to-left scripts and joiners (U+200C, U+200D) are left alone (docs/security.md, "Input,
 * tenants and pages").
 */
const DISGUISING = /[\p{Cc}\p{Zl}\p{Zp}\u202a-\u202e\u2066-\u2069]/u;

/** Whether a name shown to others holds a character that would garble or disguise it. */
export function isDisguising(s: string): boolean {
  return DISGUISING.test(s);
}

/**
 * A character that shows something: not white space, not a format or default-ignorable
 * character (a zero-width space, the Hangul filler U+3164), not a combining mark on its own, not
 * the blank Braille pattern U+2800. A name made only of the others reads as nothing where it is
 * shown: the consent page asked "Allow ?" of an app named U+200B.
 */
const VISIBLE = /[^\p{White_Space}\p{Default_Ignorable_Code_Point}\p{Cf}\p{M}\u2800]/u;

/**
 * Why a name shown to others cannot be stored, as the end of a sentence about the field ("name
 * must …"), or null when it can: a character that would garble or disguise the text around it,
 * or no character that shows (docs/security.md, "Input, tenants and pages").
 */
export function unshowable(name: string): string | null {
  if (isDisguising(name)) return "must not contain control or bidirectional override characters";
  if (!VISIBLE.test(name)) return "must hold a character that shows";
  return null;
}

/**
 * A text's length as people count characters: code points, so an emoji or a letter beyond the
 * Basic Multilingual Plane is one character, not the two UTF-16 units `.length` counts (150 emoji
 * were refused as more than 200 characters). Every documented limit on a name is counted this way
 * (docs/security.md, "Input, tenants and pages").
 */
export function charLength(s: string): number {
  let n = 0;
  for (const _ of s) n++; // a string iterates by code point (an unpaired surrogate is one)
  return n;
}

/**
 * A name as it is stored and shown back: in Unicode's composed form (NFC), so that "é" typed as
 * one character and as "e" with a combining accent is one spelling, counted alike, and without
 * surrounding white space.
 */
export function nameText(s: string): string {
  return s.normalize("NFC").trim();
}

/**
 * At most `max` characters of a text, cut between code points: cut at a UTF-16 unit, an echoed
 * value ending in an emoji ended in half of one, an unpaired surrogate in the answer's message.
 */
export function clip(s: string, max: number): string {
  let end = 0;
  let n = 0;
  for (const c of s) {
    if (n++ === max) break;
    end += c.length;
  }
  return s.slice(0, end);
}
