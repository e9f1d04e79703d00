// Knowledge: sources, indexing, search, unanswered questions and agent assist.
export { AssistService, type LocalAssist } from './assist.js';
export { KnowledgeIndexer, KNOWLEDGE_QUEUE } from './indexer.js';
export { KnowledgeService } from './service.js';
export { UnansweredQuestions } from './unanswered.js';
