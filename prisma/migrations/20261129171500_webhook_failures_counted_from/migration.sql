-- When a webhook's failures start to count: set when it is enabled again and when its URL
-- changes. The daily check (src/delivery/dead-webhooks.ts) looks only at attempts after it, so
-- the failures that disabled a webhook no longer disable it again within a minute of a project
-- enabling it (30th review). Null for every webhook that exists: its attempts all count, as before.
ALTER TABLE "webhooks" ADD COLUMN "failures_counted_from" TIMESTAMP(3);
