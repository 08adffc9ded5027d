// The account page names each session by its User-Agent in a few words: real headers of the
// browsers people use, a headless one, clients that are not browsers, and junk.
import { describe, expect, it } from "vitest";
import { describeUserAgent } from "../pages/src/user-agent.ts";

describe("describeUserAgent", () => {
  it.each([
    ["Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "Chrome 131 on Windows"],
    ["Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.2903.86", "Edge 131 on Windows"],
    ["Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15", "Safari 18 on macOS"],
    ["Mozilla/5.0 (Macintosh; Intel Mac OS X 14.7; rv:133.0) Gecko/20100101 Firefox/133.0", "Firefox 133 on macOS"],
    ["Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "Firefox 128 on Linux"],
    ["Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1", "Safari 18 on iPhone"],
    ["Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1", "Chrome 131 on iPhone"],
    ["Mozilla/5.0 (iPad; CPU OS 17_7 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/133.0 Mobile/15E148 Safari/605.1.15", "Firefox 133 on iPad"],
    ["Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36", "Chrome 131 on Android"],
    ["Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36", "Samsung Internet 26 on Android"],
    ["Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36 OPR/115.0.0.0", "Opera 115 on Windows"],
    ["Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "Chrome 131 on ChromeOS"],
    ["Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.6778.85 Safari/537.36", "Headless Chrome 131 on Linux"],
  ])("%s", (ua, words) => {
    expect(describeUserAgent(ua)).toBe(words);
  });

  it("names a client that is not a browser by its first product", () => {
    expect(describeUserAgent("curl/8.5.0")).toBe("curl 8.5.0");
    expect(describeUserAgent("node")).toBe("node");
    expect(describeUserAgent("okhttp/4.12.0 (Linux; Android 13)")).toBe("okhttp 4.12.0 on Android");
    expect(describeUserAgent("Mozilla/5.0 (X11; Linux x86_64) SomethingNew")).toBe("A browser on Linux");
  });

  it("says so when there is none, and keeps a long made-up one short", () => {
    expect(describeUserAgent(null)).toBe("Unknown browser");
    expect(describeUserAgent("   ")).toBe("Unknown browser");
    const long = describeUserAgent(`${"x".repeat(500)}/1`);
    expect(long).toHaveLength(60);
    expect(long.endsWith("…")).toBe(true);
  });
});
