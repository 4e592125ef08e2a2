/**
 * The classic wireserver protocol as the fake fabric serves it to WALinuxAgent and cloud-init's Azure datasource:
 * the version list, the goal state and the documents it links to (hosting environment, shared config, extensions
 * config, optionally the certificates), and the XML health report those agents POST back. bootstate reads only the
 * goal state and its Certificates (docs/certificates.md); the rest is served so a real peer can run beside bootstate
 * on one booted image.
 *
 * The documents carry only what the peers read (docs/protocol.md#classic-wireserver-protocol): identifiers that stay
 * the same for the life of the fabric, and URLs under the wireserver's own base so they work on loopback and on
 * 168.63.129.16 alike.
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser';

/** The wire protocol version the peers ask for; `?comp=versions` names it preferred. */
export const WIRE_PROTOCOL_VERSION = '2012-11-30';
export const CONTAINER_ID = '4f8e1c2a-7b3d-4e59-a6c0-91d2e3f4a5b6';
export const ROLE_INSTANCE_ID = '4f8e1c2a7b3d4e59a6c091d2e3f4a5b6.fabric-vm';
const DEPLOYMENT = '4f8e1c2a7b3d4e59a6c091d2e3f4a5b6';
const ROLE_CONFIG = `${DEPLOYMENT}.0.${DEPLOYMENT}.0.fabric-vm.1.xml`;

/** The configuration documents a goal state links to, by their `type` query parameter. */
export type ConfigDocument = 'hostingEnvironmentConfig' | 'sharedConfig' | 'extensionsConfig' | 'certificates';

export interface GoalStateOptions {
  /** The wireserver's base URL without a trailing slash, e.g. `http://168.63.129.16:80`. */
  base: string;
  incarnation: number;
  /** Link a Certificates document (only when the fabric has one to serve). */
  certificates: boolean;
  /** Where the extension handler uploads its status (through the host plugin's `/status`). */
  statusBlobUrl: string;
}

/** `GET /?comp=versions`. */
export function versionsDocument(): string {
  return `<?xml version="1.0" encoding="utf-8"?>
<Versions>
  <Preferred><Version>${WIRE_PROTOCOL_VERSION}</Version></Preferred>
  <Supported><Version>${WIRE_PROTOCOL_VERSION}</Version><Version>2010-12-15</Version></Supported>
</Versions>
`;
}

/** The URL of one configuration document of incarnation `incarnation`. */
export function configUrl(base: string, type: ConfigDocument, incarnation: number): string {
  return `${base}/machine/${CONTAINER_ID}/${encodeURIComponent(ROLE_INSTANCE_ID)}?comp=config&type=${type}&incarnation=${incarnation}`;
}

/** `GET /machine/?comp=goalstate`. */
export function goalStateDocument(options: GoalStateOptions): string {
  const { base, incarnation } = options;
  const link = (type: ConfigDocument) => xmlEscape(configUrl(base, type, incarnation));
  const certificates = options.certificates ? `\n          <Certificates>${link('certificates')}</Certificates>` : '';
  return `<?xml version="1.0" encoding="utf-8"?>
<GoalState xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="goalstate10.xsd">
  <Version>2010-12-15</Version>
  <Incarnation>${incarnation}</Incarnation>
  <Machine><ExpectedState>Started</ExpectedState><StopRolesDeadlineHint>300000</StopRolesDeadlineHint></Machine>
  <Container>
    <ContainerId>${CONTAINER_ID}</ContainerId>
    <RoleInstanceList>
      <RoleInstance>
        <InstanceId>${ROLE_INSTANCE_ID}</InstanceId>
        <State>Started</State>
        <Configuration>
          <HostingEnvironmentConfig>${link('hostingEnvironmentConfig')}</HostingEnvironmentConfig>
          <SharedConfig>${link('sharedConfig')}</SharedConfig>${certificates}
          <ExtensionsConfig>${link('extensionsConfig')}</ExtensionsConfig>
          <ConfigName>${ROLE_CONFIG}</ConfigName>
        </Configuration>
      </RoleInstance>
    </RoleInstanceList>
  </Container>
</GoalState>
`;
}

/** The hosting environment: WALinuxAgent reads the VM, role and deployment names from it. */
export function hostingEnvironmentDocument(incarnation: number, vmName: string): string {
  return `<HostingEnvironmentConfig version="1.0.0.0" goalStateIncarnation="${incarnation}">
  <Deployment name="${DEPLOYMENT}" guid="{${CONTAINER_ID}}" incarnation="0">
    <Service name="fabric-vm-service" guid="{00000000-0000-0000-0000-000000000000}" />
    <ServiceInstance name="${DEPLOYMENT}.0" guid="{${CONTAINER_ID}}" />
  </Deployment>
  <Incarnation number="${incarnation}" instance="${xmlEscape(vmName)}" guid="{${CONTAINER_ID}}" />
  <Role guid="{${CONTAINER_ID}}" name="${xmlEscape(vmName)}" settleTimeSeconds="0" />
</HostingEnvironmentConfig>
`;
}

/** The shared configuration: kept whole by the peers, nothing in it is read for provisioning. */
export function sharedConfigDocument(incarnation: number, vmName: string): string {
  return `<SharedConfig version="1.0.0.0" goalStateIncarnation="${incarnation}">
  <Deployment name="${DEPLOYMENT}" guid="{${CONTAINER_ID}}" incarnation="0" />
  <Incarnation number="${incarnation}" instance="${xmlEscape(vmName)}" guid="{${CONTAINER_ID}}" />
  <Role guid="{${CONTAINER_ID}}" name="${xmlEscape(vmName)}" settleTimeSeconds="0" />
  <Instances><Instance id="${xmlEscape(vmName)}" address="10.0.0.4" /></Instances>
</SharedConfig>
`;
}

/** The extensions configuration of a VM with no extensions and no agent families: only where status goes. */
export function extensionsConfigDocument(incarnation: number, statusBlobUrl: string): string {
  return `<Extensions version="1.0.0.0" goalStateIncarnation="${incarnation}">
  <GuestAgentExtension xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><GAFamilies></GAFamilies></GuestAgentExtension>
  <Plugins></Plugins>
  <PluginSettings></PluginSettings>
  <StatusUploadBlob statusBlobType="BlockBlob">${xmlEscape(statusBlobUrl)}</StatusUploadBlob>
</Extensions>
`;
}

/** Which configuration document a `GET /machine/<container>/<instance>?comp=config&type=…` asks for, or null. */
export function configDocumentOf(url: string): ConfigDocument | null {
  const query = new URLSearchParams(url.split('?')[1] ?? '');
  if (query.get('comp') !== 'config') return null;
  const type = query.get('type');
  const known: ConfigDocument[] = ['hostingEnvironmentConfig', 'sharedConfig', 'extensionsConfig', 'certificates'];
  return known.find((k) => k === type) ?? null;
}

/** One `POST /machine?comp=health` body, decoded. */
export interface WireHealthReport {
  incarnation: string;
  containerId: string;
  instanceId: string;
  state: 'Ready' | 'NotReady';
  subStatus?: string;
  description?: string;
}

/**
 * Decodes the XML health report the classic agents send.
 *
 * @throws Error naming what is missing or malformed; the fabric answers such a report 400.
 */
export function parseWireHealthReport(xml: string): WireHealthReport {
  const valid = XMLValidator.validate(xml);
  if (valid !== true) throw new Error(`health report is not well-formed XML: ${valid.err.msg} (line ${valid.err.line})`);
  const parser = new XMLParser({ ignoreAttributes: true, parseTagValue: false, trimValues: false, processEntities: true });
  const doc = parser.parse(xml) as Record<string, any>;
  const root = doc.Health;
  if (!root || typeof root !== 'object') throw new Error('health report has no <Health> root');
  const role = root.Container?.RoleInstanceList?.Role;
  if (!role || typeof role !== 'object' || Array.isArray(role)) throw new Error('health report names no single <Role>');
  const text = (value: unknown, what: string): string => {
    if (value === undefined) throw new Error(`health report has no <${what}>`);
    if (typeof value === 'object' && value !== null && Object.keys(value).length === 0) return '';
    if (typeof value !== 'string') throw new Error(`health report's <${what}> is not text`);
    return value;
  };
  const state = text(role.Health?.State, 'State').trim();
  if (state !== 'Ready' && state !== 'NotReady') throw new Error(`health report state ${JSON.stringify(state)} is neither Ready nor NotReady`);
  const report: WireHealthReport = {
    incarnation: text(root.GoalStateIncarnation, 'GoalStateIncarnation').trim(),
    containerId: text(root.Container.ContainerId, 'ContainerId').trim(),
    instanceId: text(role.InstanceId, 'InstanceId').trim(),
    state,
  };
  const details = role.Health?.Details;
  if (details !== undefined && details !== '') {
    report.subStatus = text(details.SubStatus, 'SubStatus');
    if (details.Description !== undefined) report.description = text(details.Description, 'Description');
  }
  return report;
}

function xmlEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}
