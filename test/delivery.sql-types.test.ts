// The delivery engine's fast-path statements (src/delivery/sql.ts) return exactly the columns
// and Postgres types their hand-written row types declare (test/support/sql-types.ts).
import "../src/delivery/sql.ts"; // declares the delivery engine's statements
import { describeRowTypes } from "./support/sql-types.ts";

describeRowTypes("delivery engine", ["claim_due", "record_results", "release_leases", "renew_leases", "webhooks_now"]);
