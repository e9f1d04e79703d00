// The durations analytics measure, in seconds between two conversation columns, as every path computes them.
// date_part answers float8; extract answers numeric (since PostgreSQL 14), which costs nearly twice as much per
// conversation read, and every consumer (sums, histogram buckets, percentile_cont) works in float8 anyway.
export const secs = (later: string, earlier: string) => `date_part('epoch', ${later} - ${earlier})`;

export const FR = secs('first_response_at', 'created_at');
export const HR = secs('first_human_reply_at', 'coalesce(escalated_at, created_at)');
export const RES = secs('first_resolved_at', 'created_at');
