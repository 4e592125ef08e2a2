/**
 * The fake fabric's routes of the classic wireserver protocol (the documents are goal-state.ts's): which route a
 * request is for, and what the route answers when nothing is scripted for it.
 */
import type { OkAnswer, RecordedRequest, RouteName } from './behaviours.js';
import * as classic from './goal-state.js';

/** What the classic answers depend on: where the wireserver is, and the fabric's present state. */
export interface ClassicContext {
  /** The wireserver's base URL without a trailing slash. */
  base: string;
  incarnation: number;
  /** The VM's name (the IMDS document's `compute.name`). */
  vmName: string;
  certificates?: (request: RecordedRequest) => string;
}

/** Names a classic wireserver route (told apart by the `comp` query parameter), or null. */
export function classicRouteOf(method: string, path: string, comp: string | null, url: string): RouteName | null {
  if (method === 'GET' && path === '/' && comp === 'versions') return 'versions';
  if (method === 'GET' && (path === '/machine' || path === '/machine/') && comp === 'goalstate') return 'goalState';
  if (method === 'GET' && path.startsWith('/machine/') && comp === 'config') return classic.configDocumentOf(url);
  if (method === 'POST' && (path === '/machine' || path === '/machine/')) {
    if (comp === 'health') return 'wireHealth';
    if (comp === 'telemetrydata') return 'telemetry';
    if (comp === 'roleProperties') return 'roleProperties';
  }
  return null;
}

/** The classic route's answer when nothing is wrong; null for the other routes. */
export function classicOkAnswer(route: RouteName, request: RecordedRequest, context: ClassicContext): OkAnswer | null {
  const { base, incarnation, vmName } = context;
  const xml = (text: string): OkAnswer => ({ status: 200, headers: { 'content-type': 'text/xml; charset=utf-8' }, body: Buffer.from(text) });
  const statusBlobUrl = `${base}/status-blob/${classic.CONTAINER_ID}.status`;
  switch (route) {
    case 'versions':
      return xml(classic.versionsDocument());
    case 'goalState':
      return xml(classic.goalStateDocument({ base, incarnation, certificates: context.certificates !== undefined, statusBlobUrl }));
    case 'hostingEnvironmentConfig':
      return xml(classic.hostingEnvironmentDocument(incarnation, vmName));
    case 'sharedConfig':
      return xml(classic.sharedConfigDocument(incarnation, vmName));
    case 'extensionsConfig':
      return xml(classic.extensionsConfigDocument(incarnation, statusBlobUrl));
    case 'certificates':
      return context.certificates ? xml(context.certificates(request)) : { status: 404, headers: {}, body: Buffer.from('no certificates') };
    case 'wireHealth':
      try {
        classic.parseWireHealthReport(request.body);
        return { status: 200, headers: {}, body: Buffer.alloc(0) };
      } catch (error) {
        return { status: 400, headers: {}, body: Buffer.from((error as Error).message) };
      }
    // A host plugin without FastTrack: the agents fall back to the wireserver's ExtensionsConfig.
    case 'hostPluginVmSettings':
      return { status: 404, headers: {}, body: Buffer.from('vmSettings not supported') };
    default:
      return null;
  }
}
