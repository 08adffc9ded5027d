// The abuse limits as the services use them, built once from the configuration. A module of its
// own, below every service: the counters (src/rate-limit.ts), the notice sender
// (src/auth/notices.ts) and the app's dependencies (src/deps.ts) all read these types.
import type { AbuseLimits } from "./config.ts";

export type Limit = { max: number; windowSeconds: number };

/**
 * Abuse limits (docs/security.md). Every counter that a stranger can move is keyed by the
 * client address too, so nobody can use up another person's budget. The bounds strangers can
 * exhaust for everyone (sends per project, wrong codes per identifier) do not apply where the
 * identifier signed in before (src/auth/known-places.ts); sends from there have a budget of
 * their own instead, per identifier and per project, so that they are bounded too.
 */
export type Limits = {
  /** code sends per identifier and client address */
  sendsPerIdentifier: Limit;
  /** code sends per client address, any identifier */
  sendsPerAddress: Limit;
  /**
   * code sends to one identifier from everywhere but its known places, together: counted per
   * address group alone, one subscriber with a /56 of IPv6 (256 groups) could send one inbox
   * the project's whole e-mail ceiling in an hour. 200 by default: one address group sends one
   * identifier at most 30 codes an hour, so reaching it takes 7 groups, as many as the
   * identifier's wrong-code cap takes (15 wrong codes each), and that cap refuses for the whole
   * hour at once: this limit gives a stranger no cheaper way to refuse the owner a code at a new
   * place. 60 was tried first: 2 groups refused the owner for the hour's last 10 minutes, 6 for 50
   */
  sendsPerIdentifierAll: Limit;
  /** code sends (link requests) per signed-in account */
  sendsPerAccount: Limit;
  /** texts per project: the ceiling that bounds what SMS pumping can cost */
  smsPerProject: Limit;
  /** e-mails per project */
  emailsPerProject: Limit;
  /**
   * code sends to one identifier from its known places, all of them together: a device cookie
   * is good from any address, so without it one sign-in bought a known place's budget at as
   * many addresses as the sender had
   */
  knownPlaceSendsPerIdentifier: Limit;
  /** wrong codes per account (link verifies), and per identifier and client address */
  failuresPerSubject: Limit;
  /** wrong codes per identifier from all addresses together (NIST SP 800-63B §5.2.2) */
  failuresPerIdentifier: Limit;
  /** security notices to one e-mail address or phone: beyond it they are gathered into one message */
  noticesPerDestination: Limit;
  /** security notices about one account, to all its addresses */
  noticesPerAccount: Limit;
};

export function limitsFrom(abuse: AbuseLimits): Limits {
  return {
    sendsPerIdentifier: { max: abuse.sendsPerIdentifierAddress, windowSeconds: 600 },
    sendsPerAddress: { max: abuse.sendsPerAddressHourly, windowSeconds: 3600 },
    sendsPerIdentifierAll: { max: abuse.sendsPerIdentifierHourly, windowSeconds: 3600 },
    sendsPerAccount: { max: 20, windowSeconds: 3600 },
    smsPerProject: { max: abuse.smsPerProjectHourly, windowSeconds: 3600 },
    emailsPerProject: { max: abuse.emailsPerProjectHourly, windowSeconds: 3600 },
    knownPlaceSendsPerIdentifier: { max: 10, windowSeconds: 3600 },
    failuresPerSubject: { max: abuse.wrongCodesPerIdentifierAddress, windowSeconds: 3600 },
    failuresPerIdentifier: { max: abuse.wrongCodesPerIdentifierHourly, windowSeconds: 3600 },
    noticesPerDestination: { max: abuse.noticesPerDestination, windowSeconds: 600 },
    noticesPerAccount: { max: abuse.noticesPerAccountHourly, windowSeconds: 3600 },
  };
}
