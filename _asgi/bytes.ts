/**
 * Small byte strings without an ArrayBuffer each: the bridge's scope bytes and the web layer's
 * response bodies are carved out of shared buffers.
 *
 * In Deno every ArrayBuffer (and each `new Uint8Array(n)` makes one) costs some 0.4 µs of CPU
 * (allocation, external-memory accounting, background sweeping), while a view of an existing
 * buffer costs a few dozen nanoseconds. A request handled by the App used to make one for its
 * response body alone: a twentieth of the whole server's CPU per request. Node.js does the same
 * for its small Buffers. The price, documented in docs/asgi.md ("The scope"): a view's `.buffer` is the whole
 * shared buffer, with other requests' bytes in it, and keeping a view alive keeps that buffer.
 *
 * @module
 */

/** Size of the shared buffers. */
const SLAB_SIZE = 16 * 1024;
/** Larger requests for space get a buffer of their own. */
export const SLAB_MAX = SLAB_SIZE / 8;

let slab = new ArrayBuffer(SLAB_SIZE);
let slabBytes = new Uint8Array(slab);
let slabOffset = 0;

/**
 * A region of a shared buffer, to be filled by its taker and then handed out as views. One record
 * serves every call of {@linkcode reserve}: read its fields at once, before reserving again.
 */
export interface SlabSpace {
  /** The whole shared buffer. */
  readonly buffer: ArrayBuffer;
  /** A view of the whole shared buffer, to write into. */
  readonly bytes: Uint8Array;
  /** Where the region starts. */
  readonly offset: number;
}

/** The record `reserve` fills in: a request makes several reservations, and none needs its own. */
const space: { buffer: ArrayBuffer; bytes: Uint8Array; offset: number } = {
  buffer: slab,
  bytes: slabBytes,
  offset: 0,
};

/**
 * Reserves `size` bytes (at most {@linkcode SLAB_MAX}) of a shared buffer. The space is
 * zero-filled, never handed out twice, and taken in order, so the taker may use less of it.
 *
 * @param size Bytes to reserve.
 * @returns The buffer and where the space starts, in a record the next call overwrites.
 */
export function reserve(size: number): SlabSpace {
  if (slabOffset + size > SLAB_SIZE) {
    slab = new ArrayBuffer(SLAB_SIZE);
    slabBytes = new Uint8Array(slab);
    slabOffset = 0;
    space.buffer = slab;
    space.bytes = slabBytes;
  }
  space.offset = slabOffset;
  slabOffset += size;
  return space;
}

const utf8Encoder = new TextEncoder();

/**
 * UTF-8 bytes of a string. Short ASCII text, the usual small response body or header, is copied
 * code unit by code unit into a shared buffer; anything else goes through `TextEncoder`.
 *
 * @param text The text.
 * @returns Its bytes; a view into a shared buffer when the text is short ASCII.
 */
export function textBytes(text: string): Uint8Array {
  const length = text.length;
  if (length === 0) return new Uint8Array(0);
  if (length > SLAB_MAX) return utf8Encoder.encode(text);
  for (let i = 0; i < length; i++) {
    if (text.charCodeAt(i) >= 0x80) return utf8Encoder.encode(text);
  }
  const { buffer, bytes, offset } = reserve(length);
  for (let i = 0; i < length; i++) bytes[offset + i] = text.charCodeAt(i);
  return new Uint8Array(buffer, offset, length);
}

/**
 * A copy of `bytes` that nothing else writes to: small ones in a shared buffer, larger ones in an
 * ArrayBuffer of their own, never a SharedArrayBuffer (`slice()` of such a view makes a plain
 * one). For bytes a transport may hold after the application's `send` has resolved, since the
 * application may then change its array (see `Cycle`'s `#sendBody`).
 *
 * @param bytes The bytes.
 * @returns A copy of them.
 */
export function copyBytes(bytes: Uint8Array): Uint8Array {
  const length = bytes.length;
  // Not slice(): a view whose ArrayBuffer was transferred away reads as empty but throws there,
  // which on node cut the whole response off with no answer (review of 2026-11-29).
  if (length === 0) return new Uint8Array(0);
  if (length > SLAB_MAX) return bytes.slice();
  const { buffer, bytes: slabBytes, offset } = reserve(length);
  slabBytes.set(bytes, offset);
  return new Uint8Array(buffer, offset, length);
}

/**
 * Bytes as a string of the same code units (Latin-1), the form Fetch and Node take headers in.
 *
 * @param bytes The bytes.
 * @returns One code unit, 0 to 255, per byte.
 */
export function latin1Text(bytes: Uint8Array): string {
  // fromCharCode.apply is the fastest way for short arrays; chunk long ones to stay under the
  // engine's argument limit.
  if (bytes.length <= 4096) return String.fromCharCode.apply(null, bytes as unknown as number[]);
  let text = "";
  for (let i = 0; i < bytes.length; i += 4096) {
    text += String.fromCharCode.apply(null, bytes.subarray(i, i + 4096) as unknown as number[]);
  }
  return text;
}

/** A zero-length array; safe to share because it holds nothing to mutate. */
export const EMPTY: Uint8Array = new Uint8Array(0);
