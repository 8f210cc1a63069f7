/**
 * The repeated upload flood of the fault suite: the same flood of endless chunked uploads past
 * `maxBodySize`, several times in one server process, with the heap after GC, the fds and the RSS
 * read after each flood. It tells a leak (heap or fds that grow flood after flood) from
 * retention (RSS that stays high but stops growing).
 *
 * @module
 */
import { Connection, requestBytes } from "./_client.ts";
import { finish, newRow, type Scenario, start } from "./_scenario.ts";

const MIB = 1024 * 1024;
const HEAD = requestBytes(
  "POST /echo HTTP/1.1\r\nhost: soak\r\ntransfer-encoding: chunked\r\n\r\n",
);
const CHUNK = requestBytes(`4000\r\n${"z".repeat(0x4000)}\r\n`);

/**
 * One flooding client until `until`: it sends a chunked upload that never ends, reading what the
 * server answers meanwhile, and starts again on a new connection once the server closes.
 *
 * @returns How many connections it opened, and how many 413 responses it read: fewer than its
 * connections, since a server that closes on a client still sending resets the connection, and
 * the reset may discard the answer before the client reads it.
 */
async function flooder(port: number, until: number): Promise<{ opened: number; refused: number }> {
  let opened = 0;
  let refused = 0;
  while (performance.now() < until) {
    let connection: Connection;
    try {
      connection = await Connection.open(port);
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 50));
      continue;
    }
    opened++;
    const stop = setTimeout(() => connection.close(), Math.max(0, until - performance.now()));
    const reading = connection.readResponse().then(
      (response) => response?.status === 413,
      () => false,
    );
    try {
      await connection.write(HEAD);
      while (performance.now() < until) await connection.write(CHUNK);
    } catch {
      // The server closed (or reset) the connection: that is how each upload ends.
    } finally {
      clearTimeout(stop);
      connection.close();
    }
    if (await reading) refused++;
  }
  return { opened, refused };
}

/** The same upload flood, repeated in one server process. */
export const floods: Scenario = {
  name: "repeated upload floods past maxBodySize",
  checks: "clients send endless chunked uploads past maxBodySize (64 KiB), several floods in one " +
    "process: each gets its 413, and after each flood the fds come back and the heap after GC " +
    "does not grow flood after flood (RSS may stay high: that is retention, not a leak)",
  async run(transport, size) {
    const server = await start("./asgi_server.ts", transport, {
      env: { MAX_BODY_SIZE: "65536" },
      denoFlags: ["--v8-flags=--expose-gc"],
    });
    const row = newRow(transport, server);
    const cycles = size.short ? 3 : 5;
    const clients = size.short ? 50 : 100;
    const floodMs = size.short ? 2_000 : 10_000;
    const base = await server.stats();
    server.watch();
    const heaps: number[] = [];
    const figures: string[] = [];
    let opened = 0;
    let refused = 0;
    for (let cycle = 1; cycle <= cycles; cycle++) {
      const until = performance.now() + floodMs;
      const counts = await Promise.all(
        Array.from({ length: clients }, () => flooder(server.port, until)),
      );
      for (const count of counts) {
        opened += count.opened;
        refused += count.refused;
      }
      await server.settleFds(server.fds.start + 16, 10_000);
      const stats = await server.stats();
      if (stats === undefined) {
        row.failures.push(`no /_stats answer after flood ${cycle}`);
        break;
      }
      heaps.push(stats.heapUsed);
      figures.push(
        `${(stats.heapUsed / MIB).toFixed(2)} MiB / ${server.fds.end} / ` +
          `${server.rss.end.toFixed(0)} MiB`,
      );
    }
    row.notes.push(
      `${opened} uploads, ${refused} 413 answers read, in ${cycles} floods of ${clients} clients for ` +
        `${floodMs / 1000} s`,
      `heap after GC / fds / RSS, before: ${((base?.heapUsed ?? 0) / MIB).toFixed(2)} MiB / ` +
        `${server.fds.start} / ${server.rss.start.toFixed(0)} MiB; after each flood: ` +
        figures.join(", "),
    );
    if (refused === 0) row.failures.push("no upload was refused with 413");
    // A flood holds hundreds (node, whose closes linger) to tens of thousands (deno) of
    // connections: anything kept per connection adds up to far more than 1 MiB per flood. The
    // heap grew by 0.05 to 0.1 MiB per flood on both transports (2026-11-28, 14 floods on node:
    // flat after the 7th).
    const first = heaps[0];
    const last = heaps.at(-1);
    if (first !== undefined && last !== undefined && last - first > (heaps.length - 1) * MIB) {
      row.failures.push(
        `the heap after GC grew flood after flood: ${((last - first) / MIB).toFixed(1)} MiB ` +
          `in ${heaps.length - 1} floods after the first`,
      );
    }
    return await finish(server, row);
  },
};
