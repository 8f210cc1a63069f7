/**
 * Every scenario of the fault suite, in the order they run.
 *
 * @module
 */
import { heap, mixed, wrkPost } from "./_load_scenarios.ts";
import { idle, malformed, stalls, storm } from "./_fault_scenarios.ts";
import { floods } from "./_flood_scenario.ts";
import { tasks } from "./_task_scenario.ts";
import type { Scenario } from "./_scenario.ts";

export type { Row, Scenario, Size, Transport } from "./_scenario.ts";

/** Every scenario, in the order they run. */
export const SCENARIOS: readonly Scenario[] = [
  mixed,
  wrkPost,
  storm,
  idle,
  stalls,
  malformed,
  floods,
  tasks,
  heap,
];

/** The scenario that needs wrk. */
export const WRK_SCENARIO: Scenario = wrkPost;
