// Identifiers are normalized once, at the edge of every service call, so storage and
// comparison never see two spellings of one address.
import { parsePhoneNumberFromString } from "libphonenumber-js/max";
import { domainToASCII } from "node:url";
import { IdentifierRequired, InvalidIdentifier, InvalidRequest } from "../errors.ts";
import { charLength } from "../text.ts";

/** `external`: a sign-in at an identity provider, `<issuer>#<subject>` (src/auth/external/). */
export type IdentifierKind = "email" | "phone" | "external";
export type Identifier = { kind: IdentifierKind; value: string };
/** An identifier messages can reach: codes and notices go to these only. */
export type Contact = { kind: "email" | "phone"; value: string };

export const isContact = (i: Identifier): i is Contact => i.kind !== "external";

/** The issuer and subject of an external identifier's value (an issuer has no `#`). */
export function externalParts(value: string): { issuer: string; subject: string } {
  const at = value.indexOf("#");
  return { issuer: value.slice(0, at), subject: value.slice(at + 1) };
}

export const externalValue = (issuer: string, subject: string) => `${issuer}#${subject}`;

/** zod's local part (`z.email()`): dot-separated atoms of letters, digits and `_'+-`. */
const LOCAL_PART = /^(?:[a-z0-9_'+-]+\.)*[a-z0-9_'+-]*[a-z0-9_+-]$/;
/**
 * A host name as DNS has them: labels of 1 to 63 letters, digits and inner hyphens. zod's e-mail
 * check takes longer labels and ones ending in a hyphen; an account signed up with one (a relay
 * accepts the message) could not show its address: GraphQL's EmailAddress type refuses it, and
 * viewer.email was an "Unexpected error" (docs/authentication.md, "How identifiers are spelled").
 */
const HOST_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
/** The last label: letters (.com), or an internationalized one in punycode (.рф is xn--p1ai). */
const TOP_LABEL = /^(?:[a-z]{2,63}|xn--[a-z0-9-]{1,59})$/;

function isHostName(domain: string): boolean {
  const labels = domain.split(".");
  return labels.length >= 2 && labels.every((label) => HOST_LABEL.test(label)) && TOP_LABEL.test(labels.at(-1)!);
}

/**
 * The one spelling of an e-mail address that is stored, compared, counted and sent to
 * (docs/authentication.md, "How identifiers are spelled"): trimmed; the local part in lower case;
 * the domain in its ASCII form, as IDNA maps it (case, width, NFC, then punycode: BÜCHER.example
 * and its NFD or full-width spellings are xn--bcher-kva.example). Refused as a domain in Unicode,
 * the address as its owner prints it did not sign in, support could not look it up, and a
 * provider's claim in Unicode made a second account beside the one holding the punycode form.
 */
export function normalizeEmail(raw: string): string {
  const trimmed = raw.trim();
  const at = trimmed.lastIndexOf("@");
  // the length bound first: IDNA mapping is linear, but the input need not be looked at past it
  const local = trimmed.slice(0, at).toLowerCase();
  const domain = at < 1 || trimmed.length > 1024 ? "" : domainToASCII(trimmed.slice(at + 1));
  const value = `${local}@${domain}`;
  if (!domain || value.length > 254 || !LOCAL_PART.test(local) || !isHostName(domain)) {
    throw new InvalidIdentifier("that is not a valid e-mail address");
  }
  return value;
}

export function normalizePhone(raw: string): string {
  const trimmed = raw.trim();
  // E.164 is the contract: a leading + and the country code, no national formats.
  if (!trimmed.startsWith("+")) throw new InvalidIdentifier("phone numbers are written + and country code (E.164)");
  const phone = parsePhoneNumberFromString(trimmed);
  if (!phone || !phone.isValid()) throw new InvalidIdentifier("that is not a valid phone number");
  return phone.number;
}

/** Only digits and the punctuation numbers are written with: libphonenumber reads "+52 1 55 abc" as +52155. */
const PHONE_WRITTEN = /^\+[\d\s().\/-]{1,40}$/;

/**
 * A phone number as it may already be held, for finding it (support's lookup, removal): its E.164
 * spelling, valid under today's numbering plans or not. Validity is what a number is checked for
 * when it is proven; plans change (Mexico dropped the mobile "1" in 2019: +52 1 55… is no valid
 * number now), and a number proven before must still be found and removable
 * (docs/authentication.md, "How identifiers are spelled").
 */
export function heldPhone(raw: string): string {
  try {
    return normalizePhone(raw);
  } catch (err) {
    const trimmed = raw.trim();
    const phone = PHONE_WRITTEN.test(trimmed) ? parsePhoneNumberFromString(trimmed) : undefined;
    if (!phone) throw err;
    return phone.number;
  }
}

/**
 * Why no code is texted to a phone (E.164, as normalizePhone returns it), or null. Premium-rate
 * and shared-cost numbers bill the sender, and numbers of no country (international networks,
 * satellite services: +881, +882, +883) are where SMS pumping sends texts; each code sent there
 * is paid by the operator and shared by whoever runs the number (31st review: all three were
 * texted). `countries`: the ones the operator texts (LINKGATE_SMS_COUNTRIES); empty, every one.
 */
export function untextable(phone: string, countries: readonly string[]): string | null {
  const parsed = parsePhoneNumberFromString(phone);
  if (!parsed?.country) return "codes are not texted to numbers of no country (international networks, satellite services)";
  const type = parsed.getType();
  if (type === "PREMIUM_RATE" || type === "SHARED_COST") return "codes are not texted to premium-rate or shared-cost numbers";
  if (countries.length > 0 && !countries.includes(parsed.country)) return `codes are not texted to numbers of this country (${parsed.country}) here`;
  return null;
}

/**
 * Whether a held number still signs in: a code sign-in reads it as a new number (normalizePhone)
 * and texts no code to an untextable one, so a number proven before its numbering plan changed,
 * or one of a country no longer texted, is refused (InvalidIdentifier) before any code is sent.
 * Such a number is no way into its account (docs/external-identities.md, LastIdentifier).
 */
export function phoneSignsIn(held: string, countries: readonly string[]): boolean {
  try {
    return normalizePhone(held) === held && untextable(held, countries) === null;
  } catch {
    return false;
  }
}

/** Domains whose mailboxes ignore dots in the local part: a.d.a@gmail.com is ada@gmail.com. */
const DOTLESS_DOMAINS = new Set(["gmail.com", "googlemail.com"]);

/**
 * The mailbox a message to an identifier reaches, for counting what is sent there: an e-mail's
 * sub-address (`ada+anything@`, which most providers deliver to `ada@`) is dropped, and so are
 * Gmail's dots. Each spelling is an identifier of its own (it may sign up, be linked), but the
 * codes sent to one inbox are bounded together: counted per spelling, `victim+1@`, `victim+2@`, …
 * sent one inbox codes past the bound of 200 an hour (31st review). Phones are already one spelling.
 */
export function inboxOf(i: Identifier): string {
  if (i.kind !== "email") return i.value;
  const at = i.value.lastIndexOf("@");
  let local = i.value.slice(0, at);
  let domain = i.value.slice(at + 1);
  const plus = local.indexOf("+");
  if (plus > 0) local = local.slice(0, plus);
  if (DOTLESS_DOMAINS.has(domain)) {
    local = local.replaceAll(".", "");
    domain = "gmail.com";
  }
  return `${local}@${domain}`;
}

/**
 * Exactly one of email / phone, each a string when present. `phone`: how a number is read; a
 * number to find among those held (removal) is read by heldPhone.
 */
export function parseIdentifier(input: { email?: unknown; phone?: unknown }, phone: (raw: string) => string = normalizePhone): Contact {
  const hasEmail = input.email !== undefined && input.email !== null;
  const hasPhone = input.phone !== undefined && input.phone !== null;
  if (hasEmail && hasPhone) throw new InvalidRequest("send either email or phone, not both");
  if (!hasEmail && !hasPhone) throw new IdentifierRequired();
  const raw = hasEmail ? input.email : input.phone;
  if (typeof raw !== "string") throw new InvalidRequest(`${hasEmail ? "email" : "phone"} must be a string`);
  if (raw.trim() === "") throw new IdentifierRequired();
  return hasEmail ? { kind: "email", value: normalizeEmail(raw) } : { kind: "phone", value: phone(raw) };
}

/**
 * What remove takes: an e-mail or phone as everywhere, or an external identifier as
 * `viewer.identifiers` shows it (`{"external": "<issuer>#<subject>"}`).
 */
export function parseRemovable(input: { email?: unknown; phone?: unknown; external?: unknown }): Identifier {
  if (input.external === undefined || input.external === null) return parseIdentifier(input, heldPhone);
  if (input.email != null || input.phone != null) throw new InvalidRequest("send one of email, phone or external");
  const value = input.external;
  if (typeof value !== "string" || charLength(value) > 2400 || value.indexOf("#") < 1 || value.endsWith("#")) {
    throw new InvalidIdentifier("external is an identifier's value as listed: <issuer>#<subject>");
  }
  return { kind: "external", value };
}
