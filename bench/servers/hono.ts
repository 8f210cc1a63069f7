/**
 * The benchmark's handlers as a Hono app on `Deno.serve` (Hono's default router, SmartRouter,
 * picks RegExpRouter for these routes).
 *
 * Prints `LISTENING <port>` once it listens on 127.0.0.1 (port from `PORT`, default: any free one).
 *
 * Serves when run as the main module; `bench/profile_app.ts` imports the handlers.
 *
 * @module
 */
import { serveForBench } from "./_listen.ts";
import { Hono } from "npm:hono@4.13.19";

const CONTENT_TYPE = { "content-type": "text/plain; charset=utf-8" };

/** The Hono app. */
export const app: Hono = new Hono();
app.get("/hello", (c) => c.text("hello"));
app.get("/hello/:name", (c) => c.text(`hello ${c.req.param("name")}`));
app.post("/echo", async (c) => c.body(await c.req.arrayBuffer(), 200, CONTENT_TYPE));

if (import.meta.main) serveForBench(app.fetch);
