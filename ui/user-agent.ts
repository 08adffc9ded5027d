// A User-Agent header in words a person recognises ("Chrome 131 on Windows"), for the lists of
// sessions (the account page's and the dashboard's users view). No parser library is installed,
// and the lists only need the browser's family, its major version and the system: the rest of
// the header is compatibility noise.

type Rule = [pattern: RegExp, name: string];

// Order matters: Edge, Opera and Samsung's browser also say "Chrome", Chrome also says "Safari",
// and every browser on an iPhone is Safari underneath.
const BROWSERS: Rule[] = [
  [/\bEdg(?:e|A|iOS)?\/(\d+)/, "Edge"],
  [/\bOPR\/(\d+)/, "Opera"],
  [/\bSamsungBrowser\/(\d+)/, "Samsung Internet"],
  [/\bFxiOS\/(\d+)/, "Firefox"],
  [/\bFirefox\/(\d+)/, "Firefox"],
  [/\bCriOS\/(\d+)/, "Chrome"],
  [/\bHeadlessChrome\/(\d+)/, "Headless Chrome"],
  [/\bChromium\/(\d+)/, "Chromium"],
  [/\bChrome\/(\d+)/, "Chrome"],
  [/\bVersion\/(\d+)[\d.]*.*\bSafari\//, "Safari"],
];

const SYSTEMS: Rule[] = [
  [/\biPhone\b/, "iPhone"],
  [/\biPad\b/, "iPad"],
  [/\bAndroid\b/, "Android"],
  [/\bCrOS\b/, "ChromeOS"],
  [/\bWindows\b/, "Windows"],
  [/\bMac OS X\b|\bMacintosh\b/, "macOS"],
  [/\bLinux\b/, "Linux"],
];

/** Longest a shown name may get: a made-up header must not widen a phone's screen. */
const MAX = 60;

/** "Chrome 131 on Windows"; a client that is not a browser by its first word ("curl 8.5.0"). */
export function describeUserAgent(ua: string | null | undefined): string {
  const raw = (ua ?? "").trim();
  if (!raw) return "Unknown browser";
  const system = SYSTEMS.find(([re]) => re.test(raw))?.[1];
  for (const [re, name] of BROWSERS) {
    const version = re.exec(raw)?.[1];
    if (version) return system ? `${name} ${version} on ${system}` : `${name} ${version}`;
  }
  // Not a browser we know: its first product token, e.g. "curl/8.5.0" or "node". Every browser
  // starts with "Mozilla/5.0", which names none.
  const [product = raw, version] = raw.split(/\s+/)[0].split("/");
  const named = product === "Mozilla" ? "A browser" : version ? `${product} ${version}` : product;
  const short = named.length > MAX ? `${named.slice(0, MAX - 1)}…` : named;
  return system ? `${short} on ${system}` : short;
}
