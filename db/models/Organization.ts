import { BaseModel } from '../BaseModel.js';

/** A plan named in the configuration: built in (free, pro, enterprise, unlimited) or from PLANS_FILE. */
export type Plan = string;

export class Organization extends BaseModel {
  static override tableName = 'organizations';
  static override jsonAttributes = ['settings'];

  declare name: string;
  declare slug: string;
  declare domain: string | null;
  declare logoUrl: string | null;
  declare plan: Plan;
  declare settings: Record<string, unknown>;
}
