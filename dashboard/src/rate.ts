// The success rate as the dashboard shows it, in a file without JSX so that tests import it.
import type { Stats } from "./api.ts";

/**
 * successRate (docs/graphql.md: succeeded / finished) to a tenth of a percent. Only a rate of 1
 * reads "100 %" and only 0 reads "0 %": 2,999 of 3,000 rounded to 100 % with a failure in the
 * window, and 1 of 3,000 to 0 % with a success.
 */
export const fmtRate = (s: Pick<Stats, "successRate">) => {
  const rate = s.successRate;
  if (rate === null) return "—";
  const tenths = Math.min(rate < 1 ? 999 : 1000, Math.max(rate > 0 ? 1 : 0, Math.round(rate * 1000)));
  return `${tenths / 10} %`;
};
