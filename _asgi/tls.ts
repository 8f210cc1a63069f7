// Copyright the stellarator authors. MIT license.
/**
 * Checks `serve()`'s `cert` and `key` when they are given, so that a mistake fails `serve()` with
 * a message that says what is wrong, on both transports. Without this, Deno's node:https started
 * "successfully" with a file name, an empty string, a swapped pair or a key of another
 * certificate and then failed every connection without a log line, and `Deno.serve` rejected
 * with a message of rustls's ("No certificates found in certificate data"), or one that was
 * wrong for empty strings ("Both 'cert' and 'key' must be provided").
 *
 * Messages never quote a key's text: only a value that looks like a file name is quoted.
 *
 * @module
 */
import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto";
import { describe, errorText } from "../_common/describe.ts";

/** The certificate and key, as checked PEM text. */
export interface TlsPair {
  /** The certificate chain, PEM. */
  cert: string;
  /** Its private key, PEM. */
  key: string;
}

/**
 * Checks the TLS options.
 *
 * @param cert The `cert` option.
 * @param key The `key` option.
 * @returns The pair, or undefined when neither is given.
 * @throws {TypeError} When one is missing or not a string (bytes included), is no PEM text (a file name, say),
 *   holds no certificate or key that can be read (or each holds the other), a later certificate
 *   of the chain cannot be read, the key is not the first certificate's (a chain in the wrong
 *   order, say), or it is of a kind Deno's TLS cannot sign with.
 */
export function checkTls(cert: unknown, key: unknown): TlsPair | undefined {
  if (cert === undefined && key === undefined) return undefined;
  // Bytes, as node's fs.readFileSync and Deno.readFileSync give a file: node:https takes them,
  // Deno.serve does not, and "cert \"object\"" named neither the mistake nor the fix.
  for (const [name, value] of [["cert", cert], ["key", key]] as const) {
    if (ArrayBuffer.isView(value)) {
      throw new TypeError(
        `Invalid TLS ${name} (a ${value.constructor.name} of ${value.byteLength} bytes, not ` +
          "text): decode it, e.g. with new TextDecoder().decode(bytes), or read the file with " +
          "Deno.readTextFileSync(path)",
      );
    }
  }
  if (typeof cert !== "string" || typeof key !== "string") {
    // A string is not quoted: the key is a secret. Bytes were refused above, with their fix.
    throw new TypeError(
      `Invalid TLS options (cert ${given(cert)}, key ${given(key)}): give both cert and key as ` +
        "PEM text",
    );
  }
  // A byte order mark (Windows Notepad writes one) makes both transports find no PEM block.
  return checkPair(cert.replace(BOM, ""), key.replace(BOM, ""));
}

/** A `cert` or `key` option for a message: `a string`, never its text, or what else it is. */
function given(value: unknown): string {
  return typeof value === "string" ? "a string" : describe(value);
}

/** Checks a pair of PEM texts, both given as strings; see `checkTls`. */
function checkPair(cert: string, key: string): TlsPair {
  requirePem("cert", cert, "CERTIFICATE");
  requirePem("key", key, "PRIVATE KEY");
  // A file may hold the key and the certificate chain both (the transports pick the blocks they
  // need): check the first block of each kind, and pass the text on as it is.
  const certBlock = CERT_BLOCK.exec(cert)?.[0];
  if (certBlock === undefined) {
    throw new TypeError(
      KEY_BLOCK.test(cert)
        ? "Invalid TLS cert (PEM text of a private key): give the certificate as cert and its key as key"
        : 'Invalid TLS cert (PEM text without a "-----BEGIN CERTIFICATE-----" block): give the ' +
          "certificate's PEM text",
    );
  }
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(readable(certBlock));
  } catch (error) {
    throw new TypeError(
      misshapen("cert", certBlock) ??
        `Invalid TLS cert (a certificate that cannot be read: ${errorText(error)}): give the ` +
          "certificate's PEM text",
    );
  }
  const keyBlock = KEY_BLOCK.exec(key)?.[0];
  if (keyBlock === undefined) {
    throw new TypeError(
      CERT_BLOCK.test(key)
        ? "Invalid TLS key (PEM text of a certificate): give the certificate as cert and its key as key"
        : 'Invalid TLS key (PEM text without a "-----BEGIN ... PRIVATE KEY-----" block): give ' +
          "the private key's PEM text",
    );
  }
  if (keyBlock.startsWith("-----BEGIN ENCRYPTED") || /Proc-Type:\s*4,\s*ENCRYPTED/.test(keyBlock)) {
    // Neither transport takes a passphrase; node's own error says "interrupted or cancelled".
    throw new TypeError(
      "Invalid TLS key (an encrypted private key): give the key's PEM text unencrypted, e.g. " +
        "from `openssl pkey -in key.pem -out plain.pem`",
    );
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(readable(keyBlock));
  } catch (error) {
    throw new TypeError(
      misshapen("key", keyBlock) ??
        `Invalid TLS key (a private key that cannot be read: ${errorText(error)}): give the ` +
          "private key's PEM text",
    );
  }
  const chain = readChain(cert, certificate);
  if (!certificate.checkPrivateKey(privateKey)) {
    // A chain file written intermediate first: the key is right, the order is not.
    const owner = chain.findIndex((c) => c.checkPrivateKey(privateKey));
    if (owner > 0) {
      throw new TypeError(
        `Invalid TLS cert (the key belongs to certificate ${owner + 1} of ${chain.length}, ${
          describe(subjectOf(chain[owner]!))
        }, not to the first, ${
          describe(subjectOf(certificate))
        }): put the server's own certificate first, then its intermediates`,
      );
    }
    throw new TypeError(
      `Invalid TLS key (not the certificate's key) for cert ${
        describe(subjectOf(certificate))
      }: give the key the certificate was made with`,
    );
  }
  requireServableKey(privateKey);
  return { cert, key };
}

/**
 * Why a PEM block that could not be read is misshapen, as a message, when its shape says: PEM
 * text kept in an environment variable or a YAML file often arrives with its line breaks written
 * as `\n`, turned into spaces, or with every line indented, and the parsers then said only
 * "BER error: Unexpected Tag" or "DECODER routines::unsupported", after which "give the PEM text"
 * read as if it had not been given. Never quotes the block: it may be a key.
 *
 * @param name The option.
 * @param block The PEM block, BEGIN and END lines included.
 * @returns The message, or undefined when the shape is not what is wrong.
 */
function misshapen(name: "cert" | "key", block: string): string | undefined {
  if (block.includes("\\n")) {
    return `Invalid TLS ${name} (PEM text with "\\n" in place of its line breaks, as an ` +
      "environment variable may hold it): turn each into a line break, e.g. " +
      'text.replaceAll("\\\\n", "\\n")';
  }
  if (/\n[ \t]+\S/.test(block)) {
    return `Invalid TLS ${name} (PEM text with indented lines): remove the spaces at the start ` +
      "of each line";
  }
  if (!/-----[ \t\r]*\n[^]*\n[ \t\r]*-----END/.test(block)) {
    return `Invalid TLS ${name} (PEM text on one line, its line breaks lost): keep the lines ` +
      "of the file, the BEGIN line, the base64 lines and the END line";
  }
  return undefined;
}

/**
 * A PEM block as node:crypto reads it: without the spaces and carriage returns at the end of its
 * lines, which both transports' PEM readers skip (a key pasted from a terminal or a web console
 * often has them; measured on Deno 2.9.6, `Deno.serve` and `node:https`). node:crypto refused
 * such a key, and the pair the transports serve was refused with "PEM text on one line, its line
 * breaks lost". The text itself is passed on as it is.
 */
function readable(block: string): string {
  return block.replace(LINE_END_SPACE, "\n");
}

/** Spaces and carriage returns at the end of a line, with its line break. */
const LINE_END_SPACE = /[ \r]+\n/g;

/** A certificate's subject on one line, e.g. `CN=example.com, O=Example`. */
function subjectOf(certificate: X509Certificate): string {
  return certificate.subject.replaceAll("\n", ", ");
}

/**
 * Every certificate of `cert`, the first one already read. A certificate after the first that
 * cannot be read (a chain file cut short, a block pasted in half) once passed: both transports
 * then started and failed every handshake without a log line.
 */
function readChain(cert: string, first: X509Certificate): X509Certificate[] {
  const blocks = cert.match(CERT_BLOCKS) ?? [];
  const chain = [first];
  for (let i = 1; i < blocks.length; i++) {
    try {
      chain.push(new X509Certificate(readable(blocks[i]!)));
    } catch (error) {
      throw new TypeError(
        misshapen("cert", blocks[i]!) ??
          `Invalid TLS cert (certificate ${i + 1} of ${blocks.length} cannot be read: ${
            errorText(error)
          }): give each certificate of the chain whole, the server's own first`,
      );
    }
  }
  return chain;
}

/** The elliptic curves Deno's TLS signs with, by node:crypto's names. */
const SERVABLE_CURVES: Record<string, string> = {
  prime256v1: "P-256",
  secp384r1: "P-384",
  secp521r1: "P-521",
};

/** Names of key types in messages, by node:crypto's `asymmetricKeyType`. */
const KEY_TYPE_NAMES: Record<string, string> = {
  "rsa-pss": "an RSA-PSS",
  dsa: "a DSA",
  ed448: "an Ed448",
  x25519: "an X25519",
  x448: "an X448",
  dh: "a DH",
};

/** The smallest RSA key Deno's TLS signs with, in bits. */
const MIN_RSA_BITS = 2048;

/**
 * Throws unless Deno's TLS can sign with `key`. node:crypto reads more kinds of keys than Deno's
 * TLS uses: with an Ed448, secp256k1, RSA-PSS or DSA key the node transport started and failed
 * every handshake without a log line, and `Deno.serve` refused to listen with "failed to parse
 * private key as RSA, ECDSA, or EdDSA", which it also said of a 1024-bit RSA key (measured on
 * Deno 2.9.6).
 */
function requireServableKey(key: KeyObject): void {
  const type = key.asymmetricKeyType ?? "unknown";
  const details = key.asymmetricKeyDetails ?? {};
  let kind: string | undefined;
  if (type === "rsa") {
    const bits = details.modulusLength ?? 0;
    if (bits < MIN_RSA_BITS) kind = `an RSA key of ${bits} bits`;
  } else if (type === "ec") {
    const curve = details.namedCurve ?? "unknown";
    if (!Object.hasOwn(SERVABLE_CURVES, curve)) kind = `an ECDSA key on curve ${describe(curve)}`;
  } else if (type !== "ed25519") {
    kind = `${KEY_TYPE_NAMES[type] ?? `a ${describe(type)}`} key`;
  }
  if (kind === undefined) return;
  throw new TypeError(
    `Invalid TLS key (${kind}, which Deno's TLS cannot sign with): use an RSA key of at least ` +
      `${MIN_RSA_BITS} bits, an ECDSA key on P-256, P-384 or P-521, or an Ed25519 key, with a ` +
      "certificate made for it, e.g. from `openssl req -x509 -newkey ec -pkeyopt " +
      "ec_paramgen_curve:prime256v1 -nodes -keyout key.pem -out cert.pem`",
  );
}

/** A leading byte order mark. */
const BOM = /^\uFEFF/;
/** The first certificate of a PEM text. */
const CERT_BLOCK = /-----BEGIN CERTIFICATE-----[^]*?-----END CERTIFICATE-----/;
/** Every certificate of a PEM text. */
const CERT_BLOCKS = /-----BEGIN CERTIFICATE-----[^]*?-----END CERTIFICATE-----/g;
/** The first private key of a PEM text: PKCS#8, PKCS#1 ("RSA"), SEC1 ("EC"), or encrypted. */
const KEY_BLOCK =
  /-----BEGIN (?:[A-Z0-9]+ )?PRIVATE KEY-----[^]*?-----END (?:[A-Z0-9]+ )?PRIVATE KEY-----/;

/**
 * Throws unless `value` holds a PEM block. A certificate is public and may be quoted (shortened);
 * a key never is, whatever it looks like: a key's base64 body without its PEM lines is one short
 * line, just like a file name.
 */
function requirePem(name: "cert" | "key", value: string, label: string): void {
  if (value.includes("-----BEGIN ")) return;
  const shown = name === "cert" ? ` ${describe(value)}` : ` (${value.length} characters)`;
  if (value.trim() === "") {
    throw new TypeError(
      `Invalid TLS ${name}${shown}: give the PEM text, which starts with "-----BEGIN ${label}-----"`,
    );
  }
  const pathLike = !/\s/.test(value) &&
    (/\.(?:pem|crt|cer|key)$/i.test(value) ||
      (/[\\/]/.test(value) && !/^[A-Za-z0-9+/=]{40,}$/.test(value)));
  if (pathLike) {
    throw new TypeError(
      `Invalid TLS ${name}${shown}, which looks like a file name: pass the file's text, ` +
        `e.g. Deno.readTextFileSync(path)`,
    );
  }
  throw new TypeError(
    `Invalid TLS ${name}${shown} without a "-----BEGIN" line: give the PEM text, which starts ` +
      `with "-----BEGIN ${label}-----"`,
  );
}
