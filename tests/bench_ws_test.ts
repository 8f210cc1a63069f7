import { assertEquals, assertThrows } from "@std/assert";
import { parseOptions, runLoad, table } from "../bench/ws_load.ts";

Deno.test("parseOptions() of bench/ws_load.ts reads sockets, seconds and one transport", () => {
  assertEquals(parseOptions([]), { sockets: 1000, seconds: 30, transports: ["deno", "node"] });
  assertEquals(parseOptions(["--sockets", "5", "--seconds", "0.5", "--transport", "node"]), {
    sockets: 5,
    seconds: 0.5,
    transports: ["node"],
  });
  assertThrows(() => parseOptions(["--sockets", "0"]), RangeError, 'Invalid --sockets "0"');
  assertThrows(() => parseOptions(["--x"]), TypeError, 'Unknown option "--x"');
});

Deno.test("runLoad() of bench/ws_load.ts loses no message and gives back every fd", async () => {
  const result = await runLoad("deno", 20, 1);
  assertEquals(result.lost, 0);
  assertEquals(result.mismatched, 0);
  assertEquals(result.fds.open - result.fds.before, 20);
  assertEquals(result.fds.end, result.fds.before);
  assertEquals(result.activeAtEnd, 0);
  assertEquals(table([result]).split("\n").length, 3);
});
