// Analytics: conversation, response, message and ticket figures of an organization, computed in SQL.
export { AnalyticsService, CACHE_TTL_MS, type AnalyticsQuery, type Computed, type OwnerView, type Percentiles, EXACT_ROWS } from './service.js';
export type { AgentFigures, AgentSort, DayFigures, Durations, SummaryFigures } from './queries.js';
export type { AnalyticsRange } from './range.js';
export { MessageRollup, type RollupResult } from './rollup.js';
