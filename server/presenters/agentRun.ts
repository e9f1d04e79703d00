// A recorded run of the AI agent, as agents and the AI service read it back.
import type { AgentRun } from '../../db/models/AgentRun.js';
import { iso } from './time.js';

export function presentAgentRun(r: AgentRun) {
  return {
    id: r.id,
    conversationId: r.conversationId,
    status: r.status,
    modelId: r.modelId ?? null,
    input: r.input ?? null,
    output: r.output ?? null,
    steps: r.steps ?? [],
    latencyMs: r.latencyMs ?? null,
    totalTokens: r.totalTokens ?? null,
    error: r.error ?? null,
    createdAt: iso(r.createdAt),
  };
}
