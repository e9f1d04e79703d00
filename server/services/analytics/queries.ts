// The analytics SQL: every figure is computed by PostgreSQL over the timestamps stored when things happened, read
// through the (organization_id, created_at | first_resolved_at | done_at) indexes and the per-minute message rollup.
import type { ReadSession } from '../../../db/statements.js';
import { secs } from './durations.js';
import type { AnalyticsRange } from './range.js';

export interface Filters {
  channel: string | null;
  agentId: string | null;
}

export interface Durations {
  avg: number | null;
  median: number | null;
  p90: number | null;
  count: number;
}

export interface SummaryFigures {
  conversations: { started: number; resolved: number; open: number; escalated: number; aiResolved: number };
  messages: { visitor: number; agent: number; ai: number; system: number; total: number };
  firstResponse: Durations;
  firstHumanResponse: Durations;
  resolution: Durations;
  tickets: { created: number; resolved: number };
}

export interface DayFigures {
  date: string;
  started: number;
  resolved: number;
  openAtEnd: number;
  messagesVisitor: number;
  messagesAgent: number;
  messagesAi: number;
  ticketsCreated: number;
  ticketsResolved: number;
  medianFirstResponse: number | null;
}

export interface AgentFigures {
  userId: string;
  name: string | null;
  assigned: number;
  resolved: number;
  open: number;
  firstHumanResponses: number;
  medianFirstResponse: number | null;
  medianResolution: number | null;
}

export type AgentSort = 'assigned' | 'resolved' | 'open' | 'medianFirstResponse' | 'medianResolution' | 'name';

/** Organization ids as one array parameter (they are validated UUIDs by the time they get here). */
const orgArray = (ids: string[]) => `{${ids.join(',')}}`;


function durations(expr: string, alias: string): string {
  return `avg(${expr}) as ${alias}_avg,
    percentile_cont(0.5) within group (order by ${expr}) as ${alias}_median,
    percentile_cont(0.9) within group (order by ${expr}) as ${alias}_p90,
    count(${expr})::int as ${alias}_count`;
}

/** Rows of a raw query with camelCase keys (the knex mappers convert query-builder rows only). */
function rowsOf<T = Record<string, unknown>>(result: { rows: Record<string, unknown>[] }): T[] {
  return result.rows.map((row) => Object.fromEntries(Object.entries(row).map(([k, v]) => [k.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase()), v])) as T);
}

/** A duration column: null when there was nothing to measure (every column named is in the row). */
const round = (v: unknown): number | null => (v === null ? null : Math.round(Number(v)));
const int = (v: unknown): number => Number(v ?? 0);

function readDurations(row: Record<string, unknown>, alias: string): Durations {
  return { avg: round(row[`${alias}Avg`]), median: round(row[`${alias}Median`]), p90: round(row[`${alias}P90`]), count: int(row[`${alias}Count`]) };
}

export class AnalyticsQueries {
  constructor(private readonly knex: ReadSession) {}

  /** `and ...` conditions for the conversation filters, with their bindings. */
  private convFilter(f: Filters): { sql: string; bindings: string[] } {
    let sql = '';
    const bindings: string[] = [];
    if (f.channel) {
      sql += ' and channel = ?';
      bindings.push(f.channel);
    }
    if (f.agentId) {
      sql += ' and assigned_to = ?';
      bindings.push(f.agentId);
    }
    return { sql, bindings };
  }

  /**
   * Conversations open at `at` (created before it, neither resolved nor closed by then): the open ones plus those done
   * since, so the count reads recent rows only (partial and covering indexes), never the whole history.
   */
  private openAt(cf: { sql: string; bindings: string[] }): string {
    return `((select count(*) from conversations where organization_id = any(?::uuid[]) and done_at is null and created_at < ?${cf.sql})
      + (select count(*) from conversations where organization_id = any(?::uuid[]) and done_at >= ? and created_at < ?${cf.sql}))`;
  }

  private openAtBindings(orgs: string, at: Date, cf: { bindings: string[] }): (string | Date)[] {
    return [orgs, at, ...cf.bindings, orgs, at, at, ...cf.bindings];
  }

  async summary(orgIds: string[], range: AnalyticsRange, f: Filters): Promise<SummaryFigures> {
    const orgs = orgArray(orgIds);
    const cf = this.convFilter(f);
    const { from, to } = range;
    const sql = `
      with started as (
        select count(*)::int as started,
          count(*) filter (where escalated_at is not null)::int as escalated,
          ${durations(secs('first_response_at', 'created_at'), 'fr')},
          ${durations(secs('first_human_reply_at', 'coalesce(escalated_at, created_at)'), 'hr')}
        from conversations where organization_id = any(?::uuid[]) and created_at >= ? and created_at < ?${cf.sql}
      ),
      resolved as (
        select count(*)::int as resolved, count(*) filter (where first_resolved_by_ai)::int as ai_resolved,
          ${durations(secs('first_resolved_at', 'created_at'), 'res')}
        from conversations where organization_id = any(?::uuid[]) and first_resolved_at >= ? and first_resolved_at < ?${cf.sql}
      )
      select started.*, resolved.*, ${this.openAt(cf)} as open
      from started, resolved`;
    const bindings = [orgs, from, to, ...cf.bindings, orgs, from, to, ...cf.bindings, ...this.openAtBindings(orgs, to, cf)];
    const [conv, messages, tickets] = await Promise.all([
      this.knex.raw(sql, bindings).then((r) => rowsOf(r)[0]!),
      this.messageCounts(orgs, range, f),
      this.ticketCounts(orgs, range, f),
    ]);
    return {
      conversations: { started: int(conv.started), resolved: int(conv.resolved), open: int(conv.open), escalated: int(conv.escalated), aiResolved: int(conv.aiResolved) },
      messages,
      firstResponse: readDurations(conv, 'fr'),
      firstHumanResponse: readDurations(conv, 'hr'),
      resolution: readDurations(conv, 'res'),
      tickets,
    };
  }

  private async messageCounts(orgs: string, range: AnalyticsRange, f: Filters): Promise<SummaryFigures['messages']> {
    const rows = rowsOf<{ senderType: string; n: string }>(await this.knex.raw(
      `select sender_type, sum(count)::bigint as n from message_rollups
       where organization_id = any(?::uuid[]) and bucket >= ? and bucket < ?${f.channel ? ' and channel = ?' : ''} group by sender_type`,
      [orgs, range.from, range.to, ...(f.channel ? [f.channel] : [])],
    ));
    const by = (kind: string) => int(rows.find((r) => r.senderType === kind)?.n);
    const counts = { visitor: by('visitor'), agent: by('agent'), ai: by('ai'), system: by('system') };
    return { ...counts, total: counts.visitor + counts.agent + counts.ai + counts.system };
  }

  /**
   * Tickets created and resolved per day of the period, in its zone: one row, `ticket_days`, a json array of
   * { date, created, resolved }. Unfiltered: only periods without an `agentId` filter read the aggregates.
   */
  ticketDaysSql(orgs: string, range: AnalyticsRange): { sql: string; bindings: unknown[] } {
    const { from, to, timezone: tz } = range;
    return {
      sql: `select coalesce(json_agg(json_build_object('date', to_char(d, 'YYYY-MM-DD'), 'created', created, 'resolved', resolved)), '[]') as ticket_days from (
         select d, sum(created)::int as created, sum(resolved)::int as resolved from (
           select (created_at at time zone ?::text)::date as d, 1 as created, 0 as resolved from tickets
           where organization_id = any(?::uuid[]) and created_at >= ?::timestamptz and created_at < ?::timestamptz
           union all
           select (resolved_at at time zone ?::text)::date, 0, 1 from tickets
           where organization_id = any(?::uuid[]) and resolved_at >= ?::timestamptz and resolved_at < ?::timestamptz
         ) t group by d
       ) days`,
      bindings: [tz, orgs, from, to, tz, orgs, from, to],
    };
  }

  async ticketCounts(orgs: string, range: AnalyticsRange, f: Filters): Promise<SummaryFigures['tickets']> {
    const q = this.ticketCountsSql(orgs, range, f);
    const row = (await this.knex.raw(q.sql, q.bindings)).rows[0]!;
    return { created: int(row.tickets_created), resolved: int(row.tickets_resolved) };
  }

  /** One row: `tickets_created`, `tickets_resolved` in the period. */
  ticketCountsSql(orgs: string, range: AnalyticsRange, f: Filters): { sql: string; bindings: unknown[] } {
    const agent = f.agentId ? ' and assigned_to = ?::uuid' : '';
    const a = f.agentId ? [f.agentId] : [];
    return {
      sql: `select (select count(*) from tickets where organization_id = any(?::uuid[]) and created_at >= ?::timestamptz and created_at < ?::timestamptz${agent})::int as tickets_created,
              (select count(*) from tickets where organization_id = any(?::uuid[]) and resolved_at >= ?::timestamptz and resolved_at < ?::timestamptz${agent})::int as tickets_resolved`,
      bindings: [orgs, range.from, range.to, ...a, orgs, range.from, range.to, ...a],
    };
  }

  async trends(orgIds: string[], range: AnalyticsRange, f: Filters): Promise<DayFigures[]> {
    const orgs = orgArray(orgIds);
    const cf = this.convFilter(f);
    const { from, to, timezone: tz } = range;
    const day = (col: string) => `(${col} at time zone ?)::date`;
    const agent = f.agentId ? ' and assigned_to = ?' : '';
    const a = f.agentId ? [f.agentId] : [];
    const channel = f.channel ? ' and channel = ?' : '';
    const ch = f.channel ? [f.channel] : [];
    // openAtEnd: open when the range starts, plus each day's starts, minus each day's first resolutions or closes.
    const sql = `
      with days as (
        select d::date as date from generate_series((?::timestamptz at time zone ?)::date, ((?::timestamptz - interval '1 microsecond') at time zone ?)::date, interval '1 day') d
      ),
      started as (
        select ${day('created_at')} as date, count(*)::int as n,
          percentile_cont(0.5) within group (order by ${secs('first_response_at', 'created_at')}) as median_first_response
        from conversations where organization_id = any(?::uuid[]) and created_at >= ? and created_at < ?${cf.sql} group by 1
      ),
      resolved as (
        select ${day('first_resolved_at')} as date, count(*)::int as n
        from conversations where organization_id = any(?::uuid[]) and first_resolved_at >= ? and first_resolved_at < ?${cf.sql} group by 1
      ),
      done as (
        select ${day('done_at')} as date, count(*)::int as n
        from conversations where organization_id = any(?::uuid[]) and done_at >= ? and done_at < ?${cf.sql} group by 1
      ),
      messages as (
        select ${day('bucket')} as date,
          sum(count) filter (where sender_type = 'visitor')::int as visitor,
          sum(count) filter (where sender_type = 'agent')::int as agent,
          sum(count) filter (where sender_type = 'ai')::int as ai
        from message_rollups where organization_id = any(?::uuid[]) and bucket >= ? and bucket < ?${channel} group by 1
      ),
      tickets_created as (
        select ${day('created_at')} as date, count(*)::int as n from tickets
        where organization_id = any(?::uuid[]) and created_at >= ? and created_at < ?${agent} group by 1
      ),
      tickets_resolved as (
        select ${day('resolved_at')} as date, count(*)::int as n from tickets
        where organization_id = any(?::uuid[]) and resolved_at >= ? and resolved_at < ?${agent} group by 1
      ),
      base as (select ${this.openAt(cf)} as n)
      select to_char(days.date, 'YYYY-MM-DD') as date,
        coalesce(s.n, 0) as started, coalesce(r.n, 0) as resolved,
        (base.n + sum(coalesce(s.n, 0) - coalesce(dn.n, 0)) over (order by days.date))::int as open_at_end,
        coalesce(m.visitor, 0) as messages_visitor, coalesce(m.agent, 0) as messages_agent, coalesce(m.ai, 0) as messages_ai,
        coalesce(tc.n, 0) as tickets_created, coalesce(tr.n, 0) as tickets_resolved, s.median_first_response
      from days cross join base
        left join started s on s.date = days.date left join resolved r on r.date = days.date
        left join done dn on dn.date = days.date left join messages m on m.date = days.date
        left join tickets_created tc on tc.date = days.date left join tickets_resolved tr on tr.date = days.date
      order by days.date`;
    const bindings = [
      from, tz, to, tz,
      tz, orgs, from, to, ...cf.bindings,
      tz, orgs, from, to, ...cf.bindings,
      tz, orgs, from, to, ...cf.bindings,
      tz, orgs, from, to, ...ch,
      tz, orgs, from, to, ...a,
      tz, orgs, from, to, ...a,
      ...this.openAtBindings(orgs, from, cf),
    ];
    const rows = rowsOf(await this.knex.raw(sql, bindings));
    return rows.map((r) => ({
      date: String(r.date),
      started: int(r.started),
      resolved: int(r.resolved),
      openAtEnd: int(r.openAtEnd),
      messagesVisitor: int(r.messagesVisitor),
      messagesAgent: int(r.messagesAgent),
      messagesAi: int(r.messagesAi),
      ticketsCreated: int(r.ticketsCreated),
      ticketsResolved: int(r.ticketsResolved),
      medianFirstResponse: round(r.medianFirstResponse),
    }));
  }

  /** Per accepted member: conversations started in the range and assigned to them, and first human replies they made. */
  async agents(orgId: string, range: AnalyticsRange, f: Filters, page: { sort: AgentSort; limit: number; offset: number }): Promise<{ rows: AgentFigures[]; total: number }> {
    const channel = f.channel ? ' and channel = ?' : '';
    const ch = f.channel ? [f.channel] : [];
    const member = f.agentId ? ' and m.user_id = ?' : '';
    const order: Record<AgentSort, string> = {
      assigned: 'assigned desc', resolved: 'resolved desc', open: 'open desc',
      medianFirstResponse: 'median_first_response asc nulls last', medianResolution: 'median_resolution asc nulls last', name: 'name asc',
    };
    const sql = `
      with members as (
        select m.user_id, coalesce(u.name, m.name) as name from memberships m join users u on u.id = m.user_id
        where m.organization_id = ? and m.status = 'accepted'${member}
      ),
      assigned as (
        select assigned_to as user_id, count(*)::int as assigned,
          count(*) filter (where first_resolved_at is not null)::int as resolved,
          count(*) filter (where done_at is null)::int as open,
          percentile_cont(0.5) within group (order by ${secs('first_resolved_at', 'created_at')}) as median_resolution
        from conversations where organization_id = ? and created_at >= ? and created_at < ? and assigned_to is not null${channel} group by 1
      ),
      human as (
        select first_human_reply_by as user_id, count(*)::int as n,
          percentile_cont(0.5) within group (order by ${secs('first_human_reply_at', 'coalesce(escalated_at, created_at)')}) as median_first_response
        from conversations where organization_id = ? and created_at >= ? and created_at < ? and first_human_reply_by is not null${channel} group by 1
      )
      select members.user_id, members.name, coalesce(a.assigned, 0) as assigned, coalesce(a.resolved, 0) as resolved, coalesce(a.open, 0) as open,
        coalesce(h.n, 0) as first_human_responses, h.median_first_response, a.median_resolution, count(*) over () as total
      from members left join assigned a on a.user_id = members.user_id left join human h on h.user_id = members.user_id
      order by ${order[page.sort]}, members.user_id
      limit ? offset ?`;
    const bindings = [orgId, ...(f.agentId ? [f.agentId] : []), orgId, range.from, range.to, ...ch, orgId, range.from, range.to, ...ch, page.limit, page.offset];
    const rows = rowsOf(await this.knex.raw(sql, bindings));
    // No row to read the window count from (a page past the last, or no member matches): count the members.
    const total = rows.length
      ? int(rows[0]!.total)
      : ((await this.knex.raw(`select count(*)::int as n from memberships m where m.organization_id = ? and m.status = 'accepted' and m.user_id is not null${member}`, [orgId, ...(f.agentId ? [f.agentId] : [])])).rows[0] as { n: number }).n;
    return {
      total,
      rows: rows.map((r) => ({
        userId: String(r.userId),
        name: (r.name as string | null) ?? null,
        assigned: int(r.assigned),
        resolved: int(r.resolved),
        open: int(r.open),
        firstHumanResponses: int(r.firstHumanResponses),
        medianFirstResponse: round(r.medianFirstResponse),
        medianResolution: round(r.medianResolution),
      })),
    };
  }
}
