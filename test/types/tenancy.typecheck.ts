// Compiled by `npm run typecheck`, never run: each `@ts-expect-error` fails the typecheck if the line it marks
// starts compiling, so a tenant table reachable without its organization is a build error, not a review comment.
import type { Database } from '../../db/index.js';

export async function unscopedTenantQueriesDoNotCompile(db: Database, orgId: string): Promise<void> {
  // @ts-expect-error a conversation cannot be read without naming its organization
  await db.models.Conversation.query().findById('00000000-0000-0000-0000-000000000000');
  // @ts-expect-error nor updated
  await db.models.Message.query().patch({ content: 'x' });
  // @ts-expect-error nor deleted
  await db.models.Contact.query().delete();
  // @ts-expect-error related queries would escape the organization the same way
  db.models.Ticket.relatedQuery('events');

  // What compiles: the organization's rows, and work across organizations that says so.
  await db.models.Conversation.forOrg(orgId).findById('00000000-0000-0000-0000-000000000000');
  await db.models.StorageObject.acrossOrgs().where('status', 'pending').limit(1);
  // Tables that belong to no organization keep their plain query.
  await db.models.User.query().findById('00000000-0000-0000-0000-000000000000');
}
