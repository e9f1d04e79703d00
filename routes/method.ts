// The HTTP methods routes are declared with: a leaf, so the API key scopes can name them without the registry.
export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
