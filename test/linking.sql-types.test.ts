// The link flow's fast-path statements return exactly the columns and Postgres types their
// hand-written row types declare (test/support/sql-types.ts).
import "../src/auth/authenticate.ts";
import "../src/rate-limit.ts";
import "../src/linking/service.ts";
import "../src/auth/notices.ts";
import { describeRowTypes } from "./support/sql-types.ts";

describeRowTypes("link flow", ["authenticate_user", "claim_notices", "count_all", "link_state", "link_verify", "read_counters", "record_notices_sent"]);
