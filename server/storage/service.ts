// Stored files: presigned uploads checked twice (at presign and at completion), downloads, listing, deletion, the
// signed local URLs and the sweep of abandoned uploads.
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Knex } from 'knex';
import type { Models } from '../../db/index.js';
import type { Role } from '../../db/models/Membership.js';
import type { StorageObject, StoragePurpose } from '../../db/models/StorageObject.js';
import { Conflict, Forbidden, NotFound, PayloadTooLarge, PlanLimitReached, UnsupportedMediaType, ValidationFailed } from '../errors.js';
import { assertFileDeletable } from '../policies/file.js';
import type { OrganizationService } from '../services/organizations.js';
import type { StorageDriver, StoredRef } from './driver.js';
import { LocalDriver } from './local.js';
import { baseType, contentMatches, PURPOSE_RULES, safeFileName } from './rules.js';

/** Who stores a file: an operator of the organization, or a widget visitor (attachments only). */
export type Uploader = { kind: 'operator'; orgId: string; userId: string; role: Role } | { kind: 'visitor'; orgId: string; sessionId: string };

export interface PresignInput {
  fileName: string;
  mimeType: string;
  sizeBytes: number;
  purpose: StoragePurpose;
  expiresIn?: number;
}

export interface Presigned {
  object: StorageObject;
  upload: { url: string; method: 'PUT'; headers: Record<string, string> };
  expiresAt: Date;
}

const MiB = 1024 * 1024;
/** Uploads never confirmed are removed after this long. */
export const PENDING_TTL_HOURS = 24;
const DEFAULT_EXPIRES_IN = 900;

export const refOf = (o: StorageObject): StoredRef => ({ id: o.id, key: o.key, mimeType: o.mimeType, fileName: o.fileName, sizeBytes: o.sizeBytes });

export class StorageService {
  constructor(
    private readonly deps: {
      models: Models;
      knex: Knex;
      driver: StorageDriver;
      organizations: OrganizationService;
      /** Tables other than message_attachments whose rows keep an object alive (knowledge sources). */
      referencedBy?: (trx: Knex, objectId: string) => Promise<boolean>;
    },
  ) {}

  get driver(): StorageDriver {
    return this.deps.driver;
  }

  /** Checks type, size and the plan's storage, writes a pending object and signs its upload. */
  async presignUpload(uploader: Uploader, input: PresignInput, trx?: Knex.Transaction): Promise<Presigned> {
    const rule = PURPOSE_RULES[input.purpose];
    const mimeType = baseType(input.mimeType);
    if (!rule.types.includes(mimeType)) throw new ValidationFailed(`${mimeType} is not allowed for ${input.purpose} files`, [{ field: 'mimeType', message: `must be one of ${rule.types.join(', ')}` }]);
    if (input.sizeBytes < 1 || input.sizeBytes > rule.maxBytes) {
      throw new ValidationFailed(`A ${input.purpose} file is at most ${rule.maxBytes / MiB} MiB`, [{ field: 'sizeBytes', message: `must be 1..${rule.maxBytes}` }]);
    }
    const write = async (t: Knex.Transaction) => {
      await this.requireSpace(uploader.orgId, input.sizeBytes, t);
      const id = randomUUID();
      const fileName = safeFileName(input.fileName);
      return this.deps.models.StorageObject.forOrg(uploader.orgId, t).insertAndFetch({
        id,
        organizationId: uploader.orgId,
        key: `org/${uploader.orgId}/${input.purpose}/${id}/${fileName}`,
        purpose: input.purpose,
        fileName,
        mimeType,
        sizeBytes: input.sizeBytes,
        status: 'pending',
        createdBy: uploader.kind === 'operator' ? uploader.userId : null,
        visitorSessionId: uploader.kind === 'visitor' ? uploader.sessionId : null,
      });
    };
    const object = trx ? await write(trx) : await this.deps.knex.transaction(write);
    const expiresIn = input.expiresIn ?? DEFAULT_EXPIRES_IN;
    const upload = await this.deps.driver.uploadTarget(refOf(object), expiresIn);
    return { object, upload, expiresAt: new Date(Date.now() + expiresIn * 1000) };
  }

  /**
   * A file the server received itself (a channel's inbound media): the purpose's type, size and content rules and the
   * plan's storage as for an upload, then the bytes and an uploaded row. The same id again answers the stored object,
   * so a job that runs twice stores a file once.
   */
  async storeReceived(orgId: string, input: { id: string; purpose: StoragePurpose; fileName: string; mimeType: string; bytes: Buffer }): Promise<StorageObject> {
    const existing = await this.deps.models.StorageObject.forOrg(orgId).findById(input.id);
    if (existing) return existing;
    const rule = PURPOSE_RULES[input.purpose];
    const mimeType = baseType(input.mimeType);
    if (!rule.types.includes(mimeType)) throw new ValidationFailed(`${mimeType} is not allowed for ${input.purpose} files`, [{ field: 'mimeType', message: 'not an allowed type' }]);
    if (input.bytes.length < 1 || input.bytes.length > rule.maxBytes) throw new ValidationFailed(`A ${input.purpose} file is at most ${rule.maxBytes / MiB} MiB`, [{ field: 'sizeBytes', message: `must be 1..${rule.maxBytes}` }]);
    if (!contentMatches(mimeType, input.bytes.subarray(0, 16))) throw new ValidationFailed(`The file's content is not ${mimeType}`, [{ field: 'mimeType', message: 'does not match the content' }]);
    const fileName = safeFileName(input.fileName);
    const key = `org/${orgId}/${input.purpose}/${input.id}/${fileName}`;
    return this.deps.knex.transaction(async (trx) => {
      await this.requireSpace(orgId, input.bytes.length, trx);
      // The bytes before the row: a failure in between leaves an orphan file, never a row without one.
      await this.deps.driver.put(key, input.bytes, mimeType);
      return this.deps.models.StorageObject.forOrg(orgId, trx).insertAndFetch({
        id: input.id, organizationId: orgId, key, purpose: input.purpose, fileName, mimeType, sizeBytes: input.bytes.length,
        status: 'uploaded', createdBy: null, visitorSessionId: null, uploadedAt: new Date(),
      });
    });
  }

  /** The plan's `storageMb` counts pending and uploaded bytes; the organization row is locked so two uploads cannot both squeeze in. */
  private async requireSpace(orgId: string, sizeBytes: number, trx: Knex.Transaction): Promise<void> {
    const organization = await this.deps.models.Organization.query(trx).findById(orgId).forNoKeyUpdate();
    if (!organization) throw new NotFound('Organization');
    const limitMb = this.deps.organizations.planOf(organization).limits.storageMb;
    if (limitMb === null) return;
    const row = (await trx('storage_objects').where({ organizationId: orgId }).sum({ used: 'size_bytes' }).first()) as { used: string | number | null } | undefined;
    const used = Number(row?.used ?? 0);
    if (used + sizeBytes > limitMb * MiB) throw new PlanLimitReached(`The ${organization.plan} plan allows ${limitMb} MB of storage; delete files or upgrade`);
  }

  /** An object of the organization, or 404. */
  async get(orgId: string, objectId: string, trx?: Knex): Promise<StorageObject> {
    const object = await this.deps.models.StorageObject.forOrg(orgId, trx).findById(objectId);
    if (!object) throw new NotFound('File');
    return object;
  }

  private isCreator(uploader: Uploader, object: StorageObject): boolean {
    return uploader.kind === 'operator' ? object.createdBy === uploader.userId : object.visitorSessionId === uploader.sessionId;
  }

  /**
   * Confirms an upload after looking at the stored bytes: the real size and type must be what was declared (and
   * allowed). A mismatch deletes the object and answers 400; a missing upload answers 400 and may still be sent.
   */
  async complete(uploader: Uploader, objectId: string): Promise<StorageObject> {
    const object = await this.get(uploader.orgId, objectId);
    if (!this.isCreator(uploader, object)) throw new NotFound('File');
    return this.verifyUpload(object);
  }

  /** `detach` runs before a mismatched object is deleted, for a row that refers to it (a knowledge source). */
  async verifyUpload(object: StorageObject, detach?: () => Promise<void>): Promise<StorageObject> {
    if (object.status === 'uploaded') return object;
    const head = await this.deps.driver.head(object.key);
    if (!head) throw new ValidationFailed('The file has not been uploaded yet', [{ field: 'objectId', message: 'no uploaded bytes' }]);
    const rule = PURPOSE_RULES[object.purpose];
    let problem: string | null = null;
    if (head.sizeBytes < 1 || head.sizeBytes > object.sizeBytes || head.sizeBytes > rule.maxBytes) problem = `The uploaded file has ${head.sizeBytes} bytes; ${object.sizeBytes} were declared`;
    else if (head.contentType !== null && baseType(head.contentType) !== object.mimeType) problem = `The uploaded file is ${baseType(head.contentType)}; ${object.mimeType} was declared`;
    else if (!contentMatches(object.mimeType, await this.deps.driver.readStart(object.key, 16))) problem = `The uploaded file's content is not ${object.mimeType}`;
    if (problem) {
      await detach?.();
      await this.remove(object);
      throw new ValidationFailed(problem, [{ field: 'objectId', message: 'the upload did not match its declaration and was deleted' }]);
    }
    return this.deps.models.StorageObject.forOrg(object.organizationId).patchAndFetchById(object.id, { status: 'uploaded', sizeBytes: head.sizeBytes, uploadedAt: new Date() });
  }

  /** A signed download URL for an uploaded object. */
  async downloadUrl(object: StorageObject, expiresIn = DEFAULT_EXPIRES_IN): Promise<{ url: string; expiresAt: Date }> {
    if (object.status !== 'uploaded') throw new ValidationFailed('The file has not been uploaded yet', [{ field: 'objectId', message: 'is pending' }]);
    const inline = object.mimeType.startsWith('image/');
    return { url: await this.deps.driver.downloadUrl(refOf(object), expiresIn, inline ? 'inline' : 'attachment'), expiresAt: new Date(Date.now() + expiresIn * 1000) };
  }

  async list(orgId: string, opts: { purpose?: StoragePurpose; status?: 'pending' | 'uploaded'; limit: number; offset: number }): Promise<{ rows: StorageObject[]; total: number }> {
    const base = this.deps.models.StorageObject.forOrg(orgId);
    if (opts.purpose) base.where('purpose', opts.purpose);
    if (opts.status) base.where('status', opts.status);
    const [rows, total] = await Promise.all([base.clone().orderBy([{ column: 'createdAt', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(opts.limit).offset(opts.offset), base.clone().resultSize()]);
    return { rows, total };
  }

  /** Deletes a file: its creator or an admin; a file still shown in a message or used by a knowledge source is 409. */
  async delete(uploader: Extract<Uploader, { kind: 'operator' }>, objectId: string): Promise<void> {
    const object = await this.get(uploader.orgId, objectId);
    assertFileDeletable(object, uploader);
    if (await this.isReferenced(object.id)) throw new Conflict('The file is still used by a message or a knowledge source');
    await this.remove(object);
  }

  async isReferenced(objectId: string, trx: Knex = this.deps.knex): Promise<boolean> {
    if (await trx('message_attachments').where({ objectId }).first('id')) return true;
    if (await trx('ticket_event_attachments').where({ objectId }).first('id')) return true;
    return this.deps.referencedBy ? this.deps.referencedBy(trx, objectId) : false;
  }

  /** Removes the row, then the bytes (a failure there leaves an orphan file, never a row without one). */
  async remove(object: StorageObject): Promise<void> {
    await this.deps.models.StorageObject.forOrg(object.organizationId).deleteById(object.id);
    await this.deps.driver.delete(object.key).catch(() => undefined);
  }

  /** Deletes up to `batch` uploads left pending past their time (unless something refers to them); returns how many. */
  async sweepPending(olderThanHours = PENDING_TTL_HOURS, batch = 500): Promise<number> {
    const cutoff = new Date(Date.now() - olderThanHours * 3_600_000);
    // The sweep works for every organization at once.
    const stale = await this.deps.models.StorageObject.acrossOrgs().where('status', 'pending').where('createdAt', '<', cutoff).orderBy('createdAt').limit(batch);
    let removed = 0;
    for (const object of stale) {
      if (await this.isReferenced(object.id)) continue;
      await this.remove(object);
      removed++;
    }
    return removed;
  }

  // ---- the local driver's own URLs --------------------------------------------------------------------------------

  private local(): LocalDriver {
    if (!(this.deps.driver instanceof LocalDriver)) throw new NotFound('File');
    return this.deps.driver;
  }

  /** An object named by a signed local URL (the signature stands in for the organization). */
  private async signedObject(method: 'PUT' | 'GET', objectId: string, expires: number, signature: string): Promise<StorageObject> {
    if (!this.local().verify(method, objectId, expires, signature)) throw new Forbidden('The link is invalid or has expired');
    // The signature names the object, whichever organization holds it.
    const object = await this.deps.models.StorageObject.acrossOrgs().findById(objectId);
    if (!object) throw new NotFound('File');
    return object;
  }

  /** Receives the bytes of a signed local upload: the declared type (else 415) and at most the declared size (else 413). */
  async receiveLocal(objectId: string, signed: { expires: number; signature: string }, request: { contentType: string; contentLength: number | null; body: Readable }): Promise<StorageObject> {
    const object = await this.signedObject('PUT', objectId, signed.expires, signed.signature);
    if (object.status !== 'pending') throw new Conflict('This file was already uploaded');
    if (baseType(request.contentType) !== object.mimeType) throw new UnsupportedMediaType(`Content-Type must be ${object.mimeType}`);
    const limit = Math.min(object.sizeBytes, PURPOSE_RULES[object.purpose].maxBytes);
    if (request.contentLength !== null && request.contentLength > limit) throw new PayloadTooLarge(`This upload is at most ${limit} bytes`);
    const driver = this.local();
    const file = driver.pathOf(object.key);
    await mkdir(path.dirname(file), { recursive: true });
    const part = `${file}.part-${randomUUID()}`;
    let received = 0;
    const counter = async function* (source: AsyncIterable<Buffer>) {
      for await (const chunk of source) {
        received += chunk.length;
        if (received > limit) throw new PayloadTooLarge(`This upload is at most ${limit} bytes`);
        yield chunk;
      }
    };
    const out = createWriteStream(part);
    try {
      await pipeline(request.body, counter, out);
      await rename(part, file);
    } catch (err) {
      // Refused before its file was open, the stream still opens (creates) it later: remove it once it is closed.
      if (!out.closed) await new Promise<void>((resolve) => out.once('close', () => resolve()));
      await rm(part, { force: true });
      throw err;
    }
    return object;
  }

  /** The bytes behind a signed local download link. */
  async sendLocal(objectId: string, signed: { expires: number; signature: string }): Promise<{ object: StorageObject; body: Readable }> {
    const object = await this.signedObject('GET', objectId, signed.expires, signed.signature);
    if (object.status !== 'uploaded') throw new NotFound('File');
    return { object, body: await this.deps.driver.stream(object.key) };
  }

  /** Avatars and logos without a signature: the bytes (local) or a fresh signed URL to redirect to (S3). */
  async publicFile(objectId: string): Promise<{ object: StorageObject; body: Readable } | { object: StorageObject; redirect: string }> {
    // Avatars and logos are public by design: the id alone names them, in any organization.
    const object = await this.deps.models.StorageObject.acrossOrgs().findById(objectId);
    if (!object || object.status !== 'uploaded' || !PURPOSE_RULES[object.purpose].public) throw new NotFound('File');
    if (this.deps.driver instanceof LocalDriver) return { object, body: await this.deps.driver.stream(object.key) };
    return { object, redirect: (await this.downloadUrl(object, 3600)).url };
  }
}
