// JSON schemas of the analytics routes: the shared query, and the answers (their descriptions define each figure).
import { object, paginationQuery, uuid } from './common.js';

const seconds = (what: string) => ({ type: ['integer', 'null'], description: `${what}, in seconds (null when there is nothing to measure)` }) as const;
const count = (description: string) => ({ type: 'integer', description }) as const;

export const analyticsQuery = {
  from: { type: 'string', maxLength: 40, description: 'Start of the period: an ISO date (the start of that day in `timezone`) or date-time with a zone, in the year 1000 or later (both bounds). Default: 30 days before `to`' },
  to: { type: 'string', maxLength: 40, description: 'End of the period (exclusive): an ISO date (that whole day is included) or date-time. Default: now. At most 366 days after `from`; `from` after `to` is 400' },
  timezone: { type: 'string', maxLength: 64, description: "IANA zone the days are counted in (400 when unknown). Default: the organization's `settings.timezone`, else UTC" },
  channel: { type: 'string', minLength: 1, maxLength: 30, description: 'Only conversations (and their messages) of this channel; tickets are not filtered by channel' },
  agentId: { type: 'string', maxLength: 36, description: 'Only conversations (and tickets) currently assigned to this user; message counts are not filtered by agent' },
} as const;

export const RangeView = object({ from: { type: 'string', format: 'date-time' }, to: { type: 'string', format: 'date-time' }, timezone: { type: 'string' } });
const generatedAt = { type: 'string', format: 'date-time', description: 'When these figures were computed (answers are cached up to 60 s)' } as const;
const percentiles = {
  type: 'string', enum: ['exact', 'histogram'],
  description: '`exact`: medians and p90s sort every conversation measured (periods of up to 10,000 conversations, any `channel` filter, and summary or trends filtered by `agentId`). ' +
    '`histogram`: read from daily and hourly (agents: daily) log-scale histograms (four buckets per doubling), each the middle of the bucket holding the sample at rank p * (n - 1): within 9.1% of that sample ' +
    '(0 for under a second). Counts, averages and open conversations are exact either way.',
} as const;

const DurationsView = (what: string) => ({
  ...object({ avg: seconds(`Mean ${what}`), median: seconds(`Median ${what}`), p90: seconds(`90th percentile ${what}`), count: count('Conversations measured') }),
  description: what,
});

const summaryFields = {
  conversations: object({
    started: count('Conversations created in the period'),
    resolved: count('Conversations whose first resolution falls in the period (a later reopen does not undo it)'),
    open: count('Conversations open at the end of the period: created before it and neither resolved nor closed by then'),
    escalated: count('Conversations created in the period that were escalated to humans'),
    aiResolved: count('Conversations first resolved in the period by the AI service with no agent ever in them (resolved by AI alone)'),
  }),
  messages: {
    ...object({ visitor: { type: 'integer' }, agent: { type: 'integer' }, ai: { type: 'integer' }, system: { type: 'integer' }, total: { type: 'integer' } }),
    description: 'Messages written in the period by sender kind (internal notes included), from the per-minute rollup (current to within about 15 s)',
  },
  firstResponse: DurationsView('first response: from creation to the first public agent or AI reply, over conversations created in the period'),
  firstHumanResponse: DurationsView('first human response: from the escalation (or creation, when never escalated) to the first public agent reply after it, over conversations created in the period'),
  resolution: DurationsView('resolution time: from creation to the first resolution, over conversations first resolved in the period'),
  tickets: object({ created: count('Tickets created in the period'), resolved: count('Tickets whose current resolution falls in the period') }),
} as const;

export const SummaryView = object({ range: RangeView, generatedAt, percentiles, ...summaryFields });
export const SummaryFiguresView = object(summaryFields);

export const DayView = object({
  date: { type: 'string', format: 'date', description: 'A calendar day in the answer\'s time zone' },
  started: { type: 'integer' },
  resolved: { type: 'integer', description: 'First resolutions that day' },
  openAtEnd: { type: 'integer', description: 'Conversations open when the day ended (or when the period ended, on its last day)' },
  messagesVisitor: { type: 'integer' },
  messagesAgent: { type: 'integer' },
  messagesAi: { type: 'integer' },
  ticketsCreated: { type: 'integer' },
  ticketsResolved: { type: 'integer' },
  medianFirstResponse: seconds('Median first response of the conversations created that day'),
});
export const TrendsView = object({ range: RangeView, generatedAt, percentiles, byDay: { type: 'array', items: DayView } });

const agentFields = {
  userId: uuid,
  name: { type: ['string', 'null'] },
  assigned: count('Conversations created in the period and assigned to this agent'),
  resolved: count('Of those, the ones resolved (first resolution)'),
  open: count('Of those, the ones neither resolved nor closed'),
  firstHumanResponses: count('Conversations created in the period whose first human reply this agent wrote'),
  medianFirstResponse: seconds('Median first human response credited to this agent'),
  medianResolution: seconds('Median resolution time of the conversations assigned to this agent'),
} as const;
export const AgentRowView = object(agentFields);
export const AgentsView = object({ range: RangeView, generatedAt, percentiles, agents: { type: 'array', items: AgentRowView } });
export const AgentStatsView = object({ range: RangeView, generatedAt, percentiles, ...agentFields });
export const agentsQuery = {
  ...analyticsQuery,
  ...paginationQuery,
  sort: { type: 'string', enum: ['assigned', 'resolved', 'open', 'medianFirstResponse', 'medianResolution', 'name'], default: 'assigned' },
} as const;

export const ownerQuery = {
  ...analyticsQuery,
  organizationIds: { type: 'string', minLength: 1, maxLength: 2000, description: 'Comma-separated ids of organizations you own (1..50); any other is 403' },
  timezone: { ...analyticsQuery.timezone, description: 'IANA zone the days are counted in (400 when unknown). Default: UTC' },
} as const;
const orgEntry = { organizationId: uuid, name: { type: 'string' } } as const;
export const OwnerSummaryView = object({
  range: RangeView, generatedAt, percentiles,
  totals: { ...SummaryFiguresView, description: 'Over all the organizations together (medians over all their conversations)' },
  organizations: { type: 'array', items: object({ ...orgEntry, ...summaryFields }) },
});
export const OwnerTrendsView = object({
  range: RangeView, generatedAt, percentiles,
  totals: object({ byDay: { type: 'array', items: DayView } }),
  organizations: { type: 'array', items: object({ ...orgEntry, byDay: { type: 'array', items: DayView } }) },
});
