import type { Pojo } from 'objection';
import { TenantModel } from '../BaseModel.js';

export type ConflictKind = 'field' | 'duplicate';
export type ConflictStatus = 'open' | 'applied' | 'dismissed';

/**
 * What an automatic source (the AI service, a channel) wanted to change but did not, because a person had already
 * recorded another value (`field`), or because two contacts seem to be the same person (`duplicate`).
 */
export class ContactConflict extends TenantModel {
  static override tableName = 'contact_conflicts';

  declare kind: ConflictKind;
  declare contactId: string;
  declare otherContactId: string | null;
  /** `name`, `email`, `phone`, `company` or `attributes.<key>`. */
  declare field: string | null;
  declare currentValue: unknown;
  declare proposedValue: unknown;
  declare status: ConflictStatus;
  declare source: string;
  declare conversationId: string | null;
  declare resolvedBy: string | null;
  declare resolvedAt: Date | null;

  // The values are any JSON, strings included, so they are always written as JSON text (jsonAttributes would pass
  // a bare string through, which PostgreSQL cannot read as jsonb).
  override $formatDatabaseJson(json: Pojo): Pojo {
    const out = super.$formatDatabaseJson(json);
    for (const key of ['current_value', 'proposed_value', 'currentValue', 'proposedValue']) {
      if (key in out) out[key] = out[key] === undefined ? null : JSON.stringify(out[key]);
    }
    return out;
  }
}
