// The sign-in flow's fast-path statements return exactly the columns and Postgres types their
// hand-written row types declare (test/support/sql-types.ts).
import "../src/auth/authenticate.ts";
import "../src/auth/sign-in.ts";
import { describeRowTypes } from "./support/sql-types.ts";

describeRowTypes("sign-in flow", ["account_claims", "authenticate_project", "authenticate_token", "sign_in_verify"]);
