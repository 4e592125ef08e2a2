/** The file in the data directory that holds the hostname last published to Azure DNS (hostname-watch.ts). */
export const PUBLISHED_FILE = 'published-hostname';
