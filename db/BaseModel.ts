// Base for every model: uuid ids, timestamps kept by the database row, camelCase in code and snake_case in SQL.
import objection from 'objection';

const { Model } = objection;

export class BaseModel extends Model {
  declare id: string;
  declare createdAt: Date;
  declare updatedAt: Date;

  override $beforeUpdate(): void {
    this.updatedAt = new Date();
  }
}

/**
 * Rows owned by one organization. Services reach tenant tables only through `forOrg` (the `Models` type in
 * db/index.ts hides `query()`), so a query that forgets the tenant does not compile and an id from another
 * organization simply is not found. Work done on behalf of no single organization (sweeps, queue workers that load
 * a row by the id in their payload) says so with `acrossOrgs`.
 */
export class TenantModel extends BaseModel {
  declare organizationId: string;

  /**
   * This organization's rows: reads, updates and deletes are filtered by it; an insert gets its `organizationId`
   * from it, and a row naming another organization is refused.
   */
  static forOrg<T extends typeof TenantModel>(this: T, organizationId: string, trx?: objection.TransactionOrKnex): objection.QueryBuilderType<InstanceType<T>> {
    return this.query(trx).context({ organizationId }).where(`${this.tableName}.organization_id`, organizationId) as unknown as objection.QueryBuilderType<InstanceType<T>>;
  }

  /** Rows of every organization, for work that acts for none in particular; each caller says why in a comment. */
  static acrossOrgs<T extends typeof TenantModel>(this: T, trx?: objection.TransactionOrKnex): objection.QueryBuilderType<InstanceType<T>> {
    return this.query(trx) as unknown as objection.QueryBuilderType<InstanceType<T>>;
  }

  override $beforeInsert(context: objection.QueryContext): void {
    const organizationId = (context as { organizationId?: unknown }).organizationId;
    if (typeof organizationId !== 'string') return;
    if (this.organizationId !== undefined && this.organizationId !== organizationId) {
      throw new Error(`A ${this.constructor.name} of organization ${this.organizationId} cannot be inserted for organization ${organizationId}`);
    }
    this.organizationId = organizationId;
  }
}
