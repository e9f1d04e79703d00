export { ApiKeyService, API_KEY_PREFIX, type CreateApiKeyInput } from './service.js';
export { ALL_SCOPES, SCOPE_AREAS, describeScope, hasScope, keyAllows, requiredScope, type Scope, type ScopeArea } from './scopes.js';
