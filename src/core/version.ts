/** The agent's version; a test keeps it equal to package.json's. */
export const VERSION = '0.1.0';
export const AGENT = `bootstate/${VERSION}`;
