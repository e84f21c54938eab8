/**
 * What route handlers are given: the services the engine works with (chat/services.ts).
 */
export type { Services } from "../chat/services.js";
