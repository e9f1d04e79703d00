// The durations analytics measure, in seconds between two conversation columns, as every path computes them.
const secs = (later: string, earlier: string) => `extract(epoch from (${later} - ${earlier}))`;

export const FR = secs('first_response_at', 'created_at');
export const HR = secs('first_human_reply_at', 'coalesce(escalated_at, created_at)');
export const RES = secs('first_resolved_at', 'created_at');
