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
 * @throws {TypeError} When one is missing or not a string, is no PEM text (a file name, say),
 *   holds no certificate or key that can be read (or each holds the other), or the key is not the
 *   certificate's.
 */
export function checkTls(cert: unknown, key: unknown): TlsPair | undefined {
  if (cert === undefined && key === undefined) return undefined;
  if (typeof cert !== "string" || typeof key !== "string") {
    throw new TypeError(
      `Invalid TLS options (cert ${describe(cert === undefined ? cert : typeof cert)}, key ${
        describe(key === undefined ? key : typeof key)
      }): give both cert and key as PEM text`,
    );
  }
  requirePem("cert", cert, "CERTIFICATE");
  requirePem("key", key, "PRIVATE KEY");
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(cert);
  } catch (error) {
    throw new TypeError(
      cert.includes("PRIVATE KEY-----")
        ? "Invalid TLS cert (PEM text of a private key): give the certificate as cert and its key as key"
        : `Invalid TLS cert (PEM text without a certificate that can be read: ${
          errorText(error)
        }): give the certificate's PEM text`,
    );
  }
  if (
    key.includes("-----BEGIN ENCRYPTED PRIVATE KEY-----") || /Proc-Type:\s*4,\s*ENCRYPTED/.test(key)
  ) {
    // Neither transport takes a passphrase; node's own error says "interrupted or cancelled".
    throw new TypeError(
      "Invalid TLS key (an encrypted private key): give the key's PEM text unencrypted, e.g. " +
        "from `openssl pkey -in key.pem -out plain.pem`",
    );
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key);
  } catch (error) {
    throw new TypeError(
      !key.includes("PRIVATE KEY-----") && key.includes("CERTIFICATE-----")
        ? "Invalid TLS key (PEM text of a certificate): give the certificate as cert and its key as key"
        : `Invalid TLS key (PEM text without a private key that can be read: ${
          errorText(error)
        }): give the private key's PEM text`,
    );
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    throw new TypeError(
      `Invalid TLS key (not the certificate's key) for cert ${
        describe(certificate.subject.replaceAll("\n", ", "))
      }: give the key the certificate was made with`,
    );
  }
  return { cert, key };
}

/** Throws unless `value` holds a PEM block. */
function requirePem(name: "cert" | "key", value: string, label: string): void {
  if (value.includes("-----BEGIN ")) return;
  if (value.trim() === "") {
    throw new TypeError(
      `Invalid TLS ${name} ${describe(value)}: give the PEM text, which starts with ` +
        `"-----BEGIN ${label}-----"`,
    );
  }
  // A short line is a file name (the commonest mistake) and safe to quote; anything else may be
  // key material, which a message must not carry into a log.
  if (!value.includes("\n") && value.length <= 1024) {
    throw new TypeError(
      `Invalid TLS ${name} ${describe(value)}: pass the file's text, not its name: ` +
        `Deno.readTextFileSync(${JSON.stringify(value)})`,
    );
  }
  throw new TypeError(
    `Invalid TLS ${name} (${value.length} characters without a "-----BEGIN" line): give the ` +
      `PEM text, which starts with "-----BEGIN ${label}-----"`,
  );
}
