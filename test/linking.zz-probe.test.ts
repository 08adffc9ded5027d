import { describe, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness } from "./support/app.ts";
describe.each(backends)("probe %s", (backend) => {
  it("timing", async () => {
    let t = Date.now();
    const h = await startHarness(backend);
    console.log(backend, "harness", Date.now() - t);
    for (let i = 0; i < 3; i++) {
      t = Date.now();
      const s = await h.call("POST", "/auth/otp/start", { body: { email: `p${i}@x.com` } });
      const t1 = Date.now() - t;
      const otp = await h.mailbox.otp(`p${i}@x.com`);
      const t2 = Date.now() - t;
      await h.call("POST", "/auth/otp/verify", { body: { state_id: s.body.state_id, otp } });
      console.log(backend, "start", t1, "otp", t2, "verify", Date.now() - t);
    }
    t = Date.now();
    await h.close();
    console.log(backend, "close", Date.now() - t);
  });
});
