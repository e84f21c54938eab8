/**
 * The one assertion for error responses: the status, a JSON content type, and a body
 * that is exactly `{"error": "<string>"}` (equal to / matching `message` when given).
 */
import type { Test } from "tap";

/** A response already read: status, headers (lower-case names) and raw body text. */
export interface RawResponse {
  status: number;
  headers?: Record<string, string | string[] | undefined>;
  body: string;
}

/** Asserts an error response; returns the message for further checks. */
export async function assertError(t: Test, res: Response | RawResponse, status: number, message?: string | RegExp): Promise<string> {
  const { type, text } =
    res instanceof Response ? { type: res.headers.get("content-type"), text: await res.text() } : { type: res.headers?.["content-type"], text: res.body };
  t.equal(res.status, status, `status ${status}`);
  t.match(String(type ?? ""), /^application\/json/, "content-type is JSON");
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    t.ok(false, `body is JSON: ${text.slice(0, 200)}`);
    return "";
  }
  const keys = body !== null && typeof body === "object" && !Array.isArray(body) ? Object.keys(body) : [];
  t.same(keys, ["error"], "body has exactly one key, error");
  const error = (body as { error?: unknown }).error;
  t.equal(typeof error, "string", "error is a string");
  if (typeof message === "string") t.equal(error, message, "error message");
  else if (message instanceof RegExp) t.match(String(error), message, "error message");
  return typeof error === "string" ? error : "";
}
