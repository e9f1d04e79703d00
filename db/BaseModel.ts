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
 * Rows owned by one organization. Queries go through `forOrg`, so a query that forgets the tenant cannot be
 * written by accident and an id from another organization simply is not found.
 */
export class TenantModel extends BaseModel {
  declare organizationId: string;

  static forOrg<T extends typeof TenantModel>(this: T, organizationId: string, trx?: objection.TransactionOrKnex): objection.QueryBuilderType<InstanceType<T>> {
    return this.query(trx).where(`${this.tableName}.organization_id`, organizationId) as unknown as objection.QueryBuilderType<InstanceType<T>>;
  }
}
