// CRM data for the `crm` scenario: one organization's contacts and tickets written straight in SQL inside the app
// server process (one multi-row INSERT per batch of 5,000 rows, handed over as one JSON parameter and unpacked with
// jsonb_to_recordset: the same on PostgreSQL and PGlite). 100,000 contacts through the HTTP API would only measure the setup.
import type { AppServer } from '../../../server/server.js';

export interface CrmSeedRequest {
  orgId: string;
  /** The organization's agents; tickets are spread over them (and a share left unassigned). */
  agentIds: string[];
  contacts: number;
  tickets: number;
}

export interface CrmSeedResult {
  contacts: number;
  tickets: number;
  /** Literal text in a few contacts (company) and in a few tickets (title). */
  rareText: string;
  rareContacts: number;
  rareTickets: number;
  /** A tag about one contact in twelve carries. */
  tag: string;
  seconds: number;
}

const BATCH = 5_000;
/** Rows that carry RARE: a handful, whatever the size. */
const RARE_EVERY = (total: number) => Math.max(1, Math.floor(total / 6));
const RARE = 'Quillfeather';

const FIRST = ['Anna', 'Ben', 'Carla', 'David', 'Elif', 'Farid', 'Greta', 'Hugo', 'Ines', 'Jonas', 'Keiko', 'Lena', 'Mateo', 'Nora', 'Omar', 'Paula', 'Quentin', 'Rosa', 'Samir', 'Tara', 'Umut', 'Vera', 'Wei', 'Ximena', 'Yusuf', 'Zoe', 'Amara', 'Bruno', 'Chloé', 'Dmitri', 'Esra', 'Finn'];
const LAST = ['Müller', 'Schmidt', 'Garcia', 'Smith', 'Kowalski', 'Nguyen', 'Rossi', 'Yilmaz', 'Dubois', 'Silva', 'Tanaka', 'Johansson', 'Novak', 'Kim', 'Okafor', 'Hansen', 'Moreau', 'Fischer', 'Lopez', 'Brown', 'Weber', 'Ivanova', 'Costa', 'Jensen'];
const COMPANIES = ['Acme GmbH', 'Globex', 'Initech', 'Umbrella Retail', 'Stark Logistics', 'Wayne Foods', 'Hooli', 'Vandelay Import', 'Soylent AG', 'Tyrell Systems', 'Cyberdyne', 'Wonka Sweets', 'Oscorp', 'Massive Dynamic', 'Nakatomi Trading', 'Bluth Homes', 'Pied Piper', 'Dunder Paper', 'Sterling & Cooper', 'Aperture Labs'];
const DOMAINS = ['example.com', 'mail.test', 'kunde.example.de', 'shop.example.org', 'inbox.example.net'];
const TAGS = ['vip', 'trial', 'churn-risk', 'newsletter', 'partner', 'b2b', 'beta', 'enterprise', 'reseller', 'support-plan'];
// E.164 prefixes (country + mobile range); the rest of the number is the contact's index, so phones are unique.
const PHONE_PREFIXES = ['+49151', '+44770', '+1415', '+33612', '+3934', '+4670'];
const SUBJECTS = ['Cannot log in', 'Refund for order', 'Invoice address wrong', 'Delivery is late', 'Password reset mail missing', 'Upgrade our plan', 'Export to CSV fails', 'Widget not loading', 'Change the billing email', 'Damaged item received', 'API rate limit question', 'Cancel subscription'];
const BODIES = ['The customer writes that the problem started yesterday after the update.', 'Second message about this; please call back in the afternoon.', 'Attached screenshot shows the error page.', 'Order number is in the subject of the original mail.', null];
const STATUSES = ['open', 'open', 'open', 'in_progress', 'pending', 'resolved', 'resolved', 'closed', 'closed', 'closed'];
const PRIORITIES = ['low', 'medium', 'medium', 'medium', 'high', 'urgent'];
const SOURCES = ['email', 'email', 'widget', 'agent', 'whatsapp', 'telegram'];

const pick = <T>(list: readonly T[], n: number): T => list[n % list.length]!;
/** A cheap deterministic scramble, so neighbouring rows do not share every field. */
const mix = (i: number, salt: number) => Math.imul(i + 1, 2654435761 + salt * 40503) >>> 7;

/** Inserts `total` rows made by `make(i)` in batches; `columns` names each column with its SQL type. */
async function insertBatches(server: AppServer, table: string, total: number, columns: Record<string, string>, make: (i: number) => Record<string, unknown>): Promise<string[]> {
  const names = Object.keys(columns);
  const sql = `insert into ${table} (${names.join(', ')}) select ${names.join(', ')} from jsonb_to_recordset(?::jsonb) as x(${names.map((n) => `${n} ${columns[n]}`).join(', ')}) returning id`;
  const ids: string[] = [];
  for (let start = 0; start < total; start += BATCH) {
    const rows = Array.from({ length: Math.min(total, start + BATCH) - start }, (_, k) => make(start + k));
    const result = await server.db.knex.raw(sql, [JSON.stringify(rows)]);
    ids.push(...(result.rows as { id: string }[]).map((r) => r.id));
  }
  return ids;
}

export async function seedCrm(server: AppServer, req: CrmSeedRequest): Promise<CrmSeedResult> {
  const started = performance.now();
  const { knex } = server.db;
  const now = Date.now();
  const day = 86_400_000;
  const rareContact = RARE_EVERY(req.contacts);
  const rareTicket = RARE_EVERY(req.tickets);
  let rareContacts = 0;
  let rareTickets = 0;

  const contactIds = await insertBatches(
    server,
    'contacts',
    req.contacts,
    { organization_id: 'uuid', name: 'text', email: 'text', phone: 'text', company: 'text', tags: 'jsonb', created_at: 'timestamptz', updated_at: 'timestamptz', last_activity_at: 'timestamptz' },
    (i) => {
      const h = mix(i, 1);
      const first = pick(FIRST, h);
      const last = pick(LAST, h >>> 5);
      const rare = i % rareContact === rareContact - 1;
      if (rare) rareContacts++;
      // Two years of sign-ups, oldest first; activity within the last 90 days for two in three.
      const created = now - Math.floor(((req.contacts - i) / req.contacts) * 730 * day) - (h % 3_600_000);
      return {
        organization_id: req.orgId,
        name: h % 29 === 0 ? null : `${first} ${last}`,
        // Emails are unique per organization (the index suffix), phones too; some contacts have only one of them.
        email: h % 11 === 0 ? null : `${first}.${last}.${i}@${pick(DOMAINS, h >>> 9)}`.toLowerCase().normalize('NFD').replace(/[\u0300-\u036f]/g, ''),
        phone: h % 3 === 0 ? null : `${pick(PHONE_PREFIXES, h >>> 12)}${String(i).padStart(7, '0')}`,
        company: rare ? `${RARE} Studio ${i}` : h % 4 === 0 ? null : pick(COMPANIES, h >>> 14),
        tags: TAGS.filter((_, t) => mix(i, 10 + t) % 12 === 0),
        created_at: new Date(created).toISOString(),
        updated_at: new Date(created + (h % 30) * day).toISOString(),
        last_activity_at: h % 3 === 1 ? null : new Date(now - (h % 90) * day).toISOString(),
      };
    },
  );

  await insertBatches(
    server,
    'tickets',
    req.tickets,
    { organization_id: 'uuid', number: 'integer', title: 'text', description: 'text', status: 'text', priority: 'text', source: 'text', contact_id: 'uuid', assigned_to: 'uuid', created_at: 'timestamptz', updated_at: 'timestamptz' },
    (i) => {
      const h = mix(i, 2);
      const rare = i % rareTicket === rareTicket - 1;
      if (rare) rareTickets++;
      const subject = pick(SUBJECTS, h);
      const created = now - Math.floor(((req.tickets - i) / req.tickets) * 365 * day);
      return {
        organization_id: req.orgId,
        number: i + 1,
        title: rare ? `${subject} (${RARE} Studio)` : `${subject} #${1000 + (h % 9000)}`,
        description: pick(BODIES, h >>> 6),
        status: pick(STATUSES, h >>> 3),
        priority: pick(PRIORITIES, h >>> 8),
        source: pick(SOURCES, h >>> 11),
        contact_id: h % 10 === 0 || contactIds.length === 0 ? null : contactIds[h % contactIds.length]!,
        // One in five unassigned, the rest spread over the agents.
        assigned_to: h % 5 === 0 ? null : pick(req.agentIds, h >>> 13),
        created_at: new Date(created).toISOString(),
        updated_at: new Date(created + (h % 10) * day).toISOString(),
      };
    },
  );
  // The next ticket created through the API continues the numbering.
  await knex.raw('insert into ticket_counters (organization_id, last_number) values (?, ?) on conflict (organization_id) do update set last_number = excluded.last_number', [req.orgId, req.tickets]);
  // Fresh statistics and visibility map, as autovacuum would leave them on a live database.
  await knex.raw('vacuum analyze contacts');
  await knex.raw('vacuum analyze tickets');

  return { contacts: contactIds.length, tickets: req.tickets, rareText: RARE.toLowerCase(), rareContacts, rareTickets, tag: 'vip', seconds: (performance.now() - started) / 1000 };
}
