import { TenantModel } from '../BaseModel.js';

export type UnansweredStatus = 'open' | 'resolved' | 'dismissed';

/** A question the AI could not answer: one row per normalized question, counted once per conversation. */
export class UnansweredQuestion extends TenantModel {
  static override tableName = 'unanswered_questions';

  declare question: string;
  declare normalized: string;
  declare status: UnansweredStatus;
  declare occurrences: number;
  declare answer: string | null;
  declare sourceId: string | null;
  declare lastAskedAt: Date;
}
