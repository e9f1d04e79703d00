import { TenantModel } from '../BaseModel.js';

/** One run of the AI agent inside a conversation, as the AI service reported it. */
export class AgentRun extends TenantModel {
  static override tableName = 'agent_runs';
  static override jsonAttributes = ['steps'];

  declare conversationId: string;
  declare status: string;
  declare modelId: string | null;
  declare input: string | null;
  declare output: string | null;
  declare steps: unknown[];
  declare latencyMs: number | null;
  declare totalTokens: number | null;
  declare error: string | null;

  override $beforeUpdate(): void {}
}
