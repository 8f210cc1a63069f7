// Copyright the stellarator authors. MIT license.
/**
 * The lifespan protocol: one long-lived call of the application with a lifespan scope, whose
 * startup and shutdown each run once. Private: not exported from `deno.json`.
 *
 * @module
 */
import type {
  AsgiApplication,
  AsgiLogger,
  LifespanScope,
  ReceiveMessage,
  SendMessage,
} from "./types.ts";
import { AsgiProtocolError, LifespanError } from "./errors.ts";
import { RESOLVED, withResolvers } from "./promises.ts";
import { describe, errorText } from "../_common/describe.ts";

type LifespanPhase =
  | "idle"
  | "starting"
  | "started"
  | "stopping"
  | "stopped"
  | "off";

/**
 * Runs the lifespan protocol: one long-lived call of the application with a lifespan scope.
 * `startup()` and `shutdown()` each run once; later calls return the first call's promise.
 */
export class Lifespan {
  /** The lifespan scope's `state`; HTTP scopes get a shallow copy. */
  readonly state: Record<string, unknown> = {};
  readonly #app: AsgiApplication;
  readonly #mode: "auto" | "on" | "off";
  readonly #logger: AsgiLogger;
  #phase: LifespanPhase = "idle";
  #startup: Promise<void> | null = null;
  #shutdown: Promise<void> | null = null;
  #receives = 0;
  #shutdownRequested = withResolvers<void>();
  #outcome: PromiseWithResolvers<void> | null = null;
  #ready = false;

  /**
   * Creates the runner.
   *
   * @param app The application.
   * @param mode The lifespan mode.
   * @param logger Where log lines go.
   */
  constructor(app: AsgiApplication, mode: "auto" | "on" | "off", logger: AsgiLogger) {
    this.#app = app;
    this.#mode = mode;
    this.#logger = logger;
  }

  /** Runs startup once. Rejects with `LifespanError` when it fails. */
  startup(): Promise<void> {
    return this.#startup ??= this.#runStartup();
  }

  /** Runs shutdown once (after startup, if startup is running). */
  shutdown(): Promise<void> {
    return this.#shutdown ??= this.#runShutdown();
  }

  async #runStartup(): Promise<void> {
    if (this.#mode === "off") {
      this.#phase = "off";
      this.#ready = true;
      return;
    }
    this.#phase = "starting";
    this.#outcome = withResolvers<void>();
    const scope: LifespanScope = {
      type: "lifespan",
      asgi: { version: "3.0", spec_version: "2.0" },
      state: this.state,
    };
    this.#main(scope);
    await this.#outcome.promise;
    this.#ready = true;
  }

  /** `true` once startup has succeeded and requests may be served. */
  get ready(): boolean {
    return this.#ready;
  }

  async #main(scope: LifespanScope): Promise<void> {
    try {
      await this.#app(scope, this.#receive, this.#send);
    } catch (error) {
      this.#raised(error);
      return;
    }
    this.#returned();
  }

  async #runShutdown(): Promise<void> {
    if (this.#startup !== null) {
      try {
        await this.#startup;
      } catch {
        return;
      }
    }
    if (this.#phase !== "started") {
      if (this.#phase === "idle") this.#phase = "stopped";
      return;
    }
    this.#phase = "stopping";
    this.#outcome = withResolvers<void>();
    this.#shutdownRequested.resolve();
    await this.#outcome.promise;
  }

  #receive = (): Promise<ReceiveMessage> => {
    this.#receives++;
    if (this.#receives === 1) return Promise.resolve({ type: "lifespan.startup" });
    if (this.#receives === 2) {
      return this.#shutdownRequested.promise.then(() => ({ type: "lifespan.shutdown" }));
    }
    // The protocol has no third event: the application waits for ever, as in uvicorn.
    return new Promise<ReceiveMessage>(() => {});
  };

  #send = (message: SendMessage): Promise<void> => {
    try {
      this.#handle(message);
      return RESOLVED;
    } catch (error) {
      return Promise.reject(error);
    }
  };

  #handle(message: SendMessage): void {
    if (typeof message !== "object" || message === null) {
      throw new AsgiProtocolError(
        `Invalid message ${describe(message)}: send an object with a "type" key`,
      );
    }
    const type = message.type;
    const phase = this.#phase;
    switch (type) {
      case "lifespan.startup.complete":
      case "lifespan.startup.failed":
        if (phase !== "starting") {
          throw new AsgiProtocolError(
            `Cannot send ${JSON.stringify(type)} ${
              phase === "stopping" ? "during shutdown" : "after startup"
            }: startup messages answer "lifespan.startup" once`,
          );
        }
        if (type === "lifespan.startup.complete") {
          this.#phase = "started";
          this.#outcome!.resolve();
        } else {
          this.#phase = "stopped";
          this.#failed("startup", message.message);
        }
        return;
      case "lifespan.shutdown.complete":
      case "lifespan.shutdown.failed":
        if (phase !== "stopping") {
          throw new AsgiProtocolError(
            `Cannot send ${
              JSON.stringify(type)
            } before "lifespan.shutdown" was received: shutdown messages answer it once`,
          );
        }
        this.#phase = "stopped";
        if (type === "lifespan.shutdown.complete") {
          this.#outcome!.resolve();
        } else {
          this.#failed("shutdown", message.message);
        }
        return;
      default:
        throw new AsgiProtocolError(
          `Cannot send ${
            describe(type)
          } on the lifespan connection: expected a "lifespan.startup.*" or "lifespan.shutdown.*" message`,
        );
    }
  }

  /**
   * The application reported a failure: it takes effect whatever its `message`. One that is no
   * string also fails the `send` (a protocol error), and is named in the failure; it once made
   * the `send` fail alone, so a startup failure in "auto" mode served as if lifespan were
   * unsupported, and a shutdown failure waited for `lifespanTimeout`.
   */
  #failed(phase: "startup" | "shutdown", message: unknown): void {
    if (message === undefined || typeof message === "string") {
      this.#outcome!.reject(new LifespanError(phase, message || `Lifespan ${phase} failed`));
      return;
    }
    const error = new AsgiProtocolError(
      `Invalid "message" ${describe(message)} in "lifespan.${phase}.failed": use a string`,
    );
    this.#outcome!.reject(new LifespanError(phase, `Lifespan ${phase} failed; ${error.message}`));
    throw error;
  }

  #raised(error: unknown): void {
    const phase = this.#phase;
    if (phase === "starting") {
      this.#phase = "off";
      if (this.#mode === "auto") {
        this.#logger.info("ASGI 'lifespan' protocol appears unsupported");
        this.#outcome!.resolve();
      } else {
        this.#logger.error("Exception in 'lifespan' protocol\n", error);
        this.#outcome!.reject(
          new LifespanError("startup", `Exception in lifespan startup: ${errorText(error)}`, {
            cause: error,
          }),
        );
      }
    } else if (phase === "stopping") {
      this.#phase = "stopped";
      this.#logger.error("Exception in 'lifespan' protocol\n", error);
      this.#outcome!.reject(
        new LifespanError("shutdown", `Exception in lifespan shutdown: ${errorText(error)}`, {
          cause: error,
        }),
      );
    } else if (phase !== "stopped") {
      // "stopped": the application already reported startup.failed or shutdown.*; uvicorn is
      // silent about an exception after that too.
      this.#phase = "off";
      this.#logger.error("Exception in 'lifespan' protocol\n", error);
    }
  }

  #returned(): void {
    const phase = this.#phase;
    if (phase === "starting") {
      this.#phase = "off";
      // The usual way for an application without lifespan support to say so (`if (scope.type
      // !== "http") return;`): in "auto" mode as quiet as raising, as uvicorn is.
      if (this.#mode === "auto") {
        this.#logger.info(
          "ASGI 'lifespan' protocol appears unsupported (the application returned without " +
            "completing startup)",
        );
      } else this.#logger.warn("ASGI lifespan callable returned without completing startup");
      this.#outcome!.resolve();
    } else if (phase === "stopping") {
      this.#phase = "stopped";
      this.#outcome!.resolve();
    } else if (phase === "started") {
      this.#phase = "off";
    }
  }
}
