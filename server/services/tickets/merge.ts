// Merging one ticket into another: in one transaction, or not at all.
import type { Ticket } from '../../../db/models/Ticket.js';
import { NotFound, ValidationFailed } from '../../errors.js';
import type { TicketActor, TicketCore } from './core.js';
import { assertMergeable, statusPatch } from './rules.js';

/**
 * The source becomes `merged` (final) with mergedIntoId, tickets merged into it earlier now point at the target,
 * and both timelines record the merge. Inbound mail answering the source's thread is matched to the target through
 * mergedIntoId. Answers the target.
 */
export function mergeTicket(core: TicketCore, actor: TicketActor, sourceId: string, targetId: string): Promise<Ticket> {
  if (sourceId === targetId) return Promise.reject(new ValidationFailed('A ticket cannot be merged into itself', [{ field: 'targetTicketId', message: 'is the ticket itself' }]));
  return core.run(async (trx, fx) => {
    // Both rows locked in one statement, in id order, so two opposite merges cannot deadlock each other.
    const locked = await core.models.Ticket.forOrg(actor.orgId, trx).whereIn('id', [sourceId, targetId]).orderBy('id').forNoKeyUpdate();
    const source = locked.find((t) => t.id === sourceId);
    const target = locked.find((t) => t.id === targetId);
    if (!source) throw new NotFound('Ticket');
    if (!target) throw new NotFound('Target ticket');
    assertMergeable(source, 'source');
    assertMergeable(target, 'target');

    const merged = await core.models.Ticket.forOrg(actor.orgId, trx).patchAndFetchById(source.id, { ...statusPatch('merged', new Date()), mergedIntoId: target.id });
    await core.models.Ticket.forOrg(actor.orgId, trx).where('mergedIntoId', source.id).patch({ mergedIntoId: target.id });
    await core.addEvent(trx, merged, actor, 'merged', { data: { direction: 'into', ticketId: target.id, number: target.number, from: source.status } });
    await core.addEvent(trx, target, actor, 'merged', { data: { direction: 'from', ticketId: source.id, number: source.number } });
    const updatedTarget = await core.models.Ticket.forOrg(actor.orgId, trx).patchAndFetchById(target.id, { updatedAt: new Date() });
    fx.announce('merged', merged);
    fx.announce('merged', updatedTarget);
    return updatedTarget;
  });
}
