import { TenantModel } from '../BaseModel.js';

/** A website visitor of one widget; its id is the `sessionId` of widget_session tokens. */
export class VisitorSession extends TenantModel {
  static override tableName = 'visitor_sessions';

  declare widgetId: string;
  declare name: string | null;
  declare email: string | null;
  declare origin: string | null;
  declare lastSeenAt: Date;
}
