import { BaseModel } from '../BaseModel.js';

export type Plan = 'free' | 'pro' | 'enterprise';

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
