// Conversations: the agents' inbox (service.ts) and what follows a new conversation (arrivals.ts).
export { ConversationService, type ConversationFilters, type ContactInput } from './service.js';
export { listenForArrivals, welcomeConversation } from './arrivals.js';
