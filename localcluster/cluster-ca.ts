/**
 * The cluster certificate authority: `harvest security init` makes one, `harvest security issue` signs certificates
 * with it. Every certificate names its holder and role in its subject (`CN=<name>, OU=<role>, O=harvest`); a daemon's
 * also lists the host names and IPs it serves on, which peers check as TLS clients do. Keys are ECDSA P-256, made by
 * the platform's WebCrypto; the X.509 encoding is @peculiar/x509's (no hand-rolled ASN.1).
 */
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { randomBytes, webcrypto, X509Certificate } from "node:crypto";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { isIP } from "node:net";
import { join, resolve } from "node:path";
import { writeFileAtomic } from "../common/atomic-file.js";
import { HarvestError } from "../common/errors.js";
import { IDENTITY_ROLES, isValidHost, isValidIdentityName, RESERVED_IDENTITY_NAMES } from "../common/tls.js";
import type { IdentityRole, TlsFiles } from "../common/tls.js";

x509.cryptoProvider.set(webcrypto);

const ALGORITHM = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const DAY_MS = 86_400_000;

/** The files of a cluster CA. */
export interface CaFiles {
  /** The CA certificate (share it with every daemon and user). */
  cert: string;
  /** The CA's private key (keep it on the machine that issues certificates, mode 0600). */
  key: string;
}

/** The CA files in `dir`. */
export function caFiles(dir: string): CaFiles {
  return { cert: join(resolve(dir), "ca.pem"), key: join(resolve(dir), "ca-key.pem") };
}

function serial(): string {
  // A positive 128-bit serial (the top bit clear keeps its DER INTEGER positive).
  const b = randomBytes(16);
  b[0] = b[0]! & 0x7f;
  return b.toString("hex");
}

async function pkcs8Pem(key: webcrypto.CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey("pkcs8", key);
  return x509.PemConverter.encode(der, "PRIVATE KEY");
}

/** Creates a CA in `dir` (ca.pem, ca-key.pem); fails with CA_EXISTS rather than replace one. */
export async function createCa(dir: string, opts: { name?: string; days?: number } = {}): Promise<CaFiles> {
  const files = caFiles(dir);
  if (existsSync(files.cert) || existsSync(files.key))
    throw new HarvestError(
      "CA_EXISTS",
      `${dir} already holds a CA (${files.cert}); every certificate it issued depends on it, so it is never replaced`,
    );
  mkdirSync(resolve(dir), { recursive: true, mode: 0o700 });
  const keys = (await webcrypto.subtle.generateKey(ALGORITHM, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${opts.name ?? "Harvest cluster CA"}, O=harvest`,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + (opts.days ?? 3650) * DAY_MS),
    keys,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  writeFileAtomic(files.key, await pkcs8Pem(keys.privateKey), 0o600);
  writeFileAtomic(files.cert, cert.toString("pem") + "\n", 0o644);
  return files;
}

/** What to put in a certificate. */
export interface IssueRequest {
  /** The holder: a daemon's name (its node id, or "resourcemanager") or a user's name. */
  name: string;
  role: IdentityRole;
  /** Host names and IPs a daemon serves on (its advertised host, and any other name peers use). */
  hosts?: string[];
  /** Validity, in days from `validFromMs`. @default 365 */
  days?: number;
  /** Start of validity (ms since the epoch), e.g. back-dated for clocks that lag. @default a minute ago */
  validFromMs?: number;
}

/** A certificate and its key, as PEM files. */
export interface IssuedFiles {
  cert: string;
  key: string;
}

/**
 * Issues a certificate signed by the CA in `caDir` into `<outDir>/<name>.pem` and `<name>-key.pem` (mode 0600).
 * Daemons must name at least one host; users and admins may name none. The names that carry power in the
 * coordination service (RESERVED_IDENTITY_NAMES) go to daemons only.
 */
export async function issueCertificate(caDir: string, outDir: string, req: IssueRequest): Promise<IssuedFiles> {
  if (RESERVED_IDENTITY_NAMES.includes(req.name) && req.role !== "daemon")
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `the name ${req.name} is reserved for daemons: it carries power in the coordination service (etcd takes a ` +
        `certificate's name as its user; ${RESERVED_IDENTITY_NAMES.join(", ")} are its superuser, the masters and its ` +
        `members), so the CA never issues it to a ${req.role}`,
      { details: { field: "name" } },
    );
  return issue(caDir, outDir, req);
}

/** {@link issueCertificate} without the reserved names' check (for the CA holder's own admin certificate). */
async function issue(caDir: string, outDir: string, req: IssueRequest): Promise<IssuedFiles> {
  if (!isValidIdentityName(req.name))
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `bad name ${JSON.stringify(req.name)}: 1-64 characters of [A-Za-z0-9_.@-]`,
    );
  if (!IDENTITY_ROLES.includes(req.role))
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `bad role ${JSON.stringify(req.role)}: one of ${IDENTITY_ROLES.join(", ")}`,
    );
  const hosts = req.hosts ?? [];
  for (const h of hosts)
    if (!isValidHost(h))
      throw new HarvestError("INVALID_ARGUMENT", `bad host ${JSON.stringify(h)}: a DNS name or an IP`);
  if (req.role === "daemon" && hosts.length === 0)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      "a daemon certificate needs the host names or IPs it serves on (--host), which its peers check",
    );
  const files = caFiles(caDir);
  if (!existsSync(files.cert) || !existsSync(files.key))
    throw new HarvestError("CA_NOT_FOUND", `no CA in ${caDir}: create one with 'harvest security init --dir ${caDir}'`);
  const caCert = new x509.X509Certificate(readFileSync(files.cert, "utf8"));
  const caKey = await webcrypto.subtle.importKey(
    "pkcs8",
    x509.PemConverter.decodeFirst(readFileSync(files.key, "utf8")),
    ALGORITHM,
    false,
    ["sign"],
  );
  const keys = (await webcrypto.subtle.generateKey(ALGORITHM, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
  const from = req.validFromMs ?? Date.now() - 60_000;
  const usages =
    req.role === "daemon"
      ? [x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]
      : [x509.ExtendedKeyUsage.clientAuth];
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyAgreement, true),
    new x509.ExtendedKeyUsageExtension(usages),
    await x509.AuthorityKeyIdentifierExtension.create(caCert),
  ];
  if (hosts.length)
    extensions.push(
      new x509.SubjectAlternativeNameExtension(
        hosts.map((h) => (isIP(h) ? { type: "ip" as const, value: h } : { type: "dns" as const, value: h })),
      ),
    );
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${req.name}, OU=${req.role}, O=harvest`,
    issuer: caCert.subject,
    notBefore: new Date(from),
    notAfter: new Date(from + (req.days ?? 365) * DAY_MS),
    publicKey: keys.publicKey,
    signingKey: caKey,
    signingAlgorithm: ALGORITHM,
    extensions,
  });
  mkdirSync(resolve(outDir), { recursive: true });
  const out = { cert: join(resolve(outDir), `${req.name}.pem`), key: join(resolve(outDir), `${req.name}-key.pem`) };
  writeFileAtomic(out.key, await pkcs8Pem(keys.privateKey), 0o600);
  writeFileAtomic(out.cert, cert.toString("pem") + "\n", 0o644);
  // Checked with the platform's own X.509 code, which the TLS stack uses: it must chain to the CA.
  if (!new X509Certificate(readFileSync(out.cert)).verify(new X509Certificate(readFileSync(files.cert)).publicKey))
    throw new HarvestError("INTERNAL", `the certificate issued for ${req.name} does not verify against the CA`);
  return out;
}

/** What a cluster's daemons and its admin present: their certificate, key and the CA's certificate. */
export interface ClusterCertificates {
  /** By daemon name. */
  daemons: Record<string, TlsFiles>;
  admin: TlsFiles;
}

/**
 * A whole cluster's certificates, as `harvest cluster up` and the multi-host lab make them: the CA in `caDir` (made
 * when there is none; one already there is kept, so that what it issued stays valid), a `daemon` certificate per entry
 * of `daemons` (name to the hosts it serves on) beside it, and an `admin` certificate for `admin` in `<caDir>/users`.
 * A new `caDir` gets `dirMode`: searchable, so that containers read the CA's certificate (every key is 0600).
 */
export async function issueClusterCertificates(
  caDir: string,
  opts: { caName: string; daemons: Record<string, string[]>; admin: string; dirMode: number },
): Promise<ClusterCertificates> {
  mkdirSync(resolve(caDir), { recursive: true, mode: opts.dirMode });
  const ca = caFiles(caDir);
  if (!existsSync(ca.cert)) await createCa(caDir, { name: opts.caName });
  const daemons: Record<string, TlsFiles> = {};
  await Promise.all(
    Object.entries(opts.daemons).map(async ([name, hosts]) => {
      daemons[name] = { ca: ca.cert, ...(await issueCertificate(caDir, caDir, { name, role: "daemon", hosts })) };
    }),
  );
  // The local admin is whoever holds the CA's key beside it: when root starts a cluster its certificate is named
  // root (a reserved name: etcd's superuser), a power it has anyway, since it can issue itself any certificate.
  const admin = await issue(caDir, join(caDir, "users"), { name: opts.admin, role: "admin" });
  return { daemons, admin: { ca: ca.cert, ...admin } };
}
