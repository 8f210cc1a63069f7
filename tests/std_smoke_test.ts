import { assertEquals, assertRejects } from "@std/assert";
import { deadline } from "@std/async/deadline";
import { delay } from "@std/async/delay";
import { STATUS_CODE } from "@std/http/status";

Deno.test("deadline() rejects with a TimeoutError when the promise is too slow", async () => {
  const slow = new AbortController();
  const error = await assertRejects(
    () => deadline(delay(200, { signal: slow.signal }), 20),
    DOMException,
  ) as DOMException;
  slow.abort();
  assertEquals(error.name, "TimeoutError");
});

Deno.test("STATUS_CODE from @std/http/status names the request-timeout status", () => {
  assertEquals(STATUS_CODE.RequestTimeout, 408);
});
