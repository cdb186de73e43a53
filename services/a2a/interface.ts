/** Where the A2A binding is served and the OAuth scope it takes: what the agent card advertises and the binding enforces. */
export const A2A_BASE_PATH = '/a2a';

/** The scope an OAuth access token needs on the binding's task operations. */
export const A2A_OAUTH_SCOPE = 'a2a';
