// The account page's sessions and the dashboard's users view name a browser alike: the rules
// live in ui/user-agent.ts; this path stays because test/pages.user-agent.test.ts imports it.
export { describeUserAgent } from "../../ui/user-agent.ts";
