// Analytics answers: the figures with the period they cover and when they were computed.
import type { AgentFigures, AnalyticsRange, Computed, DayFigures, OwnerView, SummaryFigures } from '../services/analytics/index.js';
import { iso } from './time.js';

function presentRange(r: AnalyticsRange) {
  return { from: iso(r.from), to: iso(r.to), timezone: r.timezone };
}

export function presentSummary(c: Computed<SummaryFigures>) {
  return { range: presentRange(c.range), generatedAt: iso(c.generatedAt), percentiles: c.percentiles, ...c.figures };
}

export function presentTrends(c: Computed<DayFigures[]>) {
  return { range: presentRange(c.range), generatedAt: iso(c.generatedAt), percentiles: c.percentiles, byDay: c.figures };
}

export function presentAgentRow(a: AgentFigures) {
  return { ...a };
}

export function presentAgentStats(c: Computed<AgentFigures>) {
  return { range: presentRange(c.range), generatedAt: iso(c.generatedAt), percentiles: c.percentiles, ...presentAgentRow(c.figures) };
}

export function presentOwnerSummary(v: OwnerView<SummaryFigures>) {
  return {
    range: presentRange(v.range), generatedAt: iso(v.generatedAt), percentiles: v.percentiles, totals: v.totals,
    organizations: v.organizations.map((o) => ({ organizationId: o.organizationId, name: o.name, ...o.figures })),
  };
}

export function presentOwnerTrends(v: OwnerView<DayFigures[]>) {
  return {
    range: presentRange(v.range), generatedAt: iso(v.generatedAt), percentiles: v.percentiles, totals: { byDay: v.totals },
    organizations: v.organizations.map((o) => ({ organizationId: o.organizationId, name: o.name, byDay: o.figures })),
  };
}
