// /analytics: an organization's conversation, response, message and ticket figures; agents' rows; owners' view.
import { presentAgentRow, presentAgentStats, presentOwnerSummary, presentOwnerTrends, presentSummary, presentTrends } from '../server/presenters/analytics.js';
import { iso } from '../server/presenters/time.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { object } from './schemas/common.js';
import { AgentStatsView, AgentsView, agentsQuery, analyticsQuery, OwnerSummaryView, OwnerTrendsView, ownerQuery, SummaryView, TrendsView } from './schemas/analytics.js';

const tag = 'Analytics';
const agent = { kind: 'org', role: 'agent', orgFrom: 'token' } as const;
const definitions =
  'Durations are seconds, on the calendar clock (no business hours). Figures are computed in SQL over timestamps stored when things happened; ' +
  'message counts come from a per-minute rollup. Periods with more than 10,000 conversations and no `channel` filter read aggregates kept by the rollup job ' +
  '(summary and trends: daily and hourly rows, without an `agentId` filter; the agents\' table: per-agent running totals by day): ' +
  'counts, averages and open conversations stay exact, medians and p90s come from log-scale histograms within 9.1% (`percentiles: histogram`). ' +
  'Answers are cached up to 60 s per organization and query; `generatedAt` says when they were computed.';

export function analyticsRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/analytics/summary', operationId: 'getAnalyticsSummary', tag, auth: agent,
      summary: 'Conversations, messages, first response, first human response, resolution and tickets over a period',
      description: definitions,
      query: object(analyticsQuery),
      response: { status: 200, description: 'Summary', data: SummaryView },
      handler: async ({ orgId, query }) => ({ message: 'Analytics summary', data: presentSummary(await s.analytics.summary(orgId, query)) }),
    }),
    defineRoute({
      method: 'get', path: '/analytics/trends', operationId: 'getAnalyticsTrends', tag, auth: agent,
      summary: "The period's figures day by day, in the organization's time zone (or `timezone`)",
      description: definitions,
      query: object(analyticsQuery),
      response: { status: 200, description: 'Trends', data: TrendsView },
      handler: async ({ orgId, query }) => ({ message: 'Analytics trends', data: presentTrends(await s.analytics.trends(orgId, query)) }),
    }),
    defineRoute({
      method: 'get', path: '/analytics/agents', operationId: 'getAnalyticsAgents', tag, auth: { kind: 'org', role: 'admin', orgFrom: 'token' },
      summary: "Every accepted member's row: assigned, resolved and open conversations, median first human response and resolution",
      description: `${definitions} Admins and owners only; an agent reads their own row at /analytics/agent/stats.`,
      query: object(agentsQuery),
      response: { status: 200, description: 'Agents', data: AgentsView },
      handler: async ({ orgId, query }) => {
        const { sort, limit, offset, ...rest } = query;
        const result = await s.analytics.agents(orgId, rest, { sort, limit, offset });
        return {
          message: 'Agent analytics',
          data: { range: { from: iso(result.range.from), to: iso(result.range.to), timezone: result.range.timezone }, generatedAt: iso(result.generatedAt), percentiles: result.percentiles, agents: result.figures.rows.map(presentAgentRow) },
          pagination: { limit, offset, total: result.figures.total },
        };
      },
    }),
    defineRoute({
      method: 'get', path: '/analytics/agent/stats', operationId: 'getAnalyticsAgentStats', tag, auth: agent,
      summary: 'Your own row of /analytics/agents',
      description: definitions,
      query: object((({ agentId: _agentId, ...rest }) => rest)(analyticsQuery)),
      response: { status: 200, description: 'Your figures', data: AgentStatsView },
      handler: async ({ orgId, actor, query }) => ({ message: 'Your analytics', data: presentAgentStats(await s.analytics.agentStats(orgId, actor.userId, query)) }),
    }),
    defineRoute({
      method: 'get', path: '/analytics/owner/summary', operationId: 'getOwnerAnalyticsSummary', tag, auth: { kind: 'bearer' },
      summary: 'The summary over several organizations you own: totals over all of them, and each one',
      description: `${definitions} Every id must be an organization you own (accepted owner membership), else 403.`,
      query: object(ownerQuery, ['organizationIds']),
      response: { status: 200, description: 'Summary', data: OwnerSummaryView },
      errors: [403],
      handler: async ({ actor, query }) => {
        const { organizationIds, ...rest } = query;
        return { message: 'Owner analytics summary', data: presentOwnerSummary(await s.analytics.ownerSummary(actor.userId, organizationIds, rest)) };
      },
    }),
    defineRoute({
      method: 'get', path: '/analytics/owner/trends', operationId: 'getOwnerAnalyticsTrends', tag, auth: { kind: 'bearer' },
      summary: 'Day-by-day figures over several organizations you own: totals and each one',
      description: `${definitions} Every id must be an organization you own (accepted owner membership), else 403.`,
      query: object(ownerQuery, ['organizationIds']),
      response: { status: 200, description: 'Trends', data: OwnerTrendsView },
      errors: [403],
      handler: async ({ actor, query }) => {
        const { organizationIds, ...rest } = query;
        return { message: 'Owner analytics trends', data: presentOwnerTrends(await s.analytics.ownerTrends(actor.userId, organizationIds, rest)) };
      },
    }),
  ];
}
